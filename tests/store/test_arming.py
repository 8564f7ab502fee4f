"""store.arming: the run directory of a supervisor killed before its run started is removed by the
next command (issue 32: it kept a 2.3 MB reserve and an empty samples.parquet for ever)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import psutil

from softrt.store import arming
from softrt.store.rundir import RESERVE, SAMPLES, SUMMARY


def _wait_dead(pid: int, timeout_s: float = 10.0) -> None:
    end = time.monotonic() + timeout_s
    while psutil.pid_exists(pid) and time.monotonic() < end:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return
        except psutil.NoSuchProcess:
            return
        time.sleep(0.02)


def test_a_run_killed_while_arming_is_removed_by_the_next_command(tmp_path, state_dir, run_cli):
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
            "5s",
            "--no-trace",
            "--quiet",
            "--out-dir",
            str(out),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        end = time.monotonic() + 60
        while not list(out.glob(f"*/{RESERVE}")) and time.monotonic() < end:
            time.sleep(0.005)  # the directory is made before the worker is spawned, which takes ~0.3 s
        workers = psutil.Process(proc.pid).children()
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    for worker in workers:
        _wait_dead(worker.pid)  # it dies with its supervisor (or ends on the closed pipe)
    [run_dir] = out.iterdir()
    assert not (run_dir / SUMMARY).exists()  # killed while arming: no run, the reserve and the samples file
    assert (run_dir / SAMPLES).exists()
    code, _, err = run_cli("history")
    assert code == 0 and f"removed the run directory {run_dir} left by a softrt that was killed" in err, err
    assert not run_dir.exists() and list((state_dir / "rundirs").iterdir()) == []
    code, _, err = run_cli("history")
    assert "removed the run directory" not in err  # once


def _dead_entry(state_dir, path) -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    from softrt.platform import get_platform

    identity = get_platform().process_identity(child.pid)
    child.kill()
    child.wait()
    (state_dir / "rundirs").mkdir(parents=True, exist_ok=True, mode=0o700)
    (state_dir / "rundirs" / f"{child.pid}-0.json").write_text(
        json.dumps({"format": arming.FORMAT, "identity": identity, "path": str(path)})
    )


def test_the_sweep_deletes_only_what_softrt_left(tmp_path, state_dir):
    os.makedirs(state_dir, mode=0o700, exist_ok=True)
    foreign = tmp_path / "foreign"  # an entry naming a directory with something else in it
    foreign.mkdir()
    (foreign / RESERVE).write_bytes(b"x")
    (foreign / "thesis.tex").write_text("mine")
    started = tmp_path / "started"  # a run killed after it started: its results stay, its reserve goes
    started.mkdir()
    (started / SUMMARY).write_text("{}")
    (started / RESERVE).write_bytes(b"x")
    link = tmp_path / "link"
    link.symlink_to(foreign)
    for path in (foreign, started, link):
        _dead_entry(state_dir, path)
    assert arming.sweep() == []
    assert sorted(p.name for p in foreign.iterdir()) == [RESERVE, "thesis.tex"]
    assert [p.name for p in started.iterdir()] == [SUMMARY]
    assert list((state_dir / "rundirs").iterdir()) == []


def test_a_live_supervisors_directory_is_left_alone(tmp_path, state_dir):
    run_dir = tmp_path / "arming"
    run_dir.mkdir()
    (run_dir / RESERVE).write_bytes(b"x")
    entry = arming.register(run_dir)
    assert arming.sweep() == [] and run_dir.exists() and entry.exists()
    arming.unregister(entry)
    assert not entry.exists()
