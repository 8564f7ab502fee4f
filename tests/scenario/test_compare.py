"""Pooling of a scenario's runs: the board's miss count and a run without motion figures."""

from __future__ import annotations

import numpy as np

from softrt.ipc.layout import RECORD_DTYPE
from softrt.scenario import load_scenario
from softrt.scenario.compare import ScenarioRun, _pool, plan
from softrt.scenario.require import parse_requirements
from softrt.session.config import RunConfig
from softrt.session.run import RunResult
from softrt.store.rundir import RunDir


def _records(seqs: np.ndarray, period_ns: int = 250_000) -> np.ndarray:
    rec = np.zeros(seqs.size, dtype=RECORD_DTYPE)
    rec["seq"] = seqs
    rec["cycle"] = seqs
    rec["edge_ns"] = seqs * period_ns
    rec["detect_ns"] = rec["edge_ns"] + 2_000
    rec["write_ns"] = rec["detect_ns"] + 1_000
    rec["done_ns"] = rec["write_ns"] + 1_000
    return rec


def test_pooled_misses_are_the_boards_and_a_run_without_motion_figures_pools(tmp_path):
    (item,) = plan([load_scenario("tuned")], RunConfig(out_dir=tmp_path))
    # The ring dropped records 1000-1999; the board counted 7 missed updates in them, none elsewhere.
    rundir = RunDir(tmp_path, "run-with-overflow")
    rundir.append(_records(np.concatenate([np.arange(0, 1000), np.arange(2000, 3000)])))
    rundir.close()
    summary = {"run_id": rundir.run_id, "mode": "real-time", "status": "complete",
               "misses": {"missed_updates": 7, "missed_updates_in_records": 0, "source": "board"},
               "motion": {"not_computed": "1,000 records were dropped by the ring"}}
    run = ScenarioRun(item.scenario, 1, RunResult(summary, rundir.path))
    figures = _pool(item, [run])
    assert figures["records_missing"] == 1000
    assert figures["misses"]["missed_updates"] == 7 and figures["misses"]["missed_updates_in_records"] == 0
    assert figures["motion"]["max_deviation_counts"] is None
    (req,) = parse_requirements("misses==0")
    assert req.check(figures) == (False, 7)
