"""Reading run directories for the report: what each kind of run provides, and broken runs."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pyarrow.parquet as pq
import pytest

from softrt.analysis import derive
from softrt.errors import SoftRTError
from softrt.report import load as load_mod
from softrt.report.load import load_run
from softrt.schema.check import Finding, Status
from softrt.store.rundir import read_samples


def test_softrt_run_matches_its_samples(synth_run, monkeypatch):
    run = synth_run()
    # Small batches: the streaming must give the same answer however the file is cut.
    monkeypatch.setattr(load_mod, "BATCH_ROWS", 4_099)
    view = load_run(run)
    rec = read_samples(run)
    series = derive(rec, 250_000)
    assert view.period.total == rec.size - 1 and view.latency.total == view.process.total == rec.size
    assert view.period.max_ns == series.period_ns.max() and view.process.min_ns == series.process_ns.min()
    expected, _ = np.histogram(series.period_ns, bins=view.period.edges_ns())
    assert np.array_equal(view.period.counts, expected)
    s = view.series
    assert s.downsampled and s.t_s.size == load_mod.SERIES_BUCKETS and s.n == rec.size - 1
    assert s.hi.max() == series.period_ns.max()  # the 12-cycle stall survives the downsampling
    assert s.marks.sum() == int((rec["missed"] > 0).sum()) == 3
    assert view.notes == [] and view.check is None


def test_motion_trace_is_centred_on_the_worst_miss(synth_run):
    run = synth_run()
    summary = json.loads((run / "summary.json").read_text())
    view = load_run(run)
    m = view.motion
    assert m is not None and m.center_cycle == summary["motion"]["worst_run_cycle"]
    # Inside the window the 12 missed cycles repeat the previous sample.
    held = int((np.diff(m.delivered_sample) == 0).sum())
    assert held == 12
    dev = np.abs(m.delivered_position_counts - m.commanded_position_counts)
    assert dev.max() > 0 and "largest position error" in view.motion_note
    # Against the schedule delayed by the 4 cycles lost earlier, the error at the centre is what
    # this run of misses did by itself: motion_impact's max_run_deviation_counts.
    ref = view.motion_reference
    assert ref.lag_cycles == 3 + 1
    at_center = int(np.flatnonzero(m.board_cycle == m.center_cycle)[0])
    own = abs(m.delivered_position_counts[at_center] - ref.position_counts[at_center])
    assert own == pytest.approx(summary["motion"]["max_run_deviation_counts"])
    assert np.abs(m.delivered_position_counts[:5] - ref.position_counts[:5]).max() == pytest.approx(0.0)


def test_run_without_misses_has_no_motion_trace(synth_run):
    view = load_run(synth_run(misses=[], cycles=5_000))
    assert view.motion is None and "no missed updates" in view.motion_note
    assert view.series.marks.sum() == 0


def test_run_without_motion(synth_run):
    view = load_run(synth_run(motion=False, cycles=3_000))
    assert view.motion is None and "no motion test" in view.motion_note and view.period is not None


def test_check_verdict_from_summary_and_check_json(synth_run):
    run = synth_run(cycles=2_000)
    assert load_run(run).check is None
    finding = {
        "id": "idle.states",
        "title": "CPU idle states",
        "status": "fail",
        "severity": "high",
        "summary": "C6 enabled",
        "fix": "cpupower idle-set -D 0",
    }
    (run / "check.json").write_text(
        json.dumps({"ready": False, "verdict": "NOT READY (full report)", "findings": [finding]})
    )
    assert load_run(run).check.report.verdict == "NOT READY (full report)"
    summary = json.loads((run / "summary.json").read_text())
    summary["check"] = {
        "ready": False,
        "verdict": "NOT READY: fix idle states",
        "counts": {"fail": 1},
        "fix_first": ["idle.states"],
    }
    (run / "summary.json").write_text(json.dumps(summary))
    check = load_run(run).check.report
    assert check.verdict == "NOT READY: fix idle states" and [f.to_dict() for f in check.findings] == [
        Finding.from_dict(finding).to_dict()
    ]
    assert check.counts == {"fail": 1} and check.ready is False and check.findings[0].status is Status.FAIL
    (run / "check.json").write_text(json.dumps({"findings": [{**finding, "status": "bad"}]}))
    check = load_run(run).check
    assert check.report.findings == [] and check.report.verdict == "NOT READY: fix idle states"
    assert check.unreadable == f"{run / 'check.json'}: findings[0].status must be one of ok, warn, fail, n/a, got 'bad'"


def test_a_check_json_alone_that_does_not_read_is_named_not_shown_in_part(synth_run):
    run = synth_run(cycles=2_000)
    (run / "check.json").write_text('{"ready": "yes"}')
    check = load_run(run).check
    assert check.report is None and check.unreadable == f"{run / 'check.json'}: ready must be true or false, got 'yes'"


def test_missing_samples(synth_run):
    run = synth_run(cycles=2_000)
    (run / "samples.parquet").unlink()
    with pytest.raises(SoftRTError, match=r"samples file .* is missing"):
        load_run(run)


@pytest.mark.parametrize("damage", ["truncate", "garbage", "wrong_columns"])
def test_corrupt_samples(synth_run, damage, tmp_path):
    run = synth_run(cycles=2_000)
    file = run / "samples.parquet"
    if damage == "truncate":
        data = file.read_bytes()
        file.write_bytes(data[: len(data) // 2])
    elif damage == "garbage":
        file.write_bytes(b"PAR1" + b"\0" * 100)
    else:
        import pyarrow as pa

        pq.write_table(pa.table({"x": [1, 2, 3]}), file)
    # Issue 32: the run was refused although its summary and stats.json were intact; now it is
    # reported from stats.json, and the first note says why.
    view = load_run(run)
    assert view.series is None and view.period is not None and view.period.total == 2_000 - 1
    assert view.notes[0].startswith("samples.parquet is damaged (") and "those of the run's stats.json" in view.notes[0]
    assert view.motion_note == "not available: the report read stats.json only"
    (run / "stats.json").unlink()  # both damaged: one error naming both
    with pytest.raises(SoftRTError, match=r"samples.*; and stats.json: .*stats.json is missing"):
        load_run(run)


def test_partial_run_with_fewer_samples_than_summary(synth_run, tmp_path):
    run = synth_run(cycles=3_000)
    summary = json.loads((run / "summary.json").read_text())
    summary["cycles"] = 3_500
    (run / "summary.json").write_text(json.dumps(summary))
    view = load_run(run)
    assert any("3,000 cycles, the summary 3,500" in n for n in view.notes)


def test_empty_run(synth_run, tmp_path):
    run = synth_run(cycles=2_000)
    rec = read_samples(run)[:0]
    target = tmp_path / "empty"
    shutil.copytree(run, target)
    import pyarrow as pa

    pq.write_table(pa.table({n: rec[n] for n in rec.dtype.names}), target / "samples.parquet")
    view = load_run(target)
    assert view.period is None and view.series is None and view.latency is None
    assert any("no cycles were recorded" in n for n in view.notes)


def test_after_a_ring_overflow_the_report_period_is_the_summary_period(synth_run, monkeypatch):
    # The ring lost records 20,000-20,499 (and a few at a row-group edge): no period spans a gap.
    monkeypatch.setattr(load_mod, "BATCH_ROWS", 4_096)
    run = synth_run(dropped=[(20_000, 20_500), (4_096, 4_100)], misses=[(2_600, 3), (30_000, 2)])
    summary = json.loads((run / "summary.json").read_text())
    assert summary["records_missing"] == 504
    view = load_run(run)
    assert view.period.max_ns == summary["period_us"]["max"] * 1e3
    assert view.period.max_ns // 250_000 == 4  # the 3-cycle stall, not the 500-record gap
    assert view.period.total == summary["cycles"] - 3  # one record and two gaps start no period
    stats = view.stats.summary().to_dict()
    assert stats["period_us"] == summary["period_us"] and stats["records_missing"] == 504
    rec = read_samples(run)
    assert summary["period_us"]["max"] * 1e3 < np.diff(rec["detect_ns"]).max()  # the gap is not a period
    assert view.series.hi.max() == view.period.max_ns


def test_a_late_run_draws_what_the_same_run_with_every_sample_draws(tmp_path, synth_run):
    """--samples late: histograms from stats.json, the series from the per-second aggregates, the
    motion from the kept late cycles; against the same records stored whole."""
    kw = dict(cycles=40_000, misses=[(2_600, 3), (9_000, 1), (30_000, 12)], seed=5)
    full = load_run(synth_run(run_id="full", **kw))
    late = load_run(synth_run(run_id="late", samples="late", **kw))
    for name in ("period", "latency", "process"):
        a, b = getattr(full, name), getattr(late, name)
        assert a.total == b.total and a.max_ns == b.max_ns and a.min_ns == b.min_ns
    assert late.series.n == full.series.n and late.series.hi.max() == full.series.hi.max()
    assert late.series.marks.sum() == full.series.marks.sum() == 3
    assert late.t0_ns == full.t0_ns
    for field in (
        "board_cycle",
        "commanded_sample",
        "delivered_sample",
        "commanded_position_counts",
        "delivered_position_counts",
    ):
        assert np.array_equal(getattr(late.motion, field), getattr(full.motion, field)), field
    for field in ("commanded_velocity_counts_per_s", "delivered_velocity_counts_per_s"):
        assert np.allclose(getattr(late.motion, field), getattr(full.motion, field), equal_nan=True), field
    assert np.allclose(late.motion_reference.position_counts, full.motion_reference.position_counts)
    assert late.motion_reference.lag_cycles == full.motion_reference.lag_cycles
    assert any("late cycles only" in n for n in late.notes) and not full.notes


def test_report_of_a_long_late_run_builds_without_its_cycles(tmp_path):
    from softrt.report import build_report

    from ..synthetic import write_synthetic_long_late_run

    run = write_synthetic_long_late_run(tmp_path / "runs", hours=0.5, events=40)
    view = load_run(run)
    assert view.stats.counters["cycles"] == 7_200_000 and view.series.n == 7_200_000
    assert view.series.t_s.size == 1_800 and view.motion is not None
    result = build_report([run], tmp_path / "r.html")
    assert result.runs == [run.name] and "late cycles only" in (tmp_path / "r.html").read_text()


def test_a_killed_run_is_reported_from_its_last_checkpoint(synth_run, tmp_path):
    """A supervisor killed mid-run leaves a summary that is a checkpoint and a samples file without
    its footer: the report shows the checkpoint's figures and says why there is no time series."""
    run = synth_run(cycles=3_000)
    file = run / "samples.parquet"
    data = file.read_bytes()
    file.write_bytes(data[: len(data) // 2])  # what a SIGKILL leaves: row groups, no footer
    summary = json.loads((run / "summary.json").read_text())
    complete = dict(summary)
    assert "samples.parquet is damaged" in load_run(run).notes[0]  # a complete run: that file is damaged
    summary.update(status="running", finished_at=None)
    (run / "summary.json").write_text(json.dumps(summary))
    view = load_run(run)
    assert view.series is None and view.period is not None and view.period.total == complete["cycles"] - 1
    assert any("stopped before it closed its files" in n and "3,000 cycles" in n for n in view.notes)
    (run / "stats.json").unlink()  # killed before the first checkpoint: nothing to show, one clear error
    with pytest.raises(SoftRTError, match="last checkpoint"):
        load_run(run)
