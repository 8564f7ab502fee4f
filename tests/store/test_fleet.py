"""store.fleet and store.regressions over a lab's history (every engine): rows per rig, diff, regressions."""

from __future__ import annotations

import pytest

from softrt.store.fleet import LateRate, diff, fleet_rows, jsonable, late_rate, load_runs
from softrt.store.history import History
from softrt.store.regressions import find

from ..fleetdata import store, summary


@pytest.fixture
def lab(history_db, tmp_path):
    """Two rigs: rig-1 got worse with kernel 6.18.9 (four runs on 6.18.4, then two), rig-2 did not;
    rig-3 changed its BIOS after two runs only (noise unknown)."""
    runs = [summary(n, worst_us=w, p9999_us=w - 20, late=2) for n, w in enumerate((300, 320, 310, 305))]
    runs += [summary(n, kernel="6.18.9-rt", worst_us=w, p9999_us=w - 20, late=40) for n, w in ((4, 900), (5, 950))]
    rig2 = {"rig": "bbbb000000000002", "label": "rig-2", "host": "pc2"}
    runs += [summary(n, worst_us=w, hours=0.5, **rig2) for n, w in enumerate((200, 210, 205))]
    runs += [summary(3, kernel="6.18.9-rt", worst_us=208, hours=0.5, **rig2)]
    rig3 = {"rig": "cccc000000000003", "label": "rig-3", "host": "pc3"}
    runs += [summary(n, worst_us=100, hours=0.25, **rig3) for n in range(2)]
    runs += [summary(2, bios="1.03", worst_us=5000, hours=0.25, **rig3)]
    history = History(history_db)
    store(history, runs, tmp_path)
    return history


def test_one_row_per_rig(lab):
    rows = {r.label: jsonable(r) for r in fleet_rows(load_runs(lab))}
    assert sorted(rows) == ["rig-1", "rig-2", "rig-3"]
    one = rows["rig-1"]
    assert (one["runs"], one["kernel"], one["cpu"], one["verdict"]) == (6, "6.18.9-rt", "Test CPU 9000", "pass")
    assert one["trend_worst_period_us"] == [320, 310, 305, 900, 950] and one["trend"] == "↑"
    assert one["late_rate_per_h"] is None and one["worst_period_us"] == 950  # no tail model: the worst cycle


def test_filters(lab):
    assert {r.label for r in load_runs(lab, kernel="6.18.9-rt")} == {"rig-1", "rig-2"}
    assert {r.label for r in load_runs(lab, rig="pc3")} == {"rig-3"}  # a host name names the rig too
    assert {r.label for r in load_runs(lab, rig="bbbb000000000002")} == {"rig-2"}
    early = load_runs(lab, until="2026-03-01T08:30:00")  # a time bound is inclusive
    assert sorted(r.label for r in early) == ["rig-1", "rig-2", "rig-3"]
    assert len(load_runs(lab, since="2026-03-01T13:00:00")) == 1  # rig-1's last run
    assert load_runs(lab, scenario="nope") == []


def test_regressions_name_the_change_and_rank_kernels(lab):
    found = jsonable(find(load_runs(lab)))
    (entry,) = found["regressions"]
    assert (entry["label"], entry["scenario"]) == ("rig-1", "tuned")
    assert entry["change"] == {"kernel": {"before": "6.18.4-rt", "after": "6.18.9-rt"}}
    assert entry["last_good"]["run_id"].endswith("-0003") and entry["first_bad"]["run_id"].endswith("-0004")
    assert "period_max_us" in entry["worse"] and entry["figures"]["period_max_us"]["after"] == 925
    assert entry["figures"]["period_max_us"]["noise"] == {"runs": 4, "median": 307.5, "range": 20.0, "known": True}
    assert found["kernels"][0] == {
        "kernel": "6.18.9-rt",
        "rigs_worse": 1,
        "rigs_tested": 2,
        "rigs": ["aaaa000000000001"],
    }
    assert found["changes_with_unknown_noise"] == 1  # rig-3's BIOS: two runs before it


def test_diff_across_rigs_and_noise(lab):
    runs = load_runs(lab)
    by_id = {r.run_id: r for r in runs}
    a = next(r for r in runs if r.label == "rig-1" and r.prov.kernel == "6.18.4-rt")
    b = next(r for r in runs if r.label == "rig-1" and r.prov.kernel == "6.18.9-rt")
    d = jsonable(diff(a, b, runs))
    assert d["provenance"] == {"kernel": {"a": "6.18.4-rt", "b": "6.18.9-rt"}} and d["config"] == {}
    worst = d["headline"][0]
    assert (worst["a"], worst["b"], worst["change"], worst["judged"]) == (300, 900, 600, "worse")
    assert len(d["noise_runs"]) == 4 and "range" in d["noise_how"]
    other = next(r for r in by_id.values() if r.label == "rig-3")
    d = jsonable(diff(a, other, runs))
    assert not d["same_rig"] and {"rig_id", "rig_label", "hostname"} <= set(d["provenance"])
    first = runs[0]
    assert diff(first, runs[1], runs).headline[0].judged == "noise unknown (1 run)"


def test_late_rate_from_the_tail_block_when_present():
    s = summary(1, tail={"late_rate_per_h": {"estimate": 1.5, "low": 0.5, "high": 4.0}, "late_rate_bound_per_h": 6.0})
    assert late_rate(s) == LateRate(estimate=1.5, low=0.5, high=4.0, bound=6.0)
    only = late_rate(summary(1, tail={"late_rate_per_h": None, "late_rate_bound_per_h": 3.0}))
    assert only == LateRate(bound=3.0)  # no model fitted: the bound only
    assert late_rate(summary(1)) is None
