"""Windows backend of the platform layer: the Soft Real-Time application calls, through ctypes (platform layer).

What the worker does is Microsoft's "Develop a soft real-time application"
(learn.microsoft.com/windows/iot/iot-enterprise/soft-real-time/soft-real-time-application): the
process to REALTIME_PRIORITY_CLASS and the real-time cores (SetPriorityClass,
SetProcessAffinityMask), the thread to the real-time core and a base priority in 16-31
(SetThreadAffinityMask, SetThreadPriority: in REALTIME_PRIORITY_CLASS its levels -15, -7…6 and 15
give 16-31, and ``--priority`` 1-99 is spread over them). Beyond the doc: the working set
is locked (SetProcessWorkingSetSizeEx with a hard minimum, VirtualLock of the ring), the system
timer runs at 1 ms (timeBeginPeriod), ``--wait sleep`` sleeps on a high-resolution waitable timer
(CreateWaitableTimerExW, CREATE_WAITABLE_TIMER_HIGH_RESOLUTION, Windows 10 1803+), the clock is
QueryPerformanceCounter (``time.perf_counter_ns``, PEP 418), and the worker is killed with the
supervisor by a job object with JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE.

Every Win32 call goes through :class:`._win32.Win32` (the ctypes bindings, one method a call, raising
:class:`._win32.Win32Failed`); :class:`WindowsPlatform` maps those to softrt errors with their fix
(:func:`._win32.to_softrt_error`, as psutil's ``wrap_exceptions``). The DLLs are resolved on the first call
only, so this module imports (and its call sequence is tested, against a recording fake of ``Win32``) on Linux.

Limits: CPU masks cover processor group 0 (64 logical CPUs), as SetProcessAffinityMask does.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path

import psutil

from ...cpus import CpuSet
from ...errors import InvalidCpu, NotSupported, PermissionDenied, SoftRTError
from ...schema.host import HostFacts
from .. import O_PRIVATE_BINARY
from ..base import Capabilities, Control, ThreadPins, Undo
from . import winhost
from ._win32 import (
    ADMIN_HINT,
    ANY_CLASS_LEVELS,
    CREATE_WAITABLE_TIMER_HIGH_RESOLUTION,
    ERROR_FILE_NOT_FOUND,
    ERROR_INVALID_PARAMETER,
    FILE_MAP_READ,
    INFINITE,
    JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE,
    LOCK_OFFSET,
    LOCKFILE_EXCLUSIVE_LOCK,
    LOCKFILE_FAIL_IMMEDIATELY,
    MAX_GROUP_CPUS,
    PROCESS_QUERY_LIMITED_INFORMATION,
    PROCESS_SET_INFORMATION,
    PROCESS_SET_QUOTA,
    PROCESS_TERMINATE,
    QUOTA_LIMITS_HARDWS_MAX_DISABLE,
    QUOTA_LIMITS_HARDWS_MAX_ENABLE,
    QUOTA_LIMITS_HARDWS_MIN_DISABLE,
    QUOTA_LIMITS_HARDWS_MIN_ENABLE,
    REALTIME_CLASS_BASE,
    REALTIME_HIGHEST,
    REALTIME_LOWEST,
    REALTIME_PRIORITY_CLASS,
    THREAD_PRIORITY_IDLE,
    THREAD_PRIORITY_TIME_CRITICAL,
    TIMER_ALL_ACCESS,
    TIMER_RESOLUTION_MS,
    WORKING_SET_MARGIN_BYTES,
    Win32,
    Win32Failed,
    to_softrt_error,
)


def realtime_level(priority: int) -> int:
    """The SetThreadPriority level in REALTIME_PRIORITY_CLASS for SCHED_FIFO *priority* 1-99: spread
    evenly over the class's base priorities 16-31 (1 → 16, 80 → 28, 99 → 31)."""
    base = REALTIME_LOWEST + ((min(max(priority, 1), 99) - 1) * (REALTIME_HIGHEST - REALTIME_LOWEST) + 49) // 98
    return {REALTIME_LOWEST: THREAD_PRIORITY_IDLE, REALTIME_HIGHEST: THREAD_PRIORITY_TIME_CRITICAL}.get(
        base, base - REALTIME_CLASS_BASE
    )


def base_priority(level: int) -> int:
    """The base priority a SetThreadPriority *level* gives in REALTIME_PRIORITY_CLASS (saturating at 16 and 31)."""
    return min(max(REALTIME_CLASS_BASE + level, REALTIME_LOWEST), REALTIME_HIGHEST)


def mask_of(cpus: CpuSet) -> int:
    """Return the affinity mask (bit n: CPU n) of *cpus*, which must lie in processor group 0."""
    mask = 0
    for cpu in cpus:
        if cpu >= MAX_GROUP_CPUS:
            raise InvalidCpu(
                cpu, CpuSet(range(MAX_GROUP_CPUS)), "is outside processor group 0 (affinity masks hold 64 CPUs)"
            )
        mask |= 1 << cpu
    return mask


def cpus_of(mask: int) -> CpuSet:
    """Return the CPUs of affinity *mask*."""
    return CpuSet(n for n in range(MAX_GROUP_CPUS) if mask >> n & 1)


def restore_flags(flags: int) -> int:
    """Return the SetProcessWorkingSetSizeEx flags that put back the hard limits GetProcessWorkingSetSizeEx reported."""
    low = QUOTA_LIMITS_HARDWS_MIN_ENABLE if flags & QUOTA_LIMITS_HARDWS_MIN_ENABLE else QUOTA_LIMITS_HARDWS_MIN_DISABLE
    high = QUOTA_LIMITS_HARDWS_MAX_ENABLE if flags & QUOTA_LIMITS_HARDWS_MAX_ENABLE else QUOTA_LIMITS_HARDWS_MAX_DISABLE
    return low | high


def _address(buffer) -> int:
    """Return the address of a writable buffer (the ring's mapping) without keeping it exported."""
    view = ctypes.c_char.from_buffer(buffer)
    try:
        return ctypes.addressof(view)
    finally:
        del view  # an exported pointer would stop the mapping from being closed


class WindowsPlatform:
    """Windows implementation of :class:`~softrt.platform.base.Platform` (see the module docstring)."""

    caps = Capabilities(rt_throttling=False, kernel_trace=False, soft_rt_steps=True)
    # QueryPerformanceCounter: time.perf_counter_ns on Windows (PEP 418); time.monotonic_ns is
    # GetTickCount64 before Python 3.13, 15.6 ms steps, useless for a 250 µs loop.
    clock_ns = staticmethod(time.perf_counter_ns)

    def __init__(self, win32: Win32 | None = None) -> None:
        self.w = win32 if win32 is not None else Win32()

    def _do(self, target: str, call: Callable, *args):
        """Run one Win32 call; a failure becomes a softrt error naming *target*, with its fix."""
        try:
            return call(*args)
        except Win32Failed as err:
            raise to_softrt_error(err, target) from None

    # --- CPUs -------------------------------------------------------------------------------------
    def online_cpus(self, root: str = "/") -> CpuSet:
        """Return the CPUs this system has (the system affinity mask, processor group 0)."""
        _, system = self._do("this process", self.w.GetProcessAffinityMask, self.w.GetCurrentProcess())
        return cpus_of(system)

    def cpu_limit(self, root: str = "/") -> int:
        """Return one past the highest CPU number an affinity mask can name."""
        return MAX_GROUP_CPUS

    def allowed_cpus(self) -> CpuSet:
        """Return the CPUs this process may run on (its process affinity mask)."""
        return self.get_affinity(0)

    def _open(self, pid: int, access: int) -> int:
        return self._do(f"process {pid}", self.w.OpenProcess, access, False, pid)

    def get_affinity(self, pid: int = 0) -> CpuSet:
        """Return the CPUs process *pid* (0: this one) may run on (GetProcessAffinityMask)."""
        if not pid:
            mine, _ = self._do("this process", self.w.GetProcessAffinityMask, self.w.GetCurrentProcess())
            return cpus_of(mine)
        handle = self._open(pid, PROCESS_QUERY_LIMITED_INFORMATION)
        try:
            mine, _ = self._do(f"process {pid}", self.w.GetProcessAffinityMask, handle)
        finally:
            self.w.CloseHandle(handle)
        return cpus_of(mine)

    def set_affinity(self, cpus: CpuSet, pid: int = 0) -> None:
        """Pin process *pid* (0: this one) to *cpus* (SetProcessAffinityMask).

        Raises:
            InvalidCpu: a CPU this system does not have (ERROR_INVALID_PARAMETER).
            NoSuchProcess: the process exited.
        """
        mask = mask_of(cpus)
        target = f"process {pid}" if pid else "this process"
        if pid:
            handle = self._open(pid, PROCESS_SET_INFORMATION | PROCESS_QUERY_LIMITED_INFORMATION)
        else:
            handle = self.w.GetCurrentProcess()
        try:
            self.w.SetProcessAffinityMask(handle, mask)
        except Win32Failed as err:
            if err.winerror == ERROR_INVALID_PARAMETER:
                raise InvalidCpu(str(cpus), self.online_cpus(), f"is not allowed to {target}") from None
            raise to_softrt_error(err, target) from None
        finally:
            if pid:
                self.w.CloseHandle(handle)

    def pin_threads(self, cpus: CpuSet, keep: tuple[int, ...] = ()) -> ThreadPins:
        """Put every thread of this process on *cpus*: the process mask (SetProcessAffinityMask "sets a
        processor affinity mask for the threads of the specified process", and "a thread can only run
        on the processors its process can run on", SetThreadAffinityMask) holds every thread, those
        started later too. *keep* must be empty here: a thread kept off the process mask cannot be."""
        before = self.get_affinity(0)
        self.set_affinity(cpus)
        return ThreadPins(cpus=cpus, threads=None, failed=[], undo=lambda: self.set_affinity(before))

    # --- the worker's real-time controls ------------------------------------------------------------
    def worker_controls(self, cpu: int, priority: int, locked: object | None = None) -> list[Control]:
        """The Soft Real-Time application steps, in the order applied; each returns its undo.

        Placement, memory and timer first, priorities last (nothing runs at real-time priority
        before it is on its core). *priority* is Linux's SCHED_FIFO level 1-99, spread over the
        base priorities 16-31 of REALTIME_PRIORITY_CLASS (:func:`realtime_level`: 80 gives 28, 99
        gives 31). *locked* is the ring's mapping.
        """
        mask = 1 << cpu
        level = realtime_level(priority)
        controls = [
            Control(
                "process_affinity",
                f"worker process on CPU {cpu} (SetProcessAffinityMask 0x{mask:x})",
                lambda: self._process_affinity(mask),
            ),
            Control(
                "cpu_affinity",
                f"worker thread pinned to CPU {cpu} (SetThreadAffinityMask 0x{mask:x})",
                lambda: self._thread_affinity(mask),
            ),
            Control(
                "working_set",
                "hard minimum working set (SetProcessWorkingSetSizeEx)",
                lambda: self._working_set(len(locked) if locked is not None else 0),
                before_device=True,
            ),
        ]
        if locked is not None:
            controls.append(
                Control(
                    "virtual_lock",
                    f"ring locked in RAM ({len(locked):,} bytes, VirtualLock)",
                    lambda: self._virtual_lock(locked),
                    before_device=True,
                )
            )
        controls += [
            Control("timer_resolution", f"{TIMER_RESOLUTION_MS} ms system timer (timeBeginPeriod)", self._timer_period),
            Control("realtime_priority_class", "REALTIME_PRIORITY_CLASS (SetPriorityClass)", self._realtime_class),
            Control(
                "thread_priority",
                f"base priority {base_priority(level)} (SetThreadPriority {level} in "
                f"REALTIME_PRIORITY_CLASS, for --priority {priority})",
                lambda: self._thread_priority(level),
            ),
        ]
        return controls

    def _process_affinity(self, mask: int) -> Undo:
        me = self.w.GetCurrentProcess()
        before, _ = self._do("this process", self.w.GetProcessAffinityMask, me)
        self._do("this process", self.w.SetProcessAffinityMask, me, mask)
        return lambda: self._do("this process", self.w.SetProcessAffinityMask, me, before)

    def _thread_affinity(self, mask: int) -> Undo:
        thread = self.w.GetCurrentThread()
        before = self._do("the worker thread", self.w.SetThreadAffinityMask, thread, mask)
        return lambda: self._do("the worker thread", self.w.SetThreadAffinityMask, thread, before)

    def _working_set(self, locked_bytes: int) -> Undo:
        me = self.w.GetCurrentProcess()
        low, high, flags = self._do("this process", self.w.GetProcessWorkingSetSizeEx, me)
        want_low = max(low, psutil.Process().memory_info().rss + locked_bytes + WORKING_SET_MARGIN_BYTES)
        want_high = max(high, want_low + WORKING_SET_MARGIN_BYTES)
        self._do(
            "this process",
            self.w.SetProcessWorkingSetSizeEx,
            me,
            want_low,
            want_high,
            QUOTA_LIMITS_HARDWS_MIN_ENABLE | QUOTA_LIMITS_HARDWS_MAX_DISABLE,
        )
        return lambda: self._do("this process", self.w.SetProcessWorkingSetSizeEx, me, low, high, restore_flags(flags))

    def _virtual_lock(self, buffer) -> Undo:
        address, size = _address(buffer), len(buffer)
        self._do("the ring", self.w.VirtualLock, address, size)
        return lambda: self._do("the ring", self.w.VirtualUnlock, address, size)

    def _timer_period(self) -> Undo:
        self._do("the system timer", self.w.timeBeginPeriod, TIMER_RESOLUTION_MS)
        return lambda: self._do("the system timer", self.w.timeEndPeriod, TIMER_RESOLUTION_MS)

    def _realtime_class(self) -> Undo:
        me = self.w.GetCurrentProcess()
        before = self._do("this process", self.w.GetPriorityClass, me)
        self._do("this process", self.w.SetPriorityClass, me, REALTIME_PRIORITY_CLASS)
        # Without SeIncreaseBasePriorityPrivilege the call succeeds with HIGH_PRIORITY_CLASS instead
        # (SetPriorityClass, "Remarks"): read it back, and put the old class back if it was not granted.
        got = self._do("this process", self.w.GetPriorityClass, me)
        if got != REALTIME_PRIORITY_CLASS:
            self._do("this process", self.w.SetPriorityClass, me, before)
            raise PermissionDenied(
                "SetPriorityClass(REALTIME_PRIORITY_CLASS)", f"this process (got 0x{got:x})", hint=ADMIN_HINT
            )
        return lambda: self._do("this process", self.w.SetPriorityClass, me, before)

    def _thread_priority(self, level: int) -> Undo:
        thread = self.w.GetCurrentThread()
        before = self._do("the worker thread", self.w.GetThreadPriority, thread)
        if (
            level not in ANY_CLASS_LEVELS
            and self._do("this process", self.w.GetPriorityClass, self.w.GetCurrentProcess()) != REALTIME_PRIORITY_CLASS
        ):
            level = 2 if level > 0 else -2  # REALTIME was not granted: -7…-3 and 3…6 exist only there
        self._do("the worker thread", self.w.SetThreadPriority, thread, level)
        return lambda: self._do("the worker thread", self.w.SetThreadPriority, thread, before)

    def make_sleep_until(self) -> tuple[Callable[[int], None], Undo]:
        """Return ``(sleep_until(abs_ns), close)``: a high-resolution waitable timer, armed relative.

        The due time is relative (negative, 100 ns units): an absolute one is wall-clock FILETIME,
        not the loop's QueryPerformanceCounter clock. Raises a softrt error on Windows before
        10 1803, which lacks CREATE_WAITABLE_TIMER_HIGH_RESOLUTION (ERROR_INVALID_PARAMETER).
        """
        w, clock = self.w, self.clock_ns
        timer = self._do(
            "a waitable timer", w.CreateWaitableTimerExW, CREATE_WAITABLE_TIMER_HIGH_RESOLUTION, TIMER_ALL_ACCESS
        )

        def sleep_until(abs_ns: int) -> None:
            ahead_ns = abs_ns - clock()
            if ahead_ns <= 0:
                return
            self._do("the waitable timer", w.SetWaitableTimer, timer, -max(1, ahead_ns // 100))
            self._do("the waitable timer", w.WaitForSingleObject, timer, INFINITE)

        return sleep_until, lambda: self._do("the waitable timer", w.CloseHandle, timer)

    # --- performance counters ---------------------------------------------------------------------------
    def sample_counters(self, paths: list[str], seconds: float) -> dict[str, float]:
        """Average each counter over *seconds* (pdh.dll, English paths: :func:`.winhost.sample_counters`)."""
        return winhost.sample_counters(self.w, paths, seconds)

    # --- RT throttling: Windows has none ----------------------------------------------------------------
    def rt_runtime_us(self, root: str = "/") -> int | None:
        """None: Windows does not throttle REALTIME_PRIORITY_CLASS threads."""
        return None

    def rt_throttling_off(self) -> tuple[str, str]:
        raise NotSupported("Windows has no RT throttling to switch off")

    # --- the worker's lifetime --------------------------------------------------------------------------
    def die_with_parent(self) -> None:
        """Nothing to do in the worker: the supervisor puts it in a kill-on-close job (:meth:`adopt_worker`)."""

    def adopt_worker(self, pid: int) -> Undo:
        """Put process *pid* in a job that kills it when the job's last handle closes (this process's).

        JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE: "Causes all processes associated with the job to terminate
        when the last handle to the job is closed" (JOBOBJECT_BASIC_LIMIT_INFORMATION), also when
        the supervisor is killed. The returned undo closes the job: call it after the worker stopped.

        The window: multiprocessing starts the worker running (it cannot create it suspended), and this
        is called right after CreateProcess returns, while the new interpreter is still loading. Nothing
        real-time happens in that window: the worker applies its controls (all undone when it exits)
        and then waits on its pipe for "go", so a supervisor killed before this call leaves a worker
        that reads end-of-file there and exits, never one that spins.
        """
        job = self._do("a job object", self.w.CreateJobObjectW)
        try:
            self._do("the worker's job", self.w.SetInformationJobObject, job, JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE)
            process = self._open(pid, PROCESS_SET_QUOTA | PROCESS_TERMINATE)
            try:
                self._do(f"process {pid}", self.w.AssignProcessToJobObject, job, process)
            finally:
                self.w.CloseHandle(process)
        except SoftRTError:
            self.w.CloseHandle(job)
            raise
        return lambda: self._do("the worker's job", self.w.CloseHandle, job)

    def children_start_on(self, cpus: CpuSet) -> AbstractContextManager[None]:
        """Nothing to do: a new process takes its creator's *process* affinity mask, not a thread's
        (Microsoft, "Processor Groups"); the worker places itself when it arms (worker_controls)."""
        return nullcontext()

    def ctrl_c_shield(self) -> AbstractContextManager[None]:
        """Nothing to block: Windows has no signal mask. The worker ignores SIGINT (CTRL_C_EVENT)
        from its first line; a Ctrl-C during its interpreter's start-up ends it, and the run
        reports that it did not arm."""
        return nullcontext()

    # --- exclusion between softrt processes ------------------------------------------------------------
    def process_identity(self, pid: int = 0, root: str = "/") -> str | None:
        """Return ``BOOT/PID/CREATED`` naming process *pid* (0: this one) while it lives (psutil)."""
        pid = pid or os.getpid()
        try:
            created = psutil.Process(pid).create_time()
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            return None
        return f"{int(psutil.boot_time())}/{pid}/{created:.3f}"

    def machine_lock_path(self, name: str) -> Path:
        """Return a lock file shared by every user of this machine (%ProgramData%\\softrt; SOFTRT_STATE_DIR moves it)."""
        if os.environ.get("SOFTRT_STATE_DIR"):
            return Path(os.environ["SOFTRT_STATE_DIR"]) / f"{name}.lock"
        base = os.environ.get("PROGRAMDATA") or os.environ.get("ALLUSERSPROFILE") or r"C:\ProgramData"
        return Path(base) / "softrt" / f"softrt-{name}.lock"

    def try_lock(self, path: Path) -> int | None:
        """Lock *path* (LockFileEx, one byte past the pid); return its fd, or None if another holds it.

        Windows releases the lock when the holder's handle closes, also when it is killed. Every user
        can take it: in %ProgramData% a file is writable by the user who created it only, so another
        user locks it through a read handle, which LockFileEx accepts ("the handle must have been
        created with either the GENERIC_READ or GENERIC_WRITE access right"); that holder's pid is then
        not written (:meth:`lock_holder` says "?" rather than a stale one).

        Raises:
            SoftRTError: the lock's folder or file cannot be opened at all (with where it is and how to move it).
        """
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            try:
                fd, writable = os.open(path, os.O_RDWR | os.O_CREAT | O_PRIVATE_BINARY, 0o666), True
            except PermissionError:
                fd, writable = os.open(path, os.O_RDONLY | O_PRIVATE_BINARY), False
        except OSError as err:
            raise SoftRTError(
                f"the machine lock {path} cannot be opened: {err.strerror or err}",
                hint="an Administrator can let every user modify that folder (icacls), or set "
                "SOFTRT_STATE_DIR to a folder every softrt user can write",
            ) from None
        try:
            handle = self.w.get_osfhandle(fd)
            if not self._do(
                str(path),
                self.w.LockFileEx,
                handle,
                LOCKFILE_EXCLUSIVE_LOCK | LOCKFILE_FAIL_IMMEDIATELY,
                LOCK_OFFSET,
                1,
            ):
                os.close(fd)
                return None
            if writable:
                os.ftruncate(fd, 0)
                os.write(fd, str(os.getpid()).encode())
        except BaseException:
            os.close(fd)
            raise
        return fd

    def lock_holder(self, path: Path) -> str:
        """Return the pid written in the lock file *path* by its holder, or "?" (none, or not running:
        a holder that could only read the file wrote nothing)."""
        try:
            text = path.read_text(encoding="ascii", errors="replace")[:32].strip()
        except OSError:
            return "?"
        return text if text.isdigit() and psutil.pid_exists(int(text)) else "?"

    # --- shared memory: pagefile-backed sections --------------------------------------------------------
    def open_shared_memory(self, name: str, size: int, create: bool) -> mmap.mmap:
        """Map the named section *name*: created (it must not exist) or opened (it must).

        A pagefile-backed section lives while a handle or view is open, so a killed supervisor
        leaves nothing behind (nothing to list or remove).
        """
        try:
            probe = self.w.OpenFileMappingW(FILE_MAP_READ, name)
        except Win32Failed as err:
            if err.winerror != ERROR_FILE_NOT_FOUND:
                raise to_softrt_error(err, f"shared memory {name}") from None
            if not create:
                raise SoftRTError(f"shared memory {name} does not exist (its supervisor is gone)") from None
        else:
            self.w.CloseHandle(probe)
            if create:
                raise SoftRTError(f"shared memory {name} exists already", hint="run again (the name is random)")
        return self.w.map_pagefile(name, size)

    def list_shared_memory(self, prefix: str) -> list[str]:
        """Nothing to list: a section dies with its last handle."""
        return []

    def remove_shared_memory(self, name: str) -> None:
        """Nothing to remove: the section goes with its last handle."""

    # --- host facts -----------------------------------------------------------------------------------
    def host_facts(self, root: str = "/") -> HostFacts:
        """Return what a reader of a result needs to know about this machine (:func:`.winhost.host_facts`)."""
        return winhost.host_facts(self.w, len(self.online_cpus()))
