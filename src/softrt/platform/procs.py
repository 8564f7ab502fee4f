"""Launching and ending load processes so that none outlives softrt (platform layer: used by ``load``).

Every load process starts in a session of its own (setsid(2)), so one signal to its process group
reaches every worker it forked, and a terminal's Ctrl-C reaches only softrt, which then stops the
loads in order. External tools are wrapped as ``taskset -c CPUS setpriv --pdeathsig TERM -- tool``
(taskset(1), setpriv(1), both util-linux): the affinity is set before the tool's first
instruction, and PR_SET_PDEATHSIG (prctl(2)) sends SIGTERM to the tool if softrt dies, even by
SIGKILL. No preexec_fn is used: code between fork and exec is unsafe when softrt has threads
(subprocess docs).

On Windows there is no taskset, setpriv or process group to signal: a load starts in a new
process group (CREATE_NEW_PROCESS_GROUP) and is placed on its CPUs through the platform object
right after it starts (SetProcessAffinityMask: its first instructions may run elsewhere); it is
asked to stop with CTRL_BREAK_EVENT and then killed (TerminateProcess). What is not applied
there is said in :data:`WINDOWS_NOT_APPLIED`.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from ..cpus import CpuSet
from ..errors import NotSupported, SoftRTError
from . import IS_WINDOWS, get_platform

# After SIGTERM a tool gets this long to write its report (stress-ng writes its YAML on SIGTERM)
# before the whole group gets SIGKILL.
TERM_GRACE_S = 5.0
_KILL_WAIT_S = 5.0

# Disk loads default to /var/tmp: the FHS keeps it on disk, while /tmp may be a tmpfs (Debian 13
# and others), where an "SSD benchmark" would only exercise memory.
DISK_WORKDIR = tempfile.gettempdir() if IS_WINDOWS else "/var/tmp"

#: What a load on Windows does without (said in every Windows load's notes).
WINDOWS_NOT_APPLIED = (
    "Windows: placed on its CPUs just after it started (not before its first instruction); "
    "not killed with softrt if softrt itself is killed (no death signal)"
)


def placement_note() -> str | None:
    """What a load on this OS does without, to say in its notes (None: nothing)."""
    return WINDOWS_NOT_APPLIED if IS_WINDOWS else None


def inherits_fds() -> bool:
    """True when a child can inherit a descriptor (POSIX ``pass_fds``); on Windows a socket is
    handed over with ``socket.share`` through the child's stdin instead."""
    return not IS_WINDOWS


def smallest_program() -> list[str]:
    """The smallest stock program that exits at once (process churn): ``true``, or ``cmd /c rem``."""
    if IS_WINDOWS:
        return [os.environ.get("ComSpec", "cmd.exe"), "/c", "rem"]
    return [shutil.which("true") or "/bin/true"]


# The unprivileged account used when a stressor refuses to run as root (stress-ng's exec).
UNPRIVILEGED_USER = "nobody"


def which_or_raise(tool: str, package: str) -> str:
    """Return the path of *tool* or raise NotSupported naming the package that provides it."""
    path = shutil.which(tool)
    if path is None:
        raise NotSupported(f"{tool} not found on PATH", hint=f"install the {package} package")
    return path


def uid_of(user: str) -> int | None:
    """The uid of *user*, or None when there is no such user (or no POSIX users: Windows)."""
    if IS_WINDOWS:
        return None
    import pwd

    try:
        return pwd.getpwnam(user).pw_uid
    except KeyError:
        return None


def is_root() -> bool:
    """True when running as root (never on Windows, where stress-ng's root check does not apply)."""
    return not IS_WINDOWS and os.geteuid() == 0


def guarded_argv(argv: Sequence[str], cpus: CpuSet, *, drop_root: bool = False) -> list[str]:
    """Return *argv* wrapped in taskset (placement) and setpriv (death signal, optional user).

    On Windows *argv* is returned as it is: :func:`spawn` places the process through the platform.
    """
    if IS_WINDOWS:
        return list(argv)
    taskset = which_or_raise("taskset", "util-linux")
    setpriv = which_or_raise("setpriv", "util-linux")
    wrap = [taskset, "-c", str(cpus), setpriv, "--pdeathsig", "TERM"]
    if drop_root:
        # setpriv applies the death signal after changing user, so it survives the drop (tested;
        # a plain credential change clears it, prctl(2) PR_SET_PDEATHSIG).
        import pwd  # POSIX only; Windows never drops root here

        user = pwd.getpwnam(UNPRIVILEGED_USER)
        wrap += [f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--clear-groups"]
    return [*wrap, "--", *argv]


def spawn(
    argv: Sequence[str],
    *,
    cwd: str | os.PathLike[str] | None,
    log: Path | None = None,
    stdout: int | None = None,
    stdin: int | None = None,
    pass_fds: Sequence[int] = (),
    cpus: CpuSet | None = None,
    term_held: bool = False,
) -> subprocess.Popen[bytes]:
    """Start *argv* in a new session; stderr (and stdout unless given) go to *log*.

    On Windows, in a new process group, placed on *cpus* through the platform once started
    (on Linux :func:`guarded_argv`'s taskset already did it); *pass_fds* is POSIX only.
    *term_held* (POSIX): the child starts with SIGTERM blocked, for a program of softrt's own that
    unblocks it once its handler is set; a stop asked for before then waits for it instead of
    killing the interpreter half-started (sigprocmask(2): the mask survives fork and execve).
    """
    logf = open(log, "wb") if log is not None else None  # noqa: SIM115 (closed below, child keeps its copy)
    where = (
        {"creationflags": subprocess.CREATE_NEW_PROCESS_GROUP}
        if IS_WINDOWS
        else {"pass_fds": tuple(pass_fds), "start_new_session": True}
    )
    held = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM}) if term_held and not IS_WINDOWS else None
    try:
        proc = subprocess.Popen(
            list(argv),
            cwd=cwd,
            stdin=stdin if stdin is not None else subprocess.DEVNULL,
            stdout=stdout if stdout is not None else (logf or subprocess.DEVNULL),
            stderr=logf or subprocess.DEVNULL,
            **where,
        )
    finally:
        if held is not None:
            signal.pthread_sigmask(signal.SIG_SETMASK, held)
        if logf is not None:
            logf.close()
    if IS_WINDOWS and cpus is not None:
        place(proc, cpus)
    elif cpus is not None:
        # taskset places the program before it runs (guarded_argv); until taskset itself has run, the
        # process is on this one's CPUs, where a check at once (a load stopped as it starts) finds it
        try:
            get_platform().set_affinity(cpus, proc.pid)
        except SoftRTError:
            pass  # (it exited already: its exit is reported where it is waited for)
    return proc


def place(proc: subprocess.Popen[bytes], cpus: CpuSet) -> None:
    """Put a started process on *cpus* through the platform object; stop it if that fails.

    Raises:
        SoftRTError: the platform refused (the process is ended first, so nothing runs misplaced).
    """
    try:
        get_platform().set_affinity(cpus, proc.pid)
    except SoftRTError:
        proc.kill()
        proc.wait()
        raise


def gpu_video_api() -> str | None:
    """The GPU path of this OS's GPU load, or None where it renders through stress-ng's gpu stressor on a
    DRM render node (Linux). Windows: ffmpeg decoding video on the GPU through ``d3d11va`` (Direct3D 11
    video decoding, which every vendor's WDDM display driver provides: Microsoft, "Direct3D 11 Video
    APIs"; ffmpeg(1), ``-hwaccel``), what the seed did there: it played video on the GPU."""
    return "d3d11va" if IS_WINDOWS else None


def asks_through_stdin() -> bool:
    """True where a load is asked to stop by closing its stdin (Windows): CTRL_BREAK_EVENT reaches only
    processes attached to the caller's console (GenerateConsoleCtrlEvent), and softrt may have none
    (a service, pythonw, Wine with redirected streams: there every built-in load was killed unreported)."""
    return IS_WINDOWS


def ask_to_stop(proc: subprocess.Popen[bytes]) -> None:
    """Ask a load to end and report: SIGTERM; on Windows, close its stdin and send CTRL_BREAK_EVENT to
    its process group."""
    if proc.stdin is not None and not proc.stdin.closed:
        try:
            proc.stdin.close()
        except OSError:
            pass  # it has just exited (a broken pipe)
    try:
        proc.send_signal(signal.CTRL_BREAK_EVENT if IS_WINDOWS else signal.SIGTERM)
    except (ProcessLookupError, OSError):
        pass  # it has just exited


def _group_exists(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, but owned by someone else (cannot happen for our own loads as root)
    return True


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass


def terminate(proc: subprocess.Popen[bytes], *, grace_s: float = TERM_GRACE_S) -> int | None:
    """Stop *proc* and every process in its group; return the leader's exit status.

    SIGTERM goes to the leader first (stress-ng and ffmpeg then stop their workers and write their
    reports), then SIGTERM and finally SIGKILL to the whole group, until no member is left.
    The group id is the leader's pid (start_new_session) and stays valid while any member lives.
    """
    if IS_WINDOWS:
        return _terminate_windows(proc, grace_s)
    pgid = proc.pid
    if proc.poll() is None:
        ask_to_stop(proc)
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            _signal_group(pgid, signal.SIGTERM)
            try:
                proc.wait(timeout=1.0)
            except subprocess.TimeoutExpired:
                _signal_group(pgid, signal.SIGKILL)
                try:
                    proc.wait(timeout=_KILL_WAIT_S)
                except subprocess.TimeoutExpired:
                    pass  # stuck in the kernel (D state): the group loop below still runs
    # Workers the leader did not reap (it may have died first) are still in the group.
    deadline = time.monotonic() + _KILL_WAIT_S
    sig = signal.SIGTERM
    while _group_exists(pgid) and time.monotonic() < deadline:
        _signal_group(pgid, sig)
        sig = signal.SIGKILL
        time.sleep(0.02)
    return proc.returncode


def _terminate_windows(proc: subprocess.Popen[bytes], grace_s: float) -> int | None:
    """CTRL_BREAK_EVENT, then TerminateProcess after *grace_s* (no process group to sweep)."""
    if proc.poll() is None:
        ask_to_stop(proc)
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            try:
                proc.wait(timeout=_KILL_WAIT_S)
            except subprocess.TimeoutExpired:
                pass
    return proc.returncode


def describe_exit(returncode: int | None) -> str:
    """Say how a process ended: "exit status 1" or "killed by SIGKILL" (Popen.returncode)."""
    if returncode is None:
        return "still running"
    if returncode < 0:
        try:
            return f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exit status {returncode}"


def make_private_dir(parent: str | os.PathLike[str] | None, *, owner_uid: int | None = None) -> Path:
    """Create a private directory (mode 0700) for one load's files, optionally owned by *owner_uid*.

    A directory for another user must be reachable by that user: when a directory above
    *parent* is closed to others (a 0700 home or pytest directory), the system temporary
    directory is used instead.
    """
    if owner_uid is not None and parent is not None and not _reachable_by_others(Path(parent)):
        parent = None
    if owner_uid is not None and not _reachable_by_others(Path(parent or tempfile.gettempdir())):
        raise NotSupported(
            f"no directory that user {UNPRIVILEGED_USER} can reach for the load's files",
            hint="set TMPDIR to a directory open to others, such as /tmp",
        )
    path = Path(tempfile.mkdtemp(prefix="softrt-load-", dir=parent))
    if owner_uid is not None:
        try:
            os.chown(path, owner_uid, -1)
        except BaseException:
            remove_private_dir(path)
            raise
    return path


def _reachable_by_others(path: Path) -> bool:
    """True when every directory from / to *path* lets other users through (o+x)."""
    path = path.resolve()
    return all(os.stat(p).st_mode & 0o001 for p in (path, *path.parents))


def remove_private_dir(path: Path | None) -> None:
    """Remove a directory made by make_private_dir and everything left in it."""
    if path is not None:
        shutil.rmtree(path, ignore_errors=True)


def filesystem_of(path: str | os.PathLike[str]) -> str:
    """Return "fstype on source" for the mount holding *path* (from /proc/self/mounts, proc(5))."""
    target = os.path.realpath(path)
    if IS_WINDOWS:  # no mount table to read; the drive is what a user can act on
        return f"drive {os.path.splitdrive(target)[0] or target}"
    best = ("", "?", "?")
    try:
        with open("/proc/self/mounts", encoding="utf-8", errors="replace") as f:
            for line in f:
                parts = line.split()
                if len(parts) < 3:
                    continue
                mnt = parts[1].replace("\\040", " ")
                inside = target == mnt or target.startswith(mnt.rstrip("/") + "/")
                if inside and len(mnt) >= len(best[0]):
                    best = (mnt, parts[2], parts[0])
    except OSError:
        return "unknown filesystem"
    return f"{best[1]} on {best[2]}"
