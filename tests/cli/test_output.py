"""Standard output never drops what it was given, even when a signal interrupts a full pipe."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

# A child that counts SIGINT (as softrt does during a run) and prints 200 kB to a pipe nobody
# reads yet, so write(2) blocks at 64 KiB and the signal interrupts it part-way.
CHILD = """
import signal, sys
count = [0]
signal.signal(signal.SIGINT, lambda *_: count.__setitem__(0, count[0] + 1))
if sys.argv[1] == "install":
    from softrt.cli.output import install
    install()
sys.stdout.write("x" * 200_000 + "\\n")
sys.stdout.flush()
sys.stderr.write(f"{count[0]}\\n")
"""


def _printed(mode: str) -> tuple[int, int]:
    proc = subprocess.Popen([sys.executable, "-c", CHILD, mode], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    time.sleep(0.5)  # the child is blocked on the full pipe
    for _ in range(5):
        proc.send_signal(signal.SIGINT)
        time.sleep(0.05)
    out, err = proc.communicate(timeout=30)
    return len(out), int(err or b"0")


def test_a_signal_during_a_blocked_write_loses_nothing():
    printed, signals = _printed("install")
    assert signals >= 1  # the write really was interrupted
    assert printed == 200_001  # CPython's own buffered stdout delivers 65,536 bytes here
