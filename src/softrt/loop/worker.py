"""The real-time worker process: arm the real-time controls, run the loop, report (loop layer).

It runs in its own process (multiprocessing "spawn": a fresh interpreter with no other Python
threads to fight for the GIL). It talks to the supervisor through a pipe before and after the
loop, and through the shared-memory ring during it; it never blocks on either while cycling.
The OS kills it when the supervisor dies (Linux: PR_SET_PDEATHSIG; Windows: a job object with
JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE held by the supervisor), and it stops by itself at the run's end
time in any case. Its real-time controls come from the platform (``worker_controls``) and are
undone, newest first, when the loop ends, also on a failure.
"""

from __future__ import annotations

import gc
import os
import signal
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..board import DeviceOptions, open_device
from ..cpus import CpuSet
from ..errors import SoftRTError
from ..ipc.ring import Ring
from ..platform import STOP_SIGNALS, get_platform
from ..schema.worker import WorkerReport
from .cyclic import run_cycles

#: The first edge is this far after "go", so arming work is over before the first cycle.
START_LEAD_NS = 2_000_000


@dataclass(frozen=True)
class WorkerSpec:
    """Everything the worker needs; pickled across the spawn boundary."""

    period_ns: int
    duration_ns: int
    wait: str = "spin"
    margin_ns: int = 0
    cpu: int | None = None
    priority: int = 80
    profile: str = "rt"
    device: str = "virtual"
    axes: int = 1
    motion: Any = None  # softrt.motion.MotionConfig for the seed's motion test
    step: Callable[[int], Any] | None = None  # a user's own per-cycle function
    setup: Callable[[], None] | None = None
    warmup_cycles: int = 2000
    housekeeping: tuple[int, ...] = ()  # the supervisor's CPUs: the worker's threads but the loop go there
    #: passed to board.open_device, resolved once by the session (session.config.RunPlan; EtherCAT: the
    #: bus timeout, the DC phase lock, the drive description)
    device_options: DeviceOptions | None = None


def _arm(
    spec: WorkerSpec,
    ring: Ring,
    undo: list[Callable[[], None]],
    applied: list[dict],
    not_applied: list[dict],
    *,
    before_device: bool,
) -> None:
    """Apply the platform's real-time controls for ``--profile rt`` that come before the device
    opens (*before_device*) or after it; add them to *applied* / *not_applied*.

    Each applied control's undo is appended to *undo* (the caller runs them newest first, also
    when the run fails). A control that cannot be applied is listed with why; the run goes on.
    """
    if spec.profile != "rt":
        return
    for control in get_platform().worker_controls(spec.cpu, spec.priority, ring.mapping):
        if control.before_device != before_device:
            continue
        try:
            restore = control.apply()
        except (SoftRTError, OSError) as err:
            not_applied.append({"what": control.what, "detail": control.detail, "why": str(err)})
            continue
        applied.append({"what": control.what, "detail": control.detail})
        if restore is not None:
            undo.append(restore)


def _others_off(spec: WorkerSpec, applied: list[dict], not_applied: list[dict]) -> None:
    """Every thread of the worker but the loop's (a device's helper, one a library started) off the
    RT CPU: the worker started there (platform ``children_start_on``), and they kept that mask."""
    plat = get_platform()
    if spec.profile != "rt" or not spec.housekeeping or not plat.caps.per_thread_affinity:
        return
    pins = plat.pin_threads(CpuSet(spec.housekeeping), keep=(threading.get_native_id(),))
    detail = f"the worker's other threads ({pins.threads}) on CPUs {pins.cpus}, the loop alone on CPU {spec.cpu}"
    if pins.failed:
        not_applied.append({"what": "worker_threads", "detail": detail, "why": "; ".join(pins.failed)})
    elif pins.threads:
        applied.append({"what": "worker_threads", "detail": detail})


def _make_step(spec: WorkerSpec) -> Callable[[int], Any]:
    if spec.step is not None:
        if spec.setup is not None:
            spec.setup()
        return spec.step
    from ..motion import Trajectory

    trajectory = Trajectory(spec.motion, spec.period_ns)
    # Warm the interpreter's caches on this code path, then start the profile from sample 0.
    for i in range(spec.warmup_cycles):
        trajectory.next_target(i)
    trajectory.reset()
    return trajectory.next_target  # the seed's step (3): compute the next target


def worker_main(spec: WorkerSpec, ring_name: str, conn) -> None:
    """Entry point of the worker process (the target of the spawned Process)."""
    plat = get_platform()
    plat.die_with_parent()
    for sig in STOP_SIGNALS:  # Ctrl-C, SIGTERM, SIGHUP sent to the process group are the supervisor's
        signal.signal(sig, signal.SIG_IGN)
    ring = Ring.attach(ring_name)
    header = ring.header
    undo: list[Callable[[], None]] = []
    board = None
    try:
        # Memory locked in first, then the device, then the thread's own controls: an EtherCAT
        # master keeps the bus alive from a helper thread until start(); that thread must not
        # inherit the RT CPU and SCHED_FIFO, nor stand still while mlockall(2) faults every page
        # in (47-660 ms here beside other work: the slaves' 100 ms SM watchdog took them out of OP).
        applied: list[dict] = []
        not_applied: list[dict] = []
        _arm(spec, ring, undo, applied, not_applied, before_device=True)
        board = open_device(spec.device, spec.period_ns, spec.axes, clock=plat.clock_ns, options=spec.device_options)
        _arm(spec, ring, undo, applied, not_applied, before_device=False)
        _others_off(spec, applied, not_applied)
        step = _make_step(spec)
        writer = ring.writer()
        sleep_until = None
        if spec.wait in ("sleep", "hybrid"):
            sleep_until, close_timer = plat.make_sleep_until()
            undo.append(close_timer)
        margin_ns = spec.margin_ns if spec.wait == "hybrid" else 0
        conn.send(WorkerReport.armed(applied, not_applied, os.getpid()))
        if conn.recv() != "go":
            return
        # No collector pauses in the loop: freeze what exists, then switch the GC off
        # (gc.freeze, Python docs "gc — Garbage Collector interface").
        gc.collect()
        gc.freeze()
        gc.disable()
        t0 = plat.clock_ns() + START_LEAD_NS
        board.start(t0)
        cycles = run_cycles(
            board, step, writer, header, t0 + spec.duration_ns, sleep_until, margin_ns, clock_ns=plat.clock_ns
        )
        gc.enable()
        board.stop()
        # A failed device (bus lost, drive fault) ended the loop: the run failed, its records stand.
        conn.send(WorkerReport.done(cycles, board.counters(), board.failure))
    except BaseException as err:  # noqa: BLE001  # report anything (a user's step may raise anything), then die
        try:
            # softrt errors travel whole (the supervisor re-raises bad input as bad input).
            conn.send(WorkerReport.failed(err if isinstance(err, SoftRTError) else f"{type(err).__name__}: {err}"))
        except (OSError, TypeError, ValueError):
            pass
        raise SystemExit(1) from None
    finally:
        if board is not None:
            board.stop()  # leaves an EtherCAT bus safe (drives disabled, INIT); idempotent
        for restore in reversed(undo):
            try:
                restore()
            except (SoftRTError, OSError):
                pass  # process-scoped: it dies with the worker in any case
        del header
        ring.close()
