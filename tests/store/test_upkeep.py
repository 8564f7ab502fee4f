"""store.upkeep and the history's honesty (issue 32): a failed final update is caught up, a tree of
runs is added whole with its bad runs named, a running run cannot be forgotten, a killed run is
timed to its last record."""

from __future__ import annotations

import json
import os
import shutil
import socket
import sqlite3
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone

import pytest

from softrt.platform import get_platform
from softrt.store.history import History
from softrt.store.rundir import read_summary
from softrt.store.running import run_state

from ..synthetic import write_synthetic_run

STARTED = datetime(2026, 11, 30, 8, 0, tzinfo=timezone.utc)


def _dead_identity() -> tuple[str, int]:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    identity = get_platform().process_identity(child.pid)
    child.kill()
    child.wait()
    return identity, child.pid


def _as_checkpoint(
    run_dir, identity: str, pid: int, *, elapsed_s: float = 0.0, checkpoint_at: datetime = STARTED
) -> dict:
    """Make *run_dir*'s summary.json a checkpoint of supervisor *identity*; return the final one."""
    final = json.loads((run_dir / "summary.json").read_text())
    doc = dict(
        final,
        status="running",
        finished_at=None,
        elapsed_s=elapsed_s,
        checkpoint_at=checkpoint_at.isoformat(timespec="seconds"),
        supervisor={"pid": pid, "identity": identity, "checkpoint_interval_s": 60.0},
    )
    doc["host"] = dict(doc["host"], hostname=socket.gethostname())
    doc["config"] = dict(doc["config"], duration_ns=20_000_000_000)  # a 20 s run, cut short
    (run_dir / "summary.json").write_text(json.dumps(doc))
    return final


def test_a_run_whose_final_history_update_failed_is_caught_up_by_the_next_reader(tmp_path, softrt_home):
    """The disk under SOFTRT_HOME filled at the run's end: the run is stored complete, but its row
    said running, and history listed it "died 0s, 0 cycles" for ever."""
    run_dir = write_synthetic_run(tmp_path / "runs", cycles=2_000, started_at=STARTED)
    final = _as_checkpoint(run_dir, *_dead_identity())
    history = History()
    history.add_run(run_dir)  # the first checkpoint's row
    (run_dir / "summary.json").write_text(json.dumps(final))  # the final summary; its history update failed
    [row] = history.list_runs()
    assert row.status == "complete" and row.cycles == final["cycles"]
    assert history.get(row.run_id).status == "complete"


def test_a_killed_run_stays_listed_as_died(tmp_path, softrt_home):
    run_dir = write_synthetic_run(tmp_path / "runs", cycles=2_000, started_at=STARTED)
    _as_checkpoint(run_dir, *_dead_identity())
    History().add_run(run_dir)
    [row] = History().list_runs()
    assert row.status == "running" and run_state(row.summary, run_dir=row.path).label().startswith("died")


def test_a_killed_run_is_timed_to_its_last_record_not_its_last_checkpoint(tmp_path):
    """Killed 7 s in, before its second checkpoint: "died 7s", not "died 0s"."""
    run_dir = write_synthetic_run(tmp_path / "runs", cycles=2_000, started_at=STARTED)
    checkpoint_at = datetime.now(timezone.utc).replace(microsecond=0) - timedelta(seconds=60)
    _as_checkpoint(run_dir, *_dead_identity(), elapsed_s=0.2, checkpoint_at=checkpoint_at)
    last = (checkpoint_at + timedelta(seconds=6.8)).timestamp()
    os.utime(run_dir / "samples.parquet", (last, last))  # its last row group (or the drain's mark)
    summary = read_summary(run_dir)
    assert run_state(summary).label() == "died 0s"  # its checkpoint alone
    state = run_state(summary, run_dir=run_dir)
    assert state.elapsed_s == pytest.approx(7.0) and state.label() == "died 7s"
    late = (checkpoint_at + timedelta(days=3)).timestamp()  # touched later (by hand): never past the run's end
    os.utime(run_dir / "samples.parquet", (late, late))
    assert run_state(summary, run_dir=run_dir).elapsed_s == pytest.approx(20.0)


def test_a_running_run_cannot_be_forgotten(tmp_path, softrt_home, run_cli):
    """Forgotten, its next checkpoint put it back: refused, one line."""
    run_dir = write_synthetic_run(tmp_path / "runs", cycles=2_000, started_at=STARTED)
    _as_checkpoint(run_dir, get_platform().process_identity(), os.getpid(), checkpoint_at=datetime.now(timezone.utc))
    run_id = History().add_run(run_dir)
    code, out, err = run_cli("history", "forget", run_id)
    lines = err.strip().splitlines()
    assert code == 2 and out == "" and len(lines) == 1 and "is still running" in lines[0], err
    assert len(History()) == 1
    _as_checkpoint(run_dir, *_dead_identity())  # once it is gone, it may be
    History().add_run(run_dir)
    code, out, _ = run_cli("history", "forget", run_id)
    assert code == 0 and len(History()) == 0


def test_history_add_adds_every_good_run_and_names_each_bad_one(tmp_path, softrt_home, run_cli):
    tree = tmp_path / "copied"
    runs = [write_synthetic_run(tree, cycles=2_000, seed=k, started_at=STARTED + timedelta(hours=k)) for k in range(4)]
    (runs[1] / "summary.json").write_text("{")  # corrupt: sorted before two good ones
    (runs[2] / "summary.json").write_text(json.dumps({"schema": "softrt.summary/1", "status": "bogus"}))
    junk = tree / "20261130-090000-pc-dead"  # a run killed before it started: its files, no summary
    junk.mkdir()
    (junk / "samples.parquet").write_bytes(b"")
    code, out, err = run_cli("history", "add", str(tree))
    assert code == 1 and "Traceback" not in err
    stored = [line.split()[1] for line in out.splitlines()]
    assert stored == [read_summary(r).run_id for r in (runs[0], runs[3])]
    bad = [line for line in err.splitlines() if line.startswith("softrt: not stored:")]
    assert len(bad) == 3 and all(str(p) in " ".join(bad) for p in (runs[1], runs[2], junk))
    assert "2 run(s) stored" in err and "3 not stored" in err
    assert len(History()) == 2
    shutil.rmtree(junk)
    for r in runs[1:3]:
        shutil.rmtree(r)
    code, _, err = run_cli("history", "add", str(tree))  # all good: exit 0
    assert code == 0 and "not stored" not in err


def test_the_warning_of_a_failed_history_update_names_what_exists(tmp_path, monkeypatch, capsys):
    """It said "run not added to the history" (the row was there) and named --db, which run lacks."""
    from softrt.cli.history import remember

    run_dir = write_synthetic_run(tmp_path / "runs", cycles=2_000, started_at=STARTED)
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("SOFTRT_HOME", str(blocker / "home"))  # cannot be made: the history cannot be written
    remember([run_dir])
    err = " ".join(capsys.readouterr().err.split())
    assert "could not be updated with the run" in err and "SOFTRT_HOME" in err
    assert f"softrt history add {run_dir}" in err and "--db" not in err and "not added" not in err


@pytest.mark.root
@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")
def test_a_run_whose_history_disk_filled_is_listed_complete_once_there_is_space(
    tmp_path, state_dir, run_cli, monkeypatch
):
    """End to end: SOFTRT_HOME on a small tmpfs that fills while the run goes (a real ENOSPC)."""
    mnt = tmp_path / "home-disk"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)], check=True)
    try:
        monkeypatch.setenv("SOFTRT_HOME", str(mnt / "home"))
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
                "1.5s",
                "--no-trace",
                "--quiet",
                "--json",
                "--out-dir",
                str(out),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        end = time.monotonic() + 60
        while not list(out.glob("*/summary.json")) and time.monotonic() < end:
            time.sleep(0.02)  # the first checkpoint put the run in the history
        time.sleep(0.3)
        fd = os.open(mnt / "filler", os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            for block in (b"\xff" * 65536, b"\xff"):  # to the last byte (unbuffered)
                try:
                    while True:
                        os.write(fd, block)
                except OSError:
                    pass
        finally:
            os.close(fd)
        stdout, stderr = proc.communicate(timeout=60)
        assert proc.returncode == 0, stderr
        run_id = json.loads(stdout)["run_id"]
        err = " ".join(stderr.split())
        assert "could not be updated with the run" in err and "SOFTRT_HOME" in err and "--db" not in err, err
        assert "unusable" not in err  # the disk is full, the database is fine
        with sqlite3.connect(mnt / "home" / "history.sqlite") as conn:
            assert conn.execute("SELECT status FROM runs").fetchall() == [("running",)]
        os.unlink(mnt / "filler")
        code, text, err = run_cli("history", "--json")
        [row] = json.loads(text)
        assert code == 0 and row["run_id"] == run_id and row["status"] == "complete" and row["cycles"] > 0, (
            err,
            row,
            stderr,
        )
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)
