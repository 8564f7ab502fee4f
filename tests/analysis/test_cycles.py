"""softrt's one late rule: a stream's views agree with the whole record however it is cut, and every
consumer given the drainer's views counts what it would count alone."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from softrt.analysis import RunStats
from softrt.analysis.cycles import CycleStream, LateRule, concat, concat_records, cycle_view
from softrt.store.late import LateSelector

from ..synthetic import synthetic_records

RULE = LateRule(250_000, 20_000)


def _records(drop_at: int) -> np.ndarray:
    rec = synthetic_records(3_000, RULE.period_ns, [(400, 2), (1_700, 9)], seed=4)
    rec["edge_ns"][[50, 2_222]] -= 30_000  # two permits seen late: late by latency alone
    return np.delete(rec, np.arange(drop_at, drop_at + 5))  # records the ring dropped


def _by_words(rec: np.ndarray) -> np.ndarray:
    """The rule as the docs say it, on the whole array."""
    late = (rec["detect_ns"] - rec["edge_ns"] > RULE.threshold_ns) | (rec["missed"] > 0)
    late[1:] |= (np.diff(rec["seq"]) == 1) & (np.diff(rec["detect_ns"]) > RULE.bound_ns)
    return late


@settings(max_examples=40, deadline=None)
@given(cuts=st.lists(st.integers(1, 2_994), max_size=8), drop_at=st.integers(1, 2_990))
def test_views_of_any_chunking_are_the_whole_streams(cuts, drop_at):
    rec = _records(drop_at)
    edges = sorted({0, rec.size, *cuts})
    stream = CycleStream(RULE)
    views = [stream.view(rec[a:b]) for a, b in zip(edges, edges[1:])]
    whole = cycle_view(rec, None, RULE)
    joined = concat(views)
    assert np.array_equal(joined.late, whole.late) and np.array_equal(joined.late, _by_words(rec))
    assert np.array_equal(joined.periods(), whole.periods()) and np.array_equal(joined.records, rec)
    assert np.array_equal(joined.period_ends(), np.flatnonzero(np.diff(rec["seq"]) == 1) + 1)
    assert [late.seq for v in views for late in v.late_cycles()] == rec["seq"][whole.late].tolist()
    assert stream.prev == joined.last and stream.prev.seq == int(rec["seq"][-1])


def test_consumers_given_the_drainers_views_count_what_they_count_alone():
    rec = _records(1_000)
    drainer = CycleStream(RULE)
    stats, selector = RunStats(RULE.period_ns), LateSelector(RULE.period_ns, RULE.threshold_ns)
    kept = []
    for a in range(0, rec.size, 200):  # 50 ms drains
        view = drainer.view(rec[a : a + 200])
        stats.add(view)
        kept.append(selector.add(view))
    got, alone = stats.summary().to_dict(), RunStats(RULE.period_ns).add(rec).summary().to_dict()
    for series in [k for k in got if k.endswith("_us")]:  # std: the same up to float rounding (chunks merged)
        assert got[series].pop("std") == pytest.approx(alone[series].pop("std"), rel=1e-9)
    assert got == alone and got["late_cycles"] == int(_by_words(rec).sum())
    assert selector.late == stats.counters["late_cycles"]
    assert np.array_equal(np.concatenate(kept), LateSelector(RULE.period_ns, RULE.threshold_ns).add(rec))


def test_records_are_joined_as_words_or_field_by_field():
    rec = _records(10)
    assert np.array_equal(concat_records([rec[:7], rec[7:]]), rec)
    strided = [rec[:100:2], rec[100::3]]  # no int64 view of these: numpy's own join
    assert np.array_equal(concat_records(strided), np.concatenate(strided))
