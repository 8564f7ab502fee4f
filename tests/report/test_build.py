"""build_report: the page, its plots, PNG export and bad input."""

from __future__ import annotations

import base64
import json
import re
import xml.etree.ElementTree as ET

import numpy as np
import pytest
from matplotlib.image import imread

from softrt.errors import ConfigError
from softrt.report import build_report
from softrt.report.plots import PLOTS
from softrt.store.history import History

from .conftest import write_cyclictest_run

PLOT_KEYS = ("period_hist", "latency_hist", "period_series", "exceedance", "process_hist", "motion")


def figures(html: str) -> dict[str, str | None]:
    """data-plot key -> the embedded SVG text (None for a figure that does not apply)."""
    out = {}
    for m in re.finditer(r'<figure id="plot-(\w+)" data-plot="\w+"( data-empty="1")?>(.*?)</figure>', html, re.S):
        img = re.search(r'src="data:image/svg\+xml;base64,([^"]+)"', m.group(3))
        out[m.group(1)] = base64.b64decode(img.group(1)).decode() if img else None
    return out


@pytest.fixture
def cyclictest_run(tmp_path):
    return write_cyclictest_run(tmp_path)


def test_report_has_every_plot_and_table(shared_report):
    shared = shared_report
    a, b, cyclictest_run, result, html = shared.a, shared.b, shared.imported, shared.result, shared.html
    assert result.runs == [json.loads((p / "summary.json").read_text())["run_id"] for p in (a, b, cyclictest_run)]
    assert [r for r, _ in result.broken] == [str(shared.bad)] and result.pngs == []
    figs = figures(html)
    # The return-level plot (report.tail_plot) needs a run's tail block: these synthetic runs have none.
    assert set(figs) == set(PLOT_KEYS) | {"return_levels"} and len(PLOTS) == len(PLOT_KEYS)
    assert figs.pop("return_levels") is None
    for key, svg in figs.items():
        assert svg is not None, key
        root = ET.fromstring(svg)  # well-formed SVG
        assert root.tag.endswith("svg")
        # Every run that has the data is in the figure's legend (SVG text stays text: svg.fonttype none).
        if key in ("period_hist", "period_series", "process_hist", "motion"):
            assert result.runs[0] in svg and result.runs[1] in svg and result.runs[2] not in svg, key
        else:
            assert all(r in svg for r in result.runs), key
    # The imported run says what does not apply to it.
    assert "no per-cycle period (imported latency histogram)" in html
    assert "The seed's period/process table does not apply" in html
    # Seed table values come from the summaries.
    sa = json.loads((a / "summary.json").read_text())
    assert f"{sa['period_us']['max']:,.1f}" in html and "Timer int. process" in html
    assert "otherpc" in html and "SCHED_FIFO priority 90 (-p)" in html
    # The verdict banner first: each softrt run's answer (none for the imported tool's), before the runs table.
    banner = html[html.index('<div id="verdict">') : html.index('<table id="runs-table">')]
    verdicts = re.findall(r'<p class="verdict" data-meets="(\w+)">.*?<span class="(\w+)">([^<]*)</span>', banner)
    assert [(meets, cls) for meets, cls, _ in verdicts] == [("false", "bad"), ("false", "bad")]
    assert all(text.startswith("FAILS the 250 µs cycle") for _, _, text in verdicts)
    assert "cycles observed, so events rarer than about 1 in 40,000 cycles are unseen" in banner
    # Slack shows its low tail: its own header, negative where the work overran (never its max).
    assert "<th>slack (µs)</th><th>p50</th><th>p1</th><th>p0.1</th><th>p0.01</th><th>min</th>" in html
    assert f'<td class="bad">{sa["slack_us"]["min"]:,.1f}</td>' in html and sa["slack_us"]["min"] < 0


def test_check_verdict_and_findings_are_shown(tmp_path, synth_run):
    run = synth_run(cycles=2_000)
    summary = json.loads((run / "summary.json").read_text())
    summary["check"] = {
        "ready": False,
        "verdict": "NOT READY: a 250 µs loop cannot be expected to hold on CPU 1",
        "counts": {"ok": 3, "warn": 1, "fail": 1, "n/a": 0},
        "fix_first": ["idle.states"],
    }
    (run / "summary.json").write_text(json.dumps(summary))
    (run / "check.json").write_text(
        json.dumps(
            {
                "findings": [
                    {
                        "id": "idle.states",
                        "title": "CPU idle states",
                        "status": "fail",
                        "severity": "high",
                        "summary": "C6 <enabled>",
                        "fix": "cpupower idle-set -D 0",
                    },
                    {"id": "clock.source", "title": "Clocksource", "status": "ok", "severity": "low", "summary": "tsc"},
                ]
            }
        )
    )
    out = tmp_path / "r.html"
    build_report([run], out)
    html = out.read_text()
    assert "NOT READY: a 250 µs loop cannot be expected to hold on CPU 1" in html
    assert "C6 &lt;enabled&gt;" in html and "cpupower idle-set -D 0" in html  # escaped
    assert "Clocksource" not in html  # only what failed or warned


#: A comparison's loads as a run stores them: one that worked, one whose worker died at once (issue 34: the
#: disk load on Windows, shown as "0.0 MB/s" with its problems hidden), one this machine cannot run.
LOADS = [
    {"name": "memory", "backend": "builtin", "achieved": {"copy_MB_per_s": 2100.5, "cpu_pct_per_worker": 99.0}},
    {
        "name": "disk",
        "backend": "builtin",
        "achieved": {"io_MB_per_s": 0.0, "write_MB_per_s": 0.0},
        "problems": [
            "io worker ended on its own (exit status 1)",
            "AttributeError: module 'os' has no attribute 'pwrite'",
        ],
    },
    {"name": "gpu", "backend": "ffmpeg", "achieved": {}, "skipped_reason": "ffmpeg is not on PATH"},
]


def test_a_load_that_achieved_nothing_is_failed_with_its_problems(tmp_path, synth_run):
    run = synth_run(cycles=2_000)
    summary = json.loads((run / "summary.json").read_text())
    summary["loads"] = LOADS
    (run / "summary.json").write_text(json.dumps(summary))
    out = tmp_path / "r.html"
    build_report([run], out)
    html = out.read_text()
    assert "<li>memory (builtin): copy_MB_per_s 2,100.5, cpu_pct_per_worker 99.0</li>" in html
    assert (
        '<li class="bad" data-load-failed="1">disk (builtin): FAILED, it achieved nothing (see its problems)<ul>'
        '<li class="bad">problem: io worker ended on its own (exit status 1)</li>'
        '<li class="bad">problem: AttributeError: module &#x27;os&#x27; has no attribute &#x27;pwrite&#x27;</li>'
        "</ul></li>"
    ) in html
    assert "<li>gpu skipped: ffmpeg is not on PATH</li>" in html
    assert "0.0" not in html[html.index("<h4>Loads</h4>") : html.index("gpu skipped")]


def test_report_is_self_contained(shared_report):
    html = shared_report.html
    assert 'http-equiv="Content-Security-Policy"' in html and "default-src 'none'" in html
    assert "<script" not in html.lower() and "<link" not in html.lower() and "@import" not in html
    refs = re.findall(r'(?:src|href)="([^"]*)"', html)
    assert refs and all(r.startswith(("data:", "#")) for r in refs), [r[:40] for r in refs if not r.startswith("data:")]
    # No SVG pulls anything in either.
    for svg in figures(html).values():
        if svg:
            assert 'xlink:href="http' not in svg and "<image" not in svg


def test_broken_run_is_a_visible_note(shared_report):
    assert [r for r, _ in shared_report.result.broken] == [str(shared_report.bad)]
    html = shared_report.html
    assert 'class="note broken"' in html and "cannot read samples" in html
    # the good runs still have every plot (synthetic runs have no tail block to draw return levels of)
    assert all(svg for key, svg in figures(html).items() if key != "return_levels")


def test_unfinished_run_is_a_note(tmp_path, synth_run):
    good = synth_run(cycles=2_000, seed=1)
    unfinished = synth_run(cycles=2_000, seed=2)
    (unfinished / "summary.json").unlink()  # a killed supervisor leaves samples but no summary
    result = build_report([good, unfinished], tmp_path / "r.html")
    assert [r for r, _ in result.broken] == [str(unfinished)] and "has no summary.json" in result.broken[0][1]


def test_every_run_broken_is_bad_input(tmp_path, synth_run):
    bad = synth_run(cycles=2_000)
    (bad / "samples.parquet").unlink()
    with pytest.raises(ConfigError, match=r"no run could be read: .*missing"):
        build_report([bad], tmp_path / "r.html")
    assert not (tmp_path / "r.html").exists()


def test_bad_references_and_outputs(tmp_path, synth_run, monkeypatch):
    monkeypatch.setenv("SOFTRT_HOME", str(tmp_path / "home"))
    run = synth_run(cycles=2_000)
    with pytest.raises(ConfigError, match="unknown run id 'nope'"):
        build_report(["nope"], tmp_path / "r.html")
    with pytest.raises(ConfigError, match="not a run directory"):
        build_report([str(tmp_path / "no" / "such")], tmp_path / "r.html")
    with pytest.raises(ConfigError, match="cannot write the report"):
        build_report([run], tmp_path / "missing-dir" / "r.html")
    with pytest.raises(ConfigError, match="it is a directory"):
        build_report([run], tmp_path)
    blocker = tmp_path / "blocker"
    blocker.write_text("")
    with pytest.raises(ConfigError, match="cannot write PNGs"):
        build_report([run], tmp_path / "r.html", png_dir=blocker / "png")
    assert not (tmp_path / "r.html").exists()


def test_runs_by_id_prefix_and_directory_of_runs(tmp_path, synth_run, monkeypatch):
    monkeypatch.setenv("SOFTRT_HOME", str(tmp_path / "home"))
    a = synth_run(cycles=2_000, seed=1)
    b = synth_run(cycles=2_000, seed=2)  # a second run in the same directory
    run_id = History().add_run(a)
    b_id = json.loads((b / "summary.json").read_text())["run_id"]
    # An id prefix (from the history), a directory of runs and a run directory: each run once, in order.
    assert build_report([run_id[:-1], a.parent, a], tmp_path / "r.html").runs == [run_id, b_id]


def assert_pngs_drawn(png_dir):
    """Every plot exported as a PNG of the page's size, drawn (tests/cli/test_report.py exports them
    through ``softrt report --png``, the one PNG export of the suite)."""
    pngs = sorted(png_dir.glob("*.png"))
    assert [p.name for p in pngs] == sorted(f"{k}.png" for k in PLOT_KEYS)
    for p in pngs:
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        img = imread(p)
        height, width = img.shape[:2]
        assert width == 1100 and height >= 380, p.name  # 10 in at 110 dpi
        # Not blank: lines of several colours on a white background.
        pixels = img[..., :3].reshape(-1, 3)
        assert (pixels.min(axis=1) < 0.9).mean() > 0.01, p.name
        colours = {tuple(c) for c in np.round(pixels[:: max(1, pixels.shape[0] // 20000)], 1)}
        assert len(colours) > 5, p.name


def test_run_references_resolve_as_softrt_show_does(tmp_path, synth_run, monkeypatch):
    """A run directory or id goes through store.history.resolve_run (one rule for show and report)."""
    from softrt.report import build
    from softrt.store import history

    run = synth_run(cycles=2_000)
    seen = []

    def recording(ref, db=None):
        seen.append((str(ref), db))
        return history.resolve_run(ref, db)

    monkeypatch.setattr(build, "resolve_run", recording)
    db = tmp_path / "h.sqlite"
    assert build.resolve_runs([run], db) == [run]
    assert seen == [(str(run), db)]
    with pytest.raises(ConfigError, match="not a run directory"):
        build.resolve_runs([str(tmp_path / "no" / "such")], db)


def test_why_cycles_were_late_section_and_marks(shared_report):
    """A run whose why_late block the real Attributor made from a synthetic trace; one run without tracing."""
    traced, html = shared_report.a, shared_report.html
    section = html[html.index('<h2 id="why-late">') : html.index('<h2 id="plots">')]
    why = json.loads((traced / "summary.json").read_text())["why_late"]
    assert why["late_cycles"] > 0 and why["worst"]
    # The culprits table and the worst cycles, as the Attributor produced them.
    top = why["culprits"][0]
    assert f"<td>{top['kind']}</td>" in section and f"<td>{top['total_us']:,.1f}</td>" in section
    assert "stress-ng-cpu (pid 5151, FIFO/RR 99)" in section and "eth0 (IRQ 24)" in section
    assert f"<td>{why['worst'][0]['seq']:,}</td>" in section and "steal +" in section
    assert "Tracing unavailable: tracefs not mounted and not root" in section
    # The period-over-time plot marks the worst cycles with a number, listed under it with the cause.
    svg = figures(html)["period_series"]
    assert "worst late cycle (traced), numbered by its main cause" in svg
    main = why["worst"][0]["causes"][0]
    assert f">{main['name']}<" in svg.replace("</tspan>", "<")


def test_late_marks_place_the_worst_cycles():
    from softrt.report.data import late_marks

    from ..synthetic import synthetic_records, synthetic_why_late

    rec = synthetic_records(8_000, misses=[(1_000, 2), (5_000, 1)])
    from softrt.schema.why_late import WhyLate

    why = synthetic_why_late(rec, 250_000)
    marks = late_marks(why, int(rec["detect_ns"][0]))
    assert [round(m.t_s, 3) for m in marks[:2]] == [0.25, 1.25]  # cycles 1,000 and 5,000 at 250 µs
    assert marks[0].cause == "stress-ng-cpu" and marks[0].y_us > 400  # the write landed two edges on
    assert late_marks(WhyLate(tracing="off (--no-trace)"), 0) == [] and late_marks(why, None) == []
