"""A run's live figures served to Prometheus during the run (metrics layer).

The supervisor's main thread builds an immutable :class:`RunView` of a run from its progress
(:func:`view_of`, plain Python numbers read from the streaming pass's histograms and the trace's
culprits) and hands it to :meth:`MetricsServer.publish`; the endpoint's thread (:mod:`.http`)
renders the views published last with the official client library (prometheus_client,
https://prometheus.github.io/client_python/collector/custom/ "custom collectors"), reading them
under a lock, so a scrape never touches the live numpy state and always sees one consistent run.
Series, types and labels: docs/metrics.md; exposition format:
https://prometheus.io/docs/instrumenting/exposition_formats/.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, ProcessCollector
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.exposition import choose_encoder
from prometheus_client.utils import floatToGoString

from ..errors import ConfigError
from ..platform import get_platform, softrt_version
from .buckets import at_or_below, latency_bounds_ns, period_bounds_ns
from .http import BoundedHttp, bind

LABELS = ("host", "scenario", "run_id", "rt_cpu")
INFO_LABELS = ("version", "kernel", "preemption")
#: Culprit sources with series of their own per run (the largest by late time): bounded cardinality.
TOP_CULPRITS = 10
STATES = ("running", "complete", "partial", "failed")
#: Counters: series name (without ``_total``), RunView field, help.
COUNTERS = (
    ("softrt_cycles", "cycles", "Cycles measured (records received from the real-time loop)."),
    ("softrt_missed_updates", "missed_updates", "Board cycles that received no new target."),
    (
        "softrt_late_cycles",
        "late_cycles",
        "Late cycles by softrt's one rule: period over softrt_late_bound_seconds (nominal + --late-threshold), "
        "latency over --late-threshold, or a missed update (the summary's late_cycles).",
    ),
    ("softrt_ring_overflows", "ring_overflows", "Records the loop dropped because the shared-memory ring was full."),
    ("softrt_overruns", "overruns", "Cycles whose work ended after the next board edge (negative slack)."),
    ("softrt_device_errors", "device_errors", "Cycles with a device error (EtherCAT working counter, lost frame)."),
)


@dataclass(frozen=True)
class Histogram:
    """Cumulative counts at or below each bound (seconds), the count and the sum (seconds)."""

    bounds_s: tuple[float, ...]
    cumulative: tuple[int, ...]
    count: int
    sum_s: float


@dataclass(frozen=True)
class RunView:
    """One run's figures at one moment: plain numbers, never changed once built."""

    labels: tuple[str, str, str, str]  # LABELS
    state: str
    elapsed_s: float
    duration_s: float
    cycles: int
    missed_updates: int
    late_cycles: int
    late_bound_s: float
    ring_overflows: int
    overruns: int
    device_errors: int
    period: Histogram
    latency: Histogram
    period_max_s: float | None
    period_quantiles_s: tuple[tuple[str, float], ...]  # ("0.99", seconds), ...
    latency_max_s: float | None = None
    latency_quantiles_s: tuple[tuple[str, float], ...] = ()
    process_max_s: float | None = None
    process_quantiles_s: tuple[tuple[str, float], ...] = ()
    slack_min_s: float | None = None  # negative: the deepest overrun
    culprits: tuple[tuple[str, str, float], ...] = ()  # (kind, source, late seconds), largest first, ≤ TOP_CULPRITS

    @property
    def run_id(self) -> str:
        return self.labels[2]


QUANTILES = (0.5, 0.99, 0.9999)


def _histogram(hdr, bounds_ns: tuple[int, ...]) -> Histogram:
    return Histogram(tuple(b / 1e9 for b in bounds_ns), tuple(at_or_below(hdr, bounds_ns)), hdr.n, hdr.total / 1e9)


def _quantiles(hdr) -> tuple[tuple[str, float], ...]:
    values = hdr.percentiles(tuple(q * 100 for q in QUANTILES)) if hdr.n else []
    return tuple((f"{q:g}", v / 1e9) for q, v in zip(QUANTILES, values))


def top_culprits(table, n: int = TOP_CULPRITS) -> tuple[tuple[str, str, float], ...]:
    """The *n* largest sources of late time as (kind, source, seconds), from culprit rows (dicts or
    ``schema.why_late`` culprits: ``kind``, ``name``, ``total_us``); sources of one name (the same
    kernel thread name under several pids) are added up, so a label names what a fleet compares."""
    totals: dict[tuple[str, str], float] = {}
    for row in table or ():
        get = row.get if isinstance(row, dict) else lambda k, r=row: getattr(r, k, None)
        key = (str(get("kind")), str(get("name")))
        totals[key] = totals.get(key, 0.0) + float(get("total_us") or 0.0) / 1e6
    ranked = sorted(totals.items(), key=lambda kv: (-kv[1], kv[0]))[:n]
    return tuple((kind, name, seconds) for (kind, name), seconds in ranked)


def view_of(progress, host: str, state: str = "running", ring_overflows: int | None = None, culprits=None) -> RunView:
    """The figures of a run from its progress (``session.drain.Progress``: its ``stats``, ``config``,
    ``run_id``, ``culprits``); call it in the thread that feeds the stats (the supervisor's), never
    elsewhere. *culprits* (the summary's, at the end) replaces the live table."""
    stats, config = progress.stats, progress.config
    period, latency, c = stats.hist["period"], stats.hist["latency"], stats.counters
    process, slack = stats.hist["process"], stats.hist["slack"]
    live = progress.culprits
    return RunView(
        labels=(host, config.scenario, progress.run_id, "none" if config.cpu is None else str(config.cpu)),
        state=state,
        elapsed_s=progress.elapsed_s,
        duration_s=progress.duration_s,
        cycles=c["cycles"],
        missed_updates=c["missed_updates"],
        late_cycles=c["late_cycles"] or 0,
        late_bound_s=stats.rule.bound_ns / 1e9,
        ring_overflows=progress.ring_overflows if ring_overflows is None else ring_overflows,
        overruns=c["overruns"],
        device_errors=c["device_errors"],
        period=_histogram(period, period_bounds_ns(config.period_ns)),
        latency=_histogram(latency, latency_bounds_ns()),
        period_max_s=period.max / 1e9 if period.n else None,
        period_quantiles_s=_quantiles(period),
        latency_max_s=latency.max / 1e9 if latency.n else None,
        latency_quantiles_s=_quantiles(latency),
        process_max_s=process.max / 1e9 if process.n else None,
        process_quantiles_s=_quantiles(process),
        slack_min_s=slack.min / 1e9 if slack.n else None,
        culprits=top_culprits(culprits if culprits is not None else live() if callable(live) else ()),
    )


def host_info() -> tuple[str, str, str]:
    """``softrt_info``'s (version, kernel, preemption) of this machine (platform host facts)."""
    facts = get_platform().host_facts()
    return softrt_version(), facts.kernel or "unknown", facts.preemption or "unknown"


class MetricsServer:
    """An HTTP endpoint (``/metrics``) serving the runs' views published last; one per command.

    *info* is ``softrt_info``'s (version, kernel, preemption), this machine's by default; the
    endpoint's bounds (:mod:`.http`) are its keyword arguments.
    """

    def __init__(
        self, addr: str = "127.0.0.1", port: int = 0, *, info: tuple[str, str, str] | None = None, **bounds
    ) -> None:
        self._lock = threading.Lock()
        self._views: dict[str, RunView] = {}
        self.info = info if info is not None else host_info()
        self.registry = CollectorRegistry(auto_describe=True)
        self.registry.register(_Collector(self))
        ProcessCollector(registry=self.registry)  # the supervisor's CPU time and memory over a long run
        try:
            sock = bind(addr, port)
        except OSError as err:  # also socket.gaierror (an address that does not resolve)
            why = err.strerror or str(err)
            raise ConfigError(
                f"cannot serve metrics on {addr} port {port}: {why}",
                hint="choose a free --metrics-port (0: any free port) and an address of this "
                "machine for --metrics-addr",
            ) from None
        self.http = BoundedHttp(sock, self._render, **bounds)
        self.addr, self.port = addr, self.http.port  # the port chosen for port 0

    def _render(self, accept: str) -> tuple[bytes, str]:
        encode, content_type = choose_encoder(accept)  # OpenMetrics when the scraper asks for it
        return encode(self.registry), content_type

    @property
    def url(self) -> str:
        host = f"[{self.addr}]" if ":" in self.addr else self.addr
        return f"http://{host}:{self.port}/metrics"

    def publish(self, view: RunView) -> None:
        """Serve *view* (replacing the earlier view of the same run) from now on."""
        with self._lock:
            self._views[view.run_id] = view

    def views(self) -> list[RunView]:
        with self._lock:
            return list(self._views.values())

    def close(self) -> None:
        """Stop serving (the command ends)."""
        self.http.close()

    def __enter__(self) -> MetricsServer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


#: Gauges: series name, help, the RunView's value (None: no sample yet, the series is left out).
GAUGES = (
    ("softrt_period_max_seconds", "Longest period so far.", lambda v: v.period_max_s),
    (
        "softrt_latency_max_seconds",
        "Longest latency (permit detected after the edge) so far.",
        lambda v: v.latency_max_s,
    ),
    (
        "softrt_process_max_seconds",
        "Longest processing time (write + next target) so far.",
        lambda v: v.process_max_s,
    ),
    (
        "softrt_slack_min_seconds",
        "Smallest slack so far (next edge - end of work; negative: an overrun).",
        lambda v: v.slack_min_s,
    ),
    (
        "softrt_late_bound_seconds",
        "A cycle is late when its period exceeds this (or its latency --late-threshold, or it missed an update).",
        lambda v: v.late_bound_s,
    ),
    ("softrt_run_elapsed_seconds", "Time since the loop started.", lambda v: v.elapsed_s),
    ("softrt_run_duration_seconds", "Planned measurement time.", lambda v: v.duration_s),
)


class _Collector:
    """prometheus_client custom collector: builds the families from the published views."""

    def __init__(self, server: MetricsServer) -> None:
        self._server = server

    def collect(self):
        views = self._server.views()
        for name, field, doc in COUNTERS:
            fam = CounterMetricFamily(name, doc, labels=LABELS)
            for v in views:
                fam.add_metric(v.labels, getattr(v, field))
            yield fam
        for name, attr, doc in (
            ("softrt_period_seconds", "period", "Cycle period (permit to next permit)."),
            ("softrt_latency_seconds", "latency", "Permit detected after the board's edge."),
        ):
            fam = HistogramMetricFamily(
                name, doc + " Bounds are softrt histogram edges (docs/metrics.md).", labels=LABELS
            )
            for v in views:
                h: Histogram = getattr(v, attr)
                buckets = [(floatToGoString(b), c) for b, c in zip(h.bounds_s, h.cumulative)]
                fam.add_metric(v.labels, [*buckets, ("+Inf", h.count)], h.sum_s)
            yield fam
        for name, doc, get in GAUGES:
            fam = GaugeMetricFamily(name, doc, labels=LABELS)
            for v in views:
                if get(v) is not None:
                    fam.add_metric(v.labels, get(v))
            yield fam
        for name in ("period", "latency", "process"):
            fam = GaugeMetricFamily(
                f"softrt_{name}_quantile_seconds",
                f"{name.capitalize()} percentiles from softrt's histogram (within 0.1 %).",
                labels=(*LABELS, "quantile"),
            )
            for v in views:
                for q, value in getattr(v, f"{name}_quantiles_s"):
                    fam.add_metric((*v.labels, q), value)
            yield fam
        fam = CounterMetricFamily(
            "softrt_late_seconds",
            "Late-cycle time the trace charged to a source, for the "
            f"{TOP_CULPRITS} largest sources of the run (docs/metrics.md).",
            labels=(*LABELS, "kind", "source"),
        )
        for v in views:
            for kind, source, seconds in v.culprits:
                fam.add_metric((*v.labels, kind, source), seconds)
        yield fam
        fam = GaugeMetricFamily(
            "softrt_info",
            "1, with softrt's version and the machine's kernel and preemption model as labels.",
            labels=(*LABELS, *INFO_LABELS),
        )
        for v in views:
            fam.add_metric((*v.labels, *self._server.info), 1.0)
        yield fam
        fam = GaugeMetricFamily(
            "softrt_run_state",
            "1 for the run's state (running, complete, partial, failed), 0 otherwise.",
            labels=(*LABELS, "state"),
        )
        for v in views:
            for state in STATES:
                fam.add_metric((*v.labels, state), 1.0 if v.state == state else 0.0)
        yield fam
