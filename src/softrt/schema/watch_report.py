"""What ``softrt watch --json`` prints (schema layer; docs/watch.md): a row per thread watched with
its ``latency_us``, ``period_us`` and ``runtime_us`` (min/mean/max and percentiles, from its run's
summary: ``runtime_us`` is the run's ``process_us``), its ``watch`` block and its ``why_late``.
"""

from __future__ import annotations

from .doc import Doc, count, many, opt
from .summary import Stats
from .watch import Watch, WatchedThread
from .why_late import WhyLate


class WatchRow(Doc):
    """One thread in ``softrt watch --json``."""

    run_id: str = ""
    path: str | None = None
    status: str | None = None
    partial_reason: str | None = None
    thread: WatchedThread = WatchedThread()
    waits: str | None = None
    cycles: int | None = count()
    late_cycles: int | None = count(omit_none=True)
    overruns: int | None = count(omit_none=True)
    skipped: int | None = count(omit_none=True)  # expiries it skipped
    latency_us: Stats = Stats()
    period_us: Stats = Stats()
    runtime_us: Stats = Stats()
    watch: Watch = Watch()
    why_late: WhyLate | None = opt()


class WatchReport(Doc):
    """``softrt watch --json``: every thread watched."""

    threads: list[WatchRow] = many()
    duration_s: float | None = None
    ended_early: bool = False
