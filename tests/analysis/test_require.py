import pytest

from softrt.analysis.require import parse_requirements
from softrt.errors import ConfigError
from softrt.schema.summary import Metrics


def figures(period_max=280.0, missed=0, p999=260.0, slack_p01=-3.0) -> dict:
    stats = {
        "mean": 250.0,
        "min": 240.0,
        "max": period_max,
        "std": 1.0,
        "p50": 250.0,
        "p99": 255.0,
        "p99_9": p999,
        "p99_99": 270.0,
    }
    slack = {
        "mean": 240.0,
        "min": -20.0,
        "max": 249.0,
        "std": 1.0,
        "p50": 245.0,
        "p1": 200.0,
        "p0_1": 100.0,
        "p0_01": slack_p01,
    }
    return {
        "late_cycles": missed + 3,
        "period_us": stats,
        "latency_us": stats,
        "process_us": stats,
        "slack_us": slack,
        "misses": {"missed_updates": missed, "longest_miss_run": missed, "overruns": 0, "cycles_with_miss": missed},
    }


def summary(**kw) -> Metrics:
    return Metrics.from_dict(figures(**kw))


def test_pass_and_fail_on_synthetic_summaries():
    reqs = parse_requirements("period.max<=300us,misses==0")
    assert [r.check(summary()) for r in reqs] == [(True, 280.0), (True, 0)]
    assert reqs[0].check(summary(period_max=300.5)) == (False, 300.5)
    assert reqs[1].check(summary(missed=2)) == (False, 2)


def test_units_and_statistics():
    (req,) = parse_requirements("period.p99.9 < 0.27ms")
    assert req.value == 270.0 and req.check(summary(p999=269.0))[0] and not req.check(summary(p999=270.0))[0]
    (req,) = parse_requirements("longest_miss_run<=2")
    assert req.check(summary(missed=2))[0] and not req.check(summary(missed=3))[0]
    (req,) = parse_requirements("late_cycles<=3")
    assert req.check(summary()) == (True, 3) and not req.check(summary(missed=1))[0]


def test_slack_is_judged_by_its_low_tail():
    (req,) = parse_requirements("slack.p0.01>=5us")
    assert req.check(summary(slack_p01=5.0)) == (True, 5.0) and req.check(summary()) == (False, -3.0)


def test_missing_value_fails():
    (req,) = parse_requirements("period.max<=300us")
    s = figures()
    s["period_us"] = {**s["period_us"], "max": None}
    assert req.check(Metrics.from_dict(s)) == (False, None)
    assert parse_requirements("misses==0")[0].check(Metrics()) == (False, None)  # an import: no misses block


@pytest.mark.parametrize(
    "text,needle",
    [
        ("period.max=300us", "not 'metric<op>value'"),
        ("jitter.max<=3us", "unknown metric"),
        ("period.p42<=3us", "unknown statistic"),
        ("slack.p99>=3us", "unknown statistic"),  # slack's tail is its low one
        ("period.p1<=3us", "unknown statistic"),
        ("period.max<=soon", "not a time"),
        ("misses<0", "can never be met"),
        ("misses<=many", "not a number"),
        ("", "empty"),
    ],
)
def test_bad_requirements(text, needle):
    with pytest.raises(ConfigError, match=needle):
        parse_requirements(text)
