"""Windows kernel events (ETW) as the trace events the Linux attribution reads (trace layer; pure).

The culprits table and the why-late verdict are built by :mod:`softrt.analysis.attribution` from a timeline of
who held the RT CPU (:mod:`softrt.analysis.timeline`), whose vocabulary is the Linux tracepoints'. The NT kernel
logger's events (:mod:`softrt.platform.etwevents`) say the same things, so they are translated, not re-analysed:

    CSwitch            -> sched_switch: prev/next are the old/new thread (``pid`` is the thread id, as a Linux
                          tid), ``comm`` the image name of its process; thread 0 is the idle thread. A Windows
                          priority of 16-31 (the real-time class) becomes a kernel prio of ``99 - priority``
                          (shown ``FIFO/RR 16``…``31``), lower ones the SCHED_OTHER prio 120; OldThreadState
                          Ready/Running/Standby/DeferredReady is ``R`` (preempted), Waiting ``S``.
    ISR                -> irq_handler_entry at InitialTime, irq_handler_exit at the event: ``irq`` the vector,
                          ``name`` ``ISR 0x<routine>``.
    DPC / ThreadDPC / TimerDPC -> softirq_entry/exit (the timeline's layer between IRQs and threads, where a
                          DPC runs): ``action`` ``DPC 0x<routine>``.

Timestamps go through *to_ns* (QPC ticks to the loop's clock: both are QueryPerformanceCounter on Windows).
"""

from __future__ import annotations

from collections.abc import Callable

from ..analysis.events import TraceEvent
from ..platform.windows.etwevents import RUNNABLE_STATES, WAITING, CSwitch, Routine

IDLE = "Idle"


def kernel_prio(priority: int) -> int:
    """A Windows thread priority as the kernel prio the timeline reads (real-time class 16-31: FIFO/RR N)."""
    return 99 - priority if priority >= 16 else 120


def _state(state: int) -> str:
    return "R" if state in RUNNABLE_STATES else "S" if state == WAITING else "D"


def qpc_to_ns(frequency_hz: int) -> Callable[[int], int]:
    """QueryPerformanceCounter ticks to nanoseconds."""
    return lambda ticks: ticks * 1_000_000_000 // frequency_hz


def to_trace_events(
    switches: list[CSwitch],
    routines: list[Routine],
    names: dict[int, str],
    to_ns: Callable[[int], int],
    cpus: set[int] | None = None,
) -> list[TraceEvent]:
    """The RT CPUs' (*cpus*, all when None) events, time-ordered; *names* maps a thread id to its process's image
    name (``thread <tid>`` when unknown)."""

    def name(tid: int) -> str:
        return IDLE if tid == 0 else names.get(tid, f"thread {tid}")

    out: list[TraceEvent] = []
    for s in switches:
        if cpus is not None and s.cpu not in cpus:
            continue
        fields = {
            "prev_comm": name(s.old_tid),
            "prev_pid": str(s.old_tid),
            "prev_prio": str(kernel_prio(s.old_priority)),
            "prev_state": _state(s.old_state),
            "next_comm": name(s.new_tid),
            "next_pid": str(s.new_tid),
            "next_prio": str(kernel_prio(s.new_priority)),
        }
        out.append(TraceEvent(to_ns(s.ts), s.cpu, "sched_switch", s.old_tid, name(s.old_tid), fields))
    for r in routines:
        if cpus is not None and r.cpu not in cpus:
            continue
        if r.kind == "isr":
            entry = ("irq_handler_entry", {"irq": str(r.vector), "name": f"ISR {r.routine:#x}"})
            leave = ("irq_handler_exit", {"irq": str(r.vector), "ret": "handled"})
        else:
            entry = ("softirq_entry", {"vec": "-1", "action": f"DPC {r.routine:#x}"})
            leave = ("softirq_exit", {"vec": "-1", "action": f"DPC {r.routine:#x}"})
        out.append(TraceEvent(to_ns(r.start), r.cpu, entry[0], -1, "", entry[1]))
        out.append(TraceEvent(to_ns(r.end), r.cpu, leave[0], -1, "", leave[1]))
    # an ISR ends before the DPC it queued starts; equal stamps keep entries before exits of later items
    out.sort(key=lambda e: e.ts_ns)
    return out
