"""A run past the report's row budget (softrt.report.longrun): the period over time as a min/max
envelope read by row group, the worst period in it, histograms from stats.json, motion unchanged."""

from __future__ import annotations

import numpy as np
import pyarrow.parquet as pq
import pytest

from softrt.report import load as report_load
from softrt.report import longrun
from softrt.report.data import envelope


@pytest.fixture(scope="module")
def long_run(tmp_path_factory):
    from ..synthetic import write_synthetic_run

    # 30,000 cycles in 2 row groups of 16,384; a 12-cycle stall (the worst period, 3.25 ms), a short
    # one and a 1-cycle miss; the worst period sits in a row group of its own batch.
    return write_synthetic_run(
        tmp_path_factory.mktemp("runs"), cycles=30_000, misses=[(2_600, 3), (9_000, 1), (21_000, 12)], seed=4
    )


def _raw_periods(run):
    t = pq.read_table(run / "samples.parquet", columns=["seq", "detect_ns"])
    detect = t.column("detect_ns").to_numpy()
    return np.diff(detect), detect


def test_the_envelope_keeps_each_buckets_min_and_max_and_the_worst_period_is_drawn(long_run):
    period, detect = _raw_periods(long_run)
    env = longrun.scan_envelope(long_run, detect.size, 100, batch_rows=4_096)
    s = env.series
    assert s is not None and s.n == period.size and s.t_s.size == 100 and s.downsampled
    bucket = np.arange(period.size) * 100 // period.size  # MinMaxDownsampler's equal-count buckets
    assert np.array_equal(s.lo, np.minimum.reduceat(period, np.flatnonzero(np.diff(bucket, prepend=-1))))
    assert np.array_equal(s.hi, np.maximum.reduceat(period, np.flatnonzero(np.diff(bucket, prepend=-1))))
    _, y = envelope(s)  # what the plot draws
    worst = int(np.argmax(period))  # the period after the 12-cycle stall: 13 periods long
    assert y.max() == period.max() > 12 * 250_000 and y.min() == period.min()
    assert s.hi[bucket[worst]] == period.max()
    assert np.flatnonzero(s.marks).tolist() == sorted({bucket[i - 1] for i in (2_600, 9_000, 21_000)})
    # Read by row group in bounded batches: batches of 4,096 rows are one row group (16,384) each.
    assert pq.ParquetFile(long_run / "samples.parquet").metadata.num_row_groups == 2
    assert env.batches == 2 and env.rows == 30_000 and env.worst[:2] == (12, 21_000)
    assert longrun.scan_envelope(long_run, detect.size, 100, batch_rows=1 << 20).batches == 1


def test_past_the_budget_the_report_draws_the_same_series_and_motion_with_exact_histograms(long_run, monkeypatch):
    small = report_load.load_run(long_run)
    monkeypatch.setattr(report_load, "ROW_BUDGET", 1_000)
    monkeypatch.setattr(longrun, "SCAN_BATCH_ROWS", 4_096)  # the motion's row groups are read alone
    big = report_load.load_run(long_run)
    assert big.notes[0].startswith(
        "samples.parquet holds 30,000 cycles, more than the report keeps one by one "
        "(1,000): the period over time was read by row group (2 batches) and is drawn "
        "downsampled, as the minimum and maximum of 2,000 slices of about 15 periods"
    )
    for name in ("t_s", "lo", "hi", "mean", "marks"):
        assert np.array_equal(getattr(small.series, name), getattr(big.series, name)), name
    assert big.period.max_ns == small.period.max_ns and big.period.total == small.period.total == 29_999
    assert big.motion_note == small.motion_note
    for name in (
        "board_cycle",
        "commanded_sample",
        "delivered_sample",
        "delivered_position_counts",
        "delivered_velocity_counts_per_s",
    ):
        assert np.array_equal(getattr(small.motion, name), getattr(big.motion, name), equal_nan=True), name
    assert big.motion_reference.lag_cycles == small.motion_reference.lag_cycles


def test_past_the_budget_without_stats_json_the_run_is_refused_with_one_line(synth_run, monkeypatch):
    from softrt.errors import SoftRTError

    run = synth_run(cycles=3_000, misses=[])
    (run / "stats.json").unlink()
    monkeypatch.setattr(report_load, "ROW_BUDGET", 1_000)
    with pytest.raises(
        SoftRTError,
        match=r"^run \S+: samples.parquet holds 3,000 cycles, more than the report keeps "
        r"one by one \(1,000\), and its stats.json cannot be read: .*stats.json is missing",
    ):
        report_load.load_run(run)
