"""Pure data preparation: streamed histograms, downsampling and exceedance against brute force."""

from __future__ import annotations

import numpy as np
import pytest

from softrt.report.data import (
    Hist,
    MinMaxDownsampler,
    StreamHist,
    common_width_ns,
    envelope,
    exceedance,
    hist_from_buckets,
    merge,
    nice_width_ns,
    rebin,
)


def _chunks(values, rng):
    i = 0
    while i < values.size:
        n = int(rng.integers(1, 5000))
        yield values[i : i + n]
        i += n


def test_stream_hist_matches_numpy_histogram_on_chunks():
    rng = np.random.default_rng(1)
    v = (250_000 + rng.normal(0, 3_000, 50_000)).astype(np.int64)
    h = StreamHist()
    for c in _chunks(v, rng):
        h.add(c)
    r = h.result()
    assert r.width_ns == 100 and r.total == v.size
    expected, _ = np.histogram(v, bins=r.edges_ns())
    assert np.array_equal(r.counts, expected)
    assert r.min_ns == v.min() and r.max_ns == v.max()


def test_stream_hist_widens_exactly_when_the_range_grows():
    rng = np.random.default_rng(2)
    small = rng.integers(0, 1_000, 1_000)
    huge = np.array([5_000_000_000])  # 5 s: forces 100 ns -> 10 µs bins with a 1M-bin cap
    h = StreamHist(max_bins=1 << 20)
    h.add(small)
    h.add(huge)
    r = h.result()
    assert r.width_ns == 10_000
    assert r.total == small.size + 1
    expected, _ = np.histogram(np.concatenate([small, huge]), bins=r.edges_ns())
    assert np.array_equal(r.counts, expected)


def test_negative_values_are_counted_apart():
    h = StreamHist()
    h.add(np.array([-5, 10, 200, -1]))
    r = h.result()
    assert r.under_count == 2 and r.total == 4 and int(r.counts.sum()) == 2


def test_rebin_preserves_counts_and_is_exact_on_multiples():
    rng = np.random.default_rng(3)
    v = rng.integers(0, 2_000_000, 20_000)
    h = StreamHist()
    h.add(v)
    fine = h.result()
    for width in (1_000, 2_000, 5_000, 50_000):
        coarse = rebin(fine, width)
        assert coarse.total == v.size
        expected, _ = np.histogram(v, bins=coarse.edges_ns())
        assert np.array_equal(coarse.counts, expected), width


@pytest.mark.parametrize(
    "span,max_bins,floor,expected",
    [
        (1_160_000, 2000, 1000, 1000),
        (3_250_000, 2000, 1000, 2000),
        (14_608_000, 2000, 1000, 10_000),
        (40_000, 2000, 100, 100),
        (7e9, 2000, 1000, 5_000_000),
    ],
)
def test_nice_width(span, max_bins, floor, expected):
    assert nice_width_ns(span, max_bins, floor) == expected


def test_common_width_is_no_finer_than_any_histogram():
    a = Hist(100, np.ones(10, np.int64))
    b = Hist(2_000, np.ones(5, np.int64))
    assert common_width_ns([a, b], floor_ns=100) >= 2_000


def test_exceedance_matches_brute_force_at_bin_edges():
    rng = np.random.default_rng(4)
    v = rng.gamma(2.0, 40_000.0, 30_000).astype(np.int64)
    h = StreamHist()
    h.add(v)
    e = exceedance(h.result(), max_points=100_000)
    assert e.fraction[0] == 1.0
    for x, f in zip(e.x_ns[1:], e.fraction[1:]):
        assert f == pytest.approx((v >= x).mean())
    assert e.fraction[-1] == 0.0  # beyond the largest value nothing is left
    assert np.all(np.diff(e.fraction) <= 0)


def test_exceedance_is_limited_in_points_and_keeps_the_tail():
    rng = np.random.default_rng(5)
    v = np.concatenate([rng.integers(240_000, 260_000, 100_000), [14_608_000]])
    h = StreamHist()
    h.add(v)
    e = exceedance(h.result(), max_points=500)
    assert e.x_ns.size <= 501
    # The single long period keeps the curve above zero up to it: 1 sample in 100,001.
    assert e.fraction[-2] == pytest.approx(1 / v.size)
    assert e.x_ns[-1] > 14_600_000


def test_exceedance_with_overflow_has_a_tail():
    h = hist_from_buckets(
        np.array([8_000, 9_000]), np.array([10, 5]), 1_000, over_count=5, over_from_ns=400_000, max_ns=3_937_000
    )
    e = exceedance(h)
    assert e.total == 20
    assert e.tail == (400_000.0, 3_937_000.0, 0.25)
    assert e.fraction[-1] == pytest.approx(0.25)  # the overflow is still above every bin


def test_merge_sums_threads():
    a = hist_from_buckets(np.array([1_000, 2_000]), np.array([3, 4]), 1_000, min_ns=1_000, max_ns=2_500)
    b = hist_from_buckets(
        np.array([2_000, 5_000]), np.array([1, 1]), 1_000, over_count=2, over_from_ns=6_000, min_ns=2_000, max_ns=9_000
    )
    m = merge([a, b])
    assert m.total == 11 and m.over_count == 2 and m.min_ns == 1_000 and m.max_ns == 9_000
    assert dict(zip(m.edges_ns()[:-1].tolist(), m.counts.tolist()))[2_000] == 5


def _brute(values, times, buckets):
    n = values.size
    b = np.arange(n) * buckets // n
    return (
        [values[b == k].min() for k in range(buckets)],
        [values[b == k].max() for k in range(buckets)],
        [times[b == k][0] for k in range(buckets)],
    )


def test_min_max_downsampler_matches_brute_force_with_any_chunking():
    rng = np.random.default_rng(6)
    n = 23_457
    v = rng.integers(200_000, 300_000, n)
    v[[17, 9_999, 23_456]] = [14_608_600, 1, 5_000_000]  # spikes must survive
    t = np.cumsum(rng.integers(249_000, 251_000, n))
    marked = np.zeros(n, bool)
    marked[[17, 18, 9_999]] = True
    ds = MinMaxDownsampler(n, 300)
    i = 0
    for c in _chunks(v, rng):
        ds.add(c, t[i : i + c.size], marked[i : i + c.size])
        i += c.size
    s = ds.result()
    lo, hi, first_t = _brute(v, t, 300)
    assert s.lo.tolist() == lo and s.hi.tolist() == hi
    b = np.arange(n) * 300 // n
    assert np.allclose(s.mean, [v[b == k].mean() for k in range(300)])
    assert np.allclose(s.t_s, np.array(first_t) / 1e9)
    assert s.marks.sum() == 3 and s.downsampled and s.n == n
    assert s.hi.max() == 14_608_600 and s.lo.min() == 1
    x, y = envelope(s)
    assert x.size == y.size == 600


def test_short_series_is_not_downsampled():
    ds = MinMaxDownsampler(5, 2000)
    ds.add(np.array([1, 2, 3, 4, 5]), np.arange(5))
    s = ds.result()
    assert not s.downsampled and s.lo.tolist() == [1, 2, 3, 4, 5] and s.hi.tolist() == s.lo.tolist()


def test_downsampler_refuses_more_samples_than_announced():
    ds = MinMaxDownsampler(3, 10)
    with pytest.raises(ValueError):
        ds.add(np.arange(4), np.arange(4))


def test_exceedance_of_the_runs_hdr_histogram_is_exact_at_every_point():
    from softrt.analysis.hdr import Hdr
    from softrt.report.data import exceedance_of_hdr

    rng = np.random.default_rng(7)
    v = np.concatenate(
        [rng.integers(100, 1_000, 9_800), rng.integers(1_000, 40_000, 180), rng.integers(1_000_000, 20_000_000, 20)]
    )
    h = Hdr()
    for c in _chunks(v, rng):
        h.add(c)
    e = exceedance_of_hdr(h)
    assert e.total == v.size and e.x_ns[0] == v.min() and e.x_ns[-1] == v.max() and e.fraction[0] == 1.0
    assert np.all(np.diff(e.x_ns) >= 0) and np.all(np.diff(e.fraction) <= 0)
    for x, f in zip(e.x_ns, e.fraction):  # every point is the true fraction at or above it
        assert f == np.count_nonzero(v >= x) / v.size
    assert len(e.x_ns) < 3 * len(np.unique(v))


def test_the_reports_latency_exceedance_comes_from_the_hdr_histogram():
    """The plotted curve at 1 µs is the true share (1.8 % here), not the first coarse bin's 100 % (issue 17)."""
    from softrt.analysis import RunStats
    from softrt.report.load import RunView
    from softrt.report.plots import exceedance_curves
    from softrt.schema.summary import RunSummary

    from ..synthetic import synthetic_records

    rng = np.random.default_rng(3)
    rec = synthetic_records(20_000, 250_000, [(5_000, 40)], seed=3)
    latency = rng.integers(100, 1_000, rec.size)
    slow = rng.choice(rec.size, 360, replace=False)
    latency[slow] = rng.integers(1_000, 20_000_000, slow.size)  # up to a 20 ms stall: a wide, coarse histogram
    rec["edge_ns"] = rec["detect_ns"] - latency
    stream = StreamHist()
    stream.add(latency)
    view = RunView(path=None, summary=RunSummary(run_id="r"), latency=stream.result(), stats=RunStats(250_000).add(rec))
    plot = exceedance_curves([(0, view)])
    x_us, frac = plot.figure.axes[1].lines[0].get_data()
    at_1us = frac[np.searchsorted(x_us, 1.0, side="right") - 1]  # a "post" step: the value from its x on
    assert at_1us == np.count_nonzero(latency >= 1_000) / rec.size == 0.018
