"""The verdict: the requirement judged on a run's figures, the main culprit with its fix, and its words."""

from __future__ import annotations

import pytest

from softrt.analysis import summarize
from softrt.analysis.verdict import default_requirement, judge, verdict_lines
from softrt.errors import ConfigError
from softrt.schema.summary import Metrics, Verdict
from softrt.schema.why_late import WhyLate

from ..synthetic import synthetic_records

P, T = 250_000, 20_000


def metrics(misses=()) -> Metrics:
    return summarize(synthetic_records(19_950, P, list(misses), seed=2), P)


def why(culprits, window_us=50_000.0, steal_ms=None) -> WhyLate:
    return WhyLate.from_dict(
        {
            "tracing": "on",
            "window_us": window_us,
            "culprits": culprits,
            **({"steal": {"cpu": 1, "total_ms": steal_ms, "over_s": 5.0}} if steal_ms else {}),
        }
    )


def culprit(kind, name, total_us, ident=None, detail=None, via=None):
    return {
        "kind": kind,
        "name": name,
        "id": ident,
        "detail": detail,
        **({"via": via} if via else {}),
        "cycles": 3,
        "total_us": total_us,
        "worst_us": total_us,
    }


def test_the_seeds_requirement_met():
    v = judge(metrics(), period_ns=P, threshold_ns=T)
    assert v.meets is True and v.default and v.requirement == default_requirement(P, T) == "misses==0,period.max<=270us"
    assert [c.passed for c in v.checks] == [True, True] and v.culprit is None and v.cycles == 19_950
    lines = verdict_lines(v)
    assert lines[0].startswith("MEETS the 250 µs cycle (0 missed updates, every period ≤ 270.0 µs): worst period ")
    assert lines[1] == "  19,950 cycles observed, so events rarer than about 1 in 20,000 cycles are unseen"
    assert Verdict.from_dict(v.to_dict()) == v  # the summary's block reads back


def test_a_failure_names_the_worst_figures_the_main_culprit_by_time_and_its_fix():
    m = metrics([(1_000, 3), (9_000, 7)])
    blocks = [
        why(
            [
                culprit("outside", "no guest activity on CPU 1", 6_000.0),
                culprit("thread", "servo-poller", 16_221.0, 812, "FIFO/RR 90"),
            ]
        ),
        why([culprit("thread", "servo-poller", 9_000.0, 812, "FIFO/RR 90")], window_us=10_000.0),
        None,
    ]  # a round without a trace adds nothing
    v = judge(m, period_ns=P, threshold_ns=T, why_late=blocks)
    assert v.meets is False and v.missed_updates == 10 and v.longest_miss_run == 7
    c = v.culprit
    assert (c.kind, c.source, c.total_us, c.share) == ("thread", "servo-poller (pid 812, FIFO/RR 90)", 25_221.0, 0.4204)
    assert c.checks == ["cores.tasks"] and "lower priority" in c.fix
    head, main, proves = verdict_lines(v)
    assert head.startswith("FAILS the 250 µs cycle (0 missed updates, every period ≤ 270.0 µs): worst period 2,000")
    assert "(8.0× nominal), 10 missed updates (longest run 7)" in head
    assert main.startswith("  main culprit (thread): servo-poller (pid 812, FIFO/RR 90), 42 % of the late time; fix: ")
    assert main.endswith("[softrt check: cores.tasks]") and proves.endswith("about 1 in 20,000 cycles are unseen")


def test_the_hypervisor_is_named_with_its_steal_and_an_untraced_run_says_why_no_culprit():
    m = metrics([(1_000, 3)])
    v = judge(
        m,
        period_ns=P,
        threshold_ns=T,
        why_late=[why([culprit("outside", "no guest activity on CPU 1", 9_000.0, 1)], steal_ms=30.0)],
    )
    assert v.culprit.fix == "the hypervisor or firmware took the CPU (steal 30.0 ms): bare metal, or a dedicated vCPU"
    off = judge(m, period_ns=P, threshold_ns=T, why_late=[WhyLate(tracing="off (--no-trace)")])
    assert off.culprit is None and off.why_unknown == "tracing off (--no-trace)"
    assert "main culprit: not named (tracing off (--no-trace)); a traced run names it" in verdict_lines(off)[1]


def test_a_given_requirement_replaces_the_seeds_and_its_failed_parts_are_shown():
    m = metrics([(1_000, 3)])
    v = judge(m, period_ns=P, threshold_ns=T, require="period.max<=2ms,latency.p99<=0.1us")
    assert not v.default and [c.passed for c in v.checks] == [True, False]
    head = verdict_lines(v)[0]
    assert head.startswith("FAILS the 250 µs cycle (required: period.max<=2ms,latency.p99<=0.1us): ")
    assert head.endswith("; latency.p99<=0.1us not met (0.5)")
    assert judge(m, period_ns=P, threshold_ns=T, require="misses<=3").meets
    with pytest.raises(ConfigError, match="unknown metric"):
        judge(m, period_ns=P, threshold_ns=T, require="jitter<1us")


def test_nothing_measured_is_no_verdict():
    v = judge(Metrics(), period_ns=P, threshold_ns=T)
    assert v.meets is None and verdict_lines(v) == [
        "NO VERDICT on the 250 µs cycle (0 missed updates, every period ≤ 270.0 µs): no cycle was measured"
    ]


def test_a_checkpoint_meets_so_far_and_a_partial_run_says_so():
    v = judge(metrics(), period_ns=P, threshold_ns=T)
    assert verdict_lines(v, state="running")[0].startswith("MEETS the 250 µs cycle so far (0 missed updates")
    assert verdict_lines(v, state="partial")[1] == (
        "  19,950 cycles observed (a partial run), so events rarer than about 1 in 20,000 cycles are unseen"
    )


def test_culprits_that_share_a_fix_add_up_the_biggest_names_them():
    """Many SCHED_OTHER tasks through the fair server, each smaller than the tick: the fix that
    addresses most of the late time is the fair server's (named by its biggest task), not nohz_full."""
    fair = [
        culprit("thread", name, us, pid, "OTHER nice 0, through the fair server", via="fair_server")
        for name, us, pid in (
            ("jemalloc_bg_thd", 4_944.4, 27_382),
            ("bash", 1_569.9, 27_390),
            ("bash", 1_564.4, 27_388),
        )
    ]
    v = judge(
        metrics([(1_000, 3)]),
        period_ns=P,
        threshold_ns=T,
        why_late=[why([culprit("kernel", "local timer", 5_000.0), *fair], window_us=20_000.0)],
    )
    c = v.culprit
    assert (c.source, c.more, c.total_us, c.share) == (
        "jemalloc_bg_thd (pid 27382, OTHER nice 0, through the fair server)",
        2,
        8_078.7,
        0.4039,
    )
    assert c.checks == ["kernel.fair_server", "cores.tasks"]
    assert verdict_lines(v)[1].startswith(
        "  main culprit (thread): jemalloc_bg_thd (pid 27382, OTHER nice 0, through "
        "the fair server) and 2 more with the same fix, 40 % of the late time; fix: "
    )
