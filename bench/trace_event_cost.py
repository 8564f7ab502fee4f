#!/usr/bin/env python3
"""What one trace event costs the CPU that records it, recorded, filtered out, or filtered in (issue 31, item 1).

A sleeping loop pays for the events recorded on its own wake-up path (trace_bench.py), ~0.3 µs
each on the benchmark VM: at that size the paired p50 of whole runs drowns in a shared VM's noise.
This measures the cost itself: two SCHED_FIFO threads on the RT CPU ping-pong through pipes (each
round trip is two wake-ups and two switches on that CPU, the same calls as a sleeping loop's
wake-up), in batches, untraced and with a private tracefs instance (``trace.tracefs.Instance``,
like a run's) recording a variant of the events, the variants interleaved round by round. The
cost of an event is the round trip's extra time over the events the instance counted a round
trip (``per_cpu/cpuN/stats``: entries), median of the batches, median of the rounds.

The filters tested are the kernel's (Documentation/trace/events.rst, section 5): with a filter on
an event, ``trace_event_buffer_lock_reserve`` (kernel/trace/trace.c) writes the event into a
per-CPU temporary buffer, runs the filter, and copies it into the ring buffer only when it
passes; what a filter cannot save is the tracepoint, the field assignment and the filter itself.

    sudo PYTHONPATH=src python bench/trace_event_cost.py --rounds 5

Needs root (tracefs, SCHED_FIFO) and a C compiler. Bounded: each batch set lasts a fraction of a
second, on one CPU, under the machine lock of real-time runs.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

from softrt.cpus import CpuSet
from softrt.platform import get_platform
from softrt.trace.tracefs import Instance, find

PINGPONG_C = r"""
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
static int ab[2], ba[2], cpu, prio, trips, batches;
static void pin(void) {
    cpu_set_t set; CPU_ZERO(&set); CPU_SET(cpu, &set);
    pthread_setaffinity_np(pthread_self(), sizeof set, &set);
    struct sched_param sp = {.sched_priority = prio};
    pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp);
}
static void *echo(void *arg) {
    char c; pin();
    for (long i = 0; i < (long)trips * batches + 1; i++) {
        if (read(ab[0], &c, 1) != 1 || write(ba[1], &c, 1) != 1) break;
    }
    return arg;
}
static long now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1000000000L + t.tv_nsec; }
int main(int argc, char **argv) {
    if (argc != 5) return 2;
    cpu = atoi(argv[1]); prio = atoi(argv[2]); trips = atoi(argv[3]); batches = atoi(argv[4]);
    if (pipe(ab) || pipe(ba)) return 1;
    pthread_t t; pthread_create(&t, NULL, echo, NULL); pin();
    char c = 'x';
    if (write(ab[1], &c, 1) != 1 || read(ba[0], &c, 1) != 1) return 1;  /* both threads running */
    printf("%d\n", (int)gettid()); fflush(stdout);
    for (int b = 0; b < batches; b++) {
        long t0 = now();
        for (int i = 0; i < trips; i++) if (write(ab[1], &c, 1) != 1 || read(ba[0], &c, 1) != 1) return 1;
        printf("%.1f\n", (double)(now() - t0) / trips); fflush(stdout);
    }
    pthread_join(t, NULL);
    return 0;
}
"""

#: The variants: the events enabled and their filters (None: unfiltered). ``{pid}`` is the ping-pong's
#: first thread; its wake-ups pass ``pid == {pid}`` (half of them) and none passes ``pid == 1``.
VARIANTS: dict[str, list[tuple[str, str | None]]] = {
    "off": [],
    "switch": [("sched/sched_switch", None)],
    "switch filtered out": [("sched/sched_switch", "prev_pid == 1")],
    "switch+wakeup": [("sched/sched_switch", None), ("sched/sched_wakeup", None)],
    "switch+wakeup filtered out": [("sched/sched_switch", None), ("sched/sched_wakeup", "pid == 1")],
    "switch+wakeup filtered in": [("sched/sched_switch", None), ("sched/sched_wakeup", "pid != 1")],
}


def _batch(binary: str, cpu: int, args, variant: list[tuple[str, str | None]], tracefs) -> tuple[float, float]:
    """One set of batches under *variant*: (median ns a round trip, events recorded a round trip)."""
    inst = None
    try:
        if variant:
            inst = Instance.create(tracefs, f"softrt-bench-{os.getpid()}", CpuSet([cpu]), 16384)
            for event, expr in variant:
                if expr is not None:
                    inst.write(f"events/{event}/filter", expr)
                inst.write(f"events/{event}/enable", "1")
            inst.write("tracing_on", "1")
        out = subprocess.run(
            [binary, str(cpu), str(args.priority), str(args.trips), str(args.batches)],
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        ).stdout.split()
        per_trip = float(np.median([float(x) for x in out[1:]]))
        events = 0.0
        if inst is not None:
            inst.write("tracing_on", "0")
            events = inst.stats(cpu).get("entries", 0) + inst.lost([cpu])
            events /= args.trips * args.batches + 1
        return per_trip, events
    finally:
        if inst is not None:
            inst.remove()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--trips", type=int, default=2000, help="round trips a batch")
    ap.add_argument("--batches", type=int, default=15)
    ap.add_argument("--priority", type=int, default=50)
    ap.add_argument("--cpu", type=int, default=None)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    plat = get_platform()
    cpu = args.cpu if args.cpu is not None else max(os.sched_getaffinity(0))
    tracefs = find()
    if tracefs is None:
        raise SystemExit("tracefs is not mounted: mount it at /sys/kernel/tracing")
    rows: dict[str, list[tuple[float, float]]] = {name: [] for name in VARIANTS}
    with tempfile.TemporaryDirectory(prefix="softrt-event-cost-") as tmp:
        binary = os.path.join(tmp, "pingpong")
        src = os.path.join(tmp, "pingpong.c")
        with open(src, "w") as f:
            f.write(PINGPONG_C)
        subprocess.run(["cc", "-O2", "-pthread", "-o", binary, src], check=True)
        for rnd in range(args.rounds):
            for _ in range(150):  # one real-time run at a time on this machine
                lock = plat.try_lock(plat.machine_lock_path("rt-loop"))
                if lock is not None:
                    break
                time.sleep(2)
            else:
                raise SystemExit("another real-time softrt run kept the machine busy for 5 minutes")
            try:
                names = list(VARIANTS) if rnd % 2 == 0 else list(reversed(VARIANTS))
                for name in names:
                    rows[name].append(_batch(binary, cpu, args, VARIANTS[name], tracefs))
                    print(f"round {rnd + 1}: {name} {rows[name][-1][0]:.1f} ns", file=sys.stderr)
            finally:
                os.close(lock)
    base = [t for t, _ in rows["off"]]
    result: dict[str, dict[str, float | list[float]]] = {}
    for name, got in rows.items():
        extra = [t - b for (t, _), b in zip(got, base)]
        events = float(np.median([e for _, e in got]))
        result[name] = {
            "round_trip_ns": [round(t, 1) for t, _ in got],
            "extra_ns_median": round(float(np.median(extra)), 1),
            "events_a_round_trip": round(events, 2),
        }
    if args.json:
        print(json.dumps({"cpu": cpu, "load": os.getloadavg()[0], "variants": result}, indent=2))
        return 0
    print(
        f"one event's cost on CPU {cpu}: {args.rounds} rounds x {args.batches} batches x {args.trips} round trips "
        f"(2 wake-ups, 2 switches each); 1-minute load {os.getloadavg()[0]:.2f}"
    )
    for name, r in result.items():
        per = r["extra_ns_median"]
        print(
            f"{name:28} round trip {float(np.median(r['round_trip_ns'])):8.1f} ns  +{per:6.1f} ns  "
            f"{r['events_a_round_trip']:.2f} events recorded a round trip  {r['round_trip_ns']}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
