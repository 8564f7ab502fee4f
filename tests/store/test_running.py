"""store.running: is a run marked ``running`` still going? (a live supervisor, a dead one, a
reboot, a run directory read on another machine)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from datetime import datetime, timedelta, timezone

import pytest

from softrt.errors import ConfigError
from softrt.platform import get_platform
from softrt.schema.summary import RunSummary
from softrt.store.running import run_state

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=timezone.utc)


def _checkpoint(
    identity: str | None, pid: int, *, age_s: float = 30.0, host: str | None = None, interval_s: float = 60.0
) -> RunSummary:
    return RunSummary.from_dict(
        {
            "status": "running",
            "elapsed_s": 600.0,
            "checkpoint_at": (NOW - timedelta(seconds=age_s)).isoformat(),
            "host": {"hostname": host or socket.gethostname()},
            "supervisor": {"pid": pid, "identity": identity, "checkpoint_interval_s": interval_s},
        }
    )


def test_a_live_supervisor_is_running_and_its_elapsed_time_goes_on():
    state = run_state(_checkpoint(get_platform().process_identity(), os.getpid(), age_s=30), now=NOW)
    assert state.running and state.alive is True
    assert state.elapsed_s == 630.0 and state.checkpoint_age_s == 30.0
    assert state.label() == "running 10m" and state.sentence().startswith("Running for 10 min")


def test_a_dead_supervisor_is_not_running_any_more():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    identity = get_platform().process_identity(child.pid)
    child.kill()
    child.wait()
    state = run_state(_checkpoint(identity, child.pid), now=NOW)
    assert not state.running and state.alive is False and state.elapsed_s == 600.0
    assert state.label() == "died 10m"
    assert "Not running any more" in state.sentence() and "supervisor is gone" in state.sentence()


def test_a_reused_pid_is_not_the_supervisor():
    mine = get_platform().process_identity()
    boot, pid, start = mine.split("/")
    other = f"{boot}/{pid}/{int(start) + 1}"  # this pid, started at another time: another process
    assert run_state(_checkpoint(other, int(pid)), now=NOW).alive is False


def test_an_earlier_boot_of_this_machine_is_a_power_cut():
    state = run_state(_checkpoint("00000000-0000-0000-0000-000000000000/1/30", 1), now=NOW)
    assert state.alive is False and not state.running


def test_another_machine_is_judged_by_the_age_of_its_last_checkpoint():
    fresh = run_state(_checkpoint("x-boot/1/30", 1, age_s=90, host="another-pc"), now=NOW)
    assert fresh.alive is None and fresh.running and fresh.elapsed_s == 600.0
    assert "on another machine" in fresh.sentence()
    stale = run_state(_checkpoint("x-boot/1/30", 1, age_s=3 * 60 * 60, host="another-pc"), now=NOW)
    assert stale.alive is False and stale.label() == "died 10m"


def test_finished_runs_and_missing_fields():
    assert run_state(RunSummary(status="complete")).label() == "complete"
    assert run_state(RunSummary(status="partial")).running is False
    assert run_state(RunSummary(status="failed")).label() == "failed"
    assert run_state(RunSummary()).label() == "complete"  # a summary from before the status field
    bare = run_state(RunSummary(status="running", checkpoint_at="not a time"))
    assert bare.status == "running" and bare.elapsed_s is None and bare.alive is None and bare.label() == "running -"


def test_odd_fields_are_refused_when_read():
    with pytest.raises(ConfigError, match="elapsed_s must be a number"):
        RunSummary.from_dict({"status": "running", "elapsed_s": "x"}, "s.json")
    with pytest.raises(ConfigError, match="supervisor must be an object"):
        RunSummary.from_dict({"status": "running", "supervisor": []}, "s.json")


def test_a_killed_run_is_listed_with_the_time_of_its_last_record(tmp_path, state_dir, run_cli):
    """Issue 32: a run killed 7 s in was listed "died 0s" (its only checkpoint, at the start)."""
    import signal
    import time

    import psutil

    out = tmp_path / "runs"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "softrt",
            "run",
            "--profile",
            "none",
            "--wait",
            "sleep",
            "--duration",
            "20s",
            "--no-trace",
            "--quiet",
            "--out-dir",
            str(out),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    workers = []
    try:
        end = time.monotonic() + 60
        while not list(out.glob("*/summary.json")) and time.monotonic() < end:
            time.sleep(0.02)  # the first checkpoint: the loop is released
        time.sleep(1.6)
        workers = psutil.Process(proc.pid).children()
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    for worker in workers:  # (an untuned worker may outlive it by a moment: no process is left behind)
        try:
            worker.kill()
            worker.wait(10)
        except psutil.NoSuchProcess:
            pass
    code, text, err = run_cli("history", "--json")
    [row] = json.loads(text)
    assert row["status"] == "running" and row["running"]["alive"] is False, err
    assert 1.0 <= row["running"]["elapsed_s"] <= 20.0, row["running"]  # (its drain marks the samples each second)
