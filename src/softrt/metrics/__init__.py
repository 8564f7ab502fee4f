"""Metrics for fleets: a run's live figures served to Prometheus (metrics layer, a part package).

:mod:`.buckets` reads Prometheus buckets exactly from softrt's histograms; :mod:`.exporter` keeps
a consistent copy of each run's figures (updated from the supervisor's progress callback) and
serves it over HTTP with the official client library (prometheus_client). docs/metrics.md lists
the series.
"""

from ..lazy import lazy
from .buckets import above, at_or_below, latency_bounds_ns, period_bounds_ns, snap_ns

# The exporter on first use: prometheus_client and asyncio cost ~45 ms at every command's start-up,
# and only --metrics-port serves anything.
__getattr__ = lazy(__name__, {name: ".exporter" for name in ("MetricsServer", "RunView", "view_of")})

__all__ = [
    "MetricsServer",
    "RunView",
    "above",
    "at_or_below",
    "latency_bounds_ns",
    "period_bounds_ns",
    "snap_ns",
    "view_of",
]
