"""Prometheus histogram buckets read exactly from softrt's log-linear histograms (metrics layer).

A Prometheus histogram bucket counts the observations *at or below* its bound ``le``
(https://prometheus.io/docs/concepts/metric_types/#histogram, cumulative buckets). softrt's
:class:`softrt.analysis.hdr.Hdr` keeps counts per bucket of known integer bounds (exact 1 ns
buckets below 1,024 ns, then 512 per power of two, each at most 2^-9 of its lower edge wide), so
the count at or below a bound is exact when the bound is a bucket's upper edge. Each requested
bound is therefore moved up to the upper edge of the histogram bucket that holds it (by less than
0.2 %; not at all below 1,024 ns): 260 µs becomes 260.095 µs, and the published ``le`` is that
edge, so every count is exact for the bound it carries.
"""

from __future__ import annotations

import numpy as np

from ..analysis.hdr import Hdr, bucket_bounds, key_of

#: Period bounds as multiples of the nominal period: at 250 µs they are 50, 100, …, 250, 260, 275,
#: 300, 400, 500 µs, 1, 2, 5, 10, 15 ms (a bucket per missed edge up to 2 periods, then the stalls).
PERIOD_FACTORS = (0.2, 0.4, 0.6, 0.8, 1.0, 1.04, 1.1, 1.2, 1.6, 2.0, 4.0, 8.0, 20.0, 40.0, 60.0)
#: Latency bounds (permit detected after the board's edge), ns.
LATENCY_BOUNDS_NS = (1_000, 2_000, 5_000, 10_000, 20_000, 50_000, 100_000, 200_000, 500_000, 1_000_000, 5_000_000)


def snap_ns(bound_ns: int) -> int:
    """The upper edge (ns, inclusive) of the histogram bucket holding *bound_ns*: the exact bound."""
    return int(bucket_bounds(np.array([key_of(int(bound_ns))]))[1][0])


def period_bounds_ns(period_ns: int) -> tuple[int, ...]:
    """The period histogram's exact bounds for a loop of *period_ns* (increasing, no repeats)."""
    return tuple(sorted({snap_ns(round(f * period_ns)) for f in PERIOD_FACTORS}))


def latency_bounds_ns() -> tuple[int, ...]:
    return tuple(sorted({snap_ns(b) for b in LATENCY_BOUNDS_NS}))


def at_or_below(hdr: Hdr, bounds_ns: tuple[int, ...]) -> list[int]:
    """How many values of *hdr* are at or below each bound (exact when each bound is a bucket's upper
    edge, as :func:`snap_ns` makes it; otherwise the whole bucket holding the bound counts)."""
    if hdr.n == 0:
        return [0] * len(bounds_ns)
    cum = np.cumsum(hdr.counts)
    idx = np.array([key_of(int(b)) for b in bounds_ns], dtype=np.int64) - hdr.origin
    out = np.where(idx < 0, 0, cum[np.clip(idx, 0, cum.size - 1)])
    return [int(x) for x in out]


def above(hdr: Hdr, bound_ns: int) -> int:
    """How many values of *hdr* are above *bound_ns* (exact when it is a bucket's upper edge)."""
    return hdr.n - at_or_below(hdr, (bound_ns,))[0]
