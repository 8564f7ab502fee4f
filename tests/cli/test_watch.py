"""``softrt watch``'s bad input: one line, exit 2, nothing written (no trace needed; the real
watches are in tests/trace/test_watch.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import pytest


@pytest.mark.parametrize("args, message", [
    (("--comm", "no-such-thread-x"), "no thread named 'no-such-thread-x' is running"),
    (("--tid", "999999999"), "no thread 999999999 is running"),
    (("--pid", "1", "--comm", "init"), "exactly one of --pid, --tid or --comm"),
    (("--tid", "SELF", "--period", "1us"), "period 1.0 µs is out of range"),
])
def test_bad_input_is_one_line_and_writes_nothing(tmp_path, run_cli, args, message):
    args = tuple(str(os.getpid()) if a == "SELF" else a for a in args)
    code, out, err = run_cli("watch", *args, "--out-dir", str(tmp_path / "runs"))
    assert code == 2 and err.startswith("softrt: error: ") and message in err and len(err.splitlines()) == 1, err
    assert not (tmp_path / "runs").exists()


def test_a_thread_id_given_as_a_process_and_too_many_threads_say_what_to_do(tmp_path, run_cli):
    stop = threading.Event()
    helper = threading.Thread(target=stop.wait)
    helper.start()
    many = subprocess.Popen([sys.executable, "-c", "import threading, sys\nev = threading.Event()\n"
                             "[threading.Thread(target=ev.wait, daemon=True).start() for _ in range(40)]\n"
                             "print('ready', flush=True)\nsys.stdin.read()"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert many.stdout.readline().strip() == "ready"
        code, _, err = run_cli("watch", "--pid", str(helper.native_id), "--out-dir", str(tmp_path))
        assert code == 2 and f"is a thread of process {os.getpid()}" in err and f"--tid {helper.native_id}" in err
        code, _, err = run_cli("watch", "--pid", str(many.pid), "--out-dir", str(tmp_path))
        assert code == 2 and "matches 41 threads" in err and "--tid" in err, err
    finally:
        stop.set()
        many.communicate("")
