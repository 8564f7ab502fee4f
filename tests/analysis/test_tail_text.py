"""The tail model in words (analysis.tail_text), the late-rate gate (analysis.require) and the
verdict's clause (analysis.verdict): the bound always, a fitted figure only with its interval."""

from __future__ import annotations

import pytest

from softrt.analysis.require import parse_rate, parse_requirements, rate_bound
from softrt.analysis.tail_text import rate_clause, span, tail_lines
from softrt.analysis.verdict import judge, verdict_lines
from softrt.errors import ConfigError
from softrt.schema.summary import Metrics, Stats
from softrt.schema.tail import HOURS_PER_YEAR, Interval, ReturnLevel, Tail

BASE = Tail(
    series="period_us",
    deadline_us=270.0,
    hours=6.0,
    cycles=86_400_000,
    late=0,
    late_rate_bound_per_h=0.5,
    threshold_us=42.0,
    threshold_rule="rule",
    gap_ms=10.0,
    exceedances=5000,
    clusters=2150,
    extremal_index=0.4,
)
FITTED = BASE.replace(
    xi=Interval(estimate=-0.04, low=-0.12, high=0.05),
    sigma_us=Interval(estimate=6.1, low=5.8, high=6.4),
    late_rate_per_h=Interval(estimate=1 / 40, low=1 / 160, high=1 / 12),
    return_levels=[
        ReturnLevel(every_h=h, level_us=100 + h, low_us=90 + h, high_us=120 + h)
        for h in (1.0, 24.0, 168.0, HOURS_PER_YEAR)
    ],
    run_h_needed=9.0,
)


def test_a_fitted_tail_says_how_often_with_its_interval_and_how_long_to_run():
    clause = rate_clause(FITTED)
    assert clause.startswith("at this tail, one late cycle every ~40 h (95 %: 12 h–6.7 days)")
    assert "to claim ≤ 1 per year, run ≥ 9 h more" in clause
    assert clause.endswith("0 cycles > 270 µs in 6 h → ≤ 0.5 late per hour (95 %, no model)")
    text = "\n".join(tail_lines(FITTED))
    assert "ξ = -0.04 [-0.12, +0.05]" in text and "worst cycle once a year: 8,866 µs [8,856 µs, 8,886 µs]" in text


def test_a_heavy_tail_says_fix_the_culprit_and_a_refusal_gives_only_its_reason_and_the_bound():
    heavy = FITTED.replace(heavy=True, xi=Interval(estimate=0.8, low=0.56, high=0.94), run_h_needed=None)
    assert rate_clause(heavy, "smi").startswith(
        "heavy tail (ξ ≥ +0.56): a longer run will not qualify this machine; fix the cause first: smi;"
    )
    refused = BASE.replace(refused="only 5 clusters above 42.0 µs (a fit needs 30): run about 30 h longer")
    clause = rate_clause(refused)
    assert clause.startswith("no tail model (only 5 clusters") and "every" not in clause and "≤ 0.5 late" in clause
    text = "\n".join(tail_lines(refused))
    assert "REFUSED" in text and "ξ" not in text and "worst cycle" not in text


def test_spans_and_rates_read_as_people_say_them():
    assert [span(h) for h in (0.5, 9.2, 75.0, 20_000.0)] == ["30 min", "9.2 h", "3.1 days", "2.3 years"]
    assert parse_rate("1/year") == pytest.approx(1 / HOURS_PER_YEAR) and parse_rate("2 / day") == pytest.approx(1 / 12)
    for bad in ("1/fortnight", "0/h", "-1/h", "year"):
        with pytest.raises(ConfigError):
            parse_rate(bad)


def test_the_late_rate_gate_holds_the_upper_bound_not_the_estimate():
    (req,) = parse_requirements("late-rate <= 1/day")
    assert req.value == pytest.approx(1 / 24)
    ok, measured = req.check(Metrics(), FITTED)  # estimate 1/40 h passes, the upper 1/12 h does not
    assert not ok and measured == pytest.approx(1 / 12) and rate_bound(FITTED) == measured
    ok, measured = req.check(Metrics(), BASE.replace(refused="x"))  # no model: the no-model bound
    assert not ok and measured == 0.5
    assert req.check(Metrics(), None) == (False, None)  # no tail block: not shown, so not met
    assert parse_requirements("late_rate<1/h")[0].check(Metrics(), FITTED)[0]
    for bad in ("late-rate>=1/year", "late-rate<=3", "late-rate<=0/year"):
        with pytest.raises(ConfigError):
            parse_requirements(bad)


def test_the_verdict_carries_the_clause_and_the_gate():
    m = Metrics(cycles=86_400_000, late_cycles=0, period_us=Stats(max=260.0))
    v = judge(m, period_ns=250_000, threshold_ns=20_000, require="period.max<=270us,late-rate<=1/year", tail=FITTED)
    assert v.meets is False and v.checks[1].measured == pytest.approx(1 / 12)
    lines = verdict_lines(v, tail=FITTED)
    assert "late-rate<=1/year not met (≤ 0.083 per hour, 95 % upper bound)" in lines[0]
    assert lines[-1].startswith("  at this tail, one late cycle every ~40 h")
    assert not any("at this tail" in line for line in verdict_lines(v))  # no tail block: no clause
