"""The live sample of ``softrt check``: what ran on the RT CPUs for a few seconds (schema layer).

Written as the report's ``sample`` (``softrt check --json``, docs/check.md). Linux watches the
scheduler's switches (tracefs ``sched_switch``, Documentation/trace/events.rst) or /proc's run
times (proc(5)); Windows reads the performance counters (typeperf.exe, or PDH on the machine
itself). Each producer builds it by keyword (:meth:`~.doc.Doc.build`), so the keys each writes and
their order are its own: the Linux one has ``idle_source`` and ``lost_events``, the Windows one
``cores``; ``error`` says why the sample failed (None: it did not).
"""

from __future__ import annotations

from typing import Any

from .doc import Doc, count, many, opt


class SampledTask(Doc):
    """A task that ran on the RT CPUs during the sample, and for how long (ms of CPU)."""

    comm: str | None = None
    pid: int | None = count(omit_none=True)  # Linux: the thread id
    cpu_ms: float | None = None
    kind: str | None = None  # Linux: "rt-app", "kthread-percpu", "user", ...; Windows: "kernel", "may run there", ...


class LiveSample(Doc):
    """What ran on the RT CPUs for ``seconds``, watched by ``method``."""

    method: str | None = None
    seconds: float | None = None
    idle_share: float | None = None
    idle_source: str | None = opt()
    lost_events: int | None = count(omit_none=True)
    cores: dict[str, Any] | None = opt()  # Windows: per RT core (its number as text), its counters in %
    tasks: list[SampledTask] = many()
    error: str | None = None
