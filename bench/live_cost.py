#!/usr/bin/env python3
"""What watching a run costs the supervisor: CPU time of the progress callback (live view, plain
progress lines, metrics exporter) per second of a real run (issue 10, items 5 and 6).

The callback runs in the supervisor's main thread after every drain of the ring (20 a second); the
time it takes is time the supervisor does not drain. For each mode a real run at 250 µs measures
the thread CPU time spent inside the callback and the supervisor's whole CPU time.

    python bench/live_cost.py                 # quiet, plain, live, live + metrics; 10 s each
    python bench/live_cost.py --duration 30 --json

Needs what ``softrt run`` needs (root for the real-time profile). Results: docs/metrics.md ("Cost").
"""

from __future__ import annotations

import argparse
import io
import json
import tempfile
import time

from rich.console import Console

from softrt.cli.live import Watch
from softrt.cli.options import WatchOptions
from softrt.schema.config import RunConfig
from softrt.session.run import run

MODES = (("quiet", False), ("plain", False), ("live", False), ("live", True))


def measure(mode: str, metrics: bool, duration_s: float, out_dir: str) -> dict:
    err = Console(file=io.StringIO(), force_terminal=mode == "live", width=100)
    spent, calls = 0.0, 0
    with Watch(err, WatchOptions(quiet=mode == "quiet", metrics_port=0 if metrics else None)) as watch:

        def on_progress(p):
            nonlocal spent, calls
            t = time.thread_time()
            watch.on_progress(p)
            spent += time.thread_time() - t
            calls += 1

        t0 = time.process_time()
        result = run(
            RunConfig(duration_ns=int(duration_s * 1e9), out_dir=out_dir, trace=False), on_progress=on_progress
        )
        process_s = time.process_time() - t0
    return {
        "mode": mode + (" + metrics" if metrics else ""),
        "callback_ms_per_s": spent / duration_s * 1e3,
        "calls": calls,
        "supervisor_ms_per_s": process_s / duration_s * 1e3,
        "cycles": result.summary.metrics.cycles,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", type=float, default=10.0, help="seconds per mode")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as out_dir:
        rows = [measure(mode, metrics, args.duration, out_dir) for mode, metrics in MODES]
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(f"{'mode':<16}{'callback ms/s':>14}{'supervisor ms/s':>17}{'calls':>7}")
    for r in rows:
        print(f"{r['mode']:<16}{r['callback_ms_per_s']:>14.2f}{r['supervisor_ms_per_s']:>17.1f}{r['calls']:>7}")


if __name__ == "__main__":
    main()
