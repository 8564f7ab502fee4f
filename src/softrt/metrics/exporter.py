"""A run's live figures served to Prometheus during the run (metrics layer).

The supervisor's main thread builds an immutable :class:`RunView` of a run from its progress
(:func:`view_of`, plain Python numbers read from the streaming pass's histograms) and hands it to
:meth:`MetricsServer.publish`; the HTTP thread of the official client library
(prometheus_client, https://prometheus.github.io/client_python/collector/custom/ "custom
collectors") only reads the views published last, under a lock, so a scrape never touches the
live numpy state and always sees one consistent run. Series, types and labels: docs/metrics.md;
exposition format: https://prometheus.io/docs/instrumenting/exposition_formats/.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, ProcessCollector, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.utils import floatToGoString

from ..errors import ConfigError
from .buckets import at_or_below, latency_bounds_ns, period_bounds_ns

LABELS = ("host", "scenario", "run_id", "rt_cpu")
STATES = ("running", "complete", "partial", "failed")
#: Counters: series name (without ``_total``), RunView field, help.
COUNTERS = (
    ("softrt_cycles", "cycles", "Cycles measured (records received from the real-time loop)."),
    ("softrt_missed_updates", "missed_updates", "Board cycles that received no new target."),
    ("softrt_late_cycles", "late_cycles",
     "Late cycles by softrt's one rule: period over softrt_late_bound_seconds (nominal + --late-threshold), "
     "latency over --late-threshold, or a missed update (the summary's late_cycles)."),
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

    @property
    def run_id(self) -> str:
        return self.labels[2]


QUANTILES = (0.5, 0.99, 0.9999)


def _histogram(hdr, bounds_ns: tuple[int, ...]) -> Histogram:
    return Histogram(tuple(b / 1e9 for b in bounds_ns), tuple(at_or_below(hdr, bounds_ns)), hdr.n, hdr.total / 1e9)


def view_of(progress, host: str, state: str = "running", ring_overflows: int | None = None) -> RunView:
    """The figures of a run from its progress (``session.run.Progress``: its ``stats``, ``config``,
    ``run_id``); call it in the thread that feeds the stats (the supervisor's), never elsewhere."""
    stats, config = progress.stats, progress.config
    period, latency, c = stats.hist["period"], stats.hist["latency"], stats.counters
    quantiles = period.percentiles(tuple(q * 100 for q in QUANTILES)) if period.n else []
    return RunView(
        labels=(host, config.scenario, progress.run_id, "none" if config.cpu is None else str(config.cpu)),
        state=state, elapsed_s=progress.elapsed_s, duration_s=progress.duration_s,
        cycles=c["cycles"], missed_updates=c["missed_updates"], late_cycles=c["late_cycles"] or 0,
        late_bound_s=stats.rule.bound_ns / 1e9,
        ring_overflows=progress.ring_overflows if ring_overflows is None else ring_overflows,
        overruns=c["overruns"], device_errors=c["device_errors"],
        period=_histogram(period, period_bounds_ns(config.period_ns)),
        latency=_histogram(latency, latency_bounds_ns()),
        period_max_s=period.max / 1e9 if period.n else None,
        period_quantiles_s=tuple((f"{q:g}", v / 1e9) for q, v in zip(QUANTILES, quantiles)),
    )


class MetricsServer:
    """An HTTP endpoint (``/metrics``) serving the runs' views published last; one per command."""

    def __init__(self, addr: str = "127.0.0.1", port: int = 0) -> None:
        self._lock = threading.Lock()
        self._views: dict[str, RunView] = {}
        self.registry = CollectorRegistry(auto_describe=True)
        self.registry.register(_Collector(self))
        ProcessCollector(registry=self.registry)  # the supervisor's CPU time and memory over a long run
        try:
            self._httpd, self._thread = start_http_server(port, addr=addr, registry=self.registry)
        except OSError as err:  # also socket.gaierror (an address that does not resolve)
            why = err.strerror or str(err)
            raise ConfigError(f"cannot serve metrics on {addr} port {port}: {why}",
                              hint="choose a free --metrics-port (0: any free port) and an address of this "
                                   "machine for --metrics-addr") from None
        self.addr, self.port = addr, int(self._httpd.server_address[1])  # the port chosen for port 0

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
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5.0)

    def __enter__(self) -> MetricsServer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


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
        for name, attr, doc in (("softrt_period_seconds", "period", "Cycle period (permit to next permit)."),
                                ("softrt_latency_seconds", "latency", "Permit detected after the board's edge.")):
            fam = HistogramMetricFamily(name, doc + " Bounds are softrt histogram edges (docs/metrics.md).",
                                        labels=LABELS)
            for v in views:
                h: Histogram = getattr(v, attr)
                buckets = [(floatToGoString(b), c) for b, c in zip(h.bounds_s, h.cumulative)]
                fam.add_metric(v.labels, buckets + [("+Inf", h.count)], h.sum_s)
            yield fam
        gauges = (
            ("softrt_period_max_seconds", "Longest period so far.", lambda v: v.period_max_s),
            ("softrt_late_bound_seconds", "A cycle is late when its period exceeds this (or its latency "
             "--late-threshold, or it missed an update).", lambda v: v.late_bound_s),
            ("softrt_run_elapsed_seconds", "Time since the loop started.", lambda v: v.elapsed_s),
            ("softrt_run_duration_seconds", "Planned measurement time.", lambda v: v.duration_s),
        )
        for name, doc, get in gauges:
            fam = GaugeMetricFamily(name, doc, labels=LABELS)
            for v in views:
                if get(v) is not None:
                    fam.add_metric(v.labels, get(v))
            yield fam
        fam = GaugeMetricFamily("softrt_period_quantile_seconds",
                                "Period percentiles from softrt's histogram (within 0.1 %).", labels=(*LABELS, "quantile"))
        for v in views:
            for q, value in v.period_quantiles_s:
                fam.add_metric((*v.labels, q), value)
        yield fam
        fam = GaugeMetricFamily("softrt_run_state", "1 for the run's state (running, complete, partial, failed), 0 otherwise.",
                                labels=(*LABELS, "state"))
        for v in views:
            for state in STATES:
                fam.add_metric((*v.labels, state), 1.0 if v.state == state else 0.0)
        yield fam
