"""Linux backend of the platform layer: scheduling, memory locking, PM QoS, clocks, host facts.

See sched(7), sched_setaffinity(2), mlockall(2), clock_nanosleep(2), prctl(2) and the kernel's
Documentation/power/pm_qos_interface.rst (/dev/cpu_dma_latency) and
Documentation/scheduler/sched-rt-group.rst (sched_rt_runtime_us).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import hashlib
import mmap
import os
import platform as _pyplatform
import pwd
import signal
import socket
import struct
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from ...cpus import MAX_CPUS, CpuSet
from ...errors import ConfigError, InvalidCpu, NoSuchProcess, PermissionDenied, SoftRTError
from ...schema.host import HostFacts
from ..base import Capabilities, Control, ThreadPins, Undo, softrt_version
from ..kfiles import read_int, read_text

_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)

MCL_CURRENT, MCL_FUTURE = 1, 2  # <sys/mman.h>
PR_SET_PDEATHSIG, PR_SET_TIMERSLACK = 1, 29  # <linux/prctl.h>
CLOCK_MONOTONIC, TIMER_ABSTIME = 1, 1  # <time.h>
RT_RUNTIME = "/proc/sys/kernel/sched_rt_runtime_us"
SHM_DIR = Path("/dev/shm")
LOCK_BACKLOG = 64  # refused runs that may ask for the holder before it ends (their connections wait here)


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

    caps = Capabilities(rt_throttling=True, kernel_trace=True, per_thread_affinity=True)
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
                raise InvalidCpu(
                    str(cpus), self.allowed_cpus(), "is not allowed to " + (f"pid {pid}" if pid else "this process")
                ) from err
            raise _oserror("sched_setaffinity", f"pid {pid or os.getpid()}", err) from err

    def pin_threads(self, cpus: CpuSet, keep: tuple[int, ...] = ()) -> ThreadPins:
        """Put every thread of this process but *keep* (thread ids) on *cpus*, one by one (:mod:`.threads`)."""
        from .threads import pin_threads

        return pin_threads(cpus, keep)

    def set_fifo(self, priority: int, pid: int = 0) -> None:
        """Make *pid* SCHED_FIFO at *priority* (1-99, sched(7))."""
        try:
            os.sched_setscheduler(pid, os.SCHED_FIFO, os.sched_param(priority))
        except OSError as err:
            raise _oserror("sched_setscheduler(SCHED_FIFO)", f"pid {pid or os.getpid()}", err) from err

    def worker_controls(self, cpu: int, priority: int, locked: object | None = None) -> list[Control]:
        """The worker's real-time controls, in the order applied: locked in RAM (before the device opens:
        Control.before_device), pinned, no deep C-states, 1 ns timer slack, SCHED_FIFO last (so
        nothing before it runs at RT priority on a shared CPU).

        *locked* (the ring) needs nothing here: mlockall(MCL_FUTURE) covers it. Every control is
        thread- or process-scoped and dies with the worker; only the PM QoS fd is closed explicitly.
        """

        def hold_dma() -> Undo:
            fd = self.hold_dma_latency(0)
            return lambda: os.close(fd)

        return [
            Control("mlockall", "MCL_CURRENT|MCL_FUTURE", self.lock_memory, before_device=True),
            Control("cpu_affinity", f"worker pinned to CPU {cpu}", lambda: self.set_affinity(CpuSet([cpu]))),
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
    def children_start_on(self, cpus: CpuSet) -> Iterator[None]:
        """Start the processes created in the block on *cpus*: this thread's affinity for the block
        (a child inherits it, sched_setaffinity(2)). The worker then loads its interpreter on its
        RT CPU, not on the housekeeping CPUs a tuned machine runs everything else on, where a
        compare's loads left it a seventh of a CPU (0.5 s of arming became ~3 s). Unchanged when
        the affinity cannot be set (a cpuset without those CPUs): the worker pins itself anyway."""
        before = os.sched_getaffinity(0)
        try:
            os.sched_setaffinity(0, cpus.to_frozenset())
        except OSError:
            yield
            return
        try:
            yield
        finally:
            os.sched_setaffinity(0, before)

    @contextmanager
    def ctrl_c_shield(self) -> Iterator[None]:
        """Block the stop signals (SIGINT, SIGTERM, SIGHUP) in this thread for the block: a process
        started inside inherits the blocked mask (sigprocmask(2): "a child created via fork(2)
        inherits a copy of its parent's signal mask"; execve(2) keeps it), so a signal sent to the
        whole process group (Ctrl-C, ``timeout``, a closed terminal) reaches only the supervisor,
        which stops the child cleanly."""
        from multiprocessing import resource_tracker

        from .. import STOP_SIGNALS

        # multiprocessing's resource tracker, started by the first spawn, unblocks SIGINT and SIGTERM
        # once it has started itself (CPython Lib/multiprocessing/resource_tracker.py, bpo-33613),
        # which would undo the block for the worker spawned right after: start it first.
        resource_tracker.ensure_running()
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, set(STOP_SIGNALS))
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
        """Return the name of a lock shared by every user of this machine (its key, not a file).

        ``SOFTRT_STATE_DIR`` moves it too, so tests get their own.
        """
        if os.environ.get("SOFTRT_STATE_DIR"):
            return Path(os.environ["SOFTRT_STATE_DIR"]) / f"{name}.lock"
        return Path("/run/lock") / f"softrt-{name}.lock"

    def try_lock(self, path: Path) -> int | None:
        """Take the machine lock named *path*; return its fd (close it to release), or None when held.

        The lock is a listening socket bound to an address in the abstract namespace of AF_UNIX
        (unix(7): "an abstract socket address ... has no connection with filesystem pathnames";
        bind(2) fails with EADDRINUSE while another socket holds it). Nothing is created on disk,
        so no file left behind or planted by any user (a root-owned 0600 file, a symlink, a FIFO)
        can block anyone, and no permission stands between root and other users: every user can
        take it, and none can keep it without a living process, since the kernel releases it when
        its holder's last fd closes (the fd is close-on-exec, PEP 446, so no child keeps it).
        """
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.bind(_lock_address(path))
            sock.listen(LOCK_BACKLOG)  # so that a refused process can ask who holds it (lock_holder)
        except OSError as err:
            sock.close()
            if err.errno == errno.EADDRINUSE:
                return None
            raise SoftRTError(f"cannot take softrt's machine lock: {err.strerror or err}") from None
        return sock.detach()

    def lock_holder(self, path: Path) -> str:
        """Return who holds the machine lock *path*: ``"PID (user NAME: COMMAND, since HH:MM:SS; real-time
        on CPU N)"``, or "?".

        The pid and user come from the kernel, not from anything the holder wrote: a connection to
        the holder's socket carries its credentials (SO_PEERCRED, unix(7)), which no user can forge;
        so do the CPUs, the affinity of its (or its worker's) SCHED_FIFO/RR threads (sched(7)).
        """
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.setblocking(False)  # a backlog that is full (many refused runs) must not block this one
        try:
            sock.connect(_lock_address(path))
            pid, uid, _gid = struct.unpack(
                "3i", sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
            )
        except OSError:
            return "?"
        finally:
            sock.close()
        cpus = realtime_cpus(pid)
        return f"{pid} ({describe_process(pid, uid)}{f'; real-time on CPU {cpus}' if cpus else ''})"

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
    def host_facts(self, root: str = "/") -> HostFacts:
        """Return what a reader of a result needs to know about this machine."""
        uname = os.uname()
        cpuinfo = read_text(root, "/proc/cpuinfo", fallback="")
        model = next((ln.split(":", 1)[1].strip() for ln in cpuinfo.splitlines() if ln.startswith("model name")), None)
        return HostFacts.build(
            os="linux",
            hostname=uname.nodename,
            kernel=uname.release,
            kernel_version=uname.version,
            machine=uname.machine,
            preemption=preemption_model(root, uname.version),
            cpu_model=model or _pyplatform.processor() or None,
            cpu_count=len(self.online_cpus(root)),
            cmdline=read_text(root, "/proc/cmdline", fallback=None),
            python=_pyplatform.python_version(),
            softrt=softrt_version(),
            clocksource=read_text(
                root, "/sys/devices/system/clocksource/clocksource0/current_clocksource", fallback=None
            ),
            rt_runtime_us=self.rt_runtime_us(root),
        )


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


def _lock_address(path: Path) -> bytes:
    """The abstract AF_UNIX address of the machine lock named *path* (a leading NUL byte, unix(7))."""
    digest = hashlib.sha256(os.fsencode(os.path.abspath(path))).hexdigest()[:32]
    return b"\0softrt-lock-" + digest.encode()


def realtime_cpus(pid: int) -> CpuSet | None:
    """The CPUs the real-time threads (SCHED_FIFO or SCHED_RR) of process *pid* and of its
    descendants may run on (a softrt run's loop is its spawned worker's), or None when it has none
    (yet: a run still arming; never: a tune). sched_getscheduler(2) and sched_getaffinity(2) read
    any user's threads, so the holder of the machine lock is described whoever it is."""
    import psutil

    cpus: set[int] = set()
    try:
        procs = [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]
    except psutil.Error:
        return None
    for proc in procs:
        try:
            tids = [t.id for t in proc.threads()]
        except psutil.Error:
            continue
        for tid in tids:
            try:
                if os.sched_getscheduler(tid) in (os.SCHED_FIFO, os.SCHED_RR):
                    cpus |= os.sched_getaffinity(tid)
            except OSError:  # the thread ended meanwhile
                continue
    return CpuSet(sorted(cpus)) if cpus else None


def describe_process(pid: int, uid: int | None = None) -> str:
    """``user NAME: COMMAND, since HH:MM:SS`` for process *pid* (whatever of it can be read), for messages."""
    import psutil

    from ...schema.text import printable

    parts = []
    try:
        proc = psutil.Process(pid)
        with proc.oneshot():
            uid = proc.uids().real if uid is None else uid
            command = " ".join(proc.cmdline()) or proc.name()
            started = time.localtime(proc.create_time())  # a day of its own when it is not today's (a 72 h run)
            since = time.strftime("%H:%M:%S" if started[:3] == time.localtime()[:3] else "%Y-%m-%d %H:%M:%S", started)
    except psutil.Error:
        command = since = None
    if uid is not None:
        try:
            parts.append(f"user {pwd.getpwuid(uid).pw_name}")
        except KeyError:
            parts.append(f"uid {uid}")
    if command:
        shown = printable(command)
        parts.append(shown if len(shown) <= 80 else shown[:79] + "…")
    text = ": ".join(parts)
    return f"{text}, since {since}" if since else text or "gone"
