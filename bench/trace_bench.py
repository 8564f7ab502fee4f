#!/usr/bin/env python3
"""Benchmark of issue 9: does tracing the RT CPU make the loop worse, and what does it cost?

Alternates runs with and without tracing (``--trace``/``--no-trace``), same CPU, same priority,
order A B in odd rounds and B A in even rounds, for a spin loop and a sleep loop at 250 µs; reports
the pooled and per-round p99 (and p99.9, max) latency and period, the events traced per second,
lost events, and the CPU time of the trace consumer (the pipe reader thread) and of the
attribution (in the supervisor's main thread), both on the housekeeping CPU.

    sudo python bench/trace_bench.py --rounds 4 --duration 5            # a table
    sudo python bench/trace_bench.py --rounds 4 --duration 5 --json     # the same as JSON

Target (issue 9): p99 latency with tracing within 1 µs and within 10 % of without.
Needs root (tracefs, SCHED_FIFO).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from softrt.errors import SoftRTError
from softrt.schema.config import RunConfig
from softrt.session.run import run
from softrt.store.rundir import read_samples


def _one(wait: str, trace: bool, args, out: Path) -> dict:
    config = RunConfig(period_ns=args.period_us * 1000, duration_ns=int(args.duration * 1e9), wait=wait,
                       cpu=args.cpu, priority=args.priority, trace=trace, out_dir=out)
    for _ in range(60):  # another real-time run (another checkout's tests) holds the machine lock: wait
        try:
            result = run(config)
            break
        except SoftRTError as err:
            if "another real-time softrt run" not in str(err):
                raise
            time.sleep(2)
    else:
        raise SystemExit("another real-time softrt run kept the machine busy for 2 minutes")
    s = result.summary
    recs = read_samples(result.path)
    latency_us = (recs["detect_ns"] - recs["edge_ns"]) / 1e3
    why = s.why_late
    row = {"wait": wait, "trace": trace, "cycles": s.metrics.cycles, "latency_us": latency_us,
           "period_max_us": s.metrics.period_us.max, "status": s.status}
    if why is not None and why.on and why.trace is not None:
        t = why.trace
        secs = t.traced_s or args.duration
        row.update(events_per_s=(t.events_read or 0) / secs, lost_events=t.lost_events,
                   consumer_cpu_pct=100 * (t.consumer_cpu_s or 0) / secs,
                   attribution_cpu_pct=100 * (t.attribution_cpu_s or 0) / secs)
    elif trace:
        row["tracing"] = why.tracing if why is not None else None
    return row


def _pct(values: np.ndarray, q: float) -> float:
    return float(np.percentile(values, q)) if values.size else float("nan")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--duration", type=float, default=5.0, help="seconds per run")
    ap.add_argument("--period-us", type=int, default=250)
    ap.add_argument("--cpu", type=int, default=None)
    ap.add_argument("--priority", type=int, default=80)
    ap.add_argument("--waits", default="spin,sleep")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="softrt-trace-bench-") as tmp:
        for rnd in range(1, args.rounds + 1):
            for wait in args.waits.split(","):
                order = (False, True) if rnd % 2 else (True, False)
                for trace in order:
                    print(f"round {rnd}: {wait} {'traced' if trace else 'untraced'}", file=sys.stderr)
                    row = _one(wait, trace, args, Path(tmp))
                    row["round"] = rnd
                    rows.append(row)
    result = {"rounds": args.rounds, "duration_s": args.duration,
              "period_us": args.period_us, "waits": {}}
    for wait in args.waits.split(","):
        fig = {}
        for trace in (False, True):
            mine = [r for r in rows if r["wait"] == wait and r["trace"] == trace]
            lat = np.concatenate([r["latency_us"] for r in mine])
            fig["traced" if trace else "untraced"] = {
                "p99_us": round(_pct(lat, 99), 2), "p99_9_us": round(_pct(lat, 99.9), 2),
                "max_us": round(float(lat.max()), 1),
                "p99_per_round_us": [round(_pct(r["latency_us"], 99), 2) for r in mine],
                "period_max_us": [round(r["period_max_us"], 1) for r in mine],
            }
            if trace:
                for key in ("events_per_s", "lost_events", "consumer_cpu_pct", "attribution_cpu_pct"):
                    vals = [r[key] for r in mine if key in r]
                    fig["traced"][key] = round(float(np.mean(vals)), 2) if vals else None
                fig["traced"]["unavailable"] = sorted({r["tracing"] for r in mine if "tracing" in r})
        diff = fig["traced"]["p99_us"] - fig["untraced"]["p99_us"]
        fig["p99_difference_us"] = round(diff, 2)
        fig["target_met"] = bool(diff <= 1.0 and diff <= 0.1 * max(fig["untraced"]["p99_us"], 1e-9) or diff <= 0)
        result["waits"][wait] = fig
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"trace benchmark: {args.rounds} rounds x {args.duration:g} s per run, period {args.period_us} µs, "
          "(traced: a private tracefs instance on the RT CPU)")
    print(f"{'wait':6} {'':9} {'p99 µs':>8} {'p99.9 µs':>9} {'max µs':>9}  {'events/s':>9} {'lost':>5} "
          f"{'consumer %CPU':>13} {'attribution %CPU':>16}  p99 per round")
    for wait, fig in result["waits"].items():
        for label in ("untraced", "traced"):
            f = fig[label]
            extra = (f"{f['events_per_s']:9,.0f} {f['lost_events']:5} {f['consumer_cpu_pct']:13.1f} "
                     f"{f['attribution_cpu_pct']:16.1f}") if label == "traced" and f.get("events_per_s") is not None \
                else f"{'':9} {'':5} {'':13} {'':16}"
            print(f"{wait:6} {label:9} {f['p99_us']:8.2f} {f['p99_9_us']:9.2f} {f['max_us']:9.1f}  {extra}  "
                  f"{f['p99_per_round_us']}")
        print(f"{wait:6} p99 traced - untraced: {fig['p99_difference_us']:+.2f} µs "
              f"({'target met' if fig['target_met'] else 'target MISSED'}: within 1 µs and 10 %)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
