"""session.summary: the summary's one builder (checkpoints and the final summary) and the checkpoints."""

from __future__ import annotations

import json
import os
import time

import pytest

from softrt.ipc.ring import Ring
from softrt.schema.config import RunConfig
from softrt.schema.device import Board
from softrt.schema.worker import WorkerReport
from softrt.session import changes
from softrt.session.collect import Collector
from softrt.session.config import resolve_motion
from softrt.session.drain import Drainer, Outcome
from softrt.session.summary import RunParts, checkpoint, run_summary
from softrt.store.history import History
from softrt.store.rundir import RunDir, read_summary
from softrt.trace import TraceSession

from ..synthetic import synthetic_records

#: What only the end of a run knows (the trace's attribution, the tail model fitted once) or only a
#: checkpoint says (when, by whom).
FINAL_ONLY = {"why_late", "tail"}
CHECKPOINT_ONLY = {"checkpoint_at", "supervisor"}


@pytest.fixture
def parts(tmp_path):
    config = resolve_motion(RunConfig(out_dir=tmp_path / "runs", trace=False))
    collector = Collector(config.period_ns, config.motion)
    collector.add(synthetic_records(20_000, misses=[(5_000, 3), (12_000, 1)]))
    rundir = RunDir(config.out_dir, "20261130-120000-test-0001")
    ring = Ring.create(1 << 10)
    p = RunParts(
        config,
        {"hostname": "test"},
        "2026-11-30T12:00:00+00:00",
        [],
        None,
        Outcome(),
        rundir,
        ring,
        collector,
        Drainer(ring, rundir, collector),
        changes.ChangeJournal(),
        TraceSession(config),
        60.0,
        released_at=time.monotonic() - 5.0,
    )
    yield p
    p.drainer.release()
    ring.close()
    rundir.close()


def test_a_checkpoint_is_the_final_summary_so_far(parts):
    """One builder: a checkpoint holds the final summary's fields and figures, marked running."""
    model = run_summary(parts, running=True)
    ckpt = model.to_dict()  # summary.json's JSON
    parts.out.worker = WorkerReport.done(20_000, Board(writes=20_000, missed_updates=4), None)
    parts.stopped_at = time.monotonic()
    final = run_summary(parts, running=False).to_dict()
    assert model.running and model.supervisor.pid == os.getpid()
    assert ckpt["status"] == "running" and final["status"] == "complete"
    assert ckpt["finished_at"] is None and final["finished_at"]
    assert set(ckpt) - CHECKPOINT_ONLY == set(final) - FINAL_ONLY
    for key in (
        "cycles",
        "period_us",
        "latency_us",
        "process_us",
        "slack_us",
        "misses",
        "motion",
        "tuning",
        "config",
        "mode",
        "run_id",
        "started_at",
    ):
        assert ckpt[key] == final[key], key
    assert ckpt["cycles"] == 20_000 and ckpt["misses"]["missed_updates"] == 4
    assert final["tail"]["series"] == "period_us" and final["tail"]["cycles"] == 19_999  # periods: cycles - 1
    assert ckpt["elapsed_s"] >= 5.0 and final["elapsed_s"] >= 5.0
    assert ckpt["supervisor"]["identity"].split("/")[1] == str(ckpt["supervisor"]["pid"])


def test_a_checkpoint_is_written_atomically_and_reaches_the_history(parts):
    checkpoint(parts)  # the drain loop's way: built here, written by a thread
    parts.writer.join()
    checkpoint(parts, wait=True)  # the stop's way
    path = parts.rundir.path
    summary = read_summary(path)  # a valid summary.json (store.validate accepts "running")
    assert summary.running and summary.metrics.cycles == 20_000 and summary.checkpoint_at
    assert json.loads((path / "stats.json").read_text())["counters"]["cycles"] == 20_000
    assert (path / "config.json").is_file() and not list(path.glob("*.tmp"))
    assert parts.checkpoints == 2 and parts.checkpoint_error is None and parts.history_error is None
    assert History().get(summary.run_id).status == "running"


def test_reconcile_misses_takes_the_boards_count_when_the_ring_dropped_records():
    from softrt.schema.summary import RunSummary
    from softrt.session.summary import reconcile_misses

    doc = {
        "run_id": "r",
        "cycles": 900,
        "records_expected": 1000,
        "records_missing": 100,
        "misses": {
            "missed_updates": 3,
            "cycles_with_miss": 2,
            "longest_miss_run": 2,
            "overruns": 0,
            "device_errors": 0,
        },
        "ring": {"capacity": 64, "overflows": 2},
        "board": {"writes": 1000, "missed_updates": 7},
    }
    misses = reconcile_misses(RunSummary.from_dict(doc)).metrics.misses
    assert (misses.missed_updates, misses.missed_updates_in_records, misses.source) == (7, 3, "board")
    assert "100 records were dropped by the ring (2 overflows)" in misses.note
    same = RunSummary.from_dict({**doc, "board": {"writes": 1000, "missed_updates": 3}})
    assert reconcile_misses(same) == same


def test_the_summarys_check_holds_what_check_json_says():
    """The summary's check is read from the audit's report itself: ready, verdict, counts and
    fix_first as ``softrt check --json`` writes them (the captured VM: not ready, some failures)."""
    from softrt.audit import run_checks
    from softrt.cpus import CpuSet
    from softrt.session.summary import _check_of

    from ..audit.trees import CAPTURED

    report = run_checks(CpuSet([1]), str(CAPTURED), sample_s=0)
    written = report.document().to_dict()
    got = _check_of(report).to_dict()
    assert got == {k: written[k] for k in ("ready", "verdict", "counts", "fix_first")}
    assert got["fix_first"] and got["ready"] is False
