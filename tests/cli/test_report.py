"""``softrt report``: from ids and directories, PNG export, broken runs, bad input; one real run."""

from __future__ import annotations

import json
import re

import pytest

from softrt.report.synthetic import write_synthetic_run

from ..report.conftest import write_cyclictest_run
from ..report.test_build import assert_pngs_drawn


def test_report_with_png_and_a_broken_run(run_cli, home, tmp_path):
    good = write_synthetic_run(tmp_path / "runs", cycles=5_000, misses=[(2_600, 2)], seed=1)
    imported = write_cyclictest_run(tmp_path)
    bad = write_synthetic_run(tmp_path / "runs", cycles=1_000, seed=2)
    (bad / "samples.parquet").unlink()
    out_html, png = tmp_path / "r.html", tmp_path / "png"
    code, out, err = run_cli("report", str(good), str(imported), str(bad), "-o", str(out_html), "--png", str(png))
    assert code == 1  # written, but one run is left out
    assert f"written to {out_html}" in out and "6 PNG(s)" in out
    assert "warning: left out" in err and "missing" in err
    html = out_html.read_text()
    assert 'class="note broken"' in html and len(re.findall(r'<figure id="plot-', html)) == 7
    assert_pngs_drawn(png)


@pytest.mark.parametrize("args,needle", [
    (["report", "nope"], "unknown run id 'nope'"),
    (["report", "/no/such/dir"], "not a run directory"),
    (["report"], "Missing argument"),
])
def test_bad_input(run_cli, home, args, needle):
    code, out, err = run_cli(*args)
    assert code == 2 and out == "" and needle in err and len(err.strip().splitlines()) == 1, err


def test_unwritable_output(run_cli, home, tmp_path):
    run = write_synthetic_run(tmp_path / "runs", cycles=1_000)
    code, out, err = run_cli("report", str(run), "-o", str(tmp_path / "no" / "dir" / "r.html"))
    assert code == 2 and "cannot write the report" in err and len(err.strip().splitlines()) == 1


def test_every_run_broken(run_cli, home, tmp_path):
    run = write_synthetic_run(tmp_path / "runs", cycles=1_000)
    (run / "samples.parquet").write_bytes(b"x")
    code, out, err = run_cli("report", str(run), "-o", str(tmp_path / "r.html"))
    assert code == 2 and "no run could be read" in err and not (tmp_path / "r.html").exists()


@pytest.mark.rt
def test_a_real_run_is_stored_and_reported(real_run, run_cli, monkeypatch, tmp_path):
    """softrt run stores its run in the history; report and show find it by id."""
    assert real_run.proc.returncode == 0, real_run.proc.stderr
    summary = real_run.summary
    monkeypatch.setenv("SOFTRT_HOME", str(real_run.home))  # the run's own history
    code, listed, _ = run_cli("history", "--json")
    assert code == 0 and [r["run_id"] for r in json.loads(listed)] == [summary["run_id"]]
    out_html = tmp_path / "r.html"
    code, _, err = run_cli("report", summary["run_id"], "-o", str(out_html))
    assert code == 0, err
    html = out_html.read_text()
    assert summary["run_id"] in html and html.count('data-plot="') == 7  # return_levels too
    assert 'data-plot="period_hist"><img' in html and 'data-plot="period_series"><img' in html
    assert 'data-plot="return_levels"><img' in html  # its tail block and tail.npz (issue 33)
    code, shown, _ = run_cli("show", summary["run_id"])
    assert code == 0 and "Timer int. period" in shown
