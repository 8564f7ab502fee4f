"""Pooled rounds of ``softrt compare``: the runs' stored histograms merged (never their samples re-read),
the board's miss count, and a run without motion figures."""

from __future__ import annotations

import numpy as np

from softrt.analysis import summarize
from softrt.analysis.require import parse_requirements
from softrt.ipc.layout import RECORD_DTYPE
from softrt.scenario import load_scenario
from softrt.scenario.compare import Planned, ScenarioRun, _pool, plan
from softrt.scenario.model import Scenario
from softrt.schema.config import RunConfig
from softrt.schema.summary import Metrics, RunSummary
from softrt.session.run import RunResult
from softrt.store.rundir import STATS, RunDir, read_samples, read_summary

from ..synthetic import synthetic_records, write_synthetic_run


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
    summary = RunSummary.from_dict(
        {
            "run_id": rundir.run_id,
            "mode": "real-time",
            "status": "complete",
            "misses": {"missed_updates": 7, "missed_updates_in_records": 0, "source": "board"},
            "motion": {"not_computed": "1,000 records were dropped by the ring"},
        }
    )
    run = ScenarioRun(item.scenario, 1, RunResult(summary, rundir.path))
    figures = _pool(item, [run])
    assert figures.metrics.records_missing == 1000
    assert figures.metrics.misses.missed_updates == 7 and figures.metrics.misses.missed_updates_in_records == 0
    assert figures.motion.max_deviation_counts is None
    (req,) = parse_requirements("misses==0")
    assert req.check(figures.metrics) == (False, 7)
    pooled = figures.to_dict()  # compare --json: the metrics at the top, as in a summary
    assert pooled["misses"]["missed_updates"] == 7 and pooled["motion"] == {
        "max_deviation_counts": None,
        "max_velocity_step_counts_per_s": None,
    }


def _round(path, scenario, rnd):
    return ScenarioRun(scenario, rnd, RunResult(read_summary(path), path))


def test_pool_merges_stored_histograms_and_streams_older_runs(tmp_path):
    scenario = Scenario(name="tuned")
    a = write_synthetic_run(tmp_path, cycles=30_000, misses=[(100, 2)], seed=1, run_id="a")
    b = write_synthetic_run(tmp_path, cycles=20_000, misses=[(5_000, 7)], seed=2, run_id="b", dropped=[(9_000, 9_100)])
    (b / STATS).unlink()  # a run from before stats.json: its samples are streamed instead
    (a / "samples.parquet").unlink()  # a stored run's samples are not needed to pool it
    planned = Planned(scenario, RunConfig(scenario="tuned"), ())
    figures = _pool(planned, [_round(a, scenario, 1), _round(b, scenario, 2)])
    rec_a = synthetic_records(30_000, misses=[(100, 2)], seed=1)
    expected = summarize([rec_a, read_samples(b)], 250_000).to_dict()
    assert {k: figures.to_dict()[k] for k in expected} == expected
    assert figures.metrics.records_missing == 100 and figures.metrics.misses.longest_miss_run == 7
    assert figures.rounds == 2 and figures.run_ids == ["a", "b"]


def _pooled(name, worst_us, missed, loads=(), period_ns=250_000):
    """A scenario's pooled figures with *worst_us* and *missed*, judged by the seed's requirement."""
    from softrt.analysis.verdict import judge
    from softrt.scenario.compare import Pooled
    from softrt.schema.summary import LoadRun

    metrics = Metrics.from_dict(
        {
            "cycles": 8_000,
            "records_expected": 8_000,
            "records_missing": 0,
            "period_us": {"max": worst_us, "mean": 250.0, "min": 200.0},
            "misses": {"missed_updates": missed, "longest_miss_run": min(missed, 5)},
        }
    )
    return Pooled(
        metrics=metrics,
        scenario=name,
        tuned=name != "untuned",
        loads=[LoadRun(name=n) for n in loads],
        verdict=judge(metrics, period_ns=period_ns, threshold_ns=20_000),
    )


def test_compare_judges_the_requirement_before_the_change_against_the_baseline():
    from softrt.scenario.compare import overall, verdict

    # An unloaded run that was already bad makes a loaded one "within 1.5x": it still fails the requirement.
    pooled = {
        "untuned": _pooled("untuned", 14_608.6, 900),
        "tuned": _pooled("tuned", 30_000.0, 300),
        "tuned+load": _pooled("tuned+load", 36_083.0, 444, loads=["disk"]),
    }
    lines = verdict(pooled)
    assert lines[0] == "Tuning did not lower the worst period (14,608.6 µs untuned, 30,000.0 µs tuned)."
    assert lines[1] == (
        "Under load (tuned+load) it failed the requirement (misses==0,period.max<=270us): worst "
        "period 36,083.0 µs vs 30,000.0 µs unloaded, 444 vs 300 missed updates."
    )
    assert not any("held" in line for line in lines)
    assert overall(pooled) == "Overall: the machine fails the 250 µs cycle in untuned, tuned, tuned+load"
    good = {"tuned": _pooled("tuned", 262.0, 0), "tuned+load": _pooled("tuned+load", 268.0, 0, loads=["disk"])}
    assert verdict(good) == [
        "Under load (tuned+load) it held: worst period 268.0 µs vs 262.0 µs unloaded, 0 vs 0 missed updates."
    ]
    assert (
        overall({**good, "untuned": pooled["untuned"]})
        == "Overall: the machine meets the 250 µs cycle in tuned, tuned+load; fails it in untuned"
    )


def test_compare_prints_the_verdicts_first_and_notes_dropped_records():
    from rich.console import Console

    from softrt.cli.compare import compare_table, dropped_text, verdicts_text

    pooled = {"tuned": _pooled("tuned", 262.0, 0), "tuned+load": _pooled("tuned+load", 36_083.0, 444, ["disk"])}
    loaded = pooled["tuned+load"]
    pooled["tuned+load"] = loaded.replace(metrics=loaded.metrics.replace(cycles=2_560, records_missing=5_440))
    console = Console(record=True, width=200)
    for part in (verdicts_text(pooled), compare_table(pooled), dropped_text(pooled)):
        console.print(part)
    lines = console.export_text().splitlines()
    assert lines[0].startswith("tuned: MEETS the 250 µs cycle") and lines[2].startswith("tuned+load: FAILS the 250 µs")
    assert "Overall: the machine meets the 250 µs cycle in tuned; fails it in tuned+load" in lines
    assert any(line.split()[:1] == ["cycles"] and line.rstrip().endswith("2,560 of 8,000") for line in lines)
    assert (
        "tuned+load: 2,560 of 8,000 cycles shown: 5,440 records were dropped by the ring (its misses are the "
        "board's count)"
    ) in lines


def test_what_is_left_learns_the_cost_of_runs_with_and_without_loads_apart():
    """A compare's progress lines: a loaded run that overruns its estimate no longer eats the
    estimate of the runs after it ("about 0 s left" was printed with two loaded runs to go)."""
    from softrt.scenario.compare import _Remaining

    now = [0.0]
    left = _Remaining([(0.5, False), (0.5, False), (0.5, True), (0.5, True)], settle_s=1.0, clock=lambda: now[0])
    assert left.sentence() == "0 of 4 done, about 12 s left"  # 2 × (0.5 + 1) + 2 × (0.5 + 1 + 3)
    now[0] = 0.9
    left.finished()  # 0.4 s beyond its measurement
    assert left.sentence() == "1 of 4 done, about 9 s left"  # 0.9 + 2 × 4.5 (whole seconds)
    now[0] = 1.8
    left.finished()
    now[0] = 20.0  # the first loaded run takes far longer than guessed, and is still running
    assert left.sentence() == "2 of 4 done, about 4 s left"  # the next loaded run's estimate still counts
    left.finished()
    assert left.sentence() == "3 of 4 done, about 18 s left"  # now learned: 17.7 s + 0.5 s a loaded run
