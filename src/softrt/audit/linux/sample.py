"""A short live sample of what runs on the real-time CPUs (audit layer).

The seed looked, in Windows Performance Analyzer, at which processes ran on each core and found
MsMpEng.exe on the real-time cores. Here: the ``sched_switch`` trace event, in a private tracefs
instance limited to the RT CPUs (Documentation/trace/ftrace.rst, "Instances"), so nobody else's
tracing is touched; without tracefs, two snapshots of /proc/PID/task/TID/{stat,schedstat}, which
can only credit a thread's run time to the CPU it was last seen on. Idle time comes from the
switches themselves, or else from /proc/stat (whose busy time is tick-sampled, so less exact).

The caller should keep itself off the RT CPUs while sampling (``runner`` does).
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Mapping
from pathlib import Path
from typing import NamedTuple

from ...cpus import CpuSet
from ...platform.kfiles import kpath, read_text
from ...platform.linux import ktasks
from ...platform.linux.kfacts import cpu_times
from ...schema.audit import LiveSample, SampledTask
from ...trace import tracefs

_SWITCH = re.compile(
    r"^\s*.+?-\d+\s+\[(?P<cpu>\d+)\]\s+(?:\S+\s+)?(?P<ts>\d+\.\d+):\s+sched_switch:\s+"
    r"prev_comm=(?P<prev_comm>.*?) prev_pid=(?P<prev_pid>-?\d+) .*?==> "
    r"next_comm=(?P<next_comm>.*?) next_pid=(?P<next_pid>-?\d+)"
)
_LOST = re.compile(r"CPU:?\s*(\d+)\s*\[LOST (\d+) EVENTS\]")
SMALL_BUFFER_KB = 16  # per CPU, for the CPUs that are not traced
RT_BUFFER_KB = 4096  # per RT CPU: ~60 000 switches, far more than a mostly idle RT CPU makes in seconds


def parse_sched_switch(text: str) -> tuple[list[tuple[int, int, int, str, int, str]], int]:
    """Parse a tracefs ``trace`` file into (cpu, ts_ns, prev_pid, prev_comm, next_pid, next_comm) rows.

    Returns the rows and the number of events the ring buffer lost.
    """
    rows, lost = [], 0
    for line in text.splitlines():
        m = _SWITCH.match(line)
        if m:
            sec, _, frac = m["ts"].partition(".")
            ts_ns = int(sec) * 1_000_000_000 + int(frac.ljust(9, "0")[:9])
            rows.append((int(m["cpu"]), ts_ns, int(m["prev_pid"]), m["prev_comm"], int(m["next_pid"]), m["next_comm"]))
        elif lm := _LOST.search(line):
            lost += int(lm[2])
    return rows, lost


def account_switches(rows, cpus: CpuSet, start_ns: int, end_ns: int) -> tuple[dict[tuple[int, str], int], set[int]]:
    """Credit the time between context switches to the task that ran (ns per (tid, comm)).

    Before a CPU's first switch its ``prev`` task was running; after the last one, its ``next``.
    Returns the totals and the CPUs that had at least one switch.
    """
    totals: dict[tuple[int, str], int] = {}
    seen: set[int] = set()
    by_cpu: dict[int, list] = {}
    for row in rows:
        if row[0] in cpus:
            by_cpu.setdefault(row[0], []).append(row)
    for cpu, events in by_cpu.items():
        events.sort(key=lambda r: r[1])
        seen.add(cpu)
        first = events[0]
        _add(totals, (first[2], first[3]), first[1] - start_ns)
        for cur, nxt in zip(events, events[1:]):
            _add(totals, (cur[4], cur[5]), nxt[1] - cur[1])
        last = events[-1]
        _add(totals, (last[4], last[5]), end_ns - last[1])
    return totals, seen


def _add(totals: dict, key, ns: int) -> None:
    if ns > 0:
        totals[key] = totals.get(key, 0) + ns


# -- /proc snapshots ----------------------------------------------------------------------------
class ThreadRun(NamedTuple):
    """One thread in a /proc snapshot (proc(5) ``stat``, ``schedstat``)."""

    comm: str
    run_ns: int  # time on a CPU so far (schedstat, else utime + stime ticks)
    cpu: int  # the CPU it last ran on (stat field 39, processor)


def proc_snapshot(root: str) -> dict[int, ThreadRun]:
    """Return ``{tid: ThreadRun}`` for every thread (schedstat, else stat ticks)."""
    tick_ns = 1_000_000_000 // os.sysconf("SC_CLK_TCK")
    snap: dict[int, ThreadRun] = {}
    for pid in ktasks.pids(root):
        try:
            tids = [int(n) for n in os.listdir(kpath(root, f"/proc/{pid}/task")) if n.isdigit()]
        except OSError:
            continue
        for tid in tids:
            base = f"/proc/{pid}/task/{tid}"
            stat = ktasks.parse_stat(read_text(root, f"{base}/stat", fallback=""))
            if stat is None:
                continue
            schedstat = read_text(root, f"{base}/schedstat", fallback="").split()
            run_ns = int(schedstat[0]) if schedstat and schedstat[0].isdigit() else (stat.utime + stat.stime) * tick_ns
            snap[tid] = ThreadRun(stat.comm, run_ns, stat.processor)
    return snap


def diff_snapshots(
    before: Mapping[int, ThreadRun], after: Mapping[int, ThreadRun], cpus: CpuSet
) -> dict[tuple[int, str], int]:
    """Credit each thread's run-time growth to the CPU it was last seen on, if that is an RT CPU."""
    totals: dict[tuple[int, str], int] = {}
    for tid, now in after.items():
        if tid in before and now.cpu in cpus:
            _add(totals, (tid, now.comm), now.run_ns - before[tid].run_ns)
    return totals


def idle_share(before: dict[int, list[int]], after: dict[int, list[int]], cpus: CpuSet) -> float | None:
    """Return the share of time the CPUs were idle (idle + iowait) between two /proc/stat reads."""
    idle = total = 0
    for cpu in cpus:
        if cpu in before and cpu in after:
            delta = [a - b for a, b in zip(after[cpu], before[cpu])]
            idle += sum(delta[3:5])
            total += sum(delta[:8])
    return idle / total if total > 0 else None


# -- tracefs --------------------------------------------------------------------------------------
def tracefs_dir(root: str) -> Path | None:
    """Return the mounted tracefs directory (from /proc/mounts), or None."""
    return tracefs.find(root)


def trace_switches(tracefs_path: Path, cpus: CpuSet, seconds: float) -> tuple[str, int, int]:
    """Record sched_switch on *cpus* for *seconds* in a private instance; return (trace, start, end).

    Timestamps use the instance's ``mono`` trace clock, the same clock as time.monotonic_ns().
    The instance is removed again, also when interrupted (and by the next command if killed).
    """
    inst = tracefs.Instance.create(
        tracefs_path, f"{tracefs.INSTANCE_PREFIX}check-{os.getpid()}", cpus, RT_BUFFER_KB, other_kb=SMALL_BUFFER_KB
    )
    try:
        inst.write("tracing_on", "1")
        start = time.monotonic_ns()
        inst.enable("sched:sched_switch")
        time.sleep(seconds)
        inst.write("tracing_on", "0")
        end = time.monotonic_ns()
        return (inst.path / "trace").read_text(errors="replace"), start, end
    finally:
        inst.remove()


# -- the sample -----------------------------------------------------------------------------------
def classify(root: str, tid: int, rt_cpus: CpuSet) -> str:
    """Return the kind of a thread: idle, rt-app, pinned, user, kthread-percpu, kthread-movable or exited.

    ``rt-app``: pinned to the RT CPUs only *and* SCHED_FIFO/RR/DEADLINE, the only kind of task that
    may be taken to be the real-time application; ``pinned``: pinned there but SCHED_OTHER (or
    BATCH/IDLE), which a real-time loop would not be: someone put it there, and it competes.
    """
    if tid == 0:
        return "idle"
    task = ktasks.read_task(root, tid, tid)
    if task is None:
        return "exited"
    if task.kthread and not task.movable:
        return "kthread-percpu"
    if task.allowed <= rt_cpus and not task.kthread:
        return "rt-app" if task.realtime else "pinned"
    return "kthread-movable" if task.kthread else "user"


def sample(rt_cpus: CpuSet, seconds: float, root: str = "/") -> LiveSample:
    """Watch what runs on *rt_cpus* for *seconds*: the method, the idle share and where it came from,
    the events the trace lost, and the tasks (``comm``, ``pid`` (thread id), ``cpu_ms``, ``kind``;
    busiest first)."""
    stat0, snap0 = cpu_times(root), proc_snapshot(root)
    t0 = time.monotonic()
    tracefs = tracefs_dir(root)
    method, lost, traced = "proc", 0, set()
    totals: dict[tuple[int, str], int] = {}
    if tracefs is not None:
        try:
            text, start, end = trace_switches(tracefs, rt_cpus, seconds)
            rows, lost = parse_sched_switch(text)
            totals, traced = account_switches(rows, rt_cpus, start, end)
            method = "tracefs sched_switch"
        except OSError as err:
            method = f"proc (tracefs unusable: {err.strerror or err})"
            time.sleep(max(0.0, seconds - (time.monotonic() - t0)))  # the /proc fallback still watches
    else:
        time.sleep(seconds)
        method = "proc (tracefs not mounted; run times credited to the CPU each thread was last seen on)"
    stat1, snap1 = cpu_times(root), proc_snapshot(root)
    untraced = rt_cpus - CpuSet(traced)
    if untraced:  # CPUs without a single switch: one task held them, or they idled throughout
        for key, ns in diff_snapshots(snap0, snap1, untraced).items():
            _add(totals, key, ns)
        # /proc/stat's user/system time is sampled at each tick, and a loop woken by a timer tends
        # to be running exactly then: it overstates busy time. Switch timestamps do not.
        idle, idle_source = idle_share(stat0, stat1, rt_cpus), "/proc/stat (tick-sampled)"
    else:
        span = (end - start) * len(rt_cpus)
        idle = sum(ns for (tid, _), ns in totals.items() if tid == 0) / span if span > 0 else None
        idle_source = "sched_switch"
    tasks = [
        SampledTask.build(comm=comm, pid=tid, cpu_ms=round(ns / 1e6, 3), kind=classify(root, tid, rt_cpus))
        for (tid, comm), ns in totals.items()
    ]
    tasks.sort(key=lambda t: -(t.cpu_ms or 0.0))
    return LiveSample.build(
        method=method,
        seconds=seconds,
        idle_share=idle,
        idle_source=idle_source,
        lost_events=lost,
        tasks=tasks,
        error=None,
    )
