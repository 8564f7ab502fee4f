"""The tail model's figures (report.tail_plot) and the stored raw material (store.tailkeep): the
return-level plot of a run with its kept tail, its points and curve; tail.npz read back whole."""

from __future__ import annotations

import numpy as np
import pytest

from softrt.analysis.tail_keep import TailKeeper
from softrt.errors import SoftRTError
from softrt.report.tail_plot import empirical_points, fitted_level_us, return_level_plot
from softrt.schema.tail import Interval, ReturnLevel, Tail
from softrt.store.tailkeep import TAIL_KEEP, read_tail_keep, write_tail_keep

TAIL = Tail(
    deadline_us=270.0,
    hours=2.0,
    cycles=28_800_000,
    threshold_us=40.0,
    gap_ms=10.0,
    exceedances=300,
    clusters=200,
    xi=Interval(estimate=0.0, low=-0.1, high=0.1),
    sigma_us=Interval(estimate=5.0, low=4, high=6),
    return_levels=[
        ReturnLevel(every_h=h, level_us=50.0 + h / 1000, low_us=45.0, high_us=60.0 + h)
        for h in (1.0, 24.0, 168.0, 8766.0)
    ],
)


def test_the_curve_the_points_and_the_figure():
    # Exponential (ξ = 0): 100 clusters an hour, so the level once an hour is u + σ ln 100.
    assert fitted_level_us(TAIL, np.array([1.0]))[0] == pytest.approx(40 + 5 * np.log(100))
    values = np.array([41.0, 45.0, 30.0, 50.0])
    times = np.array([0.0, 0.001, 1.0, 5.0])  # the first two are one burst
    h, peaks = empirical_points(TAIL, values, times)
    assert list(peaks) == [50.0, 45.0] and list(h) == [2.0, 1.0]  # the k-th worst: once every T/k hours
    plot = return_level_plot(
        [("a", TAIL, values, times), ("b", TAIL.replace(refused="too few"), None, None), ("c", None, None, None)]
    )
    assert plot.figure is not None and any("c: no tail model" in n for n in plot.not_applicable)
    assert any("b: fit refused: too few" in n for n in plot.not_applicable)
    assert return_level_plot([("c", None, None, None)]).figure is None


def test_tail_npz_reads_back_and_a_corrupt_one_is_one_error(tmp_path):
    k = TailKeeper(250_000, 270_000, min_keep=10)
    k.add(np.arange(250_000, 250_100) * 1, np.arange(100) * 250_000)
    write_tail_keep(tmp_path, {"period": k, "latency": TailKeeper(0, 20_000)})
    back = read_tail_keep(tmp_path)
    v, t = back["period"].arrays()
    assert np.array_equal(v, k.arrays()[0]) and np.array_equal(t, k.arrays()[1])
    assert (back["period"].threshold, back["period"].seen, back["period"].deadline) == (k.threshold, 100, 270_000)
    assert read_tail_keep(tmp_path / "nothing") is None
    (tmp_path / TAIL_KEEP).write_bytes(b"not a zip")
    with pytest.raises(SoftRTError, match="cannot read"):
        read_tail_keep(tmp_path)
