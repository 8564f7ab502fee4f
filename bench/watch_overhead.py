#!/usr/bin/env python3
"""Benchmark of issue 21: does ``softrt watch`` slow the thread it watches, and what does it cost?

Runs cyclictest (``-t1 -p80 -i250 -a CPU -m -h``) alone and while ``softrt watch`` traces its
thread, alternately (order A B in odd rounds, B A in even rounds, so the drift of a noisy machine
cancels), and compares cyclictest's *own* figures (its histogram: p50, p99, p99.9, max, mean). For
the watched rounds it also reports what softrt saw (its latency p50/p99, agreement with
cyclictest) and what the watch cost: events traced per second, lost events, the CPU share of the
trace reader and of the attribution (on the other CPUs: the watch moves itself off the thread's).

    sudo python bench/watch_overhead.py --rounds 6 --duration 10         # a table
    sudo python bench/watch_overhead.py --rounds 6 --duration 10 --json  # the same as JSON
    sudo python bench/watch_overhead.py --rounds 6 --duration 10 --no-explain
    sudo python bench/watch_overhead.py --rounds 6 --duration 10 --trace-mode full

The watch starts within a few tenths of a second of cyclictest (in this process: softrt is
imported once), so a watched round is watched for all but its first ~0.3 s. Needs root and
rt-tests.
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

import numpy as np

from softrt.session.watch import WatchConfig, watch
from softrt.session.watch_targets import Target


def _percentiles(histogram: dict, qs=(50, 99, 99.9)) -> list[float]:
    buckets = sorted((int(k), v) for k, v in histogram.items())
    counts = np.cumsum([v for _, v in buckets])
    return [float(buckets[int(np.searchsorted(counts, q / 100 * counts[-1]))][0]) for q in qs]


def _rt_thread(proc: subprocess.Popen, priority: int) -> int:
    for _ in range(500):
        for tid in os.listdir(f"/proc/{proc.pid}/task"):
            stat = open(f"/proc/{proc.pid}/task/{tid}/stat").read().rsplit(")", 1)[1].split()
            if int(stat[37]) == priority and int(stat[38]) == 1:
                return int(tid)
        time.sleep(0.01)
    raise SystemExit("cyclictest's measurement thread never appeared")


def one_round(watched: bool, args, tmp: Path) -> dict:
    out = tmp / f"ct-{time.monotonic_ns()}.json"
    ct = subprocess.Popen(
        [
            "cyclictest",
            "-t1",
            f"-p{args.priority}",
            f"-i{args.interval_us}",
            f"-a{args.cpu}",
            "-m",
            "-q",
            f"-h{args.histogram_us}",
            f"-D{args.duration}",
            f"--json={out}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    row: dict = {"watched": watched}
    if watched:
        tid = _rt_thread(ct, args.priority)
        result = watch(
            WatchConfig(
                target=Target(tid=tid),
                duration_ns=(args.duration + 30) * 1_000_000_000,
                late_threshold_ns=args.late_threshold_us * 1000,
                out_dir=tmp / "runs",
                explain=not args.no_explain,
                trace_mode=args.trace_mode,
            )
        )
        summary = result.runs[0][0]
        lat, trace, why = summary.metrics.latency_us, summary.why_late.trace, summary.why_late
        secs = trace.traced_s or args.duration
        row.update(
            watch_cycles=summary.metrics.cycles,
            watch_p50_us=lat.p50,
            watch_p99_us=lat.p99,
            watch_max_us=lat.max,
            late_cycles=why.late_cycles,
            events_per_s=round((trace.events_read or 0) / secs),
            lost_events=trace.lost_events,
            reader_cpu_pct=round(100 * (trace.consumer_cpu_s or 0) / secs, 1),
            attribution_cpu_pct=round(100 * (trace.attribution_cpu_s or 0) / secs, 1),
        )
    if ct.wait(args.duration + 60) != 0:
        raise SystemExit(f"cyclictest failed: {ct.stderr.read()}")
    own = json.loads(out.read_text())["thread"]["0"]
    p50, p99, p999 = _percentiles(own["histogram"])
    row.update(
        cycles=own["cycles"],
        min_us=own["min"],
        p50_us=p50,
        p99_us=p99,
        p99_9_us=p999,
        max_us=own["max"],
        avg_us=own["avg"],
    )
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--duration", type=int, default=10, help="seconds per cyclictest run")
    ap.add_argument("--cpu", type=int, default=max(os.sched_getaffinity(0)))
    ap.add_argument("--priority", type=int, default=80)
    ap.add_argument("--interval-us", type=int, default=250)
    ap.add_argument("--histogram-us", type=int, default=4000)
    ap.add_argument("--late-threshold-us", type=int, default=20, help="the watch's --late-threshold")
    ap.add_argument("--no-explain", action="store_true", help="watch with --no-explain (the threads' own events only)")
    ap.add_argument("--trace-mode", choices=("auto", "full", "lean"), default="auto", help="the watch's --trace-mode")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="softrt-watch-bench-") as tmp:
        for r in range(args.rounds):
            for watched in (False, True) if r % 2 == 0 else (True, False):
                row = one_round(watched, args, Path(tmp))
                row["round"] = r + 1
                rows.append(row)
                print(
                    f"round {r + 1} {'watched' if watched else 'alone  '}: cyclictest p50 {row['p50_us']:.0f} "
                    f"p99 {row['p99_us']:.0f} max {row['max_us']} µs",
                    file=sys.stderr,
                )
    keys = ("min_us", "p50_us", "p99_us", "p99_9_us", "max_us", "avg_us")
    summary = {
        cond: {k: float(np.median([x[k] for x in rows if x["watched"] == w])) for k in keys}
        for cond, w in (("alone", False), ("watched", True))
    }
    watched = [x for x in rows if x["watched"]]
    summary["watch"] = {
        k: float(np.median([x[k] for x in watched]))
        for k in (
            "watch_p50_us",
            "watch_p99_us",
            "events_per_s",
            "lost_events",
            "reader_cpu_pct",
            "attribution_cpu_pct",
        )
    }
    if args.json:
        print(json.dumps({"rounds": rows, "median": summary}, indent=2))
        return
    print(
        f"cyclictest -t1 -p{args.priority} -i{args.interval_us} -a{args.cpu} -m, {args.duration} s a run, "
        f"{args.rounds} rounds, watched {'--no-explain' if args.no_explain else 'explaining'} "
        f"(--trace-mode {args.trace_mode}); its own figures "
        "(µs), median over rounds"
    )
    print(f"{'':10}" + "".join(f"{k.removesuffix('_us'):>10}" for k in keys))
    for cond in ("alone", "watched"):
        print(f"{cond:10}" + "".join(f"{summary[cond][k]:>10.1f}" for k in keys))
    print("per round (alone | watched, p50 p99 max):")
    for r in range(args.rounds):
        a, b = (next(x for x in rows if x["round"] == r + 1 and x["watched"] == w) for w in (False, True))
        print(
            f"  {r + 1}: {a['p50_us']:.0f} {a['p99_us']:.0f} {a['max_us']} | {b['p50_us']:.0f} {b['p99_us']:.0f} "
            f"{b['max_us']}  (softrt saw p50 {b['watch_p50_us']:.1f} p99 {b['watch_p99_us']:.1f})"
        )
    w = summary["watch"]
    print(
        f"watch: {w['events_per_s']:,.0f} events/s, {w['lost_events']:.0f} lost; reader {w['reader_cpu_pct']:.0f} % "
        f"and attribution {w['attribution_cpu_pct']:.0f} % of a CPU (medians)"
    )


if __name__ == "__main__":
    main()
