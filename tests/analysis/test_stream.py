"""The streaming pass against exact numpy results: gaps, overflows, chunk boundaries anywhere."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from softrt.analysis import RunStats, derive, summarize
from softrt.analysis.hdr import EXACT_BELOW_NS, RELATIVE_ERROR, Hdr, bucket_bounds, bucket_keys, key_of
from softrt.errors import ConfigError
from softrt.ipc.layout import FLAG_DEVICE_ERROR, RECORD_DTYPE
from softrt.schema.runstats import StatsState

PERIOD = 250_000
Q = (50.0, 99.0, 99.9, 99.99)
PKEYS = ("p50", "p99", "p99_9", "p99_99")
LOW_Q = (50.0, 1.0, 0.1, 0.01)  # slack: its tail is the low one
LOW_PKEYS = ("p50", "p1", "p0_1", "p0_01")
THRESHOLD = 20_000


def records(n=20_000, seed=1, drops=(), rtt=False):
    """Jittered cycles with stalls (misses, overruns), device errors, and *drops* (index ranges the
    ring lost) removed."""
    rng = np.random.default_rng(seed)
    rec = np.zeros(n, dtype=RECORD_DTYPE)
    missed = np.zeros(n, np.int64)
    stalls = rng.choice(n, size=max(n // 2000, 1), replace=False)
    missed[stalls] = rng.integers(1, 5, stalls.size)
    cycle = np.zeros(n, np.int64)
    np.cumsum(missed[:-1] + 1, out=cycle[1:])
    edge = 10**12 + cycle * PERIOD
    latency = 50 + rng.gamma(2.0, 80.0, n).astype(np.int64)
    process = 500 + rng.gamma(2.0, 300.0, n).astype(np.int64)
    process[stalls] = missed[stalls] * PERIOD + PERIOD // 2
    rec["seq"], rec["cycle"], rec["missed"], rec["edge_ns"] = np.arange(n), cycle, missed, edge
    rec["detect_ns"] = edge + latency
    rec["done_ns"] = edge + latency + process
    rec["write_ns"] = rec["done_ns"] - 100
    rec["flags"][rng.choice(n, min(n, 7), replace=False)] = FLAG_DEVICE_ERROR
    if rtt:
        rec["rtt_ns"] = np.where(rng.random(n) < 0.9, 20_000 + rng.integers(0, 5_000, n), 0)
    keep = np.ones(n, bool)
    for a, b in drops:
        keep[a:b] = False
    return rec[keep]


def exact(runs, period_ns=PERIOD):
    """The summary's meaning, computed from whole arrays with numpy (the pre-streaming definition)."""
    parts = [derive(r, period_ns) for r in runs]
    cat = {k: np.concatenate([getattr(p, k) for p in parts]) for k in parts[0]._fields}
    out = {}
    for k, v in cat.items():
        out[k] = v
    missed = np.concatenate([r["missed"] for r in runs])
    flags = np.concatenate([r["flags"] for r in runs])
    rtt = np.concatenate([r["rtt_ns"] for r in runs])
    out["counts"] = {
        "cycles": sum(r.size for r in runs),
        "records_expected": sum(int(r["seq"][-1] - r["seq"][0] + 1) for r in runs if r.size),
        "late_cycles": sum(int(_late(r, period_ns).sum()) for r in runs),
        "misses": {
            "missed_updates": int(missed.sum()),
            "cycles_with_miss": int((missed > 0).sum()),
            "longest_miss_run": int(missed.max()),
            "overruns": int((cat["slack_ns"] < 0).sum()),
            "device_errors": int(((flags & FLAG_DEVICE_ERROR) != 0).sum()),
        },
    }
    out["rtt_ns"] = rtt[rtt > 0] if rtt.any() else None
    return out


def _late(r, period_ns):
    """Late cycles by the rule's words, from whole arrays: period (consecutive seq only) over nominal +
    threshold, latency over the threshold, or a miss."""
    late = (r["detect_ns"] - r["edge_ns"] > THRESHOLD) | (r["missed"] > 0)
    late[1:] |= (np.diff(r["seq"]) == 1) & (np.diff(r["detect_ns"]) > period_ns + THRESHOLD)
    return late


def assert_stats(got, values_ns, q=Q, keys=PKEYS):
    v = values_ns.astype(np.float64) / 1e3
    assert got["min"] == v.min() and got["max"] == v.max()
    assert got["mean"] == pytest.approx(v.mean(), rel=1e-12)
    assert got["std"] == pytest.approx(v.std(), rel=1e-9, abs=1e-9)
    for key, true in zip(keys, np.percentile(v, q)):
        assert abs(got[key] - true) <= RELATIVE_ERROR * abs(true) + 1e-9, (key, got[key], true)


def assert_matches(summary, runs):
    ref = exact(runs)
    c = ref["counts"]
    assert summary["cycles"] == c["cycles"] and summary["records_expected"] == c["records_expected"]
    assert summary["records_missing"] == c["records_expected"] - c["cycles"]
    assert summary["misses"] == c["misses"] and summary["late_cycles"] == c["late_cycles"] > 0
    for name in ("period", "process", "latency"):
        assert_stats(summary[f"{name}_us"], ref[f"{name}_ns"])
    assert_stats(summary["slack_us"], ref["slack_ns"], LOW_Q, LOW_PKEYS)
    if ref["rtt_ns"] is None:
        assert "rtt_us" not in summary
    else:
        assert_stats(summary["rtt_us"], ref["rtt_ns"])


def chunks(rec, cuts):
    edges = sorted({0, rec.size, *(c % (rec.size + 1) for c in cuts)})
    return [rec[a:b] for a, b in zip(edges, edges[1:])]


def test_summary_matches_numpy_with_gaps_overruns_and_rtt():
    rec = records(drops=[(100, 103), (5_000, 9_000), (19_990, 19_995)], rtt=True)
    s = summarize(rec, PERIOD).to_dict()
    assert s["records_missing"] == 3 + 4_000 + 5
    assert s["misses"]["overruns"] > 0 and s["slack_us"]["min"] < 0  # slack's tail is its minimum
    assert s["slack_us"]["p0_01"] < 0 < s["slack_us"]["p1"]  # … and its low percentiles: the overruns show
    assert_matches(s, [rec])


def test_no_period_spans_a_gap_even_at_a_chunk_boundary():
    rec = records(n=1_000)
    rec["missed"] = 0
    rec = np.delete(rec, [500, 501])  # the ring dropped two records; the chunk is cut right there
    stats = RunStats(PERIOD)
    stats.add(rec[:500]).add(rec[500:])
    assert stats.hist["period"].n == rec.size - 2  # 999 records, 998 steps, one across the gap
    assert stats.summary().to_dict()["period_us"]["max"] == summarize(rec, PERIOD).to_dict()["period_us"]["max"]


@settings(max_examples=60, deadline=None)
@given(cuts=st.lists(st.integers(0, 6_000), max_size=12), gap=st.integers(1, 5_000))
def test_chunk_boundaries_anywhere(cuts, gap):
    rec = records(n=6_000, seed=gap, drops=[(gap, gap + gap % 7 + 1)], rtt=gap % 2 == 0)
    whole = RunStats(PERIOD).add(rec)
    stats = RunStats(PERIOD)
    for part in chunks(rec, cuts):
        stats.add(part)
    a, b = stats.summary().to_dict(), whole.summary().to_dict()
    assert_matches(a, [rec])
    for series in [k for k in b if k.endswith("_us")]:
        assert a[series].pop("std") == pytest.approx(b[series].pop("std"), rel=1e-9)
    assert a == b  # the same buckets, counts and exact sums however the stream was cut
    assert (stats.worst_seq, stats.worst_period_ns) == (whole.worst_seq, whole.worst_period_ns)


@settings(max_examples=200, deadline=None)
@given(values=st.lists(st.integers(0, 10**12), min_size=1, max_size=300), negative=st.booleans())
def test_percentile_error_within_bound(values, negative):
    v = np.array(values, np.int64) * (-1 if negative else 1)
    h = Hdr()
    h.add(v)
    got = h.percentiles((*Q, 0.0, 100.0, 37.5))
    for g, true in zip(got, np.percentile(v.astype(np.float64), (*Q, 0.0, 100.0, 37.5))):
        assert abs(g - true) <= RELATIVE_ERROR * abs(true) + 1e-6


def test_exact_below_1024_ns():
    v = np.random.default_rng(3).integers(-1023, 1024, 10_001)
    h = Hdr()
    h.add(v)
    assert h.percentiles(Q) == pytest.approx(np.percentile(v, Q), abs=1e-9)


@given(st.integers(-(2**53) + 1, 2**53 - 1))
def test_bucket_holds_its_value_and_is_narrow(x):
    k = bucket_keys(np.array([x, x + 1]))
    lo, hi = bucket_bounds(k[:1])
    assert lo[0] <= x <= hi[0]
    assert k[1] >= k[0]  # keys are monotone in the value
    assert key_of(x) == k[0]
    assert hi[0] - lo[0] + 1 <= max(1, 2 * RELATIVE_ERROR * min(abs(lo[0]), abs(hi[0])))
    if abs(x) < EXACT_BELOW_NS:
        assert lo[0] == hi[0] == x


def test_merge_pools_runs_without_a_period_across_them():
    a, b = records(n=8_000, seed=4), records(n=5_000, seed=5, drops=[(10, 20)])
    b["seq"] += 50_000  # another run: its own numbering, its own clock
    b["detect_ns"] += 7 * 10**12
    merged = RunStats(PERIOD).add(a).merge(RunStats(PERIOD).add(b))
    assert merged.summary().to_dict() == summarize([a, b], PERIOD).to_dict()
    assert merged.hist["period"].n == a.size - 1 + b.size - 2
    assert_matches(merged.summary().to_dict(), [a, b])
    with pytest.raises(ValueError, match="different periods"):
        merged.merge(RunStats(1_000_000))
    with pytest.raises(ValueError, match="different late thresholds"):
        merged.merge(RunStats(PERIOD, 50_000))


def test_a_stats_file_from_before_the_late_count_reads_it_as_unknown():
    doc = json.loads(json.dumps(RunStats(PERIOD).add(records(n=500)).document().to_dict()))
    del doc["counters"]["late_cycles"], doc["late_threshold_ns"]
    doc["carry"].pop("done_ns")
    old = RunStats.of_document(StatsState.from_dict(doc))
    assert old.summary().to_dict()["late_cycles"] is None and old.rule.threshold_ns == THRESHOLD
    assert old.merge(RunStats(PERIOD).add(records(n=500))).summary().to_dict()["late_cycles"] is None


def test_round_trip_through_json_and_continue():
    rec = records(n=10_000, seed=6, drops=[(3_000, 3_010)], rtt=True)
    first = RunStats(PERIOD).add(rec[:4_000])
    doc = json.loads(json.dumps(first.document().to_dict()))
    back = RunStats.of_document(StatsState.from_dict(doc))
    assert back.summary().to_dict() == first.summary().to_dict() and back.document() == first.document()
    # The carried record survives: a checkpoint can be resumed, and a period spans the cut.
    back.add(rec[4_000:])
    assert back.summary().to_dict() == RunStats(PERIOD).add(rec[:4_000]).add(rec[4_000:]).summary().to_dict()
    keys = doc["series_ns"]["period"]["keys"]
    assert len(keys) < 2_000  # sparse: only the buckets that hold samples


def test_a_stats_document_that_does_not_hold_together_is_refused():
    doc = RunStats(PERIOD).add(records(n=500)).document().to_dict()
    bad = json.loads(json.dumps(doc))
    bad["series_ns"]["latency"]["counts"][0] += 1
    with pytest.raises(ValueError, match="add up"):  # what only the histogram knows
        RunStats.of_document(StatsState.from_dict(bad))
    with pytest.raises(ValueError, match="format"):
        RunStats.of_document(StatsState.from_dict({**doc, "format": "other/1"}))
    del bad["counters"]
    with pytest.raises(ConfigError, match=r"stats.json: counters is missing"):  # what the document knows
        StatsState.from_dict(bad, "stats.json")
    negative = json.loads(json.dumps(doc))
    negative["counters"]["overruns"] = -1
    with pytest.raises(ConfigError, match=r"counters.overruns cannot be negative"):
        StatsState.from_dict(negative, "stats.json")


def test_snapshot_names_the_worst_cycle_and_when():
    rec = records(n=4_000, seed=8)
    stats = RunStats(PERIOD)
    for part in chunks(rec, [1, 999, 2_500]):
        stats.add(part)
    snap = stats.snapshot()
    period = derive(rec, PERIOD).period_ns
    end = int(np.argmax(period)) + 1
    assert snap.cycles == rec.size and snap.missed_updates == int(rec["missed"].sum())
    assert snap.max_period_us == period.max() / 1e3 and snap.worst_seq == int(rec["seq"][end])
    assert snap.worst_at_s == (rec["detect_ns"][end] - rec["detect_ns"][0]) / 1e9
    assert abs(snap.p99_period_us - np.percentile(period, 99) / 1e3) <= RELATIVE_ERROR * snap.p99_period_us


def test_empty_and_single_record():
    assert RunStats(PERIOD).snapshot().max_period_us is None
    s = summarize(np.zeros(0, RECORD_DTYPE), PERIOD).to_dict()
    assert s["cycles"] == 0 and s["period_us"]["p99"] is None and s["misses"]["longest_miss_run"] == 0
    one = summarize(records(n=1), PERIOD).to_dict()
    assert one["cycles"] == 1 and one["period_us"]["max"] is None and one["latency_us"]["max"] is not None


def test_many_outliers_and_a_window_across_zero():
    rng = np.random.default_rng(9)
    v = np.concatenate([rng.integers(-3_000, 3_000, 5_000), rng.integers(-(10**9), 10**9, 500)])
    rng.shuffle(v)
    h = Hdr()
    for part in np.array_split(v, 7):
        h.add(part)
    assert h.n == v.size and h.min == v.min() and h.max == v.max() and h.total == int(v.sum())
    assert h.std == pytest.approx(v.std(), rel=1e-12)
    keys, counts = h.buckets()
    assert np.array_equal(keys, np.unique(bucket_keys(v))) and counts.sum() == v.size


def test_runs_pool_by_their_own_late_rule():
    a, b = (RunStats(PERIOD, 50_000).add(records(n=2_000, seed=s)) for s in (1, 2))
    pooled = RunStats.pooled([a, b], PERIOD)
    assert pooled.rule.threshold_ns == 50_000
    assert pooled.counters["late_cycles"] == a.counters["late_cycles"] + b.counters["late_cycles"]
