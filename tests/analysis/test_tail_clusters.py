"""analysis.tail_clusters: the threshold choice (the parameter-stability rule)."""

import dataclasses


def test_when_no_higher_candidate_keeps_30_clusters_the_lowest_stands(monkeypatch):
    """A run's summary once failed with an IndexError here (no candidate above the lowest kept 30
    clusters): the lowest candidate is then the choice, said in the rule."""
    import numpy as np

    from softrt.analysis import tail_clusters as tc

    rng = np.random.default_rng(5)
    n = 200_000
    values, times = rng.exponential(1.0, n), np.arange(n) * 250e-6
    real = tc.decluster
    first = real(values, times, tc.lowest_candidate(values, n), 0.01, 250e-6)

    def only_the_lowest(v, t, threshold, gap_s, period_s):
        c = real(v, t, threshold, gap_s, period_s)
        return c if threshold <= first.threshold else dataclasses.replace(c, peaks=c.peaks[: tc.MIN_CLUSTERS - 1])

    monkeypatch.setattr(tc, "decluster", only_the_lowest)
    choice = tc.choose_threshold(values, times, n, 0.01, 250e-6)
    assert choice.clusters.threshold == first.threshold and "no higher candidate keeps 30" in choice.rule
