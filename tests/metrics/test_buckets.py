"""Prometheus buckets read from the HDR histograms: exact counts at or below each published bound."""

from __future__ import annotations

import numpy as np
import pytest

from softrt.analysis.hdr import Hdr, bucket_bounds, key_of
from softrt.metrics import above, at_or_below, latency_bounds_ns, period_bounds_ns, snap_ns


def _samples(bounds, seed=3):
    """Heavy-tailed values plus every bound and its neighbours (the cases an off-by-one would miss)."""
    rng = np.random.default_rng(seed)
    body = rng.normal(250_000, 3_000, 50_000)
    tail = rng.lognormal(13.0, 1.5, 5_000)  # tens of µs to tens of ms
    small = rng.integers(0, 3_000, 5_000)
    edges = np.concatenate([np.asarray(bounds) + d for d in (-1, 0, 1)])
    return np.concatenate([body, tail, small, edges]).astype(np.int64)


def test_snapped_bounds_are_bucket_upper_edges_within_0_2_percent():
    for bound in (1_000, 2_000, 5_000, 260_000, 270_000, 5_000_000, 15_000_000):
        snapped = snap_ns(bound)
        assert bound <= snapped <= bound * 1.002
        assert bucket_bounds(np.array([key_of(snapped)]))[1][0] == snapped  # an upper edge
        assert key_of(snapped + 1) == key_of(snapped) + 1  # the next value opens the next bucket
    assert snap_ns(1_000) == 1_000  # exact 1 ns buckets below 1,024 ns
    assert period_bounds_ns(250_000)[:6] == (50_047, 100_095, 150_015, 200_191, 250_111, 260_095)
    assert latency_bounds_ns()[:3] == (1_000, 2_001, 5_007)


@pytest.mark.parametrize("chunks", [1, 7])
def test_counts_at_or_below_each_bound_equal_numpy(chunks):
    bounds = period_bounds_ns(250_000) + latency_bounds_ns()
    bounds = tuple(sorted(set(bounds)))
    values = _samples(bounds)
    hdr = Hdr()
    for part in np.array_split(np.random.default_rng(0).permutation(values), chunks):
        hdr.add(part)
    expected = [int(np.count_nonzero(values <= b)) for b in bounds]
    assert at_or_below(hdr, bounds) == expected
    late_ns = snap_ns(270_000)
    assert above(hdr, late_ns) == int(np.count_nonzero(values > late_ns))


def test_bounds_outside_the_histogram_and_an_empty_one():
    hdr = Hdr()
    assert at_or_below(hdr, (1_000, 2_001)) == [0, 0] and above(hdr, 1_000) == 0
    hdr.add(np.array([300_000, 300_001, 400_000], np.int64))
    assert at_or_below(hdr, (1_000, snap_ns(300_000), 15_007_743)) == [0, 2, 3]
    assert above(hdr, snap_ns(300_000)) == 1
