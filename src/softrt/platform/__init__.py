"""The platform layer: the only place in softrt that branches on the operating system.

``get_platform()`` returns the backend for this OS once (:mod:`.linux.backend` or :mod:`.windows.backend`,
which nothing outside this package imports); callers branch on its ``caps`` (a :class:`Capabilities`),
never on ``sys.platform``. Kernel files are read and written through the public :mod:`.kfiles`.

The tiers follow psutil's (``_pslinux``, ``_pswindows``, ``_common``): what is Linux's lives in
:mod:`.linux` (the backend, kernel facts and tasks, the fair server, the allow-list of kernel-file writes),
what is Windows's in :mod:`.windows` (the backend, its ctypes bindings ``_win32``, commands, settings, CPU
sets, adapters, ETW payloads), and what serves both stays here (journals, owned directories, output files,
load processes, provenance and the rig's id).
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

from ..errors import NotSupported
from .base import Capabilities, Control, Platform, ThreadPins
from .base import softrt_version as softrt_version

IS_LINUX = sys.platform.startswith("linux")
IS_WINDOWS = sys.platform == "win32"

_platform: Platform | None = None

#: The signals that ask softrt to stop, handled alike (session.interrupts): Ctrl-C, and SIGTERM and
#: SIGHUP where they exist (``kill``, ``timeout``, systemd, ``docker stop``; a closed terminal or ssh
#: session). Windows has no SIGHUP (Python docs, ``signal``: "Availability").
STOP_SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name))

#: os.open flags for a file softrt reads or writes byte for byte, never handed to a child: O_CLOEXEC
#: (open(2)); on Windows O_NOINHERIT, and O_BINARY, without which the C runtime translates newlines
#: (and stops a read at Ctrl-Z) on the descriptor (Microsoft C runtime, ``_open``).
O_PRIVATE_BINARY = (os.O_NOINHERIT | os.O_BINARY) if IS_WINDOWS else os.O_CLOEXEC  # type: ignore[attr-defined]


def get_platform() -> Platform:
    """Return this OS's platform backend (created once)."""
    global _platform
    if _platform is None:
        if IS_LINUX:
            from .linux.backend import LinuxPlatform

            _platform = LinuxPlatform()
        elif IS_WINDOWS:
            from .windows.backend import WindowsPlatform

            _platform = WindowsPlatform()
        else:
            raise NotSupported(
                f"softrt's real-time controls support Linux and Windows; this is {sys.platform}",
                hint="run softrt on Linux or Windows",
            )
    return _platform


def preallocate(fd: int, nbytes: int) -> None:
    """Give the open file *fd* at least *nbytes* of real disk space now, so a later write cannot
    fail for space (store.rundir's reserve file).

    Linux: posix_fallocate(3) allocates the blocks (a sparse ``ftruncate`` would reserve nothing).
    Windows has no posix_fallocate (Python's ``os`` lacks it there); ``os.ftruncate`` is
    SetEndOfFile, and NTFS allocates the clusters up to a new end of file of a file that is not
    marked sparse (Microsoft, "SetEndOfFile function", "Sparse Files"). Raises OSError.
    """
    if IS_WINDOWS:
        os.ftruncate(fd, nbytes)
    else:
        os.posix_fallocate(fd, 0, nbytes)


def lock_rt_loop() -> tuple[int | None, str]:
    """Take this machine's real-time lock, which lets one SCHED_FIFO loop (``softrt run``) or one
    ``softrt tune`` act at a time: ``(fd, "")``, or ``(None, holder)`` naming who holds it
    (:meth:`Platform.lock_holder`; :func:`lock_stop_hint` says what to do about it). Closing *fd* releases it."""
    plat = get_platform()
    path = plat.machine_lock_path("rt-loop")
    fd = plat.try_lock(path)
    return (fd, "") if fd is not None else (None, plat.lock_holder(path))


def lock_stop_hint(holder: str) -> str:
    """What to do about the machine lock's holder (as :meth:`Platform.lock_holder` names it)."""
    pid = holder.split()[0] if holder[:1].isdigit() else None
    if pid is None or IS_WINDOWS:  # (no SIGTERM there: a run stops cleanly on Ctrl-C in its console)
        return "wait for it to end, or stop it with Ctrl-C where it runs; softrt runs one real-time loop at a time"
    return (
        f"softrt runs one real-time loop at a time: wait for it to end, or stop it with kill {pid}; "
        "a softrt run stops cleanly on SIGTERM and keeps what it measured"
    )


def maker_alive(pid: int, identity: str | None) -> bool:
    """True while the process that wrote *identity* (``Platform.process_identity`` of *pid*) runs.

    Boot, pid and start time must all match, so a pid reused by another process is not the maker of a
    journal or marker it never wrote. A file without an identity (an older softrt's, or a process
    whose identity could not be read) is asked by its pid alone.
    """
    if not identity:
        import psutil

        return psutil.pid_exists(pid)
    return get_platform().process_identity(pid) == identity


def state_dir() -> Path:
    """Return softrt's state directory (restore journals, tune state).

    ``SOFTRT_STATE_DIR`` overrides it; root uses /var/lib/softrt (shared by every root
    session, so a crashed run is noticed by the next command), others ~/.local/state/softrt;
    on Windows ``%LOCALAPPDATA%\\softrt\\state``.
    """
    env = os.environ.get("SOFTRT_STATE_DIR")
    if env:
        return Path(env)
    if IS_WINDOWS and os.environ.get("LOCALAPPDATA"):
        return Path(os.environ["LOCALAPPDATA"]) / "softrt" / "state"
    if IS_LINUX and os.geteuid() == 0:
        return Path("/var/lib/softrt")
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(Path.home(), ".local", "state")
    return Path(base) / "softrt"


def data_dir() -> Path:
    """Return softrt's per-user data directory (run history, imported runs).

    ``SOFTRT_HOME`` overrides it; otherwise ``%LOCALAPPDATA%\\softrt`` on Windows and
    ``$XDG_DATA_HOME/softrt`` or ``~/.local/share/softrt`` elsewhere (XDG Base Directory
    Specification: "$XDG_DATA_HOME defines the base directory relative to which user-specific
    data files should be stored").
    """
    env = os.environ.get("SOFTRT_HOME")
    if env:
        return Path(env)
    if IS_WINDOWS and os.environ.get("LOCALAPPDATA"):
        return Path(os.environ["LOCALAPPDATA"]) / "softrt"
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(Path.home(), ".local", "share")
    return Path(base) / "softrt"


#: The default run directory as ``--help`` shows it (default_runs_dir).
RUNS_DIR_SHOWN = r"%LOCALAPPDATA%\softrt\runs (SOFTRT_HOME\runs)" if IS_WINDOWS else "softrt-runs"


def default_runs_dir() -> Path:
    """Where runs are stored without ``--out-dir``.

    Linux: ``softrt-runs`` in the current directory, as it always was (a shell user works where the
    runs should go, and scripts and docs name it). Windows: ``<data dir>\\runs``, absolute: an elevated
    prompt starts in ``C:\\Windows\\System32``, where a relative directory would put every run (issue 34).
    """
    if IS_WINDOWS:
        return Path(os.path.abspath(data_dir() / "runs"))
    return Path("softrt-runs")


def performance_cpus(root: str = "/"):
    """The logical processors of the most performant core type on a hybrid CPU; None when every core is of one
    type or it cannot be read. Windows: GetSystemCpuSetInformation's top EfficiencyClass (platform.windows.wincpusets);
    Linux, or a tree captured under *root*: ``/sys/devices/cpu_core/cpus``, the P-cores Intel's hybrid PMU driver lists (kernel doc
    Documentation/ABI/testing/sysfs-bus-event_source-devices: "cpus")."""
    from ..cpus import CpuSet
    from ..errors import SoftRTError

    try:
        if IS_WINDOWS and os.path.realpath(root) == os.path.realpath(os.sep):
            from .windows.wincpusets import system_cpu_sets, topology

            topo = topology(system_cpu_sets())
            return topo.performance() if topo.hybrid else None
        with open(os.path.join(root, "sys/devices/cpu_core/cpus"), encoding="ascii") as f:
            return CpuSet.parse(f.read().strip()) or None
    except (OSError, ValueError, SoftRTError):
        return None


def ethercat_adapter(name: str) -> str:
    """The name pysoem opens for the adapter the user named: unchanged on Linux (``eth1``); on Windows the Npcap
    device ``\\Device\\NPF_{GUID}`` of a friendly name or GUID (platform.windows.winadapters), after checking that SOEM
    can load Npcap. Raises ConfigError (one line with the fix) when it cannot."""
    if not IS_WINDOWS:
        return name
    from .windows.winadapters import list_adapters, require_npcap, resolve

    require_npcap()
    return resolve(name, list_adapters())


__all__ = [
    "IS_LINUX",
    "IS_WINDOWS",
    "O_PRIVATE_BINARY",
    "RUNS_DIR_SHOWN",
    "STOP_SIGNALS",
    "Capabilities",
    "Control",
    "Platform",
    "ThreadPins",
    "data_dir",
    "default_runs_dir",
    "ethercat_adapter",
    "get_platform",
    "lock_rt_loop",
    "lock_stop_hint",
    "maker_alive",
    "performance_cpus",
    "state_dir",
]
