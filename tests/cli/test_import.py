"""``softrt import``: a real cyclictest result becomes a run in the history, shown and reported."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest


@pytest.mark.skipif(shutil.which("cyclictest") is None, reason="rt-tests not installed")
def test_import_real_cyclictest(run_cli, home, tmp_path):
    # CPU 0, no real-time priority, 0.2 s: does not disturb a measurement on the RT CPU.
    subprocess.run(
        ["cyclictest", "-q", "-l", "1000", "-i", "200", "-h", "400", "-a", "0", "--json=ct.json"],
        cwd=tmp_path,
        check=True,
        capture_output=True,
        timeout=60,
    )
    doc = json.loads((tmp_path / "ct.json").read_text())
    code, out, err = run_cli("import", str(tmp_path / "ct.json"))
    assert code == 0, err
    assert "imported" in out and "cyclictest" in out
    code, out, _ = run_cli("history", "--source", "cyclictest", "--json")
    (row,) = json.loads(out)
    assert row["cycles"] == doc["thread"]["0"]["cycles"] and row["latency_max_us"] == doc["thread"]["0"]["max"]
    assert row["path"].startswith(str(home / "imported"))
    code, out, _ = run_cli("show", row["run_id"])
    assert code == 0 and "cyclictest latency" in out and "p99.99" in out
    code, out, _ = run_cli("import", str(tmp_path / "ct.json"))  # again: the same run
    code, out, _ = run_cli("history", "--json")
    assert len(json.loads(out)) == 1
    code, out, err = run_cli("report", row["run_id"], "-o", str(tmp_path / "r.html"))
    assert code == 0, err
    assert "latency_hist" in (tmp_path / "r.html").read_text()


def test_import_options(run_cli, home, tmp_path):
    doc = {
        "file_version": 1,
        "cmdline:": "oslat -D 10 -c 3 --json=o.json",
        "rt_test_version:": "2.40",
        "start_time": "Mon, 30 Nov 2026 06:48:55 +0000",
        "end_time": "Mon, 30 Nov 2026 06:49:06 +0000",
        "return_code": 0,
        "sysinfo": {"nodename": "pc-c", "release": "6.1", "sysname": "Linux"},
        "num_threads": 1,
        "thread": {
            "0": {
                "cpu": 3,
                "freq": 2600,
                "min": 1,
                "avg": 1.2,
                "max": 40,
                "duration": 10.0,
                "histogram": {"1": 1000, "2": 10, "32": 3},
            }
        },
    }
    f = tmp_path / "o.json"
    f.write_text(json.dumps(doc))
    code, out, err = run_cli("import", str(f), "--scenario", "baseline", "--out-dir", str(tmp_path / "imp"), "--json")
    assert code == 0, err
    (summary,) = json.loads(out)
    assert summary["source"] == "oslat" and summary["scenario"] == "baseline" and summary["cycles"] == 1013
    assert (tmp_path / "imp" / summary["run_id"] / "histogram.json").is_file()


@pytest.mark.parametrize(
    "content,needle",
    [
        ("{", "not valid JSON"),
        ('{"a": 1}', "not a cyclictest or oslat"),
    ],
)
def test_bad_files(run_cli, home, tmp_path, content, needle):
    f = tmp_path / "x.json"
    f.write_text(content)
    code, out, err = run_cli("import", str(f))
    assert code == 2 and out == "" and needle in err and len(err.strip().splitlines()) == 1


def test_missing_file(run_cli, home, tmp_path):
    code, out, err = run_cli("import", str(tmp_path / "nope.json"))
    assert code == 2 and "cannot read" in err and len(err.strip().splitlines()) == 1


def test_import_zero_cycles_prints_dash(run_cli, home, tmp_path):
    doc = {
        "file_version": 1,
        "cmdline:": "cyclictest -q -l 0 -h 400 --json=ct.json",
        "rt_test_version:": "2.40",
        "start_time": "Mon, 30 Nov 2026 06:48:55 +0000",
        "end_time": "Mon, 30 Nov 2026 06:48:55 +0000",
        "return_code": 0,
        "sysinfo": {"nodename": "pc-z", "release": "6.1", "sysname": "Linux"},
        "num_threads": 1,
        "resolution_in_ns": 0,
        "thread": {"0": {"histogram": {}, "cycles": 0, "min": 1000000, "max": 0, "avg": 0.0, "cpu": 0, "node": 0}},
    }
    f = tmp_path / "ct0.json"
    f.write_text(json.dumps(doc))
    code, out, err = run_cli("import", str(f))
    assert code == 0, err
    assert "imported" in out and "0 samples" in out and "latency max - µs" in out
