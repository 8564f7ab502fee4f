#!/usr/bin/env python3
"""Benchmarks of issues 9, 17 and 20: does tracing the RT CPU make the loop worse, and what does it cost?

Alternates runs with and without tracing (``--trace``/``--no-trace``), same CPU, same priority,
order A B in odd rounds and B A in even rounds, for a spin loop and a sleep loop at 250 µs; reports
the pooled and per-round p99 (and p99.9, max) latency and period, the paired difference of each
round (traced - untraced, the two runs next to each other) and its median, the events traced per
second, lost events, and the CPU time of the trace consumer (the pipe reader thread) and of the
attribution (in the supervisor's main thread), both on the housekeeping CPU.

``--oslat`` measures, instead, what the trace adds to each interruption of a spinning task, the
only way it can delay a spin loop: ``oslat`` (rt-tests) spins on the RT CPU, SCHED_FIFO, alternately
alone and traced by a run's own trace (``trace.session.TraceSession``, its filters pointed at
oslat's measuring thread), and its histogram of the gaps between two reads of the clock gives the
interruptions' durations (the 250 Hz tick and its softirqs, mostly) and the time they took a second.
A hypervisor stall lands in either run; the median of the gaps is immune to it.

``--ethercat PERIODS`` runs, instead, an EtherCAT loop against ``softrt ecat-sim`` (2 slaves, on
the housekeeping CPU) over a veth pair in a private network namespace, traced and untraced, and
reports the same trace figures with the frames the simulator lost (issue 20: a polling worker must
not flood the trace). The simulator runs as docs/ethercat.md runs it: SCHED_FIFO 10, ``--busy-poll 60``.

    sudo python bench/trace_bench.py --rounds 4 --duration 5 --max-load 1   # a table
    sudo python bench/trace_bench.py --rounds 4 --duration 5 --json         # the same as JSON
    sudo PYTHONPATH=src python bench/trace_bench.py --ethercat 1000,250 --duration 10
    sudo PYTHONPATH=src python bench/trace_bench.py --oslat --rounds 6 --duration 5
    sudo PYTHONPATH=src python bench/trace_bench.py --waits sleep --rounds 9               # lean: the default
    sudo PYTHONPATH=src python bench/trace_bench.py --waits sleep --rounds 9 --mode full   # every event
    sudo PYTHONPATH=src python bench/trace_bench.py --waits sleep --drop sched:sched_wakeup  # fewer events

``--drop`` and ``--filter`` run the traced runs with fewer events or extra kernel filters, to see
what a configuration costs the loop (the run itself is unchanged); what one event costs, filtered
or not, is measured better by ``bench/trace_event_cost.py`` (a few ns, not µs of noise).

Target (issues 9, 17 and 31): p50 and p99 latency with tracing within 1 µs of without (p99 also
within 10 %), judged on the median of the rounds' paired differences (one round's noise, a hypervisor
stall in either run, moves the pooled p99 by tens of µs on a shared VM) and shown pooled too. Each
run also gives the RT CPU's interrupts while the loop runs (/proc/interrupts: the trace must add no
irq_work, IWI, of a reader woken from the RT CPU) and its events a second by kind and a cycle: what
the loop pays is the events on its own wake-up path (a sleeping loop: the timer interrupt's entry
and exit, its wake-up and the switch to it). Issue 20: on an EtherCAT run, no event lost and the
reader under 10 % of a housekeeping CPU.
Needs root (tracefs, SCHED_FIFO; network namespaces for --ethercat).
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

from softrt.errors import SoftRTError
from softrt.schema.config import RunConfig
from softrt.session.run import run
from softrt.store.rundir import read_samples

#: The RT CPU's interrupts counted per run (/proc/interrupts, Documentation/filesystems/proc.rst):
#: LOC the local timer, IWI irq_work (how the ring buffer wakes a blocked reader), CAL function calls,
#: RES reschedule IPIs. Tracing must add none of its own (issue 31: no reader wake-ups on the RT CPU).
IRQ_ROWS = ("LOC", "IWI", "CAL", "RES")


def _irq_counts(cpu: int) -> dict[str, int]:
    out = {}
    with open("/proc/interrupts") as f:
        ncpu = len(f.readline().split())
        for line in f:
            parts = line.split()
            name = parts[0].rstrip(":") if parts else ""
            if name in IRQ_ROWS and len(parts) > ncpu:
                out[name] = int(parts[1 + cpu])
    return out


class _Events:
    """The bench's variant of the run's event list (``--drop``, ``--filter``): which events a cycle can
    do without, measured; the run itself is unchanged (the bench's view only, undone by close)."""

    def __init__(self, drop: list[str], filters: dict[str, str]) -> None:
        from softrt.trace import session, tracefs

        self._session, self._wanted = session, session.wanted_events
        self._inst, self._enable = tracefs.Instance, tracefs.Instance.enable
        wanted, enable = self._wanted, self._enable

        def wanted_events(*a, **kw):
            return [(e, scope) for e, scope in wanted(*a, **kw) if e not in drop]

        def enable_filtered(inst, event, filter_expr=None):
            extra = filters.get(event)
            if extra == "none":  # the event unfiltered: every task's (a filter costs even when it passes)
                filter_expr = None
            elif extra is not None:
                filter_expr = f"({filter_expr}) && ({extra})" if filter_expr else extra
            return enable(inst, event, filter_expr)

        session.wanted_events = wanted_events
        tracefs.Instance.enable = enable_filtered

    def close(self) -> None:
        self._session.wanted_events = self._wanted
        self._inst.enable = self._enable


class _KindCounter:
    """Counts the RT CPU's events by name as the attribution receives them (the bench's view only)."""

    def __init__(self) -> None:
        from collections import Counter

        from softrt.analysis.attribution import Attributor

        self.counts: Counter = Counter()
        self._cls, self._orig = Attributor, Attributor.add_events
        counts, orig = self.counts, self._orig

        def add_events(attributor, events):
            counts.update(e.name for e in events if e.cpu == attributor.rt_cpu)
            return orig(attributor, events)

        Attributor.add_events = add_events

    def close(self) -> None:
        self._cls.add_events = self._orig


def _one(wait: str, trace: bool, args, out: Path) -> dict:
    config = RunConfig(
        period_ns=args.period_us * 1000,
        duration_ns=int(args.duration * 1e9),
        wait=wait,
        cpu=args.cpu,
        priority=args.priority,
        trace=trace,
        trace_mode=args.mode,
        out_dir=out,
    )
    rt_cpu = args.cpu if args.cpu is not None else max(os.sched_getaffinity(0))
    # The interrupts are counted while the loop runs (from the first progress report to the last
    # one before its end): the start and the stop of a run (the events enabled and disabled, the
    # idle RT CPU kicked by the other's load balancer) are not what the loop pays.
    marks: list[tuple[float, dict[str, int]]] = []

    def on_progress(progress) -> None:
        if progress.elapsed_s < args.duration:
            marks.append((time.monotonic(), _irq_counts(rt_cpu)))
            del marks[1:-1]

    for _ in range(60):  # another real-time run (another checkout's tests) holds the machine lock: wait
        kinds = _KindCounter()
        variant = _Events(args.drop, args.filters)
        marks.clear()
        try:
            result = run(config, on_progress=on_progress)
            break
        except SoftRTError as err:
            if "another real-time softrt run" not in str(err):
                raise
            time.sleep(2)
        finally:
            kinds.close()
            variant.close()
    else:
        raise SystemExit("another real-time softrt run kept the machine busy for 2 minutes")
    (t0, irq0), (t1, irq1) = marks[0], marks[-1]
    secs = max(t1 - t0, 1e-9)
    s = result.summary
    recs = read_samples(result.path)
    latency_us = (recs["detect_ns"] - recs["edge_ns"]) / 1e3
    why = s.why_late
    row = {
        "wait": wait,
        "trace": trace,
        "cycles": s.metrics.cycles,
        "latency_us": latency_us,
        "period_max_us": s.metrics.period_us.max,
        "status": s.status,
        "irqs_per_s": {k: round((irq1[k] - irq0.get(k, 0)) / secs, 1) for k in irq1},
    }
    if why is not None and why.on and why.trace is not None:
        row.update(_trace_figures(why.to_dict(), args.duration))
        traced_s = why.to_dict()["trace"].get("traced_s") or args.duration
        row["events_per_s_by_kind"] = {k: round(n / traced_s) for k, n in kinds.counts.most_common()}
    elif trace:
        row["tracing"] = why.tracing if why is not None else None
    return row


def _trace_figures(why: dict | None, secs: float) -> dict:
    """events/s, lost events and the reader's and the attribution's share of a housekeeping CPU."""
    t = (why or {}).get("trace") or {}
    secs = t.get("traced_s") or secs
    return {
        "events_per_s": (t.get("events_read") or 0) / secs,
        "lost_events": t.get("lost_events"),
        "consumer_cpu_pct": 100 * (t.get("consumer_cpu_s") or 0) / secs,
        "attribution_cpu_pct": 100 * (t.get("attribution_cpu_s") or 0) / secs,
    }


def _ethercat(period_us: int, trace: bool, args, out: Path) -> dict:
    """One EtherCAT run at *period_us* against ecat-sim over veth in its own network namespace."""
    name = f"softrt-tracebench-{os.getpid()}"
    subprocess.run(["ip", "netns", "add", name], check=True)
    sim = None
    try:
        for cmd in (
            ["link", "add", "ecm0", "type", "veth", "peer", "name", "ecs0"],
            ["link", "set", "lo", "up"],
            ["link", "set", "ecm0", "up"],
            ["link", "set", "ecs0", "up"],
        ):
            subprocess.run(["ip", "-n", name, *cmd], check=True)
        # as docs/ethercat.md runs it: SCHED_FIFO and polling around the frame's due time, or a busy
        # housekeeping CPU holds its replies past the master's deadline
        fifo = ["chrt", "-f", str(args.sim_fifo)] if args.sim_fifo else []
        sim = subprocess.Popen(
            [
                "ip",
                "netns",
                "exec",
                name,
                "taskset",
                "-c",
                str(args.sim_cpu),
                *fifo,
                sys.executable,
                "-m",
                "softrt",
                "ecat-sim",
                "--iface",
                "ecs0",
                "--slaves",
                "2",
                *args.sim_args.split(),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        line = sim.stdout.readline()
        while line.startswith("softrt: "):
            line = sim.stdout.readline()
        if "answering" not in line:
            raise SystemExit(f"ecat-sim did not start: {line}")
        run = subprocess.run(
            [
                "ip",
                "netns",
                "exec",
                name,
                sys.executable,
                "-m",
                "softrt",
                "run",
                "--device",
                "ethercat:ecm0",
                "--axes",
                "2",
                "--period",
                f"{period_us}us",
                "--duration",
                f"{args.duration}s",
                "--bus-timeout",
                "1s",
                "--quiet",
                "--json",
                "--out-dir",
                str(out),
                "--trace" if trace else "--no-trace",
            ],
            capture_output=True,
            text=True,
            timeout=180 + 3 * args.duration,
            env={**os.environ, "SOFTRT_HOME": str(out / "home")},
        )
    finally:
        if sim is not None:
            sim.terminate()
            sim.wait(10)
        subprocess.run(["ip", "netns", "del", name])
    if run.returncode not in (0, 1):
        return {"period_us": period_us, "trace": trace, "error": run.stderr.strip()[-300:]}
    s = json.loads(run.stdout)
    row = {
        "period_us": period_us,
        "trace": trace,
        "status": s["status"],
        "cycles": s["cycles"],
        "device_errors": s["misses"].get("device_errors"),
        "lost_frames": (s.get("board") or {}).get("lost_frames"),
    }
    if trace:
        row.update(_trace_figures(s.get("why_late"), args.duration), tracing=(s.get("why_late") or {}).get("tracing"))
    return row


def _ethercat_main(args) -> int:
    rows = []
    with tempfile.TemporaryDirectory(prefix="softrt-trace-bench-") as tmp:
        for period in (int(p) for p in args.ethercat.split(",")):
            for trace in (True, False):
                print(f"ethercat {period} µs {'traced' if trace else 'untraced'}", file=sys.stderr)
                rows.append(_ethercat(period, trace, args, Path(tmp)))
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(
        f"trace benchmark, EtherCAT: 2 simulated slaves (softrt ecat-sim on CPU {args.sim_cpu}, "
        f"{f'SCHED_FIFO {args.sim_fifo}' if args.sim_fifo else 'SCHED_OTHER'} {args.sim_args}), "
        f"{args.duration:g} s per run, load {os.getloadavg()[0]:.2f}"
    )
    print(
        f"{'cycle':>7} {'':9} {'status':9} {'cycles':>7} {'device errors':>13} {'lost frames':>11}  "
        f"{'events/s':>9} {'lost':>5} {'reader %CPU':>11} {'attribution %CPU':>16}"
    )
    for r in rows:
        head = f"{r['period_us']:>5}µs {'traced' if r['trace'] else 'untraced':9}"
        if "error" in r:
            print(f"{head} error: {r['error']}")
            continue
        trace = (
            (
                f"{r['events_per_s']:9,.0f} {r['lost_events']:5} {r['consumer_cpu_pct']:11.1f} "
                f"{r['attribution_cpu_pct']:16.1f}"
            )
            if r["trace"] and "events_per_s" in r
            else ""
        )
        print(
            f"{head} {r['status']:9} {r['cycles']:7,} {r['device_errors'] or 0:13,} {r['lost_frames'] or 0:11,}  {trace}"
        )
    return 0


def _oslat(trace: bool, args, out: Path) -> dict:
    """oslat spinning on the RT CPU for --duration s, traced or not; its interruptions (gaps >= 2 µs)."""
    from softrt.ipc.layout import RECORD_DTYPE
    from softrt.trace import TraceSession

    cpu = args.cpu
    jf = out / "oslat.json"
    proc = subprocess.Popen(
        [
            "oslat",
            "-c",
            str(cpu),
            "-C",
            str(min(os.sched_getaffinity(0))),
            "-f",
            str(args.priority),
            "-D",
            f"{max(1, round(args.duration))}",
            "-q",
            f"--json={jf}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    tracer = None
    if trace:
        tid = None
        while tid is None and proc.poll() is None:  # oslat's measuring thread: the one pinned to the RT CPU
            time.sleep(0.01)
            for t in Path(f"/proc/{proc.pid}/task").iterdir():
                status = (t / "status").read_text()
                if f"Cpus_allowed_list:\t{cpu}\n" in status:
                    tid = int(t.name)
        tracer = TraceSession(RunConfig(cpu=cpu, period_ns=args.period_us * 1000, wait="spin"))
        tracer.start(tid)
        none = np.zeros(0, dtype=RECORD_DTYPE)
        while proc.poll() is None:
            tracer.feed(none)  # the attribution reads the events as in a run (there are no cycles to explain)
            time.sleep(0.05)
        tracer.close()
    if proc.wait() != 0 or not jf.exists():
        raise SystemExit(f"oslat failed: {proc.stderr.read().strip()}")
    th = json.loads(jf.read_text())["thread"]
    hist = {int(k): int(v) for k, v in next(iter(th.values()))["histogram"].items()}
    gaps = np.repeat(np.array([k for k in hist if k >= 2]), [hist[k] for k in hist if k >= 2])
    row = {
        "trace": trace,
        "gaps_per_s": gaps.size / args.duration,
        "stolen_us_per_s": float(gaps.sum()) / args.duration,
        "gap_p50_us": float(np.median(gaps)) if gaps.size else None,
    }
    if tracer is not None:
        why = tracer.why_late()
        row.update(_trace_figures(why, args.duration), tracing=why.get("tracing"))
    return row


def _oslat_main(args) -> int:
    from softrt.platform import get_platform
    from softrt.platform.linux.backend import RT_RUNTIME
    from softrt.session.changes import ChangeJournal

    plat = get_platform()
    rows = []
    cpu = args.cpu if args.cpu is not None else max(os.sched_getaffinity(0))
    # The trace's reader is a thread of this process: on the housekeeping CPUs, as in a run.
    os.sched_setaffinity(0, os.sched_getaffinity(0) - {cpu})
    args.cpu = cpu
    with tempfile.TemporaryDirectory(prefix="softrt-trace-bench-") as tmp:
        for rnd in range(1, args.rounds + 1):
            _wait_for_load(args.max_load)
            lock = plat.try_lock(plat.machine_lock_path("rt-loop"))  # no softrt run starts meanwhile
            if lock is None:
                raise SystemExit("another real-time softrt run holds this machine")
            journal = ChangeJournal()
            try:  # RT throttling would stop the spinning oslat 50 ms every second
                journal.set(RT_RUNTIME, "-1", "bench: oslat spins")
                for trace in (False, True) if rnd % 2 else (True, False):
                    print(f"round {rnd}: oslat {'traced' if trace else 'untraced'}", file=sys.stderr)
                    rows.append({"round": rnd, **_oslat(trace, args, Path(tmp))})
            finally:
                journal.restore()
                os.close(lock)
    figs = {}
    for label, trace in (("untraced", False), ("traced", True)):
        mine = [r for r in rows if r["trace"] is trace]
        figs[label] = {k: [round(r[k], 2) for r in mine] for k in ("gaps_per_s", "stolen_us_per_s", "gap_p50_us")}
        if trace:
            figs[label].update(
                {
                    k: round(float(np.mean([r[k] for r in mine])), 2)
                    for k in ("events_per_s", "consumer_cpu_pct", "attribution_cpu_pct")
                },
                lost_events=sum(r["lost_events"] or 0 for r in mine),
            )
    paired = {
        k: [round(t - u, 2) for t, u in zip(figs["traced"][k], figs["untraced"][k])]
        for k in ("stolen_us_per_s", "gap_p50_us")
    }
    result = {
        "rounds": args.rounds,
        "duration_s": args.duration,
        **figs,
        "paired": paired,
        "median": {k: round(float(np.median(v)), 2) for k, v in paired.items()},
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(
        f"trace benchmark, oslat on the RT CPU: {args.rounds} rounds x {args.duration:g} s, load "
        f"{os.getloadavg()[0]:.2f}"
    )
    for label in ("untraced", "traced"):
        f = figs[label]
        print(
            f"{label:9} interruptions/s {f['gaps_per_s']}; their median µs {f['gap_p50_us']}; "
            f"µs taken a second {f['stolen_us_per_s']}"
        )
    m = result["median"]
    print(
        f"traced - untraced, median of the rounds' pairs: {m['gap_p50_us']:+.2f} µs an interruption, "
        f"{m['stolen_us_per_s']:+.1f} µs a second; {figs['traced']['events_per_s']:,.0f} events/s, "
        f"{figs['traced']['lost_events']} lost, reader {figs['traced']['consumer_cpu_pct']:.1f} % of a CPU"
    )
    return 0


def _wait_for_load(max_load: float, timeout_s: float = 900) -> None:
    end = time.monotonic() + timeout_s
    while max_load > 0 and os.getloadavg()[0] >= max_load and time.monotonic() < end:
        print(f"1-min load {os.getloadavg()[0]:.2f} >= {max_load}: waiting", file=sys.stderr)
        time.sleep(30)


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
    ap.add_argument(
        "--max-load",
        type=float,
        default=0.0,
        help="before each round, wait (up to 15 minutes) for a 1-minute load below this",
    )
    ap.add_argument("--ethercat", help="EtherCAT periods in µs (e.g. 1000,250): the EtherCAT benchmark instead")
    ap.add_argument("--sim-cpu", type=int, default=0, help="--ethercat: the simulator's CPU (housekeeping)")
    ap.add_argument(
        "--sim-fifo", type=int, default=10, help="--ethercat: the simulator's SCHED_FIFO priority (0: normal)"
    )
    ap.add_argument("--sim-args", default="--busy-poll 60", help="--ethercat: more ecat-sim options, space-separated")
    ap.add_argument("--oslat", action="store_true", help="the interruptions of a spinning oslat, traced or not")
    ap.add_argument(
        "--mode",
        choices=["auto", "full", "lean"],
        default="auto",
        help="the traced runs' --trace-mode (auto, softrt's default: lean for a sleeping loop, full for the others)",
    )
    ap.add_argument(
        "--drop", default="", help="events the traced runs leave out (system:event, comma-separated): an experiment"
    )
    ap.add_argument(
        "--filter",
        action="append",
        default=[],
        metavar="EVENT=EXPR",
        help="a filter added to an event of the traced runs (events.rst section 5; 'none': its filter removed), "
        "repeatable: an experiment",
    )
    args = ap.parse_args()
    args.drop = [e for e in args.drop.split(",") if e]
    args.filters = dict(f.split("=", 1) for f in args.filter)
    if args.oslat:
        return _oslat_main(args)
    if args.ethercat:
        return _ethercat_main(args)
    rows = []
    with tempfile.TemporaryDirectory(prefix="softrt-trace-bench-") as tmp:
        for rnd in range(1, args.rounds + 1):
            _wait_for_load(args.max_load)
            for wait in args.waits.split(","):
                order = (False, True) if rnd % 2 else (True, False)
                for trace in order:
                    print(f"round {rnd}: {wait} {'traced' if trace else 'untraced'}", file=sys.stderr)
                    row = _one(wait, trace, args, Path(tmp))
                    row["round"] = rnd
                    rows.append(row)
    result = {
        "rounds": args.rounds,
        "duration_s": args.duration,
        "period_us": args.period_us,
        "mode": args.mode,
        "dropped": args.drop,
        "filters": args.filters,
        "waits": {},
    }
    for wait in args.waits.split(","):
        fig = {}
        for trace in (False, True):
            mine = [r for r in rows if r["wait"] == wait and r["trace"] == trace]
            lat = np.concatenate([r["latency_us"] for r in mine])
            fig["traced" if trace else "untraced"] = {
                "p50_us": round(_pct(lat, 50), 2),
                "p99_us": round(_pct(lat, 99), 2),
                "p99_9_us": round(_pct(lat, 99.9), 2),
                "max_us": round(float(lat.max()), 1),
                "p50_per_round_us": [round(_pct(r["latency_us"], 50), 2) for r in mine],
                "p99_per_round_us": [round(_pct(r["latency_us"], 99), 2) for r in mine],
                "period_max_us": [round(r["period_max_us"], 1) for r in mine],
                "rt_cpu_irqs_per_s": {
                    k: round(float(np.median([r["irqs_per_s"].get(k, 0) for r in mine])), 1) for k in IRQ_ROWS
                },
            }
            if trace:
                for key in ("events_per_s", "lost_events", "consumer_cpu_pct", "attribution_cpu_pct"):
                    vals = [r[key] for r in mine if key in r]
                    fig["traced"][key] = round(float(np.mean(vals)), 2) if vals else None
                kinds = {k for r in mine for k in r.get("events_per_s_by_kind", {})}
                fig["traced"]["events_per_s_by_kind"] = dict(
                    sorted(
                        (
                            (k, round(float(np.mean([r.get("events_per_s_by_kind", {}).get(k, 0) for r in mine]))))
                            for k in kinds
                        ),
                        key=lambda kv: -kv[1],
                    )
                )
                fig["traced"]["unavailable"] = sorted({r["tracing"] for r in mine if "tracing" in r})
        diff = fig["traced"]["p99_us"] - fig["untraced"]["p99_us"]
        fig["p99_difference_us"] = round(diff, 2)
        for q in ("p50", "p99"):
            paired = [t - u for t, u in zip(fig["traced"][f"{q}_per_round_us"], fig["untraced"][f"{q}_per_round_us"])]
            fig[f"{q}_paired_differences_us"] = [round(d, 2) for d in paired]
            fig[f"{q}_paired_median_us"] = round(float(np.median(paired)), 2)
        median = fig["p99_paired_median_us"]
        base = float(np.median(fig["untraced"]["p99_per_round_us"]))
        # issue 31: within 1 µs at p50 and p99 (and p99 within 10 % of untraced, issues 9 and 17)
        fig["target_met"] = bool(
            fig["p50_paired_median_us"] <= 1.0 and (median <= 0 or (median <= 1.0 and median <= 0.1 * base))
        )
        result["waits"][wait] = fig
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(
        f"trace benchmark: {args.rounds} rounds x {args.duration:g} s per run, period {args.period_us} µs, "
        f"(traced: a private tracefs instance on the RT CPU, --trace-mode {args.mode}); "
        f"1-minute load at the end {os.getloadavg()[0]:.2f}"
    )
    if args.drop or args.filters:
        print(f"variant: events left out {args.drop or 'none'}; filters added {args.filters or 'none'}")
    print(
        f"{'wait':6} {'':9} {'p50 µs':>7} {'p99 µs':>8} {'p99.9 µs':>9} {'max µs':>9}  {'events/s':>9} {'lost':>5} "
        f"{'consumer %CPU':>13} {'attribution %CPU':>16}  p99 per round"
    )
    for wait, fig in result["waits"].items():
        for label in ("untraced", "traced"):
            f = fig[label]
            extra = (
                (
                    f"{f['events_per_s']:9,.0f} {f['lost_events']:5} {f['consumer_cpu_pct']:13.1f} "
                    f"{f['attribution_cpu_pct']:16.1f}"
                )
                if label == "traced" and f.get("events_per_s") is not None
                else f"{'':9} {'':5} {'':13} {'':16}"
            )
            print(
                f"{wait:6} {label:9} {f['p50_us']:7.2f} {f['p99_us']:8.2f} {f['p99_9_us']:9.2f} {f['max_us']:9.1f}  "
                f"{extra}  {f['p99_per_round_us']}"
            )
            irqs = ", ".join(f"{k} {v:,.1f}" for k, v in f["rt_cpu_irqs_per_s"].items())
            print(f"{'':6} {'':9} RT CPU interrupts/s (median of runs): {irqs}")
            if f.get("events_per_s_by_kind"):
                per_cycle = sum(f["events_per_s_by_kind"].values()) * args.period_us / 1e6
                print(
                    f"{'':6} {'':9} RT CPU events/s ({per_cycle:.1f} a cycle): "
                    + ", ".join(f"{k} {v:,}" for k, v in f["events_per_s_by_kind"].items())
                )
        for q in ("p50", "p99"):
            print(
                f"{wait:6} {q} traced - untraced: paired by round {fig[f'{q}_paired_differences_us']}, "
                f"median {fig[f'{q}_paired_median_us']:+.2f} µs"
            )
        print(
            f"{wait:6} pooled p99 difference {fig['p99_difference_us']:+.2f} µs "
            f"({'target met' if fig['target_met'] else 'target MISSED'}: medians within 1 µs at p50 and p99, "
            f"p99 within 10 %)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
