"""A log-linear high-dynamic-range histogram of int64 nanoseconds, with exact count/min/max/mean/std
(analysis layer; pure numpy).

Buckets follow HdrHistogram's layout (Gil Tene, http://hdrhistogram.org, "significant digits" as
sub-bucket bits): with ``SUB_BITS`` = 10,

* |v| < 2^10 ns (1,024 ns) is counted exactly, one bucket per nanosecond;
* above, each power of two [2^e, 2^(e+1)) is split into 512 equal buckets of 2^(e-9) ns.

A bucket's width is at most 2^-9 of its lower edge, so its midpoint is within 2^-10 (0.098 %)
of any value in it. **Error bound:** a percentile is the bucket midpoint (clamped to the exact
min and max) of the order statistic numpy's default ("linear") method would pick, interpolated
the way numpy interpolates between two neighbours; for values of one sign its error is at most
2^-10 ≈ 0.098 % of the true value (``np.percentile`` of the same samples), and zero when the
neighbours are below 1,024 ns in magnitude; when the two neighbours differ in sign it is at most
2^-10 of the larger magnitude (tests/analysis/test_stream.py checks the bound).
Count, min, max and the mean are exact; the variance is merged chunk by chunk with Chan, Golub and
LeVeque's parallel update ("Updating formulae and a pairwise algorithm for computing sample
variances", 1979), exact up to float64 rounding.

Negative values (slack on an overrun) use the mirrored buckets. Bucket *keys* are monotone in the
value: key = idx(v) for v >= 0, key = -1 - idx(|v|) for v < 0, where for a = |v| with bit length
b, shift = max(b - 10, 0) and idx = shift * 512 + (a >> shift). Values of 2^53 ns (104 days) and
more are counted in the bucket of 2^53 - 1.
"""

from __future__ import annotations

import math

import numpy as np

from ..schema.runstats import Histogram
from ..schema.summary import Stats

SUB_BITS = 10
HALF = 1 << (SUB_BITS - 1)  # 512 buckets per power of two above the exact range
EXACT_BELOW_NS = 1 << SUB_BITS
RELATIVE_ERROR = 2.0**-SUB_BITS
_CLIP = (1 << 53) - 1  # float64 holds every integer below 2^53 exactly (frexp gives the bit length)
FORMAT = "softrt.hdr/1"
#: A chunk of n values is counted value by value in a window of 2 n + this many ns.
DENSE_SPAN_NS = 1 << 10


def bucket_keys(values_ns: np.ndarray) -> np.ndarray:
    """Bucket key (int64, monotone in the value) of each int64 value."""
    v = np.asarray(values_ns, dtype=np.int64)
    a = np.minimum(np.abs(v), _CLIP)
    _, bits = np.frexp(a.astype(np.float64))  # a = f * 2**bits, 0.5 <= f < 1: bits is a's bit length
    shift = np.maximum(bits.astype(np.int64) - SUB_BITS, 0)
    idx = (shift << (SUB_BITS - 1)) + (a >> shift)
    return np.where(v < 0, -1 - idx, idx)


def bucket_bounds(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Lowest and highest integer value (ns, inclusive) of each bucket key."""
    k = np.asarray(keys, dtype=np.int64)
    neg = k < 0
    idx = np.where(neg, -1 - k, k)
    shift = np.maximum(idx // HALF - 1, 0)
    lower = np.where(idx < EXACT_BELOW_NS, idx, (idx - shift * HALF) << shift)
    upper = lower + (np.int64(1) << shift) - 1
    return np.where(neg, -upper, lower), np.where(neg, -lower, upper)


def bucket_mid(keys: np.ndarray) -> np.ndarray:
    """The representative value (float ns) of each bucket: its midpoint."""
    lo, hi = bucket_bounds(keys)
    mid: np.ndarray = (lo + hi) / 2.0
    return mid


def key_of(value_ns: int) -> int:
    """Bucket key of one value (pure Python: the same as :func:`bucket_keys`)."""
    a = min(abs(value_ns), _CLIP)
    shift = max(a.bit_length() - SUB_BITS, 0)
    idx = (shift << (SUB_BITS - 1)) + (a >> shift)
    return idx if value_ns >= 0 else -1 - idx


# Lowest value of every bucket key, for keys _KEY_MIN … _KEY_MAX (368 KB, built once).
_KEY_MAX = key_of(_CLIP)
_KEY_MIN = -1 - _KEY_MAX
_KEY_SPAN = _KEY_MAX - _KEY_MIN + 1  # every key there is
_START = bucket_bounds(np.arange(_KEY_MIN, _KEY_MAX + 1))[0]
_RAMP = np.zeros(0, np.int64)
_RAMP2 = np.zeros(0, np.int64)


def _ramps(m: int) -> tuple[np.ndarray, np.ndarray]:
    """0 … m-1 and their squares (int64), cached."""
    global _RAMP, _RAMP2
    if _RAMP.size < m:
        _RAMP = np.arange(max(m, 2 * _RAMP.size), dtype=np.int64)
        _RAMP2 = _RAMP * _RAMP
    return _RAMP[:m], _RAMP2[:m]


class Hdr:
    """Exact moments and extremes plus a log-linear histogram of int64 ns values, fed in chunks."""

    __slots__ = ("counts", "m2", "max", "mean", "min", "n", "origin", "total")

    def __init__(self) -> None:
        self.n = 0
        self.total = 0  # exact sum (Python int), so the mean is exact whatever the run length
        self.mean = 0.0
        self.m2 = 0.0  # sum of squared deviations from the mean
        self.min: int | None = None
        self.max: int | None = None
        self.origin = 0  # key of counts[0]
        self.counts = np.zeros(0, dtype=np.int64)

    # -- feeding -------------------------------------------------------------------------------
    def add(self, values_ns: np.ndarray) -> None:
        """Count the int64 values *values_ns*.

        A chunk is counted value by value in a window of ``2 n + DENSE_SPAN_NS`` ns (one
        ``bincount``, no float work per sample); the exact sums and the buckets then come from
        that window (integer dot products, one ``add.reduceat`` over precomputed bucket edges).
        Only the samples outside the window (a stall, an overrun) are keyed one by one.
        """
        v = np.asarray(values_ns, dtype=np.int64)
        n = int(v.size)
        if n == 0:
            return
        width = (n << 1) + DENSE_SPAN_NS
        lo, hi = int(v.min()), int(v.max())
        if hi - lo < width:
            exact = np.bincount(v - lo) if hi > lo else np.array([n], np.int64)
            self._add_window(exact, n, lo, hi)
            return
        # A window around the median of ~64 samples holds all but the outliers (a stall moves the
        # mean of a short chunk further than the window reaches; the median stays put).
        sample = v[:: max(n >> 6, 1)]
        base = int(np.partition(sample, sample.size >> 1)[sample.size >> 1]) - width // 2
        rel = v - (base - 1)
        np.clip(rel, 0, width + 1, out=rel)  # bin 0: below the window, width + 1: above it
        window = np.bincount(rel, minlength=width + 2)[1 : width + 1]
        outliers = v[(rel == 0) | (rel == width + 1)]
        if outliers.size < n:
            nz = np.flatnonzero(window)
            a, b = int(nz[0]), int(nz[-1])
            self._add_window(window[a : b + 1], n - int(outliers.size), base + a, base + b)
        if outliers.size <= 64:
            self._add_few(outliers.tolist())
            return
        total = int(outliers.sum())
        mean = total / outliers.size
        d = outliers - mean
        self._merge_moments(
            int(outliers.size), total, mean, float(np.dot(d, d)), int(outliers.min()), int(outliers.max())
        )
        keys = bucket_keys(outliers)
        k0 = int(keys.min())
        self._add_counts(k0, np.bincount(keys - k0))

    def _add_few(self, values: list[int]) -> None:
        # A handful of outliers: plain Python is cheaper than a dozen numpy calls on tiny arrays.
        n = len(values)
        total = sum(values)
        mean = total / n
        m2 = sum((x - mean) ** 2 for x in values)
        self._merge_moments(n, total, mean, m2, min(values), max(values))
        keys = [key_of(x) for x in values]
        k0 = min(keys)
        self._add_counts(k0, np.bincount(np.array(keys, dtype=np.int64) - k0))

    def _add_window(self, exact: np.ndarray, n: int, lo: int, hi: int) -> None:
        # exact[i] samples of value lo + i (n in all; exact[-1] is hi's count).
        m = exact.size
        ramp, ramp2 = _ramps(m)
        s1 = int(np.dot(exact, ramp))  # exact in int64: below n * m
        total = n * lo + s1
        if n * (m - 1) ** 2 < (1 << 62):
            m2 = (n * int(np.dot(exact, ramp2)) - s1 * s1) / n  # exact integers, one rounding
        else:
            d = ramp - s1 / n
            m2 = float(np.dot(exact * d, d))
        self._merge_moments(n, total, total / n, m2, lo, hi)
        k_lo, k_hi = key_of(lo), key_of(hi)
        if k_lo == k_hi:
            self._add_counts(k_lo, np.array([n], np.int64))
            return
        # Buckets k_lo + 1 … k_hi start at these offsets in the window (key -1 holds no value: skipped).
        starts = _START[k_lo + 1 - _KEY_MIN : k_hi + 1 - _KEY_MIN] - lo
        hole = k_lo < -1 < k_hi
        if hole:
            starts = np.delete(starts, -2 - k_lo)
        counts = np.add.reduceat(exact, np.concatenate(([0], starts)))
        if hole:
            counts = np.insert(counts, -1 - k_lo, 0)
        self._add_counts(k_lo, counts)

    def _merge_moments(self, n: int, total: int, mean: float, m2: float, lo: int, hi: int) -> None:
        # Chan et al.: M2 = M2a + M2b + delta^2 * na * nb / (na + nb).
        na = self.n
        if na == 0:
            self.mean, self.m2 = mean, m2
        else:
            delta = mean - self.mean
            self.m2 += m2 + delta * delta * (na * n / (na + n))
        self.n = na + n
        self.total += total
        self.mean = self.total / self.n
        self.min = lo if self.min is None else min(self.min, lo)
        self.max = hi if self.max is None else max(self.max, hi)

    def _add_counts(self, first_key: int, counts: np.ndarray) -> None:
        end = first_key + counts.size
        if self.counts.size == 0:
            self.origin, self.counts = first_key, counts.astype(np.int64, copy=True)
            return
        start = min(self.origin, first_key)
        stop = max(self.origin + self.counts.size, end)
        if start != self.origin or stop != self.origin + self.counts.size:
            grown = np.zeros(stop - start, dtype=np.int64)
            grown[self.origin - start : self.origin - start + self.counts.size] = self.counts
            self.origin, self.counts = start, grown
        self.counts[first_key - self.origin : end - self.origin] += counts

    def merge(self, other: Hdr) -> Hdr:
        """Add *other*'s samples to this histogram (in place); return self."""
        if other.n:
            self._merge_moments(other.n, other.total, other.mean, other.m2, *other._range())
            self._add_counts(other.origin, other.counts)
        return self

    def copy(self) -> Hdr:
        out = Hdr()
        return out.merge(self)

    # -- results -------------------------------------------------------------------------------
    @property
    def std(self) -> float | None:
        """Population standard deviation (numpy's default, ddof=0), ns."""
        return math.sqrt(max(self.m2, 0.0) / self.n) if self.n else None

    def percentiles(self, q: tuple[float, ...] | list[float]) -> list[float | None]:
        """Percentiles (ns) as ``np.percentile(values, q)`` would give them, within the bound above."""
        if self.n == 0:
            return [None for _ in q]
        cum = np.cumsum(self.counts)
        out: list[float | None] = []
        for p in q:
            pos = p / 100.0 * (self.n - 1)
            below = math.floor(pos)
            frac = pos - below
            a = self._order_stat(cum, below)
            b = self._order_stat(cum, min(below + 1, self.n - 1)) if frac > 0 else a
            out.append(a + frac * (b - a))
        return out

    def _order_stat(self, cum: np.ndarray, rank: int) -> float:
        """Estimate of the sample of 0-based *rank*: its bucket's midpoint within [min, max]."""
        i = int(np.searchsorted(cum, rank, side="right"))
        mid = float(bucket_mid(np.array([self.origin + i]))[0])
        lo, hi = self._range()
        return min(max(mid, float(lo)), float(hi))

    def _range(self) -> tuple[int, int]:
        """The smallest and largest value (ns) of a histogram that holds some."""
        if self.min is None or self.max is None:
            raise ValueError("an empty histogram has no range")
        return self.min, self.max

    def stats_us(self, percentiles: tuple[float, ...]) -> Stats:
        """mean/min/max/std and the percentiles, in microseconds (None when empty): the summary's
        statistics of this series, its keys in this order."""
        keys = ("mean", "min", "max", "std", *(_pkey(p) for p in percentiles))
        if self.n == 0:
            return Stats.build(**dict.fromkeys(keys))
        lo, hi = self._range()
        values = [self.mean, float(lo), float(hi), self.std, *self.percentiles(percentiles)]
        return Stats.build(**{k: None if v is None else v / 1e3 for k, v in zip(keys, values)})

    def buckets(self) -> tuple[np.ndarray, np.ndarray]:
        """Non-empty buckets: their keys and counts."""
        nz = np.flatnonzero(self.counts)
        return nz + self.origin, self.counts[nz]

    # -- storage -------------------------------------------------------------------------------
    def document(self) -> Histogram:
        """Compact form (stats.json's ``series_ns``): exact moments and the non-empty buckets."""
        keys, counts = self.buckets()
        return Histogram(
            n=self.n,
            sum_ns=self.total,
            m2_ns2=self.m2,
            min_ns=self.min,
            max_ns=self.max,
            keys=keys.tolist(),
            counts=counts.tolist(),
        )

    @classmethod
    def of_document(cls, doc: Histogram) -> Hdr:
        """Rebuild a histogram from :meth:`document`'s; ValueError when its buckets are inconsistent
        (the document checked each value's type when it was read)."""
        if len(doc.keys) > _KEY_SPAN:
            raise ValueError(f"histogram keys and counts must be lists of at most {_KEY_SPAN} buckets")
        keys = np.asarray(doc.keys, dtype=np.int64)
        counts = np.asarray(doc.counts, dtype=np.int64)
        if keys.shape != counts.shape or (counts < 0).any() or int(counts.sum(dtype=object)) != doc.n:
            raise ValueError(f"histogram buckets do not add up to its count ({doc.n})")
        if doc.n == 0:
            return cls()
        # Every key of the layout lies in [_KEY_MIN, _KEY_MAX] (values are clipped at 2^53 ns): a key
        # outside it is not one, and would size the dense array below (a key of 2e9: 15 GiB).
        if keys[0] < _KEY_MIN or keys[-1] > _KEY_MAX or (keys.size > 1 and (np.diff(keys) <= 0).any()):
            raise ValueError(f"histogram bucket keys are not increasing within {_KEY_MIN}..{_KEY_MAX}")
        lo, hi = doc.min_ns, doc.max_ns
        if lo is None or hi is None or not (lo <= hi and key_of(lo) <= keys[0] and keys[-1] <= key_of(hi)):
            raise ValueError("histogram min and max do not bound its buckets")
        return cls.of_buckets(keys, counts, total_ns=doc.sum_ns, m2_ns2=doc.m2_ns2, min_ns=lo, max_ns=hi)

    @classmethod
    def of_buckets(
        cls,
        keys: np.ndarray | list[int],
        counts: np.ndarray | list[int],
        *,
        total_ns: int,
        m2_ns2: float,
        min_ns: int,
        max_ns: int,
    ) -> Hdr:
        """A histogram of the non-empty buckets *keys* (increasing) holding *counts*, with its exact
        moments (the sum, the sum of squared deviations) and extremes; no bucket: an empty one."""
        out = cls()
        keys, counts = np.asarray(keys, dtype=np.int64), np.asarray(counts, dtype=np.int64)
        n = int(counts.sum())
        if n == 0:
            return out
        out._merge_moments(n, total_ns, total_ns / n, m2_ns2, min_ns, max_ns)
        dense = np.zeros(int(keys[-1] - keys[0]) + 1, dtype=np.int64)
        dense[keys - keys[0]] = counts
        out._add_counts(int(keys[0]), dense)
        return out


def _pkey(p: float) -> str:
    """Summary key of a percentile: 99.9 -> "p99_9"."""
    return "p" + f"{p:g}".replace(".", "_")
