"""Pooled rounds of ``softrt compare``: the runs' stored histograms merged, never their samples re-read."""

from __future__ import annotations

import json

from softrt.analysis import summarize
from softrt.report.synthetic import synthetic_records, write_synthetic_run
from softrt.scenario.compare import Planned, ScenarioRun, _pool
from softrt.scenario.model import Scenario
from softrt.session.config import RunConfig
from softrt.session.run import RunResult
from softrt.store.rundir import STATS, read_samples


def _round(path, scenario, rnd):
    summary = json.loads((path / "summary.json").read_text())
    return ScenarioRun(scenario, rnd, RunResult(summary, path))


def test_pool_merges_stored_histograms_and_streams_older_runs(tmp_path):
    scenario = Scenario(name="tuned")
    a = write_synthetic_run(tmp_path, cycles=30_000, misses=[(100, 2)], seed=1, run_id="a")
    b = write_synthetic_run(tmp_path, cycles=20_000, misses=[(5_000, 7)], seed=2, run_id="b",
                            dropped=[(9_000, 9_100)])
    (b / STATS).unlink()  # a run from before stats.json: its samples are streamed instead
    (a / "samples.parquet").unlink()  # a stored run's samples are not needed to pool it
    planned = Planned(scenario, RunConfig(scenario="tuned"), ())
    figures = _pool(planned, [_round(a, scenario, 1), _round(b, scenario, 2)])
    rec_a = synthetic_records(30_000, misses=[(100, 2)], seed=1)
    expected = summarize([rec_a, read_samples(b)], 250_000)
    assert {k: figures[k] for k in expected} == expected
    assert figures["records_missing"] == 100 and figures["misses"]["longest_miss_run"] == 7
    assert figures["rounds"] == 2 and figures["run_ids"] == ["a", "b"]
