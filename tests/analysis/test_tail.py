"""analysis.tail: the tail model of a per-cycle series (issue 33).

Known answers that can fail: the no-model Poisson bound, a fixed-seed GPD tail whose intervals must
hold the truth, a cheap coverage run (the full one is bench/tail_coverage.py), bursts that must be
declustered, refusals (too few clusters, a load in the second half only), a histogram's caveat, and
bad input as one ConfigError line.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from softrt.analysis.tail import analyse, fit_tail, fit_tail_histogram, poisson_upper_rate
from softrt.analysis.tail_gpd import mle
from softrt.analysis.tail_tests import sample_gpd
from softrt.errors import ConfigError

PERIOD_S = 250e-6
CYCLES_PER_H = 3600 / PERIOD_S


def kept_run(
    seed: int,
    xi: float,
    hours: float = 0.25,
    keep: float = 0.01,
    base_us: float = 100.0,
    sigma_us: float = 10.0,
    bursts_per_h: float | None = None,
):
    """A run at 250 µs of which only the cycles above *base_us* are kept (a fraction *keep*, i.i.d.,
    or bursts of 3-10 cycles at *bursts_per_h*), their excesses GPD(ξ, σ) (a burst's peak; its other
    cycles lower). Returns values, times, cycles, and the true once-a-day cluster level."""
    rng = np.random.default_rng(seed)
    cycles = int(hours * CYCLES_PER_H)
    if bursts_per_h is None:
        idx = np.sort(rng.choice(cycles, rng.binomial(cycles, keep), replace=False))
        values = base_us + sample_gpd(rng, xi, sigma_us, (idx.size,))
        rate_h = keep * CYCLES_PER_H
    else:
        starts = np.sort(rng.choice(cycles - 16, rng.poisson(bursts_per_h * hours), replace=False))
        lengths = rng.integers(3, 11, starts.size)
        peaks = sample_gpd(rng, xi, sigma_us, (starts.size,))
        idx = np.concatenate([s + np.arange(n) for s, n in zip(starts, lengths)])
        share = np.concatenate([np.r_[1.0, rng.uniform(0.3, 1.0, n - 1)][rng.permutation(n)] for n in lengths])
        values = base_us + np.repeat(peaks, lengths) * share
        idx, order = np.unique(idx, return_index=True)
        values = values[order]
        rate_h = bursts_per_h
    log_n = math.log(rate_h * 24)
    truth = base_us + sigma_us * (math.expm1(xi * log_n) / xi if xi else log_n)
    return values, idx * PERIOD_S, cycles, truth


def test_the_no_model_bound_is_the_poisson_upper_limit():
    assert poisson_upper_rate(0, 1.0) == pytest.approx(-math.log(0.05), rel=1e-9)  # the rule of three
    assert poisson_upper_rate(0, 30.0) == pytest.approx(0.0999, abs=1e-3)
    assert poisson_upper_rate(10, 2.0) == pytest.approx(16.96 / 2, rel=1e-3)  # Garwood's table: 16.96 for k=10


def test_the_mle_matches_scipys():
    rng = np.random.default_rng(5)
    y = sample_gpd(rng, 0.2, 3.0, (400,))
    from scipy.stats import genpareto

    c, _, scale = genpareto.fit(y, floc=0)
    xi, sigma, _ = mle(y[None, :])
    assert xi[0] == pytest.approx(c, abs=1e-4) and sigma[0] == pytest.approx(scale, rel=1e-4)


def test_a_known_gpd_tail_is_found_with_intervals_that_hold_the_truth():
    values, times, cycles, truth = kept_run(11, xi=-0.1)
    tail = fit_tail(values, times, deadline_us=190.0, cycles=cycles, hours=0.25)
    assert tail.refused is None and tail.caveat is None
    assert tail.xi.low <= -0.1 <= tail.xi.high and tail.xi.high - tail.xi.low < 0.6
    day = next(r for r in tail.return_levels if r.every_h == 24)
    assert day.low_us <= truth <= day.high_us
    assert [r.every_h for r in tail.return_levels] == [1, 24, 168, 8766]
    assert all(r.low_us <= r.level_us <= r.high_us for r in tail.return_levels)
    assert tail.late_rate_per_h.low <= tail.late_rate_per_h.estimate <= tail.late_rate_per_h.high
    assert not tail.heavy and tail.late == 0 and tail.late_rate_bound_per_h == pytest.approx(3 / 0.25, rel=0.01)
    assert all(t.ok for t in tail.tests) and len(tail.tests) == 3
    assert tail.run_h_needed is not None and tail.run_h_needed > 0


def test_bursts_are_declustered_so_they_do_not_shrink_the_interval():
    values, times, cycles, truth = kept_run(3, xi=0.0, bursts_per_h=2000)
    tail = fit_tail(values, times, deadline_us=400.0, cycles=cycles, hours=0.25)
    assert tail.extremal_index < 0.4  # 3-10 cycles a burst: about 1/6.5
    assert tail.exceedances > 3 * tail.clusters
    assert tail.xi.low <= 0.0 <= tail.xi.high
    undeclustered = fit_tail(values, times, deadline_us=400.0, cycles=cycles, hours=0.25, gap_s=0.0)
    assert undeclustered.clusters == undeclustered.exceedances  # a zero gap keeps every exceedance
    width = tail.xi.high - tail.xi.low
    assert undeclustered.refused or undeclustered.xi.high - undeclustered.xi.low < width


def test_five_clusters_are_refused_with_the_no_model_bound_kept():
    rng = np.random.default_rng(2)
    values = rng.uniform(10, 20, 20_000)
    times = np.arange(values.size) * PERIOD_S
    for at in (1000, 5000, 9000, 13000, 17000):
        values[at : at + 4] = 300 + rng.uniform(0, 50, 4)
    tail = fit_tail(values, times, deadline_us=270.0, threshold_us=250.0)
    assert tail.refused.startswith("only 5 clusters above 250.0 µs") and "run about" in tail.refused
    assert tail.xi is None and tail.return_levels == [] and tail.late_rate_per_h is None and tail.run_h_needed is None
    assert tail.late == 20 and tail.late_rate_bound_per_h == pytest.approx(poisson_upper_rate(20, tail.hours))


def test_a_load_in_the_second_half_only_is_refused_as_non_stationary():
    values, times, cycles, _ = kept_run(4, xi=-0.1, hours=0.25)
    second = times > 0.125 * 3600
    values = np.where(second, values + 0.6 * (values - 100.0), values)  # the load stretches the tail by 60 %
    tail = fit_tail(values, times, deadline_us=400.0, cycles=cycles, hours=0.25)
    assert tail.refused and tail.refused.startswith("stationarity (halves agree) failed")
    assert "remove the load that changed halfway" in tail.refused
    assert tail.xi is None and next(t for t in tail.tests if t.name.startswith("stationarity")).ok is False


def test_a_histogram_has_no_declustering_and_says_so():
    rng = np.random.default_rng(8)
    values = np.floor(20 + rng.exponential(4.0, 500_000))
    edges = np.arange(0, values.max() + 2)
    counts, _ = np.histogram(values, edges)
    tail = fit_tail_histogram(edges, counts, hours=500_000 * PERIOD_S / 3600, deadline_us=60.0)
    assert tail.caveat and "no time order" in tail.caveat and tail.gap_ms is None and tail.extremal_index is None
    assert tail.cycles == 500_000 and tail.late == int(counts[edges[:-1] > 60].sum()) > 0
    assert tail.refused is None and tail.xi.low <= 0.0 <= tail.xi.high
    assert [t.p_value is None for t in tail.tests] == [False, True, True]
    with pytest.raises(ConfigError, match="needs 3 edges"):
        fit_tail_histogram([0, 1], [5, 6], hours=1.0, deadline_us=1.0)
    with pytest.raises(ConfigError, match="in one bucket"):
        fit_tail_histogram([0, 1, 2], [0, 5000], hours=1.0, deadline_us=1.0)


def test_a_histogram_expands_only_its_top_even_when_one_bucket_holds_most():
    counts = np.r_[np.full(10, 1_000), 300_000_000, np.full(40, 20_000) // np.arange(1, 41)]
    edges = np.arange(counts.size + 1, dtype=float)
    tail = fit_tail_histogram(edges, counts, hours=24.0, deadline_us=45.0, seed=1)
    assert tail.cycles == int(counts.sum()) and tail.threshold_us >= 10.0


@pytest.mark.parametrize(
    "values, times, problem",
    [
        (np.array([]), None, "is empty"),
        (np.full(5000, 7.0), None, "a constant has no tail"),
        (np.r_[np.ones(4999), np.nan], None, "NaN"),
        (np.r_[np.ones(4999), -1.0], None, "negative"),
        (np.arange(500.0), np.arange(500.0), "only 500 cycles"),
        (np.arange(5000.0), np.arange(10.0), "10 times for 5000 values"),
        (np.arange(5000.0), None, "observed time of period_us is unknown"),
    ],
)
def test_bad_input_is_one_config_error_line(values, times, problem):
    with pytest.raises(ConfigError, match=problem) as err:
        fit_tail(values, times, deadline_us=270.0)
    assert "\n" not in str(err.value)


def test_cheap_coverage_of_xi_and_the_daily_level_with_bursts():
    """16 seeds of 3-10-cycle bursts (bench/tail_coverage.py has the full run): the 95 % intervals of ξ
    and of the daily level must hold the truth in at least 11. Intervals from undeclustered
    exceedances (6.5 a burst, so 2.5 times narrower) or without the rate's uncertainty fall out of it."""
    xi_in = day_in = 0
    for seed in range(16):
        values, times, cycles, truth = kept_run(200 + seed, xi=0.0, hours=0.1, bursts_per_h=2000)
        tail, _ = analyse(
            values,
            times,
            deadline_us=1e4,
            hours=0.1,
            cycles=cycles,
            series="period_us",
            threshold_us=None,
            gap_s=0.01,
            target_per_h=1 / 8766,
            seed=seed,
        )
        day = next(r for r in tail.return_levels if r.every_h == 24)
        xi_in += tail.xi.low <= 0.0 <= tail.xi.high
        day_in += day.low_us <= truth <= day.high_us
    assert xi_in >= 11 and day_in >= 11, (xi_in, day_in)


def test_a_heavy_tail_or_a_rate_above_the_target_gets_no_run_length():
    values, times, cycles, _ = kept_run(6, xi=0.6, hours=0.05)
    heavy = fit_tail(values, times, deadline_us=2000.0, cycles=cycles, hours=0.05)
    assert heavy.refused is None and heavy.heavy and heavy.xi.low > 0 and heavy.run_h_needed is None
    values, times, cycles, _ = kept_run(6, xi=-0.1, hours=0.05)
    common = fit_tail(values, times, deadline_us=150.0, cycles=cycles, hours=0.05)  # ~3,000 late bursts an hour
    assert common.late_rate_per_h.estimate > common.target_per_h and common.run_h_needed is None
    assert common.late > 0 and common.late_rate_bound_per_h > common.late / common.hours


def test_a_heavy_tails_unbounded_level_is_none_so_its_summary_reads_back():
    """A hypervisor's stalls (ξ ≈ +2.5 here) put the yearly level's upper bound past int64 ns (1e17
    µs seen): no summary could hold it (schema.doc.MAX_US), so it is None ("unbounded"), never a
    figure that made the run's summary.json unreadable; every figure kept is a time."""
    from softrt.schema.doc import MAX_US
    from softrt.schema.tail import Tail

    values, times, cycles, _ = kept_run(3, 2.5, hours=0.25, keep=0.002, sigma_us=30.0)
    tail = fit_tail(values, times, deadline_us=270.0, hours=0.25, cycles=cycles)
    figures = [x for r in tail.return_levels for x in (r.level_us, r.low_us, r.high_us) if x is not None]
    assert all(abs(x) <= MAX_US for x in figures)
    assert tail.return_levels[1].high_us is None and tail.return_levels[3].level_us is None  # past any time
    assert Tail.from_dict(tail.to_dict()) == tail


def test_values_beyond_the_histogram_count_late_and_refuse_the_fit():
    """rt-tests keep only the count and the maximum of what overflows the histogram: those values are
    never invented for the fit (it is refused, saying how to record them), and they count as late when
    the maximum is past the deadline, so the no-model bound stays an upper bound."""
    rng = np.random.default_rng(3)
    values = rng.exponential(3.0, 400_000) + 1.0
    edges = np.arange(0.0, 33.0)
    counts, _ = np.histogram(values[values < 32.0], edges)
    kwargs = dict(hours=400_000 * PERIOD_S / 3600, deadline_us=50.0)
    inside = fit_tail_histogram(edges, counts, **kwargs)
    tail = fit_tail_histogram(edges, counts, beyond=106, beyond_max_us=5216.0, **kwargs)
    assert inside.late == 0 and tail.late == 106
    assert tail.late_rate_bound_per_h > inside.late_rate_bound_per_h
    assert tail.refused and "106 values lie above the histogram (32 µs, the largest 5,216 µs)" in tail.refused
    assert tail.return_levels == [] or all(r.level_us is None for r in tail.return_levels)
    below = fit_tail_histogram(edges, counts, beyond=5, beyond_max_us=40.0, **kwargs)
    assert below.late == 0 and below.refused and "counted late" not in below.refused
