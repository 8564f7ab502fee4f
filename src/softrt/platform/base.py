"""The platform contract: what every OS backend offers (platform layer).

Backends share method names and return types; callers branch on :class:`Capabilities`, never on
``hasattr`` or ``sys.platform``. The real-time controls themselves differ per OS (SCHED_FIFO and
mlockall on Linux, REALTIME_PRIORITY_CLASS and a locked working set on Windows), so a backend
hands the worker a list of :class:`Control` to apply and undo instead of one method per OS feature.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Protocol

from ..cpus import CpuSet
from ..schema.host import HostFacts

Undo = Callable[[], None]


@dataclass(frozen=True, slots=True)
class Capabilities:
    """What this OS backend can do at all (not what this user may do); callers branch on these."""

    #: The kernel throttles real-time tasks (Linux sched_rt_runtime_us): a spinning run switches it
    #: off for its duration (session.run). Windows has no such limit on REALTIME_PRIORITY_CLASS.
    rt_throttling: bool
    #: The kernel's trace buffer (Linux tracefs) can say why cycles were late (the trace layer).
    kernel_trace: bool
    #: Microsoft's Soft Real-Time steps are what ``softrt check``/``tune`` read and apply here
    #: (audit.windows); otherwise the Linux checks (audit.checks).
    soft_rt_steps: bool = False
    #: Each thread has its own CPU mask, set by thread id (Linux sched_setaffinity(2)): the worker
    #: moves its other threads off the RT CPU. On Windows a thread's mask lies within its process's.
    per_thread_affinity: bool = False


@dataclass(frozen=True, slots=True)
class Control:
    """One real-time control of the worker: ``apply()`` returns its undo (or None: dies with the process).

    ``what``/``detail`` name it in the run's "applied" / "not applied" list. ``apply`` raises
    SoftRTError (with the fix) when it cannot be applied; the run then goes on without it.
    ``before_device``: applied before the device opens (locking memory in: it faults every page
    of the process in while the process stands still, which a device's helper thread, an EtherCAT
    keep-alive against the slaves' 100 ms SM watchdog, must not live through).
    """

    what: str
    detail: str
    apply: Callable[[], Undo | None]
    before_device: bool = False


@dataclass(frozen=True)
class ThreadPins:
    """What ``pin_threads`` did: every thread of the process (but those kept) on *cpus*, except the
    *failed* ones (each named with why); ``threads`` counts them (None: the OS confines them all at
    once, Windows' process mask); ``undo`` puts them back."""

    cpus: CpuSet
    threads: int | None
    failed: list[str]
    undo: Undo


class Platform(Protocol):
    """Operations the real-time worker and the supervisor need from the OS."""

    caps: Capabilities
    #: The clock the loop and the board run on (ns); ``make_sleep_until`` sleeps to its values.
    clock_ns: Callable[[], int]

    # CPUs and scheduling
    def online_cpus(self, root: str = "/") -> CpuSet: ...
    def cpu_limit(self, root: str = "/") -> int: ...
    def allowed_cpus(self) -> CpuSet: ...
    def get_affinity(self, pid: int = 0) -> CpuSet: ...
    def set_affinity(self, cpus: CpuSet, pid: int = 0) -> None: ...
    def pin_threads(self, cpus: CpuSet, keep: tuple[int, ...] = ()) -> ThreadPins: ...
    def worker_controls(self, cpu: int, priority: int, locked: object | None = None) -> list[Control]: ...
    def make_sleep_until(self) -> tuple[Callable[[int], None], Undo]: ...
    # RT throttling (only where caps.rt_throttling)
    def rt_runtime_us(self, root: str = "/") -> int | None: ...
    def rt_throttling_off(self) -> tuple[str, str]: ...
    # the worker's lifetime
    def die_with_parent(self) -> None: ...
    def adopt_worker(self, pid: int) -> Undo: ...
    def ctrl_c_shield(self) -> AbstractContextManager[None]: ...
    def children_start_on(self, cpus: CpuSet) -> AbstractContextManager[None]: ...
    # exclusion between softrt processes, shared memory, host facts
    def host_facts(self, root: str = "/") -> HostFacts: ...
    def machine_lock_path(self, name: str): ...
    def process_identity(self, pid: int = 0, root: str = "/") -> str | None: ...
    def try_lock(self, path) -> int | None: ...
    def lock_holder(self, path) -> str: ...
    def open_shared_memory(self, name: str, size: int, create: bool): ...
    def list_shared_memory(self, prefix: str) -> list[str]: ...
    def remove_shared_memory(self, name: str) -> None: ...


def softrt_version() -> str:
    """This softrt's version, as installed (``unknown`` when it runs from a source tree that was not
    installed): stated in every run's host facts, report and ``softrt_info`` metric."""
    # (imported here: importlib.metadata costs ~25 ms, in every softrt process and each worker)
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("softrt")
    except PackageNotFoundError:
        return "unknown"
