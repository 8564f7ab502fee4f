"""A report that compares: the scenarios of one compare side by side with their verdicts, readable
plots for several runs (zoomed and log axes, numbered causes, small multiples), cut tables that
say so, the configuration in human units."""

from __future__ import annotations

import dataclasses
import json
import re

import pytest
from matplotlib.text import Text

from softrt.report.compare import columns, is_one_compare, side_by_side
from softrt.report.data import late_marks
from softrt.report.html import CULPRIT_ROWS, WORST_ROWS, _facts, _why_late, config_rows
from softrt.report.load import load_run
from softrt.report.plots import exceedance_curves, latency_histogram, motion_impact, period_histogram, period_series

from ..synthetic import write_synthetic_run

SCENARIOS = ("untuned", "tuned+load")


@pytest.fixture(scope="module")
def compare_runs(tmp_path_factory):
    """Two scenarios in two rounds (as softrt compare stores them), the loaded one traced."""
    base = tmp_path_factory.mktemp("compare") / "runs"
    runs = []
    for rnd in (1, 2):
        for k, name in enumerate(SCENARIOS):
            runs.append(
                write_synthetic_run(
                    base,
                    cycles=2_000,
                    seed=10 * rnd + k,
                    scenario=name,
                    compare_round=rnd,
                    misses=[(500 + 300 * k, 1 + k + rnd)],
                    why_late=name != "untuned",
                    run_id=f"20261130-07{rnd}{k}00-synthhost-{name.replace('+', '-')}",
                )
            )
    return runs


@pytest.fixture(scope="module")
def views(compare_runs):
    return [load_run(p) for p in compare_runs]


def _side_table(html: str) -> list[list[str]]:
    table = html[html.index('<table id="side-table">') :]
    table = table[: table.index("</table>")]
    rows = re.findall(r"<tr>(.*?)</tr>", table, re.S)
    return [
        [re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", r, re.S)] for r in rows
    ]


def test_the_scenarios_of_one_compare_are_columns_with_their_rounds_pooled(compare_runs, views):
    html = side_by_side(views, ["Tuning cut the worst period from 1,000.0 µs to 750.0 µs."])
    rows = {r[0]: r[1:] for r in _side_table(html)}
    assert rows[""] == list(SCENARIOS)
    assert rows["rounds"] == ["2", "2"]
    for k in range(len(SCENARIOS)):
        summaries = [json.loads((p / "summary.json").read_text()) for p in compare_runs[k::2]]
        assert rows["cycles"][k] == f"{sum(s['cycles'] for s in summaries):,}"  # both rounds' cycles
        assert rows["period max"][k] == f"{max(s['period_us']['max'] for s in summaries):,.1f}"
        assert rows["missed updates"][k] == f"{sum(s['misses']['missed_updates'] for s in summaries):,}"
        # No verdict block in these runs: the verdict cell states the deciding figures.
        assert rows["verdict"][k].startswith(f"worst period {rows['period max'][k]} µs, {rows['missed updates'][k]} ")
        assert rows["late cycles"][k] == f"{sum(s['late_cycles'] for s in summaries):,}"  # one rule, traced or not
    assert rows["main culprit"][1].startswith("thread: ")
    assert "One column per scenario (its rounds pooled)" in html
    assert "<li>Tuning cut the worst period from 1,000.0 µs to 750.0 µs.</li>" in html


def test_runs_that_are_not_one_compare_are_a_column_each(views):
    plain = dataclasses.replace(views[1], summary=views[1].summary.replace(compare_round=None))
    cols = columns([views[0], plain])  # a compare's run beside a plain run: not one compare
    assert not is_one_compare([views[0], plain]) and [c.name for c in cols] == [views[0].label, plain.label]
    assert not is_one_compare(views[:1] + views[:1])  # a scenario twice in one round: two compares
    html = side_by_side([views[0], plain], None)
    assert "One column per run" in html and "<td>rounds</td>" not in html
    assert side_by_side(views[:1], None) == ""  # one run: nothing to put side by side


def _texts(fig) -> list[str]:
    """Every text of a figure: titles, labels, annotations and legend entries."""
    return [t.get_text() for t in fig.findobj(Text) if t.get_text()]


def test_the_plots_read_for_several_runs(views):
    indexed = list(enumerate(views))
    # The period histogram: the nominal period ±100 µs (linear) beside the whole range (log x).
    hist = period_histogram(indexed).figure
    zoom, whole = hist.axes
    assert zoom.get_xlim() == (150.0, 350.0) and zoom.get_xscale() == "linear" and whole.get_xscale() == "log"
    assert [a.get_title() for a in latency_histogram(indexed).figure.axes] == ["0 to 100 µs", "whole range (log x)"]
    assert all(ax.get_xscale() == "log" for ax in exceedance_curves(indexed).figure.axes)
    # The worst late cycles carry numbers; each cause is listed once under the plot, not at each mark.
    series = period_series(indexed)
    texts = _texts(series.figure)
    assert texts.count("stress-ng-cpu") == 1 and "worst late cycle (traced), numbered by its main cause:" in texts
    marks = sum(len(late_marks(v.summary.why_late, v.t0_ns)) for v in views)
    assert marks and sum(t.isdigit() for t in texts if len(t) <= 2) >= marks  # a number at every mark
    assert len(series.figure.axes) == len(views)  # one panel per run
    motion_axes = [ax for ax in motion_impact(indexed).figure.axes if ax.get_visible()]
    assert len(motion_axes) == 3 * len(views)  # small multiples: position, velocity, difference per run


def test_a_cut_table_says_how_much_was_left_out(views):
    view = views[1]
    why = view.summary.why_late
    extra = [why.culprits[-1].replace(name=f"kworker/1:{k}", id=100 + k, total_us=1.0) for k in range(24)]
    cut = dataclasses.replace(view, summary=view.summary.replace(why_late=why.replace(culprits=why.culprits + extra)))
    html = _why_late(1, cut)
    total = len(why.culprits) + len(extra)
    assert f"… and {total - CULPRIT_ROWS:,} more sources ({CULPRIT_ROWS} of {total} shown; all in " in html
    assert html.count("<tr><td>") == CULPRIT_ROWS + min(len(why.worst), WORST_ROWS)
    assert ("more late cycles kept" in html) == (len(why.worst) > WORST_ROWS)
    assert "more sources" not in _why_late(1, view)  # not cut: nothing said


def test_the_configuration_is_in_human_units(views):
    assert config_rows(
        {
            "max_duration_ns": 604_800_000_000_000,
            "period_ns": 250_000,
            "dc_shift_ns": -20_000,
            "margin_ns": 1_500_000,
            "wait": "spin",
            "motion": {"axes": 1},
            "cpu": None,
        }
    ) == [("max_duration", "7 d"), ("period", "250 µs"), ("dc_shift", "-20 µs"), ("margin", "1.5 ms"), ("wait", "spin")]
    facts = _facts(0, views[0])
    assert "<td>config.max_duration</td><td>1 h</td>" in facts
    assert "max_duration_ns" not in facts and "3600000000000" not in facts


def test_a_stored_verdict_is_the_columns_verdict_the_worst_round_first(views):
    def judged(view, meets):
        doc = {**view.summary.to_dict(), "verdict": {"meets": meets, "requirement": "misses==0,period.max<=270us"}}
        return dataclasses.replace(view, summary=type(view.summary).from_dict(doc))

    cols = columns([judged(views[0], True), judged(views[1], True), judged(views[2], False), judged(views[3], True)])
    assert [(c.name, c.verdict_ok, c.verdict) for c in cols] == [
        ("untuned", False, "fails misses==0,period.max<=270us (1 of 2 rounds failed)"),
        ("tuned+load", True, "meets misses==0,period.max<=270us"),
    ]
    html = side_by_side([judged(v, True) for v in views], None)
    assert '<td class="text good">meets misses==0,period.max&lt;=270us</td>' in html
    assert "carry no verdict" not in html
