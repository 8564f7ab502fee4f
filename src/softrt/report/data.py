"""Data preparation for the report: streaming histograms, min/max downsampling, exceedance (pure numpy).

Everything here works chunk by chunk, so a 1-hour run at 250 µs (14.4 M cycles) is read once,
row group by row group, and never held as a whole (report layer; no plotting, no I/O).

* :class:`Hist` — counts in equal bins ``[origin + k w, origin + (k + 1) w)`` ns, plus an
  *overflow*: samples known only to lie between ``over_from_ns`` and ``max_ns`` (a cyclictest
  histogram's range, oslat's last bucket).
* :class:`StreamHist` — builds a Hist from chunks without knowing the range in advance: bins of
  100 ns, widened by ten (an exact merge, the origin is 0) whenever the bin count would pass a cap.
* :class:`MinMaxDownsampler` — for each of ``n`` equal index buckets, the minimum, maximum and
  mean (and the time of the first sample): drawing min and max per pixel column shows every
  spike a plot of the raw series would show, at a fixed cost (the "min/max" or M4 reduction,
  Jugel et al., "M4: A Visualization-Oriented Time Series Data Aggregation", VLDB 2014).
* :func:`exceedance_of_hdr` — P(value ≥ x) from a run's HDR histogram (stats.json), exact at every
  bucket edge; :func:`exceedance` — the same from a Hist (an imported tool's histogram).
* :func:`late_marks` — where the worst late cycles of summary.json's ``why_late`` go on the
  period-over-time plot, with their main cause.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..analysis.hdr import Hdr, bucket_bounds
from ..schema.why_late import WhyLate

#: Finest bin of a streamed histogram: 0.1 µs resolves the processing time (about 1 µs) well.
MIN_WIDTH_NS = 100
#: Most bins a streamed histogram keeps (8 MB of int64); past it the bins become ten times wider.
MAX_BINS = 1 << 20
#: Display widths: 1-2-5 multiples of 100 ns, all multiples of any finer power-of-ten width.
_NICE = (1, 2, 5)


@dataclass
class Hist:
    """A histogram with equal bins of *width_ns* from *origin_ns* (see the module docstring)."""

    width_ns: int
    counts: np.ndarray  # int64, bin k = [origin + k * width, origin + (k + 1) * width)
    origin_ns: int = 0
    over_count: int = 0  # samples beyond the bins, somewhere in (over_from_ns, max_ns]
    over_from_ns: int | None = None
    min_ns: float | None = None
    max_ns: float | None = None
    under_count: int = 0  # samples below origin_ns (a negative period: a clock that went back)

    @property
    def total(self) -> int:
        """Every sample, including the over- and underflow."""
        return int(self.counts.sum()) + self.over_count + self.under_count

    def edges_ns(self) -> np.ndarray:
        """Bin edges (len(counts) + 1), ns."""
        return self.origin_ns + self.width_ns * np.arange(self.counts.size + 1, dtype=np.int64)

    def trimmed(self) -> Hist:
        """The same histogram without empty bins at either end."""
        nz = np.flatnonzero(self.counts)
        if nz.size == 0:
            return Hist(
                self.width_ns,
                np.zeros(0, np.int64),
                self.origin_ns,
                self.over_count,
                self.over_from_ns,
                self.min_ns,
                self.max_ns,
                self.under_count,
            )
        a, b = int(nz[0]), int(nz[-1]) + 1
        return Hist(
            self.width_ns,
            self.counts[a:b].copy(),
            self.origin_ns + a * self.width_ns,
            self.over_count,
            self.over_from_ns,
            self.min_ns,
            self.max_ns,
            self.under_count,
        )


class StreamHist:
    """Accumulate a Hist of int64 ns values chunk by chunk (origin 0, power-of-ten widths)."""

    def __init__(self, min_width_ns: int = MIN_WIDTH_NS, max_bins: int = MAX_BINS) -> None:
        self.width_ns = int(min_width_ns)
        self.max_bins = int(max_bins)
        self.counts = np.zeros(0, dtype=np.int64)
        self.under = 0
        self.n = 0
        self.min_ns: int | None = None
        self.max_ns: int | None = None

    def add(self, values_ns: np.ndarray) -> None:
        """Count *values_ns* (int64)."""
        v = np.asarray(values_ns)
        if v.size == 0:
            return
        lo, hi = int(v.min()), int(v.max())
        self.n += int(v.size)
        self.min_ns = lo if self.min_ns is None else min(self.min_ns, lo)
        self.max_ns = hi if self.max_ns is None else max(self.max_ns, hi)
        if lo < 0:
            neg = v < 0
            self.under += int(neg.sum())
            v = v[~neg]
            if v.size == 0:
                return
            lo = int(v.min())
        while hi // self.width_ns >= self.max_bins:
            self._widen()
        first = lo // self.width_ns
        c = np.bincount(v // self.width_ns - first)
        end = first + c.size
        if end > self.counts.size:
            self.counts = np.concatenate([self.counts, np.zeros(end - self.counts.size, np.int64)])
        self.counts[first:end] += c

    def _widen(self) -> None:
        # Merging ten bins of width w into one of 10 w is exact because every edge is a multiple of w.
        pad = (-self.counts.size) % 10
        c = np.concatenate([self.counts, np.zeros(pad, np.int64)]) if pad else self.counts
        self.counts = c.reshape(-1, 10).sum(axis=1)
        self.width_ns *= 10

    def result(self) -> Hist:
        """The histogram so far (empty bins at the ends trimmed)."""
        return Hist(self.width_ns, self.counts.copy(), 0, 0, None, self.min_ns, self.max_ns, self.under).trimmed()


def hist_from_buckets(
    lower_ns: np.ndarray,
    counts: np.ndarray,
    width_ns: int,
    *,
    over_count: int = 0,
    over_from_ns: int | None = None,
    min_ns: float | None = None,
    max_ns: float | None = None,
) -> Hist:
    """Build a Hist from sparse buckets (imported tools), on a grid of *width_ns* from 0."""
    lower = np.asarray(lower_ns, dtype=np.int64)
    cnt = np.asarray(counts, dtype=np.int64)
    width = max(int(width_ns), 1)
    if lower.size == 0:
        return Hist(width, np.zeros(0, np.int64), 0, over_count, over_from_ns, min_ns, max_ns)
    idx = lower // width
    first = int(idx.min())
    dense = np.bincount(idx - first, weights=cnt).astype(np.int64)
    return Hist(width, dense, first * width, over_count, over_from_ns, min_ns, max_ns)


def merge(hists: list[Hist]) -> Hist:
    """Sum histograms (e.g. the threads of one cyclictest run) on the widest of their grids."""
    if not hists:
        raise ValueError("nothing to merge")
    width = max(h.width_ns for h in hists)
    parts = [rebin(h, width) for h in hists]
    lo = min(p.origin_ns for p in parts if p.counts.size) if any(p.counts.size for p in parts) else 0
    hi = max((p.origin_ns + p.counts.size * width for p in parts if p.counts.size), default=lo)
    out = np.zeros((hi - lo) // width, np.int64)
    for p in parts:
        a = (p.origin_ns - lo) // width
        out[a : a + p.counts.size] += p.counts
    overs = [h.over_from_ns for h in hists if h.over_count]
    mins = [h.min_ns for h in hists if h.min_ns is not None]
    maxs = [h.max_ns for h in hists if h.max_ns is not None]
    return Hist(
        width,
        out,
        lo,
        sum(h.over_count for h in hists),
        min(overs) if overs else None,
        min(mins) if mins else None,
        max(maxs) if maxs else None,
        sum(h.under_count for h in hists),
    )


def rebin(h: Hist, width_ns: int) -> Hist:
    """Return *h* on bins of *width_ns* aligned to multiples of it (exact when *width_ns* is a
    multiple of ``h.width_ns`` and the origins align; otherwise each bin goes by its lower edge)."""
    width = int(width_ns)
    if width == h.width_ns and h.origin_ns % width == 0:
        return h
    nz = np.flatnonzero(h.counts)
    if nz.size == 0:
        return Hist(width, np.zeros(0, np.int64), 0, h.over_count, h.over_from_ns, h.min_ns, h.max_ns, h.under_count)
    idx = (h.origin_ns + nz * h.width_ns) // width
    first = int(idx[0])
    dense = np.bincount(idx - first, weights=h.counts[nz]).astype(np.int64)
    return Hist(width, dense, first * width, h.over_count, h.over_from_ns, h.min_ns, h.max_ns, h.under_count)


def nice_width_ns(span_ns: float, max_bins: int, floor_ns: int) -> int:
    """Smallest 1-2-5 × 10^k width ≥ *floor_ns* that covers *span_ns* in at most *max_bins* bins."""
    need = max(float(span_ns) / max(max_bins, 1), float(floor_ns), 1.0)
    scale = 10 ** int(np.floor(np.log10(need)))
    for step in (*_NICE, 10):
        if step * scale >= need:
            return int(step * scale)
    return int(10 * scale)  # pragma: no cover - the loop always returns


def common_width_ns(hists: list[Hist], *, max_bins: int = 2000, floor_ns: int = 1000) -> int:
    """A display width for overlaying *hists*: no finer than any of them, ≤ *max_bins* over the joint range.

    *floor_ns* is 1 µs for latencies and periods (OSADL latency plots use 1 µs classes).
    """
    nonempty = [h for h in hists if h.counts.size]
    if not nonempty:
        return max(floor_ns, 1)
    lo = min(h.origin_ns for h in nonempty)
    hi = max(h.origin_ns + h.counts.size * h.width_ns for h in nonempty)
    width = nice_width_ns(hi - lo, max_bins, max(floor_ns, max(h.width_ns for h in nonempty)))
    return width


@dataclass
class Exceedance:
    """P(value ≥ x): ``x_ns`` and ``fraction`` (steps), plus the overflow tail if any."""

    x_ns: np.ndarray
    fraction: np.ndarray
    total: int
    tail: tuple[float, float, float] | None = None  # (from_ns, to_ns, fraction) of an overflow


def exceedance(h: Hist, max_points: int = 5000) -> Exceedance:
    """Return the exceedance curve of *h*: for each bin's upper edge x, the fraction of samples ≥ x.

    Values in bin [a, b) are below b, so the fraction at b counts the later bins and the overflow
    only: exact at the bin edges. The curve starts at (lowest edge, 1). At most *max_points*
    points: *h* is first merged to a coarser 1-2-5 width if needed, and flat stretches (empty
    bins) are dropped.
    """
    total = h.total
    if total == 0 or h.counts.size == 0:
        return Exceedance(np.zeros(0), np.zeros(0), total, _tail(h, total))
    if h.counts.size > max_points:
        h = rebin(h, nice_width_ns(h.counts.size * h.width_ns, max_points, h.width_ns))
    h = h.trimmed()
    remaining = total - h.under_count - np.cumsum(h.counts)  # samples at or above each bin's upper edge
    upper = h.edges_ns()[1:]
    keep = h.counts > 0  # the curve only changes where a bin holds samples
    x = np.concatenate([[h.origin_ns], upper[keep]]).astype(np.float64)
    frac = np.concatenate([[(total - h.under_count) / total], remaining[keep] / total])
    return Exceedance(x, frac, total, _tail(h, total))


def exceedance_of_hdr(hdr: Hdr) -> Exceedance:
    """The exceedance curve of a run's HDR histogram (softrt.analysis.hdr, the streaming pass's).

    At each non-empty bucket's lower edge the fraction of samples at or above it, and after a bucket
    followed by empty ones the fraction above it: both exact (the counts are exact per bucket), so
    the curve is wrong only inside a bucket, whose width is 1 ns below 1,024 ns and at most 2^-9 of
    its value above. It starts at the exact minimum (fraction 1) and ends at the exact maximum.
    """
    if not hdr.n:
        return Exceedance(np.zeros(0), np.zeros(0), 0)
    keys, counts = hdr.buckets()
    lower, upper = bucket_bounds(keys)
    lower = np.maximum(lower, hdr.min)
    at_or_above = hdr.n - np.concatenate([[0], np.cumsum(counts)[:-1]])
    after = upper[:-1] + 1
    gap = after < lower[1:]  # empty buckets between: the fraction drops right after this bucket
    x = np.concatenate([lower, after[gap], [hdr.max]]).astype(np.float64)
    frac = np.concatenate([at_or_above, at_or_above[1:][gap], at_or_above[-1:]]) / hdr.n
    order = np.argsort(x, kind="stable")
    return Exceedance(x[order], frac[order], hdr.n)


def _tail(h: Hist, total: int) -> tuple[float, float, float] | None:
    if not h.over_count or not total:
        return None
    start = float(h.over_from_ns if h.over_from_ns is not None else h.origin_ns + h.counts.size * h.width_ns)
    end = float(h.max_ns if h.max_ns is not None else start)
    return (start, max(end, start), h.over_count / total)


@dataclass
class Series:
    """A downsampled time series: per bucket the time of its first sample, min and max, and marks."""

    t_s: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    mean: np.ndarray
    marks: np.ndarray  # per bucket: how many marked samples (misses) it holds
    n: int  # samples represented
    downsampled: bool = field(default=False)


class MinMaxDownsampler:
    """Reduce a series of *total* samples, fed in order in chunks, to *buckets* (min, max) pairs.

    Bucket of sample i: ``i * buckets // total`` (equal counts; with a steady period that is equal
    time). With ``total <= buckets`` every sample is its own bucket: nothing is lost.
    """

    def __init__(self, total: int, buckets: int = 2000) -> None:
        self.total = max(int(total), 0)
        self.buckets = max(min(int(buckets), self.total), 0)
        self.lo = np.full(self.buckets, np.iinfo(np.int64).max, dtype=np.int64)
        self.hi = np.full(self.buckets, np.iinfo(np.int64).min, dtype=np.int64)
        self.t_ns = np.full(self.buckets, -1, dtype=np.int64)
        self.sum = np.zeros(self.buckets, dtype=np.float64)
        self.count = np.zeros(self.buckets, dtype=np.int64)
        self.marks = np.zeros(self.buckets, dtype=np.int64)
        self.seen = 0

    def _bucket(self, idx: np.ndarray) -> np.ndarray:
        return idx * self.buckets // self.total

    def add(self, values: np.ndarray, t_ns: np.ndarray, marked: np.ndarray | None = None) -> None:
        """Feed the next chunk: *values* and their times *t_ns* (int64), *marked* a bool mask."""
        n = int(values.size)
        if n == 0 or self.buckets == 0:
            return
        if self.seen + n > self.total:
            raise ValueError(f"more samples than announced ({self.seen + n} > {self.total})")
        b = self._bucket(np.arange(self.seen, self.seen + n, dtype=np.int64))
        starts = np.flatnonzero(np.diff(b)) + 1
        starts = np.concatenate([[0], starts])
        ids = b[starts]
        self.lo[ids] = np.minimum(self.lo[ids], np.minimum.reduceat(values, starts))
        self.hi[ids] = np.maximum(self.hi[ids], np.maximum.reduceat(values, starts))
        self.sum[ids] += np.add.reduceat(values.astype(np.float64), starts)
        self.count[ids] += np.diff(np.append(starts, n))
        fresh = self.t_ns[ids] < 0
        self.t_ns[ids[fresh]] = t_ns[starts[fresh]]
        if marked is not None and marked.any():
            mb = b[marked]
            self.marks[mb[0] : mb[-1] + 1] += np.bincount(mb - mb[0])
        self.seen += n

    def result(self) -> Series:
        """The buckets filled so far (all of them once every sample was fed)."""
        filled = self.t_ns >= 0
        mean = self.sum[filled] / np.maximum(self.count[filled], 1)
        return Series(
            self.t_ns[filled] / 1e9,
            self.lo[filled],
            self.hi[filled],
            mean,
            self.marks[filled],
            self.seen,
            self.buckets < self.total,
        )


def envelope(series: Series) -> tuple[np.ndarray, np.ndarray]:
    """Polyline through each bucket's min then max: what a plot of the raw series shows per column."""
    x = np.repeat(series.t_s, 2)
    y = np.column_stack([series.lo, series.hi]).ravel()
    return x, y


@dataclass(frozen=True)
class LateMark:
    """A worst late cycle on the period-over-time plot: time (s), height (µs) and its main cause."""

    t_s: float
    y_us: float
    cause: str
    share: float | None  # of the window that cause explains (None: nothing explained it)


def late_marks(why_late: WhyLate | None, t0_ns: int | None, limit: int = 10) -> list[LateMark]:
    """The *limit* worst late cycles of *why_late* (summary.json), worst first.

    Height: the cycle's period or its interference window, whichever is longer (a missed update
    written late can sit in an ordinary period; its window is what was lost).
    """
    if why_late is None or not why_late.on or t0_ns is None:
        return []
    out = []
    for cyc in (why_late.worst or [])[:limit]:
        if cyc.detect_ns is None:
            continue
        top = cyc.causes[0] if cyc.causes else None
        height = max(cyc.period_us or 0.0, cyc.window.duration_us)
        out.append(
            LateMark(
                (cyc.detect_ns - t0_ns) / 1e9,
                height,
                (top.name or top.label) if top else "unexplained",
                top.share if top else None,
            )
        )
    return out
