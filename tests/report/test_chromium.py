"""The HTML report in a real browser: headless Chromium, offline, no console message, every plot drawn.

Chromium logs every console message, including Content-Security-Policy violations and failed
loads, as ``INFO:CONSOLE`` lines on stderr (``--enable-logging=stderr``); ``--dump-dom`` prints
the DOM after the load event. To learn whether each image really decoded, a copy of the report
gets a one-line probe script (the report itself has none and its policy forbids scripts; the
copy's policy only adds ``script-src 'unsafe-inline'``), which writes each figure's
``naturalWidth`` into the DOM. A page with a deliberate error checks that errors are caught.
"""

from __future__ import annotations

import html
import json
import os
import re
import subprocess

import pytest

from softrt.report.html import CSP

from .test_build import PLOT_KEYS

#: A headless Chromium starts a whole browser for each page (seconds of CPU): these tests are a
#: harness of their own after the main suite (scripts/ci-browser sets SOFTRT_CHROMIUM).
CHROMIUM = os.environ.get("SOFTRT_CHROMIUM")
pytestmark = pytest.mark.skipif(not CHROMIUM, reason="runs the report in headless Chromium: bash scripts/ci-browser")

PROBE = """<script>window.addEventListener("load", () => {
  const figs = [...document.querySelectorAll("figure[data-plot]")].map(f => {
    const img = f.querySelector("img");
    return {plot: f.dataset.plot, empty: f.dataset.empty === "1",
            loaded: !!img && img.complete, width: img ? img.naturalWidth : 0, height: img ? img.naturalHeight : 0};
  });
  document.body.setAttribute("data-probe", JSON.stringify(figs));
});</script>"""


def open_in_chromium(page, tmp_path, probe: bool) -> tuple[list[dict] | None, list[str]]:
    """Load *page* in headless Chromium with every host unresolvable; return (probe, console lines)."""
    target = page
    if probe:
        text = page.read_text()
        assert CSP in text
        text = text.replace(CSP, CSP + "; script-src 'unsafe-inline'").replace("</body>", PROBE + "</body>")
        target = tmp_path / f"probe-{page.name}"
        target.write_text(text)
    proc = subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-extensions",
            f"--user-data-dir={tmp_path / 'chromium-profile'}",
            "--enable-logging=stderr",
            "--v=0",
            "--host-resolver-rules=MAP * ~NOTFOUND",
            "--virtual-time-budget=10000",
            "--dump-dom",
            target.resolve().as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    console = [line for line in proc.stderr.splitlines() if ":CONSOLE" in line]
    m = re.search(r'data-probe="([^"]*)"', proc.stdout)
    return (json.loads(html.unescape(m.group(1))) if m else None), console


@pytest.fixture
def report(shared_report):
    """The report of two runs, an imported result and a broken run (tests/report/conftest.py)."""
    return shared_report.path


def test_report_opens_without_console_messages(report, tmp_path):
    probe, console = open_in_chromium(report, tmp_path, probe=False)
    assert console == []


def test_every_plot_is_drawn(report, tmp_path):
    probe, console = open_in_chromium(report, tmp_path, probe=True)
    assert console == []
    assert probe is not None, "the probe did not run"
    # The return-level plot (issue 33) is drawn where a run's tail was fitted, which depends on how this
    # machine's runs went; else its figure says it does not apply. Every figure drawn must be whole.
    assert [f["plot"] for f in probe if f["plot"] != "return_levels"] == list(PLOT_KEYS)
    for fig in probe:
        if fig["plot"] == "return_levels" and fig["empty"]:
            continue  # no run of this report has a fitted tail: the figure says it does not apply
        assert not fig["empty"] and fig["loaded"], fig
        # 10 in figures: 720 pt wide SVGs, drawn at their natural size in CSS px.
        assert fig["width"] >= 700 and fig["height"] >= 250, fig


def test_the_check_catches_errors(tmp_path):
    page = tmp_path / "bad.html"
    page.write_text(
        f'<!DOCTYPE html><html><head><meta http-equiv="Content-Security-Policy" content="{CSP}"></head>'
        '<body><figure data-plot="x"><img src="https://example.com/plot.svg"></figure>'
        '<figure data-plot="y"><img src="data:image/svg+xml;base64,bm90IGFuIHN2Zw=="></figure>'
        "</body></html>"
    )
    probe, console = open_in_chromium(page, tmp_path, probe=True)
    assert any("example.com" in line for line in console)  # the CSP blocked the fetch and said so
    assert [f["width"] for f in probe] == [0, 0]  # neither image was drawn
