"""SIGTERM and SIGHUP stop a run the way Ctrl-C does (issue 22.3): stored partial, printed, restored.

``kill``, ``timeout``, systemd and ``docker stop`` send SIGTERM (``timeout`` and systemd to the
whole process group, the worker included); a closed terminal or ssh session sends SIGHUP and
takes the terminal with it, so nothing more can be printed there.
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import select
import signal
import subprocess
import sys
import termios
import time

import pyarrow.parquet as pq
import pytest

from softrt.session import interrupts as deferral
from softrt.store.history import History


def test_sigterm_and_sighup_are_counted_like_ctrl_c_and_named():
    escaped = []
    before = {
        sig: signal.signal(sig, lambda signum, frame: escaped.append(signum)) for sig in (signal.SIGTERM, signal.SIGHUP)
    }  # without the deferral these would end pytest
    try:
        with deferral.deferred():
            os.kill(os.getpid(), signal.SIGTERM)
            os.kill(os.getpid(), signal.SIGHUP)
            assert deferral.requested() == 2 and escaped == []
            assert deferral.reason() == "interrupted by SIGTERM" and deferral.exit_status() == 143
        with deferral.deferred():
            os.kill(os.getpid(), signal.SIGHUP)
            assert deferral.reason() == "interrupted by SIGHUP" and deferral.exit_status() == 129
        os.kill(os.getpid(), signal.SIGTERM)  # outside: the previous handler is back
        assert escaped == [signal.SIGTERM]
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)


def _running(out_dir) -> bool:
    """The run's loop has cycled for a moment: its first checkpoint (written when it is released) is 0.2 s old."""
    return any(time.time() - p.stat().st_mtime > 0.2 for p in out_dir.glob("*/summary.json"))


def _wait(condition, timeout_s: float = 60.0) -> None:
    end = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.05)


def _drained(fd: int) -> bool:
    while select.select([fd], [], [], 0)[0]:
        os.read(fd, 1 << 16)
    return True


def _stored(out_dir) -> dict:
    (summary,) = out_dir.glob("*/summary.json")
    return json.loads(summary.read_text())


@pytest.mark.rt
def test_sigterm_to_the_process_group_stores_the_partial_run_with_the_cycles_so_far(
    tmp_path, state_dir, rt_settings_restored
):
    """The issue's probe: SIGTERM a few seconds into a 6 s run, sent as ``timeout`` sends it (to the group)."""
    out_dir = tmp_path / "runs"
    proc = subprocess.Popen(
        [sys.executable, "-m", "softrt", "run", "--duration", "6s", "--json", "--out-dir", str(out_dir)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    _wait(lambda: _running(out_dir))
    os.killpg(proc.pid, signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 1 and "Traceback" not in err, err
    s = json.loads(out)  # printed
    assert s["status"] == "partial" and s["partial_reason"] == "interrupted by SIGTERM"
    assert 0 < s["cycles"] < 6 * 4000 and s["records_missing"] == 0  # the worker ignored it and ended cleanly
    assert (
        _stored(out_dir)["cycles"]
        == s["cycles"]
        == pq.read_metadata(out_dir / s["run_id"] / "samples.parquet").num_rows
    )
    assert [r.status for r in History().list_runs()] == ["partial"]
    assert all(c["restored"] for c in s["tuning"]["system_changes"])
    assert list(state_dir.glob("restore/*.jsonl")) == []


@pytest.mark.rt
def test_a_closed_terminal_sighup_stops_compare_keeps_its_run_and_nothing_crashes(
    tmp_path, state_dir, rt_settings_restored
):
    """A closed ssh session: SIGHUP, and the terminal gone (every later write fails with EIO)."""
    out_dir = tmp_path / "runs"
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "softrt", "compare", "untuned", "tuned", "--duration", "6s", "--out-dir", str(out_dir)],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        start_new_session=True,
        env={**os.environ, "TERM": "xterm", "COLUMNS": "120"},
        preexec_fn=lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 0),
    )  # the command's terminal
    os.close(slave)
    try:
        _wait(lambda: _drained(master) and _running(out_dir))  # (a full terminal would stop the live view)
    finally:
        os.close(master)  # the hang-up: SIGHUP to the terminal's session (pty(7), credentials(7))
    assert proc.wait(timeout=60) == 1
    s = _stored(out_dir)
    assert s["status"] == "partial" and s["partial_reason"] == "interrupted by SIGHUP" and s["cycles"] > 0
    assert s["scenario"] == "untuned"  # the second scenario never started
    assert [(r.run_id, r.status) for r in History().list_runs()] == [(s["run_id"], "partial")]
