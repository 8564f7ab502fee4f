"""What a --samples late run keeps: the late-cycle selector across chunk boundaries, the
per-second aggregates against numpy, and a late RunDir end to end (synthetic records; a real run:
tests/cli/test_live.py, where every late count is held to the same cycles)."""

from __future__ import annotations

import numpy as np
import pyarrow.parquet as pq
from hypothesis import given, settings
from hypothesis import strategies as st

from softrt.analysis.cycles import LateRule, cycle_view
from softrt.ipc.layout import RECORD_DTYPE
from softrt.store.late import AGGREGATES, LateSelector, SecondAggregator, read_aggregates, resolve_mode
from softrt.store.rundir import RunDir, read_samples, space_needed

from ..synthetic import synthetic_records

PERIOD_NS, THRESHOLD_NS = 250_000, 20_000


def _records(n: int, misses, late_latency=(), dropped=()) -> np.ndarray:
    rec = synthetic_records(n, PERIOD_NS, misses, seed=3)
    for i in late_latency:  # a permit seen late, the write on time: late by latency alone
        if 0 <= i < n:
            rec["detect_ns"][i] += 30_000
    keep = np.ones(n, dtype=bool)
    for a, b in dropped:
        keep[a:b] = False
    return rec[keep]


def _expected(rec: np.ndarray, context: int) -> np.ndarray:
    """Offline: every record within *context* positions of a late record of the whole stream."""
    late = np.flatnonzero(cycle_view(rec, None, LateRule(PERIOD_NS, THRESHOLD_NS)).late)
    keep = np.zeros(rec.size, dtype=bool)
    for j in late:
        keep[max(j - context, 0) : j + context + 1] = True
    return rec[keep]


@settings(max_examples=150, deadline=None)
@given(
    n=st.integers(1, 1_500),
    misses=st.lists(st.tuples(st.integers(0, 1_499), st.integers(1, 6)), max_size=8),
    late_latency=st.lists(st.integers(0, 1_499), max_size=5),
    dropped=st.lists(st.tuples(st.integers(0, 1_499), st.integers(1, 40)), max_size=3),
    cuts=st.lists(st.integers(0, 1_500), max_size=15),
    context=st.integers(0, 60),
)
def test_selector_keeps_every_late_record_with_its_context_however_the_stream_is_cut(
    n, misses, late_latency, dropped, cuts, context
):
    rec = _records(n, misses, late_latency, [(a, a + k) for a, k in dropped])
    sel = LateSelector(PERIOD_NS, THRESHOLD_NS, context=context)
    bounds = sorted({0, rec.size, *(c for c in cuts if c <= rec.size)})
    kept = [sel.add(rec[a:b]) for a, b in zip(bounds, bounds[1:])]
    got = np.concatenate(kept) if kept else rec[:0]
    want = _expected(rec, context)
    assert np.array_equal(got["seq"], want["seq"])  # in order, each once, nothing else
    assert sel.late == int(cycle_view(rec, None, LateRule(PERIOD_NS, THRESHOLD_NS)).late.sum())


def test_selector_merges_overlapping_windows_and_spans_a_chunk_boundary():
    rec = _records(1_000, [(500, 2), (530, 1)])
    sel = LateSelector(PERIOD_NS, THRESHOLD_NS, context=50)
    got = np.concatenate([sel.add(rec[:510]), sel.add(rec[510:515]), sel.add(rec[515:])])
    # Late: the two stalled writes (500, 530) and the long periods after them (501, 531).
    assert got["seq"].tolist() == list(range(450, 582))


def _numpy_aggregates(rec: np.ndarray) -> dict[int, dict]:
    t0 = int(rec["detect_ns"][0])
    flags = cycle_view(rec, None, LateRule(PERIOD_NS, THRESHOLD_NS))
    sec = (rec["detect_ns"] - t0) // 1_000_000_000
    latency = rec["detect_ns"] - rec["edge_ns"]
    out = {}
    for s in np.unique(sec):
        m = sec == s
        p = flags.period_ns[m & flags.consecutive]
        out[int(s)] = {
            "records": int(m.sum()),
            "periods": p.size,
            "period_min_ns": int(p.min()) if p.size else None,
            "period_max_ns": int(p.max()) if p.size else None,
            "period_mean_ns": float(p.mean()) if p.size else None,
            "latency_min_ns": int(latency[m].min()),
            "latency_max_ns": int(latency[m].max()),
            "latency_mean_ns": float(latency[m].mean()),
            "missed": int(rec["missed"][m].sum()),
            "missed_cycles": int((rec["missed"][m] > 0).sum()),
            "late": int(flags.late[m].sum()),
        }
    return out


@settings(max_examples=25, deadline=None)
@given(
    cuts=st.lists(st.integers(0, 14_000), max_size=10),
    dropped=st.lists(st.tuples(st.integers(0, 13_000), st.integers(1, 6_000)), max_size=2),
)
def test_per_second_aggregates_equal_numpy_however_the_stream_is_cut(tmp_path_factory, cuts, dropped):
    rec = _records(14_000, [(100, 2), (4_000, 1), (7_999, 9)], [3_000, 12_500], [(a, a + k) for a, k in dropped])
    path = tmp_path_factory.mktemp("agg") / AGGREGATES
    agg = SecondAggregator(path, PERIOD_NS, THRESHOLD_NS)
    bounds = sorted({0, rec.size, *(c for c in cuts if c <= rec.size)})
    for a, b in zip(bounds, bounds[1:]):
        agg.add(rec[a:b])
    agg.close()
    cols, meta = read_aggregates(path.parent)
    want = _numpy_aggregates(rec)
    assert cols["second"].tolist() == sorted(want)
    for k, s in enumerate(cols["second"]):
        for name, value in want[int(s)].items():
            got = cols[name][k]
            if value is None:
                assert np.isnan(got), (s, name)
            elif isinstance(value, float):
                assert np.isclose(got, value, rtol=1e-12), (s, name)
            else:
                assert got == value, (s, name)
    assert meta["t0_ns"] == int(rec["detect_ns"][0]) and meta["first_seq"] == int(rec["seq"][0])


def test_a_late_run_directory_holds_the_late_cycles_and_the_aggregates(tmp_path):
    rec = _records(40_000, [(2_600, 3), (30_000, 12)], [20_000])
    rd = RunDir(tmp_path, "r", len(rec), samples="late", period_ns=PERIOD_NS, late_threshold_ns=THRESHOLD_NS)
    for a in range(0, rec.size, 4_096):
        rd.append(rec[a : a + 4_096])
    rd.close()
    kept = read_samples(rd.path)
    assert np.array_equal(kept["seq"], _expected(rec, 50)["seq"]) and rd.rows == kept.size
    cols, _ = read_aggregates(rd.path)
    # 40,000 writes and 15 missed board cycles: 10.004 s from the first permit.
    assert int(cols["records"].sum()) == rec.size and cols["second"].tolist() == list(range(11))
    late = int(cycle_view(rec, None, LateRule(PERIOD_NS, THRESHOLD_NS)).late.sum())
    assert late == int(cols["late"].sum()) >= 5  # the stalled writes, the periods after them, a late permit
    assert rd.kept().to_dict() == {
        "mode": "late",
        "rows": kept.size,
        "late_cycles": late,
        "context_records": 50,
        "aggregate_seconds": 11,
    }
    assert pq.ParquetFile(rd.path / "samples.parquet").schema_arrow.names == list(RECORD_DTYPE.names)


def test_an_empty_late_run_still_has_readable_files(tmp_path):
    rd = RunDir(tmp_path, "r", samples="late", period_ns=PERIOD_NS, late_threshold_ns=THRESHOLD_NS)
    rd.close()
    assert read_samples(rd.path).size == 0 and read_aggregates(rd.path)[0]["second"].size == 0


def test_late_is_the_default_beyond_one_hour_and_much_smaller():
    hour = 3600 * 10**9
    assert resolve_mode(None, hour) == "all" and resolve_mode(None, hour + 1) == "late"
    assert resolve_mode("all", 72 * hour) == "all"
    rows = 24 * 3600 * 4_000
    assert space_needed(rows, "late") * 20 < space_needed(rows, "all")
