"""``softrt report``: from ids and directories, PNG export, broken runs, bad input; one real run."""

from __future__ import annotations

import json
import os
import re
import stat

import pytest

from ..child import nobody
from ..devices import device
from ..report.conftest import write_cyclictest_run
from ..report.test_build import assert_pngs_drawn
from ..synthetic import write_synthetic_run


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


@pytest.mark.parametrize(
    "args,needle",
    [
        (["report", "nope"], "unknown run id 'nope'"),
        (["report", "/no/such/dir"], "not a run directory"),
        (["report"], "Missing argument"),
    ],
)
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
    (run / "stats.json").unlink()  # else the report draws the run from its stats.json (issue 32)
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


# -- where the report goes (issue 32): softrt.platform.outfile ------------------------------------------------
@pytest.fixture
def small_run(tmp_path):
    return write_synthetic_run(tmp_path / "runs", cycles=1_000, seed=3)


def test_planted_links_in_the_output_directory_are_never_followed(run_cli, home, tmp_path, small_run):
    """Links another user planted at every name softrt used to write by (``.{name}.{pid}.probe``, ``.tmp``,
    ``.softrt-probe-{pid}``) and at the PNGs' names are never followed; the victim stays as it was."""
    victim = tmp_path / "victim"
    victim.write_text("precious")
    out_dir, png = tmp_path / "shared", tmp_path / "shared" / "png"
    png.mkdir(parents=True)
    pid = os.getpid()  # (the command runs in this process)
    planted = [out_dir / f".r.html.{pid}.probe", out_dir / f".r.html.{pid}.tmp", png / f".softrt-probe-{pid}"]
    for link in planted:
        link.symlink_to(victim)
        if os.geteuid() == 0:
            os.lchown(link, *nobody())
    code, out, err = run_cli("report", str(small_run), "-o", str(out_dir / "r.html"), "--png", str(png))
    assert code == 0, err
    assert victim.read_text() == "precious" and all(link.is_symlink() for link in planted)
    assert stat.S_ISREG(os.lstat(out_dir / "r.html").st_mode) and list(png.glob("*.png"))
    for name in [p.name for p in png.glob("*.png")]:  # now a link at each PNG's name, and at the report's
        (png / name).unlink()
        (png / name).symlink_to(victim)
    (out_dir / "r.html").unlink()
    (out_dir / "r.html").symlink_to(victim)
    for args in (["-o", str(out_dir / "r.html")], ["-o", str(out_dir / "s.html"), "--png", str(png)]):
        code, out, err = run_cli("report", str(small_run), *args)
        assert code == 2 and "symbolic link" in err and len(err.strip().splitlines()) == 1, err
    assert victim.read_text() == "precious" and not (out_dir / "s.html").exists()


def test_a_full_device_is_one_line_and_stays_a_device(run_cli, home, small_run, tmp_path):
    """``softrt report last -o /dev/full``: the report used to be renamed over the device node
    (369 KB where /dev/full was, "written", exit 0). As root, a node of /dev/full's own device
    (tests/devices.py), so that a regression cannot delete the machine's. /dev/null and a FIFO:
    tests/platform/test_outfile.py."""
    full = device(tmp_path, "/dev/full")
    assert run_cli("history", "add", str(small_run))[0] == 0
    code, out, err = run_cli("report", "last", "-o", str(full))
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1, err
    assert f"no space left on {full}" in err and stat.S_ISCHR(os.stat(full).st_mode)


def test_dash_writes_the_html_to_stdout(run_cli, home, small_run, tmp_path, monkeypatch):
    """``-o -`` (and ``/dev/stdout``, the same path in platform.outfile, tested there)."""
    monkeypatch.chdir(tmp_path)  # (softrt used to write a file named "-")
    code, out, err = run_cli("report", str(small_run), "-o", "-")
    assert code == 0 and out.startswith("<!DOCTYPE html>") and out.rstrip().endswith("</html>")
    assert "written to standard output" in err  # the line that says so stays out of the HTML


def test_a_directory_is_refused_in_one_line(run_cli, home, tmp_path, small_run):
    code, out, err = run_cli("report", str(small_run), "-o", str(tmp_path))
    assert code == 2 and "is a directory" in err and len(err.strip().splitlines()) == 1, err
