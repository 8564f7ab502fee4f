"""Linux backend of the platform layer: scheduling, memory locking, PM QoS, clocks, host facts.

See sched(7), sched_setaffinity(2), mlockall(2), clock_nanosleep(2), prctl(2) and the kernel's
Documentation/power/pm_qos_interface.rst (/dev/cpu_dma_latency) and
Documentation/scheduler/sched-rt-group.rst (sched_rt_runtime_us).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import fcntl
import mmap
import os
import platform as _pyplatform
import signal
import stat
import struct
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from ..cpus import MAX_CPUS, CpuSet
from ..errors import ConfigError, InvalidCpu, NoSuchProcess, PermissionDenied, SoftRTError
from .kfiles import read_int, read_text
from .base import Capabilities, Control, Undo

_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)

MCL_CURRENT, MCL_FUTURE = 1, 2  # <sys/mman.h>
PR_SET_PDEATHSIG, PR_SET_TIMERSLACK = 1, 29  # <linux/prctl.h>
CLOCK_MONOTONIC, TIMER_ABSTIME = 1, 1  # <time.h>
RT_RUNTIME = "/proc/sys/kernel/sched_rt_runtime_us"
SHM_DIR = Path("/dev/shm")


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


_clock_nanosleep = _libc.clock_nanosleep
_clock_nanosleep.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.POINTER(_Timespec), ctypes.c_void_p]
_clock_nanosleep.restype = ctypes.c_int


def _oserror(op: str, target: str, err: OSError) -> SoftRTError:
    if err.errno in (errno.EPERM, errno.EACCES):
        return PermissionDenied(op, target, hint="run as root or grant CAP_SYS_NICE / CAP_IPC_LOCK")
    return SoftRTError(f"{op} on {target} failed: {err.strerror or err}")


class LinuxPlatform:
    """Linux implementation of :class:`~softrt.platform.base.Platform`."""

    caps = Capabilities(rt_throttling=True, kernel_trace=True)
    clock_ns = staticmethod(time.monotonic_ns)  # CLOCK_MONOTONIC, what clock_nanosleep sleeps on

    # --- CPUs ---------------------------------------------------------------------------------
    def online_cpus(self, root: str = "/") -> CpuSet:
        """Return the online CPUs (/sys/devices/system/cpu/online, cputopology.rst)."""
        text = read_text(root, "/sys/devices/system/cpu/online", fallback=None)
        if text is None:
            return CpuSet(range(os.cpu_count() or 1))
        return CpuSet.parse(text)

    def cpu_limit(self, root: str = "/") -> int:
        """Return one past the highest CPU number this machine can ever have (bound for CPU lists).

        /sys/devices/system/cpu/possible lists the CPUs the kernel allocated per-CPU data for,
        hot-pluggable ones included (Documentation/admin-guide/cputopology.rst: "possible: CPUs
        that have been allocated resources and can be brought online if they are present").
        """
        text = read_text(root, "/sys/devices/system/cpu/possible", fallback=None)
        try:
            possible = CpuSet.parse(text) if text is not None else None
        except ConfigError:
            possible = None
        if not possible:
            return MAX_CPUS
        return possible.last() + 1

    def allowed_cpus(self) -> CpuSet:
        """Return the CPUs this process may run on (its affinity, which cgroups may narrow)."""
        return self.get_affinity(0)

    def get_affinity(self, pid: int = 0) -> CpuSet:
        """Return the CPUs thread *pid* (0: this one) may run on (sched_getaffinity(2)).

        Raises:
            NoSuchProcess: the thread exited (ESRCH).
        """
        try:
            return CpuSet(os.sched_getaffinity(pid))
        except OSError as err:
            if err.errno == errno.ESRCH:
                raise NoSuchProcess(f"thread {pid} exited") from err
            raise _oserror("sched_getaffinity", f"pid {pid or os.getpid()}", err) from err

    def set_affinity(self, cpus: CpuSet, pid: int = 0) -> None:
        """Pin thread *pid* (0: this one) to *cpus*.

        Raises:
            NoSuchProcess: the thread exited (ESRCH).
            InvalidCpu: a CPU offline or outside the thread's cpuset (EINVAL).
        """
        try:
            os.sched_setaffinity(pid, cpus.to_frozenset())
        except OSError as err:
            if err.errno == errno.ESRCH:
                raise NoSuchProcess(f"thread {pid} exited") from err
            if err.errno == errno.EINVAL:  # CPU offline or outside the cpuset (sched_setaffinity(2))
                raise InvalidCpu(str(cpus), self.allowed_cpus(), "is not allowed to " + (f"pid {pid}" if pid else "this process")) from err
            raise _oserror("sched_setaffinity", f"pid {pid or os.getpid()}", err) from err

    def set_fifo(self, priority: int, pid: int = 0) -> None:
        """Make *pid* SCHED_FIFO at *priority* (1-99, sched(7))."""
        try:
            os.sched_setscheduler(pid, os.SCHED_FIFO, os.sched_param(priority))
        except OSError as err:
            raise _oserror("sched_setscheduler(SCHED_FIFO)", f"pid {pid or os.getpid()}", err) from err

    def worker_controls(self, cpu: int, priority: int, locked: object | None = None) -> list[Control]:
        """The worker's real-time controls, in the order applied: pinned, locked in RAM, no deep C-states,
        1 ns timer slack, SCHED_FIFO last (so nothing before it runs at RT priority on a shared CPU).

        *locked* (the ring) needs nothing here: mlockall(MCL_FUTURE) covers it. Every control is
        thread- or process-scoped and dies with the worker; only the PM QoS fd is closed explicitly.
        """
        def hold_dma() -> Undo:
            fd = self.hold_dma_latency(0)
            return lambda: os.close(fd)

        return [
            Control("cpu_affinity", f"worker pinned to CPU {cpu}", lambda: self.set_affinity(CpuSet([cpu]))),
            Control("mlockall", "MCL_CURRENT|MCL_FUTURE", self.lock_memory),
            Control("cpu_dma_latency", "0 µs held open for the run", hold_dma),
            Control("timer_slack", "1 ns", lambda: self.set_timer_slack_ns(1)),
            Control("sched_fifo", f"SCHED_FIFO priority {priority}", lambda: self.set_fifo(priority)),
        ]

    # --- RT throttling (Documentation/scheduler/sched-rt-group.rst) ------------------------------
    def rt_runtime_us(self, root: str = "/") -> int | None:
        """Return sched_rt_runtime_us (-1: RT throttling off), None if unreadable."""
        return read_int(root, RT_RUNTIME, fallback=None)

    def rt_throttling_off(self) -> tuple[str, str]:
        """Return the kernel file and value that switch RT throttling off, for the run's journal to write.

        A spinning SCHED_FIFO task is throttled for 50 ms every second by default; -1 disables that.
        The write itself goes through the one journal (session.changes), which restores it.
        """
        return RT_RUNTIME, "-1"

    # --- memory and power ---------------------------------------------------------------------
    def lock_memory(self) -> None:
        """Lock current and future pages in RAM so the loop never takes a page fault (mlockall(2))."""
        if _libc.mlockall(MCL_CURRENT | MCL_FUTURE) != 0:
            err = ctypes.get_errno()
            raise _oserror("mlockall", "this process", OSError(err, os.strerror(err)))

    def hold_dma_latency(self, latency_us: int = 0) -> int:
        """Ask PM QoS for *latency_us* CPU wake-up latency; held while the returned fd is open.

        The kernel drops the request when the fd closes, so it cannot outlive the process
        (Documentation/power/pm_qos_interface.rst).
        """
        try:
            fd = os.open("/dev/cpu_dma_latency", os.O_WRONLY)
        except OSError as err:
            raise _oserror("open", "/dev/cpu_dma_latency", err) from err
        try:
            os.write(fd, struct.pack("i", latency_us))
        except OSError as err:
            os.close(fd)
            raise _oserror("write", "/dev/cpu_dma_latency", err) from err
        return fd

    def set_timer_slack_ns(self, slack_ns: int) -> None:
        """Set this thread's timer slack (default 50 µs for SCHED_OTHER; prctl(2) PR_SET_TIMERSLACK)."""
        if _libc.prctl(PR_SET_TIMERSLACK, ctypes.c_ulong(slack_ns), 0, 0, 0) != 0:
            err = ctypes.get_errno()
            raise SoftRTError(f"prctl(PR_SET_TIMERSLACK) failed: {os.strerror(err)}")

    def die_with_parent(self) -> None:
        """Have the kernel SIGKILL this process when its parent dies (prctl(2) PR_SET_PDEATHSIG)."""
        if _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
            err = ctypes.get_errno()
            raise SoftRTError(f"prctl(PR_SET_PDEATHSIG) failed: {os.strerror(err)}")

    def adopt_worker(self, pid: int) -> Undo:
        """Nothing to do in the supervisor: the worker arranged its own death signal (:meth:`die_with_parent`)."""
        return lambda: None

    @contextmanager
    def ctrl_c_shield(self) -> Iterator[None]:
        """Block SIGINT in this thread for the block: a process started inside inherits the blocked
        mask (sigprocmask(2): "a child created via fork(2) inherits a copy of its parent's signal
        mask"), so Ctrl-C reaches only the supervisor, which stops the child cleanly."""
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            yield
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)

    def make_sleep_until(self) -> tuple[Callable[[int], None], Undo]:
        """Return ``(sleep_until(abs_ns), close)``: clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME), nothing to close.

        Absolute sleeps do not accumulate drift (cyclictest's default mode). The timespec is
        allocated once here so the hot loop allocates nothing but the call's integers.
        """
        ts = _Timespec()
        ref = ctypes.byref(ts)
        fn = _clock_nanosleep

        def sleep_until(abs_ns: int) -> None:
            ts.tv_sec, ts.tv_nsec = divmod(abs_ns, 1_000_000_000)
            while fn(CLOCK_MONOTONIC, TIMER_ABSTIME, ref, None) == errno.EINTR:
                pass

        return sleep_until, lambda: None

    # --- exclusion between softrt processes ----------------------------------------------------
    def process_identity(self, pid: int = 0, root: str = "/") -> str | None:
        """Return ``BOOT_ID/PID/START`` naming process *pid* (0: this one) for as long as it lives.

        A pid alone is reused; with the boot id (/proc/sys/kernel/random/boot_id, random(4)) and the
        process's start time in clock ticks since boot (/proc/PID/stat field 22, proc(5)) it names
        one process of one boot. None when the process does not exist (or /proc is unreadable).
        """
        pid = pid or os.getpid()
        boot = read_text(root, "/proc/sys/kernel/random/boot_id", fallback=None)
        stat_line = read_text(root, f"/proc/{pid}/stat", fallback=None)
        if not boot or not stat_line or ")" not in stat_line:
            return None
        fields = stat_line.rsplit(")", 1)[1].split()  # the command name may hold spaces and ")"
        if len(fields) < 20:
            return None
        return f"{boot}/{pid}/{fields[19]}"  # fields[0] is field 3 (state), so field 22 is fields[19]

    def machine_lock_path(self, name: str) -> Path:
        """Return a lock file shared by every user of this machine (/run/lock is 1777, FHS 3.0 §3.15.4).

        ``SOFTRT_STATE_DIR`` moves it too, so tests get their own.
        """
        if os.environ.get("SOFTRT_STATE_DIR"):
            return Path(os.environ["SOFTRT_STATE_DIR"]) / f"{name}.lock"
        return Path("/run/lock") / f"softrt-{name}.lock"

    def try_lock(self, path: Path) -> int | None:
        """Take an exclusive flock(2) on *path*; return its fd, or None if another process holds it.

        The kernel drops the lock when the holder dies, so a killed run never leaves it taken.
        /run/lock is writable by every user, so the file is opened O_NOFOLLOW (a planted symlink
        fails with ELOOP), and softrt never writes through another user's file: its own (a regular
        file with one link) gets the holder's pid; one made by another user (root's, mode 0644,
        or a user's that ran first) is only locked, read-only where it may not be written
        (flock(2) needs no write access). Every user's run and root's exclude each other.

        Raises:
            SoftRTError: the lock path is a symlink, not a regular file or a hard link (with the fix).
        """
        path.parent.mkdir(parents=True, exist_ok=True)
        refused = f"the lock file {path} is not softrt's own"
        try:
            try:
                fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
            except PermissionError:  # another user's 0644 file
                fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError as err:
            why = "a symlink" if err.errno == errno.ELOOP else err.strerror
            fix = (f"an older softrt made it 0600: as root, chmod 644 {path}" if isinstance(err, PermissionError)
                   else f"remove it: rm {path}")
            raise SoftRTError(f"{refused}: {why}", hint=fix) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        info = os.fstat(fd)
        mine = info.st_uid == os.geteuid()
        why = ("not a regular file" if not stat.S_ISREG(info.st_mode) else
               f"a hard link ({info.st_nlink} links)" if mine and info.st_nlink != 1 else None)
        if why:
            os.close(fd)
            raise SoftRTError(f"{refused}: {why}", hint=f"remove it: rm {path}")
        if mine:
            os.fchmod(fd, 0o644)  # one an older softrt made 0600 becomes readable by users
            os.ftruncate(fd, 0)
            os.write(fd, str(os.getpid()).encode())
        return fd

    def lock_holder(self, path: Path) -> str:
        """Return the pid written in the lock file *path* by its holder, or "?" (never follows a link)."""
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
        except OSError:
            return "?"
        try:
            text = os.read(fd, 32).decode("ascii", errors="replace").strip()
        except OSError:
            return "?"
        finally:
            os.close(fd)
        return text if text.isdigit() else "?"

    # --- shared memory ------------------------------------------------------------------------
    def open_shared_memory(self, name: str, size: int, create: bool) -> mmap.mmap:
        """Map the shared-memory segment /dev/shm/*name* (created with mode 0600 when *create*)."""
        path = SHM_DIR / name
        flags = os.O_RDWR | (os.O_CREAT | os.O_EXCL if create else 0)
        fd = os.open(path, flags, 0o600)
        try:
            if create:
                os.ftruncate(fd, size)
            return mmap.mmap(fd, size)
        finally:
            os.close(fd)

    def list_shared_memory(self, prefix: str) -> list[str]:
        """Return the names of the shared-memory segments starting with *prefix*."""
        try:
            return sorted(p.name for p in SHM_DIR.glob(prefix + "*"))
        except OSError:
            return []

    def remove_shared_memory(self, name: str) -> None:
        """Remove /dev/shm/*name* if it exists."""
        try:
            (SHM_DIR / name).unlink()
        except FileNotFoundError:
            pass

    # --- host facts ---------------------------------------------------------------------------
    def host_facts(self, root: str = "/") -> dict:
        """Return what a reader of a result needs to know about this machine."""
        uname = os.uname()
        cpuinfo = read_text(root, "/proc/cpuinfo", fallback="")
        model = next((ln.split(":", 1)[1].strip() for ln in cpuinfo.splitlines() if ln.startswith("model name")), None)
        return {
            "os": "linux",
            "hostname": uname.nodename,
            "kernel": uname.release,
            "kernel_version": uname.version,
            "machine": uname.machine,
            "preemption": preemption_model(root, uname.version),
            "cpu_model": model or _pyplatform.processor() or None,
            "cpu_count": len(self.online_cpus(root)),
            "cmdline": read_text(root, "/proc/cmdline", fallback=None),
            "python": _pyplatform.python_version(),
            "clocksource": read_text(root, "/sys/devices/system/clocksource/clocksource0/current_clocksource", fallback=None),
            "rt_runtime_us": self.rt_runtime_us(root),
        }


def preemption_model(root: str = "/", version: str | None = None) -> str:
    """Return the preemption model: "PREEMPT_RT", or the PREEMPT_DYNAMIC mode, or from uname.

    /sys/kernel/realtime is 1 on PREEMPT_RT kernels; /sys/kernel/debug/sched/preempt shows the
    dynamic mode as "none voluntary (full) lazy" (kernel/sched/core.c).
    """
    if read_text(root, "/sys/kernel/realtime", fallback="0") == "1":
        return "PREEMPT_RT"
    mode = read_text(root, "/sys/kernel/debug/sched/preempt", fallback="")
    if "(" in mode:
        return "PREEMPT_DYNAMIC:" + mode.split("(", 1)[1].split(")", 1)[0]
    version = version if version is not None else os.uname().version
    for tag in ("PREEMPT_RT", "PREEMPT_DYNAMIC", "PREEMPT"):
        if tag in version.split():
            return tag
    return "unknown"
