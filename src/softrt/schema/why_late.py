"""summary.json's ``why_late`` as typed documents (store layer; docs/run-format.md, "why_late").

The attribution (analysis.attribution) of the late cycles to what ran on the RT CPU, as the
trace (trace.session) left it: the top culprits over all late cycles and the worst cycles with
their causes; ``tracing`` is "on", or why there was no trace (then nothing else is there).
Runs stored before the trace's own figures moved to ``trace`` held them in a ``tracing`` object
(with ``status``); :meth:`WhyLate.from_dict` reads those as today's shape.
"""

from __future__ import annotations

from typing import Any

from .doc import Doc, count, key, many, opt


class Culprit(Doc):
    """What held up late cycles: a thread (``id`` its pid; ``via`` the mechanism that let it run while the
    loop was runnable), an IRQ, a softirq vector, or time outside the guest."""

    kind: str | None = None
    name: str = ""
    id: int | None = None
    detail: str | None = opt()
    via: str | None = opt()  # a task that ran while the loop was parked: "fair_server", "rt_throttling", ...
    cycles: int | None = count()
    total_us: float | None = None
    worst_us: float | None = None

    @property
    def source(self) -> str:
        """The name with its id and detail, e.g. "ksoftirqd/1 (pid 23)", "eth0 (IRQ 42)"."""
        ident = {"thread": "pid", "irq": "IRQ", "softirq": "vec"}.get(self.kind or "")
        shown_id = f"{ident} {self.id}" if ident and self.id is not None and self.id >= 0 else ""
        inner = ", ".join(x for x in (shown_id, self.detail or "") if x)
        return self.name + (f" ({inner})" if inner else "")


class CauseSteal(Doc):
    """Hypervisor steal around one cause (/proc/stat)."""

    from_ns: int | None = None
    to_ns: int | None = None
    steal_ms: float | None = None
    over_s: float | None = None


class Cause(Doc):
    """One source of a late cycle's window and its share of it."""

    kind: str | None = None
    name: str | None = None
    id: int | None = None
    detail: str | None = opt()
    via: str | None = opt()
    duration_us: float = 0.0
    share: float = 0.0
    label: str = ""
    gaps_ns: list[list[int]] | None = opt()
    longest_gap_us: float | None = opt()
    steal: CauseSteal | None = opt()


class Window(Doc):
    """The stretch of a late cycle that is explained: from the edge or the permit to the late write."""

    start_ns: int | None = None
    end_ns: int | None = None
    duration_us: float = 0.0
    start: str | None = key("from")
    to: str | None = opt()


class LateCycle(Doc):
    """One of the worst late cycles."""

    seq: int = 0
    cycle: int | None = opt()
    detect_ns: int | None = opt()
    reasons: list[str] | None = opt()
    period_us: float | None = None
    latency_us: float | None = None
    missed: int | None = count()
    window: Window = Window()
    causes: list[Cause] = many()
    unexplained_us: float = 0.0
    unexplained_share: float = 0.0
    main_cause: str | None = opt()
    traced: bool | None = opt()


class Steal(Doc):
    """Hypervisor steal on the RT CPU over the run."""

    cpu: int | None = None
    total_ms: float = 0.0
    over_s: float = 0.0


class TraceInfo(Doc):
    """How the trace went: its events, what it read and lost, what it cost."""

    events: list[str] | None = opt()
    events_missing: list[str] | None = opt()
    events_read: int | None = count(omit_none=True)
    lost_events: int | None = count(omit_none=True)
    unparsed_lines: int | None = count(omit_none=True)
    consumer_cpu_s: float | None = opt()
    attribution_cpu_s: float | None = opt()
    traced_s: float | None = opt()
    buffer_kb: int | None = opt()
    mode: str | None = opt()  # "full" or "lean" (--trace-mode; files written before: full)


class WhyLate(Doc):
    """Why cycles were late; only ``tracing`` when there was no trace."""

    tracing: str | None = None  # "on", or why not
    rt_cpu: int | None = opt()
    worker_pid: int | None = opt()
    threshold_us: float | None = opt()
    gap_min_us: float | None = opt()
    rt_throttling: bool | None = opt()
    cycles: int | None = count(omit_none=True)
    late_cycles: int | None = count(omit_none=True)
    window_us: float | None = opt()
    explained_us: float | None = opt()
    events: int | None = count(omit_none=True)
    lost_events: int | None = count(omit_none=True)
    steal: Steal | None = opt()
    culprits: list[Culprit] | None = opt()
    worst: list[LateCycle] | None = opt()
    trace: TraceInfo | None = opt()

    @classmethod
    def from_dict(cls, doc: object, where: object = "document", path: str = "") -> Any:
        if isinstance(doc, dict) and isinstance(doc.get("tracing"), dict):  # before "trace" was split out
            old = doc["tracing"]
            doc = {**doc, "tracing": old.get("status"), "trace": {k: v for k, v in old.items() if k != "status"}}
        return super().from_dict(doc, where, path)

    @property
    def on(self) -> bool:
        """The run was traced and its late cycles attributed."""
        return self.tracing == "on"
