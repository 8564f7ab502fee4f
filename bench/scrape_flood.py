#!/usr/bin/env python3
"""A traced run while its metrics endpoint is flooded with scrapes: does softrt itself take the RT
CPU? (issue 31, item 2). Everything stays on 127.0.0.1 and ends by itself.

Each round runs ``softrt run --wait sleep --metrics-port 0`` (a sleeping loop leaves its CPU to
whatever may run there) while ``--clients`` threads scrape its ``/metrics`` as fast as they can,
from the housekeeping CPUs. Every 0.1 s it reads ``Cpus_allowed_list`` of every thread of every
softrt process (``/proc/<pid>/task/*/status``); afterwards, the run's culprits. It prints, per
round: the scrapes, the softrt threads other than the loop whose mask held the RT CPU, and the late
time the trace put on softrt's own threads (and whether the verdict's main culprit was one).

    python bench/scrape_flood.py                              # 3 rounds of 5 s, 100 clients
    python bench/scrape_flood.py --src /path/to/other/src     # the same against another softrt tree

Results: the closing note of issue 31 (before/after the supervisor's every thread was moved).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
import urllib.request

import psutil


def _masks(pid: int) -> dict[int, tuple[str, set[int]]]:
    out = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/status") as fh:
                fields = dict(line.split(":", 1) for line in fh if ":" in line)
        except OSError:
            continue
        cpus: set[int] = set()
        for chunk in fields.get("Cpus_allowed_list", "").strip().split(","):
            lo, _, hi = chunk.partition("-")
            if lo:
                cpus.update(range(int(lo), int(hi or lo) + 1))
        out[int(tid)] = (fields.get("Name", "?").strip(), cpus)
    return out


def _flood(url: str, stop: threading.Event, count: list[int], cpus: set[int]) -> None:
    os.sched_setaffinity(0, cpus)
    while not stop.is_set():
        try:
            with urllib.request.urlopen(url, timeout=2) as reply:
                reply.read()
            count.append(1)
        except OSError:
            time.sleep(0.01)


def one_round(args, rt_cpu: int) -> dict:
    env = dict(os.environ)
    if args.src:
        env["PYTHONPATH"] = args.src
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "softrt",
            "run",
            "--duration",
            f"{args.duration}s",
            "--wait",
            "sleep",
            "--cpu",
            str(rt_cpu),
            "--json",
            "--metrics-port",
            "0",
            "--metrics-linger",
            "0",
            "--out-dir",
            args.out_dir,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    url, said = None, []
    for line in proc.stderr:
        said.append(line)
        if "serving metrics at" in line:
            url = line.rsplit(" ", 1)[-1].strip()
            break
    if url is None:
        proc.wait()
        if "holds this machine" in "".join(said):  # another softrt run (a test's): wait for it, try again
            time.sleep(5)
            return one_round(args, rt_cpu)
        raise SystemExit(f"the run did not serve metrics: {''.join(said)}")
    printed: list[str] = []  # the --json summary (200 kB: read as it comes, or the run blocks on the full pipe)
    reader = threading.Thread(target=lambda: printed.append(proc.stdout.read()), daemon=True)
    reader.start()
    stop, count = threading.Event(), []
    housekeeping = set(os.sched_getaffinity(0)) - {rt_cpu}
    clients = [
        threading.Thread(target=_flood, args=(url, stop, count, housekeeping), daemon=True) for _ in range(args.clients)
    ]
    for c in clients:
        c.start()
    ours: set[int] = set()
    on_rt: dict[tuple[int, int], str] = {}
    while proc.poll() is None:
        try:
            procs = [psutil.Process(proc.pid), *psutil.Process(proc.pid).children(recursive=True)]
        except psutil.Error:
            break
        # The supervisor first, its worker after: a worker still there means the supervisor was read
        # during the loop, not after it (its cleanup puts every thread's mask back once the worker is gone).
        seen = {p.pid: (_masks(p.pid), any("spawn_main" in part for part in _cmdline(p))) for p in procs}
        workers = [pid for pid, (threads, worker) in seen.items() if worker and threads]
        if not workers:
            time.sleep(0.1)
            continue
        for pid, (threads, worker) in seen.items():
            for tid, (name, cpus) in threads.items():
                ours.add(tid)
                if rt_cpu in cpus and not (worker and tid == pid):
                    on_rt[(pid, tid)] = name
        time.sleep(0.1)
    stop.set()
    proc.wait()
    reader.join()
    for c in clients:
        c.join(5)
    summary = json.loads(printed[0])
    why = summary.get("why_late") or {}
    mine = [c for c in why.get("culprits") or [] if c.get("kind") == "thread" and c.get("id") in ours]
    culprit = (summary.get("verdict") or {}).get("culprit") or {}
    return {
        "scrapes": len(count),
        "threads_on_rt_cpu": sorted(f"{name} ({tid})" for (_, tid), name in on_rt.items()),
        "late_cycles": why.get("late_cycles"),
        "softrt_culprit_us": round(sum(c["total_us"] for c in mine), 1),
        "softrt_culprit_cycles": sum(c.get("cycles") or 0 for c in mine),
        "main_culprit": f"{culprit.get('kind')}: {culprit.get('source')}" if culprit else None,
        "supervisor_affinity": [
            a["detail"] for a in summary["tuning"]["applied"] if a["what"] == "supervisor_affinity"
        ],
    }


def _cmdline(p: psutil.Process) -> list[str]:
    try:
        return p.cmdline()
    except psutil.Error:
        return []


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--duration", type=float, default=5.0, help="seconds per run")
    ap.add_argument("--clients", type=int, default=100)
    ap.add_argument("--src", default=None, help="run the softrt of this source tree (PYTHONPATH)")
    ap.add_argument("--out-dir", default="/tmp/softrt-scrape-flood")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    rt_cpu = max(os.sched_getaffinity(0))
    rounds = [one_round(args, rt_cpu) for _ in range(args.rounds)]
    if args.json:
        print(json.dumps(rounds, indent=2))
        return
    for i, r in enumerate(rounds, 1):
        print(
            f"round {i}: {r['scrapes']:,} scrapes by {args.clients} clients; late cycles {r['late_cycles']}; "
            f"softrt threads as culprits: {r['softrt_culprit_cycles']} late cycles, {r['softrt_culprit_us']:,} µs; "
            f"main culprit {r['main_culprit']}"
        )
        print(f"  threads other than the loop allowed on CPU {rt_cpu}: {', '.join(r['threads_on_rt_cpu']) or 'none'}")
        print(f"  applied: supervisor_affinity ({'; '.join(r['supervisor_affinity']) or 'NOT APPLIED'})")


if __name__ == "__main__":
    main()
