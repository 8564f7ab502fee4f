import numpy as np

from softrt.analysis.metrics import summarize
from softrt.ipc.layout import RECORD_DTYPE

PERIOD = 250_000


def synthetic(n=1000):
    rec = np.zeros(n, dtype=RECORD_DTYPE)
    rec["seq"] = np.arange(n)
    rec["cycle"] = np.arange(n)
    rec["edge_ns"] = 1_000_000 + np.arange(n) * PERIOD
    rec["detect_ns"] = rec["edge_ns"] + 1_000
    rec["write_ns"] = rec["detect_ns"] + 500
    rec["done_ns"] = rec["detect_ns"] + 2_000
    return rec


def late(rec, i, late_ns):
    """Make record *i* see its permit *late_ns* late, as the board would: the write lands in a
    later window, the board repeats targets, and the following permits are one edge later."""
    rec = rec.copy()
    rec["detect_ns"][i] += late_ns
    rec["write_ns"][i] += late_ns
    rec["done_ns"][i] += late_ns
    missed = (rec["write_ns"][i] - rec["edge_ns"][i]) // PERIOD
    rec["missed"][i] = missed
    for name in ("cycle", "edge_ns", "detect_ns", "write_ns", "done_ns"):
        step = 1 if name == "cycle" else PERIOD
        rec[name][i + 1 :] += missed * step
    return rec


def test_steady_cycles():
    s = summarize(synthetic(), PERIOD).to_dict()
    assert s["cycles"] == 1000 and s["records_missing"] == 0
    assert s["period_us"]["mean"] == 250.0 and s["period_us"]["max"] == 250.0
    assert s["process_us"]["max"] == 2.0 and s["latency_us"]["p50"] == 1.0
    assert s["slack_us"]["min"] == 250.0 - 1.0 - 2.0
    assert s["misses"]["missed_updates"] == 0 and s["misses"]["overruns"] == 0


def test_one_late_cycle_shows_in_period_latency_slack():
    rec = late(synthetic(), 500, 300_000)  # seen at edge + 301 µs: window 501 had no write
    s = summarize(rec, PERIOD).to_dict()
    assert s["period_us"]["max"] == 550.0  # 499 -> 500: 250 + 300
    assert s["period_us"]["min"] == 200.0  # 500 -> next permit (edge 502): 500 - 300
    assert s["latency_us"]["max"] == 301.0
    assert s["slack_us"]["min"] == 250.0 - 303.0
    assert s["misses"] == {
        "missed_updates": 1,
        "cycles_with_miss": 1,
        "longest_miss_run": 1,
        "overruns": 1,
        "device_errors": 0,
    }


def test_several_missed_edges_in_one_stall():
    s = summarize(late(synthetic(), 100, 1_000_000), PERIOD).to_dict()  # 1 ms stall: windows 100-103 missed
    assert s["misses"]["missed_updates"] == 4 and s["misses"]["longest_miss_run"] == 4


def test_dropped_records_are_accounted_and_no_period_spans_the_gap():
    rec = np.delete(synthetic(), [10, 11, 12])
    s = summarize(rec, PERIOD).to_dict()
    assert s["records_expected"] == 1000 and s["records_missing"] == 3
    assert s["period_us"]["max"] == 250.0  # not the 1,000 µs from record 9 to record 13


def test_empty_records():
    s = summarize(np.zeros(0, dtype=RECORD_DTYPE), PERIOD).to_dict()
    assert s["cycles"] == 0 and s["period_us"]["max"] is None
