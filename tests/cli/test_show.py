"""``softrt show`` and ``softrt history`` of runs in progress: a live run's checkpoint, a run whose
supervisor was killed, and the listing at 80 columns (one line per run, ids that show takes)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import pytest

from softrt.platform import get_platform

from ..synthetic import write_synthetic_run
from .conftest import wait_dead


def _wait_for_checkpoint(run_base: Path, proc, timeout_s: float = 30.0) -> dict:
    """The first checkpoint with cycles in it."""
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        for f in run_base.glob("*/summary.json"):
            doc = json.loads(f.read_text())
            if doc["status"] == "running" and doc["cycles"] > 0:
                return doc
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.1)
    raise AssertionError("no checkpoint with cycles")


@pytest.mark.rt
def test_a_running_run_then_a_killed_one(tmp_path, state_dir, rt_settings_restored, monkeypatch, run_cli):
    import psutil

    monkeypatch.setenv("SOFTRT_CHECKPOINT_INTERVAL", "0.3")
    monkeypatch.setenv("COLUMNS", "80")
    proc = subprocess.Popen(
        [sys.executable, "-m", "softrt", "run", "--duration", "20s", "--json", "--out-dir", str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        ckpt = _wait_for_checkpoint(tmp_path, proc)
        run_dir = tmp_path / ckpt["run_id"]
        code, shown, err = run_cli("show", str(run_dir))
        assert code == 0, err
        assert "Running for" in shown and "RUNNING: the figures of the first" in shown
        assert "Distribution" in shown
        code, listed, _ = run_cli("history")  # in the history from its start, with its elapsed time
        assert code == 0 and "running " in listed and ckpt["run_id"][:15] in listed
        worker = psutil.Process(proc.pid).children()[-1]
    finally:
        proc.kill()  # SIGKILL: no cleanup, no final summary
        proc.communicate()
    wait_dead(worker)  # PR_SET_PDEATHSIG: the worker dies with its parent
    left = json.loads((run_dir / "summary.json").read_text())
    assert left["status"] == "running" and left["cycles"] >= ckpt["cycles"] > 0  # the statistics survive
    code, shown, err = run_cli("show", ckpt["run_id"][:15])  # by unique prefix, from the history
    assert code == 0, err
    assert "Not running any more: the supervisor is gone" in shown and "Running for" not in shown
    code, listed, _ = run_cli("history")  # (any softrt command also restores what the killed run changed)
    assert code == 0 and "died " in listed and "running " not in listed
    listing = json.loads(run_cli("history", "--json")[1])[0]
    assert listing["status"] == "running" and listing["running"]["alive"] is False  # the file's word, and the truth


def test_history_at_80_columns_has_one_line_per_run(tmp_path, softrt_home, run_cli, monkeypatch):
    """Long hosts, runs started in the same second, a 24 h cycle count, partial and died runs,
    through the command line at COLUMNS=80; every listed id is one softrt show takes."""
    monkeypatch.setenv("COLUMNS", "80")  # (each command makes its console: it reads the width then)
    base = tmp_path / "lab"
    t = datetime(2026, 11, 30, 7, 15, 2, tzinfo=timezone.utc)
    runs = [
        write_synthetic_run(base, cycles=2_000, host=host, seed=seed, started_at=when, scenario=scenario)
        for host, seed, when, scenario in (
            ("pc-a", 1, t, "tuned"),
            ("pc-b", 2, t, "untuned"),
            ("qualification-rig-b", 3, t.replace(hour=9), "tuned-with-a-long-scenario-name"),
            ("pc", 4, t.replace(day=29), "tuned"),
            ("pc", 5, t.replace(day=28), "tuned"),
        )
    ]
    edits = [
        {"cycles": 345_600_000, "mode": "not real-time"},
        {"status": "partial", "partial_reason": "x"},
        {
            "status": "running",
            "elapsed_s": 7_200.0,
            "checkpoint_at": "2026-11-30T09:15:02+00:00",
            "supervisor": {
                "pid": 2**22 + 1,
                "identity": get_platform().process_identity().split("/")[0] + f"/{2**22 + 1}/1",
                "checkpoint_interval_s": 60.0,
            },
        },
    ]
    for run, edit in zip(runs, edits):
        summary = json.loads((run / "summary.json").read_text())
        summary.update(edit)
        (run / "summary.json").write_text(json.dumps(summary))
    assert run_cli("history", "add", str(base))[0] == 0
    code, out, _ = run_cli("history")
    assert code == 0
    lines = out.splitlines()
    assert all(len(line) <= 80 for line in lines), out
    ids = [json.loads((r / "summary.json").read_text())["run_id"] for r in runs]
    rows = [line for line in lines if line.strip()[:8].isdigit()]
    assert len(rows) == len(runs), out  # one line per run: nothing wrapped
    assert "real-tim e" not in out and "345.6M" in out and "not RT" in out
    assert "partial" in out and "died 2h00m" in out
    for run_id, row in zip(sorted(ids, key=lambda i: i[:15]), rows):  # oldest first
        short = row.split()[0]
        assert run_id.startswith(short) and len(short) >= 15
        code, shown, err = run_cli("show", short, "--json")
        assert code == 0 and json.loads(shown)["run_id"] == run_id, err


def test_show_of_a_run_with_overruns_says_the_verdict_first_and_the_slack_low_tail(run_cli, tmp_path, home):
    """An overrun is negative slack: its low percentiles show it (the upper ones never would). The
    synthetic run's summary has no verdict block (as one stored before softrt wrote it): show judges it."""
    run = write_synthetic_run(tmp_path, cycles=10_000, misses=[(500 * k, 1 + k % 3) for k in range(1, 16)])
    status, out, _ = run_cli("show", str(run))
    assert status == 0
    lines = out.splitlines()
    assert lines[0].startswith(
        "FAILS the 250 µs cycle (0 missed updates, every period ≤ 270.0 µs): worst period "
        "1,000.2 µs (4.0× nominal), 30 missed updates (longest run 3)"
    )
    assert "10,000 cycles observed, so events rarer than about 1 in 10,000 cycles are unseen" in out
    slack = next(line for line in lines if line.split()[:1] == ["slack"]).split()[2::2]  # p50, p1, p0.1, p0.01, min
    p50, p1, p01, p001, low = (float(x.replace(",", "")) for x in slack)
    assert low <= p001 <= p01 < 0 < p1 <= p50  # 15 overruns in 10,000 cycles: below p0.1, above p1
    assert low == json.loads((run / "summary.json").read_text())["slack_us"]["min"]
