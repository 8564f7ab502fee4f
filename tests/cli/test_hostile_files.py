"""Hostile files through the command line (issue 12, defects 4 and 9): each is one ``softrt: error:`` line on
stderr, exit status 2, no traceback, and nothing written where it should not be."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from ..scenario.test_parse_fuzz import scenario_paths
from ..synthetic import write_synthetic_run


def _cyclictest(nodename: str = "labpc", **thread) -> dict:
    t = {"histogram": {"8": 3, "9": 1}, "cycles": 4, "min": 8, "max": 9, "avg": 8.2, "cpu": 1, **thread}
    return {
        "file_version": 1,
        "cmdline:": "cyclictest -m -p 90 -i 250 -h 400",
        "rt_test_version:": "2.40",
        "start_time": "Mon, 30 Nov 2026 06:48:43 +0000",
        "return_code": 0,
        "sysinfo": {"sysname": "Linux", "nodename": nodename, "release": "6.1"},
        "thread": {"0": t},
    }


def _one_error_line(code: int, out: str, err: str) -> str:
    assert code == 2, (code, out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("softrt: error: "), err
    assert "Traceback" not in err and "\x1b" not in err
    return lines[0]


@pytest.fixture
def good_run(tmp_path):
    return write_synthetic_run(tmp_path / "runs", cycles=300)


@pytest.mark.parametrize(
    "field,value,match",
    [
        ("config", [1, 2], "config must be an object"),
        ("host", "pc", "host must be an object"),
        ("cycles", 10**30, "cycles is out of range"),
        ("cycles", -4, "cycles cannot be negative"),
        ("records_missing", True, "records_missing must be a whole number"),
        ("cycles", float("nan"), "not valid JSON"),
        ("cycles", float("inf"), "not valid JSON"),
        ("run_id", "../../etc", "run_id"),
        (
            "why_late",
            {"tracing": "on", "culprits": [{"cycles": "many"}]},
            "why_late.culprits[0].cycles must be a whole",
        ),
        ("schema", "softrt.summary/2", "written by a newer softrt"),
        # issue 32: a µs figure past int64 ns listed as one 400-digit number, hiding the run id
        ("period_us", {"max": 1e308}, "period_us.max is out of range"),
        ("latency_us", {"p99_99": -1e17}, "latency_us.p99_99 is out of range"),
    ],
    ids=[
        "config-list",
        "host-string",
        "cycles-10e30",
        "cycles-negative",
        "bool-count",
        "nan",
        "infinity",
        "run-id-path",
        "mistyped-culprit",
        "newer-major",
        "period-max-1e308",
        "latency-p99_99-past-int64-ns",
    ],
)
def test_history_add_of_a_hostile_run_directory(run_cli, home, state_dir, good_run, field, value, match):
    summary = json.loads((good_run / "summary.json").read_text())
    summary[field] = value
    (good_run / "summary.json").write_text(json.dumps(summary))  # json.dumps writes NaN/Infinity as given
    line = _one_error_line(*run_cli("history", "add", str(good_run)))
    assert match in line
    code, out, _ = run_cli("history", "--json")
    assert code == 0 and json.loads(out) == []
    line = _one_error_line(*run_cli("show", str(good_run)))
    assert match in line


def test_show_of_a_deeply_nested_summary(run_cli, home, state_dir, good_run):
    (good_run / "summary.json").write_text('{"schema": "softrt.summary/1", "x": ' + "[" * 100_000 + "]" * 100_000 + "}")
    assert "nested too deeply" in _one_error_line(*run_cli("show", str(good_run)))


@pytest.mark.parametrize(
    "text,match",
    [
        ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
        (json.dumps(_cyclictest(cycles=10**30)), "out of range"),
        (json.dumps(_cyclictest(avg=float("nan"))), "not valid JSON"),
        (json.dumps(_cyclictest(max=float("inf"))), "not valid JSON"),
        (json.dumps(_cyclictest(cycles=-5)), "cycles"),
        (json.dumps(_cyclictest(histogram={"8": 10**19})), "out of range"),
        (json.dumps(_cyclictest(histogram={"nan": 3})), "malformed histogram"),
        (json.dumps({**_cyclictest(), "cmdline:": 'cyclictest "unterminated', "thread": {}}), "no thread results"),
    ],
    ids=[
        "deep",
        "cycles-10e30",
        "nan",
        "infinity",
        "negative",
        "count-beyond-64-bits",
        "nan-bucket",
        "unterminated-quote",
    ],
)
def test_import_of_a_hostile_result(run_cli, home, state_dir, tmp_path, text, match):
    f = tmp_path / "ct.json"
    f.write_text(text)
    out_dir = tmp_path / "imported"
    assert match in _one_error_line(*run_cli("import", str(f), "--out-dir", str(out_dir)))
    assert not out_dir.exists() or not any(out_dir.iterdir())


def test_import_nodename_with_a_slash_stays_in_the_output_directory(run_cli, home, state_dir, tmp_path):
    f = tmp_path / "ct.json"
    f.write_text(json.dumps(_cyclictest(nodename="evil/../../../x")))
    out_dir = tmp_path / "imported"
    code, out, err = run_cli("import", str(f), "--out-dir", str(out_dir))
    assert code == 0, err
    (run,) = out_dir.iterdir()  # one run directory, no empty directory left behind
    assert run.name.startswith("20261130-064843-evil_-cyclictest-") and (run / "summary.json").is_file()
    assert {p.name for p in tmp_path.iterdir()} <= {"ct.json", "imported", "softrt-home", "state"}


@pytest.mark.parametrize("nodename", ["pc\x1b[2J\x1b[31mRED\x1b]0;title\x07", "[/x]", "[bold]x[/bold]"])
def test_history_and_show_never_print_terminal_codes_or_markup(run_cli, home, state_dir, tmp_path, nodename):
    f = tmp_path / "ct.json"
    f.write_text(
        json.dumps(
            {
                **_cyclictest(nodename=nodename),
                "thread": {
                    "[/y]\x1b[1m": {"histogram": {"8": 3}, "cycles": 3, "min": 8, "max": 8, "avg": 8.0, "cpu": 1}
                },
            }
        )
    )
    code, _, err = run_cli("import", str(f))
    assert code == 0, err
    code, out, err = run_cli("history")
    assert code == 0, err
    assert "\x1b" not in out and "\x07" not in out
    if nodename.startswith("["):
        assert nodename[:4] in out  # shown as text, not taken as rich markup
    code, out, err = run_cli("history", "--json")
    (row,) = json.loads(out)
    code, out, err = run_cli("show", row["run_id"])
    assert code == 0, err
    assert "\x1b" not in out and "[/y]" in out


@pytest.mark.parametrize(
    "body,match",
    [
        (b'name = "x"\n\x00\xff\xfe binary\n', "not UTF-8"),
        (b'name = "x"\nduration = [1]\n', "duration [1] is not a time"),
        (b'name = "x"\nload = [1, 2]\n', "must be a table"),
        (b'name = "x"\n[[load]]\nname = "cpu"\ncpus = "0-99999999999"\n', "cannot exist"),
    ],
    ids=["binary", "duration-list", "load-ints", "cpus-huge"],
)
def test_compare_of_a_hostile_scenario(run_cli, home, state_dir, tmp_path, body, match):
    f = tmp_path / "s.toml"
    f.write_bytes(body)
    line = _one_error_line(*run_cli("compare", str(f), "--duration", "1s", "--out-dir", str(tmp_path / "runs")))
    assert match in line
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


@pytest.mark.parametrize("command", ["check", "tune"])
def test_rt_cpus_beyond_the_bound(run_cli, home, state_dir, command):
    assert "cannot exist" in _one_error_line(*run_cli(command, "--rt-cpus", "0-99999999999"))


def test_copied_run_with_a_strange_but_valid_summary_is_added(run_cli, home, state_dir, good_run, tmp_path):
    """The checks refuse what is wrong, not what is merely unusual: a run copied from another PC whose
    hostname holds control characters is stored, printable."""
    summary = json.loads((good_run / "summary.json").read_text())
    summary["host"]["hostname"] = "lab\x1b[5mpc"
    (good_run / "summary.json").write_text(json.dumps(summary))
    copy = tmp_path / "copy"
    shutil.copytree(good_run, copy)
    code, out, err = run_cli("history", "add", str(copy))
    assert code == 0, err
    code, out, _ = run_cli("history", "--json")
    assert json.loads(out)[0]["host"] == "lab?[5mpc"


def test_import_of_a_fifo_or_a_device(run_cli, home, state_dir, tmp_path):
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    (tmp_path / "zero.json").symlink_to("/dev/zero")
    for name in ("fifo.json", "zero.json"):
        assert "not a regular file" in _one_error_line(*run_cli("import", str(tmp_path / name)))


def test_a_scenario_path_that_is_no_toml_file(run_cli, home, state_dir, tmp_path):
    """Issue 32: a directory, a FIFO or a link to /dev/zero given to ``softrt compare`` is one error line
    saying what it is, exit status 2, before anything runs (and without blocking on the FIFO)."""
    for name, says in scenario_paths(tmp_path).items():
        assert says in _one_error_line(*run_cli("compare", str(tmp_path / name)))
