"""The run's collector: chunked like the drainer, it gives the summary of the whole record."""

from __future__ import annotations

import json

import pytest

from softrt.analysis import summarize
from softrt.motion import MotionConfig, motion_impact
from softrt.session.collect import Collector
from softrt.store.rundir import STATS, RunDir

from ..synthetic import synthetic_records

PERIOD = 250_000


def test_drained_chunks_give_the_summary_and_motion_of_the_whole_run(tmp_path):
    rec = synthetic_records(30_000, PERIOD, [(2_600, 3), (9_000, 1), (20_000, 12)], seed=3)
    collector = Collector(PERIOD, MotionConfig())
    for a in range(0, rec.size, 200):  # 50 ms drains at 250 µs
        collector.add(rec[a : a + 200])
        collector.add(rec[:0])  # an empty drain changes nothing
    assert collector.progress().cycles == rec.size - rec.size % 4_200  # batches of 21 drains: 4,200 records
    metrics, motion = collector.summary(worker_cycles=rec.size)
    summary = metrics.to_dict()
    whole = summarize(rec, PERIOD).to_dict()
    for key in [k for k in whole if k.endswith("_us")]:  # std: the same up to float rounding
        assert summary[key].pop("std") == pytest.approx(whole[key].pop("std"), rel=1e-9)
    assert summary == whole
    assert motion.to_dict() == motion_impact(rec["cycle"] + rec["missed"], MotionConfig(), period_ns=PERIOD).to_dict()
    snap = collector.progress()
    assert snap.cycles == rec.size and snap.missed_updates == 16 and snap.max_period_us == metrics.period_us.max
    rundir = RunDir(tmp_path, "r")
    collector.write(rundir)
    assert json.loads((rundir.path / STATS).read_text())["counters"]["cycles"] == rec.size


def test_records_lost_at_the_end_leave_the_motion_uncomputed():
    rec = synthetic_records(1_000, PERIOD, [(100, 2)])
    collector = Collector(PERIOD, MotionConfig())
    collector.add(rec)
    metrics, motion = collector.summary(worker_cycles=1_003)
    assert metrics.records_missing == 3 and "dropped by the ring" in motion.not_computed
    plain = Collector(PERIOD)  # a user step function: no motion test
    plain.add(rec)
    assert plain.summary()[1] is None
