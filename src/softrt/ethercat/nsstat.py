"""A few-thousand-sample statistic of durations in ns, kept per event without numpy (ethercat layer).

Count, min, max, exact sum and a log-linear histogram (:func:`softrt.analysis.hdr.key_of`, within
0.1 %) of |value|; the percentiles come from :class:`softrt.analysis.hdr.Hdr` when asked, as the
schema's five figures (``DiffStats`` in ns, ``LateRoundTrip`` in µs). Used for each slave's 0x092C
(:mod:`.dcmonitor`), the cyclic frame's late replies (:mod:`.cyclic`) and the simulator's answer time.
"""

from __future__ import annotations

from ..analysis.hdr import Hdr, key_of
from ..schema.device import DiffStats, LateRoundTrip


class NsStat:
    """Count, min, max, exact sum and a log-linear histogram (analysis.hdr keys) of |values| in ns."""

    __slots__ = ("keys", "max", "min", "n", "sq", "total")

    def __init__(self) -> None:
        self.n = self.total = self.sq = 0
        self.min = self.max = 0
        self.keys: dict[int, int] = {}

    def add(self, value_ns: int) -> None:
        a = -value_ns if value_ns < 0 else value_ns
        if not self.n or a < self.min:
            self.min = a
        if a > self.max:
            self.max = a
        self.n += 1
        self.total += a
        self.sq += a * a
        k = key_of(a)
        self.keys[k] = self.keys.get(k, 0) + 1

    def summary(self) -> DiffStats | None:
        """min/max/mean/p50/p99 in ns, to 0.1 ns (None without samples)."""
        if not self.n:
            return None
        keys = sorted(self.keys)
        hdr = Hdr.of_buckets(
            keys,
            [self.keys[k] for k in keys],
            total_ns=self.total,
            m2_ns2=max(self.sq - self.total**2 / self.n, 0.0),
            min_ns=self.min,
            max_ns=self.max,
        )
        p50, p99 = hdr.percentiles((50, 99))
        return DiffStats(
            min=self.min, max=self.max, mean=round(self.total / self.n, 1), p50=round(p50, 1), p99=round(p99, 1)
        )

    def summary_us(self) -> LateRoundTrip | None:
        """The same figures in µs, to 0.1 µs (as the reports write them); None without samples."""
        ns = self.summary()
        if ns is None:
            return None

        def us(value: float | None) -> float | None:
            return None if value is None else round(value / 1e3, 1)

        return LateRoundTrip(min=us(ns.min), max=us(ns.max), mean=us(ns.mean), p50=us(ns.p50), p99=us(ns.p99))
