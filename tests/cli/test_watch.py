"""``softrt watch``'s bad input: one line, exit 2, nothing written (no trace needed; the real
watches are in tests/trace/test_watch.py)."""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest

from softrt.cli import main
from softrt.platform import get_platform

from ..child import call_as, nobody


@pytest.mark.parametrize(
    "args, message",
    [
        (("--comm", "no-such-thread-x"), "no thread named 'no-such-thread-x' is running"),
        (("--tid", "999999999"), "no thread 999999999 is running"),
        (("--pid", "1", "--comm", "init"), "exactly one of --pid, --tid or --comm"),
        (("--tid", "SELF", "--period", "1us"), "period 1.0 µs is out of range"),
        (("--tid", "SELF", "--trace-mode", "thin"), "'thin' is not one of 'auto', 'full', 'lean'"),
    ],
)
def test_bad_input_is_one_line_and_writes_nothing(tmp_path, run_cli, args, message):
    args = tuple(str(os.getpid()) if a == "SELF" else a for a in args)
    code, out, err = run_cli("watch", *args, "--out-dir", str(tmp_path / "runs"))
    assert code == 2 and err.startswith("softrt: error: ") and message in err and len(err.splitlines()) == 1, err
    assert not (tmp_path / "runs").exists()


def test_a_thread_id_given_as_a_process_and_too_many_threads_say_what_to_do(tmp_path, run_cli):
    stop = threading.Event()
    helper = threading.Thread(target=stop.wait)
    helper.start()
    many = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import threading, sys\nev = threading.Event()\n"
            "[threading.Thread(target=ev.wait, daemon=True).start() for _ in range(40)]\n"
            "print('ready', flush=True)\nsys.stdin.read()",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert many.stdout.readline().strip() == "ready"
        code, _, err = run_cli("watch", "--pid", str(helper.native_id), "--out-dir", str(tmp_path))
        assert code == 2 and f"is a thread of process {os.getpid()}" in err and f"--tid {helper.native_id}" in err
        code, _, err = run_cli("watch", "--pid", str(many.pid), "--out-dir", str(tmp_path))
        assert code == 2 and "matches 41 threads" in err and "--tid" in err, err
    finally:
        stop.set()
        many.communicate("")


def _watch_as_user(away: str) -> tuple[int, str]:
    """``softrt watch`` of this process, run by main() in this (forked, unprivileged) process."""
    os.environ["SOFTRT_STATE_DIR"] = os.path.join(away, "state")  # the user's own
    out_dir = os.path.join(away, "runs")
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            main(["watch", "--pid", str(os.getpid()), "--duration", "1s", "-q", "--out-dir", out_dir])
            code = 0
        except SystemExit as exit:
            code = exit.code
    return code, err.getvalue()


def test_a_user_without_privileges_gets_one_line_and_nothing_written():
    """Not root: no trace to read. One line saying so and what to do, exit 2, no run directory."""
    uid, gid = nobody()
    get_platform()  # softrt and its platform loaded before the fork: the child may not read site-packages
    away = Path(tempfile.mkdtemp(prefix="softrt-test-"))  # pytest's tmp_path is root's alone
    try:
        os.chown(away, uid, gid)
        code, err = call_as(uid, gid, _watch_as_user, str(away))
        assert code == 2 and err.startswith("softrt: error: ") and len(err.splitlines()) == 1, err
        assert "cannot trace the threads" in err and "root" in err, err
        assert not (away / "runs").exists()
    finally:
        shutil.rmtree(away)
