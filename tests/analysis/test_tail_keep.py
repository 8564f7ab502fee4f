"""The tail model's raw material (analysis.tail_keep): what the keeper holds is exactly every value
above its final threshold, in bounded memory, and a run's tail comes from it (also pooled)."""

from __future__ import annotations

import numpy as np
import pytest

from softrt.analysis import RunStats
from softrt.analysis.tail_keep import TailKeeper, fit_kept, pool
from softrt.ipc.layout import RECORD_DTYPE


def _feed(keeper: TailKeeper, values: np.ndarray, chunk: int = 997) -> None:
    for i in range(0, values.size, chunk):
        keeper.add(values[i : i + chunk], np.arange(i, min(i + chunk, values.size)))


def test_it_holds_exactly_the_values_above_its_final_threshold():
    rng = np.random.default_rng(3)
    values = rng.integers(0, 1_000_000, 200_000)
    k = TailKeeper(0, 900_000, share=0.01, cap=10_000, min_keep=1_000)
    _feed(k, values)
    held, times = k.arrays()
    assert k.raised > 0 and k.held <= 10_000
    expected = np.flatnonzero(values > k.threshold)
    assert np.array_equal(times, expected) and np.array_equal(held, values[expected])  # in time order
    assert k.seen == values.size and k.late == int(np.count_nonzero(values > 900_000))
    assert held.size >= 0.01 * values.size  # at least the share asked (the model's p99 lies inside)


def test_the_cap_bounds_it_whatever_the_run_length():
    k = TailKeeper(0, share=0.5, cap=2_000, min_keep=100)
    _feed(k, np.random.default_rng(0).random(100_000))
    assert k.held <= 2_000 and k.raised > 0


def test_the_streaming_pass_keeps_period_and_latency_with_their_times():
    rec = np.zeros(5_000, RECORD_DTYPE)
    rec["seq"] = np.arange(rec.size)
    rec["edge_ns"] = np.arange(rec.size) * 250_000
    rec["detect_ns"] = rec["edge_ns"] + 2_000
    rec["detect_ns"][1000] += 80_000  # one late wake-up: a long period, then a short one
    stats = RunStats(250_000)
    for i in range(0, rec.size, 1024):
        stats.add(rec[i : i + 1024])
    period, latency = stats.keep["period"], stats.keep["latency"]
    values, times = period.arrays()
    assert list(values) == [330_000] and list(times) == [rec["detect_ns"][1000]]
    assert period.late == 1 and latency.late == 1 and latency.seen == rec.size
    assert latency.hours(250_000) * 3600 == pytest.approx(rec.size * 250e-6, rel=1e-3)  # the span, not the count
    assert stats.merge(RunStats(250_000)).keep is None  # pooled runs mix clocks: no tail


def test_a_short_run_is_refused_not_an_error_and_keeps_its_bound():
    k = TailKeeper(250_000, 270_000)
    k.add(np.full(500, 251_000) + np.arange(500), np.arange(500) * 250_000)
    tail = fit_kept(k, hours=500 * 250e-6 / 3600, series="period_us")
    assert tail.refused and "1,000" in tail.refused and tail.xi is None
    assert tail.late == 0 and tail.late_rate_bound_per_h == pytest.approx(-np.log(0.05) / tail.hours, rel=1e-3)


def test_pooled_runs_follow_one_another_above_the_highest_threshold():
    a, b = TailKeeper(5, 50), TailKeeper(10, 50)
    a.add(np.array([6, 60, 7]), np.array([100, 200, 300]))
    b.add(np.array([11, 70]), np.array([5, 9]))
    p = pool([a, b], period_ns=1_000)
    values, times = p.arrays()
    assert p.threshold == 10 and list(values) == [60, 11, 70]
    # a spans 300 ns (200 between its first and last time, and one more of its 3 cycles), b 8 ns
    assert list(times) == [100, 300 + 1_000_000_000, 300 + 1_000_000_000 + 4]
    assert p.seen == 5 and p.late == 2 and p.hours(1_000) * 3.6e12 == pytest.approx(308)
