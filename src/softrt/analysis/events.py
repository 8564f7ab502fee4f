"""Kernel trace events as softrt's analysis sees them (pure data; no I/O).

The trace layer (``softrt.trace``) reads a private tracefs instance (Documentation/trace/ftrace.rst)
whose ``trace_clock`` is ``mono``, so every ``ts_ns`` here is CLOCK_MONOTONIC nanoseconds, the clock of
the loop's own records (``edge_ns``, ``detect_ns``, ...): a trace event and a cycle record can be
compared directly. The attribution (``analysis.attribution``) consumes these events; nothing here
knows where they came from, so tests build them by hand.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import overload


@dataclass(slots=True)
class TraceEvent:
    """One trace event on one CPU (treated as read-only; not frozen: the trace reader makes one per
    line, and a frozen dataclass costs 1.6 µs to create against 0.3 µs, measured on the benchmark VM).

    ``name`` is the event without its system (``sched_switch``, ``irq_handler_entry``,
    ``local_timer_entry``, ``page_fault_user`` ...); ``pid``/``comm`` are the task that was current
    when it fired (the common header); ``fields`` are the event's own ``key=value`` pairs as text,
    exactly as the kernel printed them (e.g. ``{"prev_pid": "123", "prev_prio": "19", ...}``).
    """

    ts_ns: int
    cpu: int
    name: str
    pid: int
    comm: str
    fields: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class StealSample:
    """Cumulative hypervisor steal time of one CPU at one moment (proc(5) /proc/stat, 8th column).

    The kernel counts steal in USER_HZ ticks (10 ms); two samples bracket how much time the
    hypervisor took from the CPU between them.
    """

    ts_ns: int
    cpu: int
    steal_ns: int


@overload
def field_int(text: str | None, default: int = -1) -> int: ...
@overload
def field_int(text: str | None, default: None) -> int | None: ...
def field_int(text: str | None, default: int | None = -1) -> int | None:
    """A number field of an event as the kernel printed it (``123``, ``0x7f``, ``[005]``), or
    *default* when it is missing or not a number."""
    try:  # the common case first: a decimal as the kernel prints it (a third of the cost of the rest)
        return int(text)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        pass
    try:
        return int(str(text).strip().strip("[]"), 0)
    except (TypeError, ValueError):
        return default
