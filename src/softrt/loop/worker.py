"""The real-time worker process: arm the real-time controls, run the loop, report (loop layer).

It runs in its own process (multiprocessing "spawn": a fresh interpreter with no other Python
threads to fight for the GIL). It talks to the supervisor through a pipe before and after the
loop, and through the shared-memory ring during it; it never blocks on either while cycling.
The kernel kills it when the supervisor dies (PR_SET_PDEATHSIG), and it stops by itself at the
run's end time in any case.
"""

from __future__ import annotations

import gc
import os
import signal
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from ..board import open_device
from ..cpus import CpuSet
from ..errors import SoftRTError
from ..ipc.ring import Ring
from ..platform import get_platform
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
    device_options: dict = field(default_factory=dict)  # passed to open_device (board.open_device)
    motion: Any = None  # softrt.motion.MotionConfig for the seed's motion test
    step: Callable[[int], Any] | None = None  # a user's own per-cycle function
    setup: Callable[[], None] | None = None
    warmup_cycles: int = 2000


def _arm(spec: WorkerSpec) -> tuple[list[dict], list[dict], int | None]:
    """Apply the real-time controls of ``--profile rt``; return (applied, not_applied, dma_fd)."""
    plat = get_platform()
    applied: list[dict] = []
    not_applied: list[dict] = []
    dma_fd = None
    if spec.profile != "rt":
        return applied, not_applied, dma_fd

    def attempt(what: str, detail: str, fn: Callable[[], Any]) -> Any:
        try:
            result = fn()
        except (SoftRTError, OSError) as err:
            not_applied.append({"what": what, "detail": detail, "why": str(err)})
            return None
        applied.append({"what": what, "detail": detail})
        return result

    attempt("cpu_affinity", f"worker pinned to CPU {spec.cpu}", lambda: plat.set_affinity(CpuSet([spec.cpu])))
    attempt("mlockall", "MCL_CURRENT|MCL_FUTURE", plat.lock_memory)
    dma_fd = attempt("cpu_dma_latency", "0 µs held open for the run", lambda: plat.hold_dma_latency(0))
    attempt("timer_slack", "1 ns", lambda: plat.set_timer_slack_ns(1))
    attempt("sched_fifo", f"SCHED_FIFO priority {spec.priority}", lambda: plat.set_fifo(spec.priority))
    return applied, not_applied, dma_fd


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
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the supervisor's to handle
    ring = Ring.attach(ring_name)
    header = ring.header
    dma_fd = None
    board = None
    try:
        # The device first: an EtherCAT master keeps the bus alive from a helper thread until
        # start(), and that thread must not inherit the RT CPU and SCHED_FIFO applied next.
        board = open_device(spec.device, spec.period_ns, spec.axes, **spec.device_options)
        applied, not_applied, dma_fd = _arm(spec)
        step = _make_step(spec)
        writer = ring.writer()
        sleep_until = plat.make_sleep_until() if spec.wait in ("sleep", "hybrid") else None
        margin_ns = spec.margin_ns if spec.wait == "hybrid" else 0
        conn.send(("armed", {"applied": applied, "not_applied": not_applied, "pid": os.getpid()}))
        if conn.recv() != "go":
            return
        # No collector pauses in the loop: freeze what exists, then switch the GC off
        # (gc.freeze, Python docs "gc — Garbage Collector interface").
        gc.collect()
        gc.freeze()
        gc.disable()
        t0 = time.monotonic_ns() + START_LEAD_NS
        board.start(t0)
        cycles = run_cycles(board, step, writer, header, t0 + spec.duration_ns, sleep_until, margin_ns)
        gc.enable()
        board.stop()
        conn.send(("done", {"cycles": cycles, "board": board.counters()}))
    except BaseException as err:  # report anything (a user's step may raise anything), then die
        try:
            # softrt errors travel whole (the supervisor re-raises bad input as bad input).
            conn.send(("failed", err if isinstance(err, SoftRTError) else f"{type(err).__name__}: {err}"))
        except (OSError, TypeError, ValueError):
            pass
        raise SystemExit(1) from None
    finally:
        if board is not None:
            board.stop()  # leaves an EtherCAT bus safe (drives disabled, INIT); idempotent
        if dma_fd is not None:
            os.close(dma_fd)
        del header
        ring.close()
