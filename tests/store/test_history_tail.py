"""The history keeps each run's late-rate bound from its tail block (issue 33): listed, in --json,
and ranked by ``softrt history --by-rate``; runs without a block list none."""

from __future__ import annotations

import json

from softrt.schema.tail import Interval, Tail
from softrt.store.history import History
from softrt.store.rundir import update_summary

from ..synthetic import write_synthetic_run


def test_runs_are_ranked_by_their_late_rate_bound(tmp_path, run_cli, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    db = tmp_path / "h.sqlite"
    runs = [
        write_synthetic_run(tmp_path / "runs", cycles=2_000, motion=False, seed=i, run_id=f"20261201-00000{i}-h-000{i}")
        for i in range(3)
    ]
    update_summary(runs[0], tail=Tail(hours=1.0, late_rate_bound_per_h=30.0))  # refused or no fit: the bound
    update_summary(
        runs[1],
        tail=Tail(
            hours=1.0,
            late_rate_bound_per_h=30.0,
            xi=Interval(estimate=0.1, low=0, high=0.2),
            late_rate_per_h=Interval(estimate=0.5, low=0.1, high=2.0),
        ),
    )
    History(db).add_runs(runs)
    got = {r.run_id[:17]: (r.late_rate_high_per_h, r.late_rate_per_h) for r in History(db).list_runs()}
    assert got == {
        "20261201-000000-h": (30.0, None),
        "20261201-000001-h": (2.0, 0.5),
        "20261201-000002-h": (None, None),
    }
    code, out, err = run_cli("history", "--db", str(db), "--by-rate", "--json")
    assert code == 0, err
    assert [r["late_rate_high_per_h"] for r in json.loads(out)] == [2.0, 30.0, None]
    code, out, _ = run_cli("history", "--db", str(db))
    assert code == 0 and "late/h" in out and "30" in out
    code, out, _ = run_cli("history", "--db", str(db), "--by-rate")
    assert code == 0 and out.startswith("Runs, lowest late-rate bound first")
