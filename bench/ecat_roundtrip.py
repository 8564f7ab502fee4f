#!/usr/bin/env python3
"""Benchmark of issue 11: EtherCAT frame round trip and missed updates over veth, simulated slaves.

For each number of slaves (``--slaves 2,8``) and each cycle (``--periods 1000,500,250`` µs): a
fresh network namespace with a veth pair, ``softrt ecat-sim`` on one end pinned to the
housekeeping CPU (``--sim-cpu``, 0), and ``softrt run --device ethercat:ecm0 --axes N --no-trace
--json`` on the other (its worker on the RT CPU, softrt's default: the highest). From each run's
summary: the frame round trip (``rtt_us``: send to receive, per cycle) p50/p99/max, missed updates,
lost frames and wrong working counters, and the distributed-clock figures (the frame's phase
against SYNC0, |error| p99; with ``--lock`` also a ``--dc-lock`` run of each configuration); beside
them the time the hypervisor took the simulator's CPU away during the run (``/proc/stat`` steal),
which no simulator answers through.

    sudo python bench/ecat_roundtrip.py                               # a Markdown table
    sudo python bench/ecat_roundtrip.py --duration 10 --lock --json   # JSON, locked runs too

Needs root (network namespaces, raw sockets, SCHED_FIFO), iproute2, pysoem, softrt importable
(``PYTHONPATH=src`` from a checkout). Run it alone: the simulator is a Python process, so what it
measures is mostly the simulator's own scheduling on a busy housekeeping CPU, not SOEM's or a
real slave's timing (docs/ethercat.md). Not a test: nothing here asserts a bound.
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


def _ns(name: str, *args: str) -> list[str]:
    return ["ip", "netns", "exec", name, *args]


def steal_ms(cpu: int) -> float:
    """Time the hypervisor has taken *cpu* away so far (proc(5), /proc/stat "steal"), ms."""
    with open("/proc/stat") as f:
        for line in f:
            fields = line.split()
            if fields[0] == f"cpu{cpu}":
                return int(fields[8]) * 1000 / os.sysconf("SC_CLK_TCK")
    return 0.0


def one_run(
    slaves: int,
    period_us: int,
    duration_s: float,
    sim_cpu: int,
    lock: bool,
    out_dir: Path,
    sim_fifo: int = 10,
    sim_args: tuple[str, ...] = (),
    bus_timeout: str = "10ms",
) -> dict:
    """One configuration in its own namespace; return the figures of its summary."""
    name = f"softrt-bench-{os.getpid()}-{slaves}-{period_us}{'-lock' if lock else ''}"
    subprocess.run(["ip", "netns", "add", name], check=True)
    sim = None
    sim_said = ""
    try:
        for args in (
            ["link", "add", "ecm0", "type", "veth", "peer", "name", "ecs0"],
            ["link", "set", "lo", "up"],
            ["link", "set", "ecm0", "up"],
            ["link", "set", "ecs0", "up"],
        ):
            subprocess.run(["ip", "-n", name, *args], check=True)
        fifo = ["chrt", "-f", str(sim_fifo)] if sim_fifo else []
        sim = subprocess.Popen(
            _ns(
                name,
                "taskset",
                "-c",
                str(sim_cpu),
                *fifo,
                sys.executable,
                "-m",
                "softrt",
                "ecat-sim",
                "--iface",
                "ecs0",
                "--slaves",
                str(slaves),
                *sim_args,
            ),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        line = sim.stdout.readline()
        while line.startswith("softrt: "):
            line = sim.stdout.readline()
        if "answering" not in line:
            raise RuntimeError(f"ecat-sim did not start: {line}")
        stolen_ms = steal_ms(sim_cpu)
        run = subprocess.run(
            _ns(
                name,
                sys.executable,
                "-m",
                "softrt",
                "run",
                "--device",
                "ethercat:ecm0",
                "--axes",
                str(slaves),
                "--period",
                f"{period_us}us",
                "--duration",
                f"{duration_s}s",
                "--bus-timeout",
                bus_timeout,
                "--no-trace",
                "--quiet",
                "--json",
                "--out-dir",
                str(out_dir),
                *(["--dc-lock"] if lock else []),
            ),
            capture_output=True,
            text=True,
            timeout=120 + 3 * duration_s,
            # The runs are thrown away with the temporary directory: not into the user's history.
            env={**os.environ, "SOFTRT_HOME": str(out_dir / "home")},
        )
        stolen_ms = steal_ms(sim_cpu) - stolen_ms
        if run.returncode not in (0, 1):
            return {"slaves": slaves, "period_us": period_us, "lock": lock, "error": run.stderr.strip()[-300:]}
        s = json.loads(run.stdout)
    finally:
        if sim is not None:
            sim.send_signal(2)  # SIGINT: it prints what it did
            try:
                sim_said = sim.communicate(timeout=5)[0]
            except subprocess.TimeoutExpired:
                sim.kill()
                sim.wait()
        subprocess.run(["ip", "netns", "del", name])
    board = s.get("board", {})
    rtt = s.get("rtt_us") or {}
    dc = board.get("distributed_clocks") or {}
    phase = dc.get("phase") or {}
    frames = board.get("frames") or {}
    return {
        "slaves": slaves,
        "period_us": period_us,
        "lock": lock,
        "status": s["status"],
        "cycles": s["cycles"],
        "failure": s.get("partial_reason"),
        "late_replies": frames.get("late"),
        "sim_answer": sim_said.strip().rsplit("; ", 1)[-1] if "answered" in sim_said else None,
        "rtt_p50_us": rtt.get("p50"),
        "rtt_p99_us": rtt.get("p99"),
        "rtt_max_us": rtt.get("max"),
        "missed_updates": s["misses"]["missed_updates"],
        "cycles_with_miss": s["misses"]["cycles_with_miss"],
        "lost_frames": board.get("lost_frames"),
        "wkc_errors": board.get("wkc_errors"),
        "sent": frames.get("sent"),
        "sim_cpu_steal_ms": round(stolen_ms),
        "phase_abs_mean_us": phase.get("abs_mean_us"),
        "phase_abs_p99_us": phase.get("abs_p99_us"),
        "dc_vs_host_ppm": dc.get("dc_vs_host_ppm"),
    }


def table(rows: list[dict]) -> str:
    head = (
        "| slaves | cycle | lock | cycles | round trip p50 / p99 / max (µs) | missed updates (cycles) "
        "| lost frames (of sent) | wrong WKC | DC phase abs mean / p99 (µs) | simulator CPU stolen (ms) |"
    )
    out = [head, "|" + "---|" * 10]
    f = lambda v: "-" if v is None else f"{v:,.1f}"  # noqa: E731
    for r in rows:
        if "error" in r:
            out.append(
                f"| {r['slaves']} | {r['period_us']} µs | {'yes' if r['lock'] else 'no'} | error: {r['error']} |"
            )
            continue
        out.append(
            f"| {r['slaves']} | {r['period_us']} µs | {'yes' if r['lock'] else 'no'} | {r['cycles']:,} "
            f"| {f(r['rtt_p50_us'])} / {f(r['rtt_p99_us'])} / {f(r['rtt_max_us'])} "
            f"| {r['missed_updates']:,} ({r['cycles_with_miss']:,}) | {r['lost_frames']} ({r['sent']:,}) "
            f"| {r['wkc_errors']} | {f(r['phase_abs_mean_us'])} / {f(r['phase_abs_p99_us'])} "
            f"| {r['sim_cpu_steal_ms']:,} |"
        )
    return "\n".join(out)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--slaves", default="2,8", help="slave counts, comma-separated")
    p.add_argument("--periods", default="1000,500,250", help="cycles in µs, comma-separated")
    p.add_argument("--duration", type=float, default=5.0, help="seconds per run")
    p.add_argument("--sim-cpu", type=int, default=0, help="CPU of the simulator (the housekeeping CPU)")
    p.add_argument("--lock", action="store_true", help="also a --dc-lock run of each configuration")
    p.add_argument(
        "--sim-fifo",
        type=int,
        default=10,
        help="SCHED_FIFO priority of the simulator, as docs/ethercat.md runs it (0: normal)",
    )
    p.add_argument("--sim-args", default="", help="more ecat-sim options, space-separated (e.g. '--busy-poll 0')")
    p.add_argument(
        "--bus-timeout",
        default="10ms",
        help="softrt run --bus-timeout (100ms rides out this VM's stalls of several ms, as "
        "scripts/ci-kickcat does against KickCAT's simulator)",
    )
    p.add_argument("--json", action="store_true", help="JSON on stdout instead of the table")
    args = p.parse_args()
    if os.geteuid() != 0:
        print("ecat_roundtrip: needs root (network namespaces, raw sockets, SCHED_FIFO)", file=sys.stderr)
        return 2
    rows = []
    with tempfile.TemporaryDirectory(prefix="softrt-ecat-bench-") as tmp:
        for slaves in [int(x) for x in args.slaves.split(",")]:
            for period in [int(x) for x in args.periods.split(",")]:
                for lock in (False, True) if args.lock else (False,):
                    load = os.getloadavg()[0]
                    r = one_run(
                        slaves,
                        period,
                        args.duration,
                        args.sim_cpu,
                        lock,
                        Path(tmp),
                        args.sim_fifo,
                        tuple(args.sim_args.split()),
                        args.bus_timeout,
                    )
                    r["load_1min"] = round(load, 2)
                    rows.append(r)
                    print(
                        f"ecat_roundtrip: {slaves} slaves, {period} µs{' locked' if lock else ''}: "
                        f"{r.get('rtt_p50_us', r.get('error'))} (load {load:.2f})",
                        file=sys.stderr,
                    )
                    time.sleep(0.5)
    print(json.dumps(rows, indent=1) if args.json else table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
