"""schema.tail: the tail model's documents read back what they wrote (Hypothesis), and refuse bad values."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from softrt.errors import ConfigError
from softrt.schema import Interval, ReturnLevel, Tail, TailTest

# within int64 ns in ms (schema.doc: gap_ms is a time too): a µs figure past it is refused as no measurement
numbers = st.floats(min_value=-9e12, max_value=9e12, allow_nan=False, allow_infinity=False, width=64)
maybe = st.none() | numbers
intervals = st.builds(Interval, estimate=maybe, low=maybe, high=maybe)
levels = st.builds(ReturnLevel, every_h=numbers, level_us=maybe, low_us=maybe, high_us=maybe)
tests = st.builds(
    TailTest,
    name=st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=40),
    p_value=maybe,
    ok=st.none() | st.booleans(),
)
counts = st.integers(min_value=0, max_value=2**53)
tails = st.builds(
    Tail,
    series=st.sampled_from(["period_us", "latency_us"]),
    deadline_us=numbers,
    hours=numbers,
    cycles=counts,
    late=counts,
    late_rate_bound_per_h=numbers,
    threshold_us=maybe,
    threshold_rule=st.none() | st.just("given"),
    gap_ms=maybe,
    exceedances=st.none() | counts,
    clusters=st.none() | counts,
    extremal_index=maybe,
    xi=st.none() | intervals,
    sigma_us=st.none() | intervals,
    late_rate_per_h=st.none() | intervals,
    return_levels=st.lists(levels, max_size=4),
    target_per_h=numbers,
    run_h_needed=maybe,
    heavy=st.booleans(),
    tests=st.lists(tests, max_size=3),
    refused=st.none() | st.just("only 5 clusters"),
    caveat=st.none(),
)


@settings(max_examples=60, deadline=None)
@given(tails)
def test_a_tail_reads_back_what_it_wrote(tail):
    doc = json.loads(json.dumps(tail.to_dict()))
    assert Tail.from_dict(doc) == tail
    assert Tail.from_dict(doc).to_dict() == doc


def test_a_negative_count_or_a_wrong_type_is_refused_naming_the_field():
    good = Tail(deadline_us=270.0, hours=1.0, cycles=14_400_000, xi=Interval(estimate=0.1, low=0.0, high=0.2))
    doc = good.to_dict()
    with pytest.raises(ConfigError, match="clusters cannot be negative"):
        Tail.from_dict({**doc, "clusters": -1})
    with pytest.raises(ConfigError, match=r"xi\.low must be a number"):
        Tail.from_dict({**doc, "xi": {"estimate": 0.1, "low": "x", "high": 0.2}})
    assert good.fitted and not good.replace(refused="too few clusters").fitted
