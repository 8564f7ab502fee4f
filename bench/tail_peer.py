"""Peer data (issue 33): ``softrt tail`` on a cyclictest ``-v`` file against ``softrt watch`` of the same
cyclictest thread. Not a test.

cyclictest (-t1 -p80 -i250 -a CPU -m -q -v -D SECONDS) writes its own latency per cycle; softrt watch
follows its thread from the kernel's trace meanwhile (its tail block models the same wake-up latency).
Both tails are fitted (softrt.store.tailsource for the file, the watch's own tail block) and compared:
do the 95 % intervals of ξ and of each return level overlap? Needs root, rt-tests and the machine
free (the watch takes the real-time lock).

    sudo PYTHONPATH=src python bench/tail_peer.py --seconds 60
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

from softrt.session.watch import WatchConfig, watch
from softrt.session.watch_targets import Target
from softrt.store.tailsource import TailOptions, load_tail


def _rt_thread_of(proc: subprocess.Popen, priority: int, timeout_s: float = 5.0) -> int:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        for t in psutil.Process(proc.pid).threads():
            stat = open(f"/proc/{proc.pid}/task/{t.id}/stat").read().rsplit(")", 1)[1].split()
            if int(stat[37]) == priority and int(stat[38]) == 1:
                return t.id
        time.sleep(0.01)
    raise SystemExit(f"no SCHED_FIFO {priority} thread in {proc.args}")


def _overlap(a: tuple, b: tuple) -> bool:
    return a[0] <= b[1] and b[0] <= a[1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=int, default=60)
    args = ap.parse_args()
    cpu = max(os.sched_getaffinity(0))
    tmp = Path(tempfile.mkdtemp(prefix="softrt-tail-peer-"))
    ct_file = tmp / "ct.txt"
    with ct_file.open("w") as out:
        ct = subprocess.Popen(
            ["cyclictest", "-t1", "-p80", "-i250", f"-a{cpu}", "-m", "-q", "-v", f"-D{args.seconds}"],
            stdout=out,
            stderr=subprocess.PIPE,
            text=True,
        )
        tid = _rt_thread_of(ct, 80)
        result = watch(
            WatchConfig(
                target=Target(tid=tid), duration_ns=(args.seconds + 20) * 10**9, keep_late=100, out_dir=tmp / "runs"
            )
        )
        ct.wait(timeout=30)
    [(summary, path)] = result.runs
    mine = summary.tail
    theirs = load_tail(str(ct_file), TailOptions(deadline_us=mine.deadline_us)).tail
    report = {"watch_run": str(path), "file": str(ct_file)}
    for name, t in (("watch", mine), ("cyclictest_v", theirs)):
        report[name] = {
            "cycles": t.cycles,
            "hours": t.hours,
            "threshold_us": t.threshold_us,
            "clusters": t.clusters,
            "refused": t.refused,
            "xi": None if t.xi is None else [t.xi.estimate, t.xi.low, t.xi.high],
            "return_levels": [[r.every_h, r.level_us, r.low_us, r.high_us] for r in t.return_levels],
        }
    if mine.fitted and theirs.fitted:
        report["xi_overlap"] = _overlap((mine.xi.low, mine.xi.high), (theirs.xi.low, theirs.xi.high))
        report["return_levels_overlap"] = [
            _overlap((a.low_us, a.high_us), (b.low_us, b.high_us))
            for a, b in zip(mine.return_levels, theirs.return_levels)
        ]
    json.dump(report, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
