"""``softrt watch`` against what we did not write: cyclictest's own histogram, a known disturber,
a thread that exits, and softrt's own worker (issue 21).

They trace the real kernel and run real-time threads on the last CPU (root; one at a time), each
for a few seconds. Agreement is asserted within the issue's bounds on what both tools measured
over the same seconds; no latency bound is asserted.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import psutil
import pytest

from softrt.session.watch import WatchConfig, watch
from softrt.session.watch_targets import Target
from softrt.store.rundir import read_samples

pytestmark = [
    pytest.mark.rt,
    pytest.mark.root,
    pytest.mark.skipif(os.geteuid() != 0, reason="tracing and SCHED_FIFO need root"),
]

CPU = max(os.sched_getaffinity(0))
DISTURBER = "servo-poller"


@pytest.fixture(scope="module")
def disturber_bin(tmp_path_factory):
    if shutil.which("cc") is None:
        pytest.skip("needs a C compiler for the disturber")
    out = tmp_path_factory.mktemp("disturber") / "disturber"
    subprocess.run(["cc", "-O2", "-o", str(out), os.path.join(os.path.dirname(__file__), "disturber.c")], check=True)
    return str(out)


def _rt_thread_of(proc: subprocess.Popen, priority: int, timeout_s: float = 5.0) -> int:
    """The tid of *proc*'s thread at SCHED_FIFO *priority*, once it exists."""
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        for t in psutil.Process(proc.pid).threads():
            stat = open(f"/proc/{proc.pid}/task/{t.id}/stat").read().rsplit(")", 1)[1].split()
            if int(stat[37]) == priority and int(stat[38]) == 1:
                return t.id
        time.sleep(0.01)
    raise AssertionError(f"no SCHED_FIFO {priority} thread in {proc.args}")


def _same_cycles(mine_us: np.ndarray, theirs_us: np.ndarray) -> np.ndarray:
    """cyclictest's own latencies of the cycles the watch saw: its per-cycle values (``-v``) from the
    offset where the two sequences match (the watch starts a few hundred ms into cyclictest's run;
    both have one value per wake-up, in order)."""
    n = min(500, mine_us.size)
    offsets = range(0, min(theirs_us.size - mine_us.size, 20_000) + 1)
    best = min(offsets, key=lambda o: float(np.abs(theirs_us[o : o + n] - mine_us[:n]).mean()))
    return theirs_us[best : best + mine_us.size]


@pytest.mark.skipif(shutil.which("cyclictest") is None, reason="needs rt-tests (scripts/setup installs it)")
@pytest.mark.parametrize("trace_mode", ["auto", "full"])
def test_watch_agrees_with_cyclictest_and_names_the_disturber(tmp_path, disturber_bin, state_dir, trace_mode):
    """cyclictest measures its own latency; softrt watch measures it from the kernel's trace, over the
    same cycles: p50 within a few µs, p99 within 20 %. A FIFO 90 task spinning 300 µs every 100 ms
    on that CPU is named as the cause of the late cycles it made. The same with the lean trace (the
    default: no timer interrupt or wake-up recorded, nor a MONOTONIC timer's setup) and the full one.

    A SCHED_OTHER task keeps the CPU busy meanwhile: this VM's kernel (6.18) almost never logs the
    switch out of the idle task, so a disturber that wakes on an idle CPU is not seen until its
    first logged event (the attribution then says "exit from idle"; reported with issue 21).
    """
    busy = subprocess.Popen(
        [disturber_bin, "busy-other", str(CPU), "other", "0", "0", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    dist = subprocess.Popen(
        [disturber_bin, DISTURBER, str(CPU), "fifo", "90", "300", "100000"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert busy.stderr.readline().strip() == "ready" and dist.stderr.readline().strip() == "ready"
        ct = subprocess.Popen(
            ["cyclictest", "-t1", "-p80", "-i250", f"-a{CPU}", "-m", "-q", "-v", "-D2"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        tid = _rt_thread_of(ct, 80)
        # Until cyclictest's thread exits.
        # A 300 µs spike delays at least one 250 µs expiry by 50 µs or more: each makes a late cycle at
        # 40 µs (at 150 µs only those that began early enough in a cycle did: 8 of 19 in one CI run).
        result = watch(
            WatchConfig(
                target=Target(tid=tid),
                duration_ns=20_000_000_000,
                late_threshold_ns=40_000,
                keep_late=1000,
                out_dir=tmp_path / "runs",
                trace_mode=trace_mode,
            )
        )
        out, err = ct.communicate(timeout=10)
        assert ct.returncode == 0, err
    finally:
        for p in (dist, busy):
            p.terminate()
        spikes = [tuple(map(int, line.split())) for line in dist.communicate(timeout=10)[0].splitlines()]
        busy.communicate(timeout=10)
    [(summary, path)] = result.runs
    assert result.ended_early and "the thread exited" in summary.partial_reason  # when cyclictest ended
    records = read_samples(path)
    mine_us = (records["detect_ns"] - records["edge_ns"]) / 1e3
    theirs_us = np.array([int(line.split(":")[2]) for line in out.splitlines() if line.count(":") == 2], float)
    assert mine_us.size > 0.7 * theirs_us.size, (mine_us.size, theirs_us.size)
    same = _same_cycles(mine_us, theirs_us)
    # cyclictest reads its clock after returning to user space and truncates to µs
    assert np.median(np.abs(same - mine_us)) <= 2.0, np.median(np.abs(same - mine_us))
    (p50, p99), (m50, m99) = np.percentile(same, (50, 99)), np.percentile(mine_us, (50, 99))
    assert abs(m50 - p50) <= 3.0, (m50, p50)
    assert abs(m99 - p99) <= max(0.2 * p99, 3.0), (m99, p99)

    why = summary.why_late
    assert why.on and why.trace.lost_events == 0, why.tracing
    lean = trace_mode == "auto"
    assert why.trace.mode == ("lean" if lean else "full") and summary.config.trace_mode == trace_mode
    left_out = {"sched:sched_wakeup", "irq_vectors:local_timer_entry", "irq_vectors:local_timer_exit"}
    assert (left_out & set(why.trace.events)) == (set() if lean else left_out), why.trace.events
    assert "timer:hrtimer_setup" in why.trace.events  # recorded only for another clock than MONOTONIC
    inside = [s for s in spikes if records["edge_ns"][0] < s[1] and s[2] < records["detect_ns"][-1]]
    assert len(inside) >= 10, f"{len(inside)} spikes during the watch"
    # The spikes that made a late cycle are named in it; on a VM a hypervisor stall during a spike is
    # time the guest did not run ("outside"), so one in ten may lack it (as tests/trace/test_known_answer.py).
    # (Not necessarily the top culprit: other tenants' disk I/O runs kworkers that block it on this
    # preempt=none kernel.)
    unnamed, hits = [], 0
    for _deadline, start, end, *_ in inside:
        hit = [lc for lc in why.worst if lc.window.start_ns < end and start < lc.window.end_ns]
        hits += bool(hit)
        if hit and not any(c.name == DISTURBER for lc in hit for c in lc.causes):
            unnamed.append([c.label for lc in hit for c in lc.causes])
    assert hits >= len(inside) // 2 and len(unnamed) <= hits // 10, (hits, unnamed)
    [named] = [c for c in why.culprits if c.name == DISTURBER]
    assert named.kind == "thread" and named.id == dist.pid and named.detail == "FIFO/RR 90", named
    assert named.cycles >= hits - len(unnamed), (named, hits)


# Pinned, so that one CPU's events are traced (a loaded VM's busy scheduler fills a second one).
SLEEPER = (
    f"import os, time\nos.sched_setaffinity(0, {{{CPU}}})\nprint('ready', flush=True)\n"
    "for _ in range(1500): time.sleep(0.0005)\n"
)


def test_a_thread_that_exits_mid_watch_keeps_its_cycles_and_says_when(tmp_path, state_dir, run_cli):
    """The watch stops when its thread exits, keeps what it measured, says when, exits 1; show reads
    the run. (--no-explain: the cycles need only the thread's own events.)"""
    proc = subprocess.Popen([sys.executable, "-c", SLEEPER], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    code, out, err = run_cli(
        "watch",
        "--pid",
        str(proc.pid),
        "--duration",
        "20s",
        "--no-explain",
        "--json",
        "-q",
        "--out-dir",
        str(tmp_path / "runs"),
    )
    proc.wait(10)
    assert code == 1, err
    [row] = json.loads(out)["threads"]
    assert row["status"] == "partial" and "the thread exited" in row["partial_reason"], row["partial_reason"]
    assert 0 < row["watch"]["exited_at_s"] < 10
    assert row["waits"] == "timer" and row["cycles"] > 100 and row["watch"]["thread"]["policy"] == "SCHED_OTHER"
    assert row["why_late"]["tracing"].startswith("off (--no-explain") and row["why_late"]["trace"]["events_read"] > 0
    assert row["latency_us"]["p50"] > 0 and row["runtime_us"]["max"] > 0 and 400 < row["period_us"]["p50"] < 5000
    # a SCHED_OTHER thread's timers may fire late by its timer slack (inherited from this process)
    assert row["watch"]["timer_slack_us"] * 1000 == int(open(f"/proc/{os.getpid()}/timerslack_ns").read())
    code, shown, _ = run_cli("show", row["path"])
    assert code == 0 and "It sleeps on a timer" in shown and "the thread exited" in shown


def test_watching_softrts_own_worker_agrees_with_its_records(tmp_path, state_dir):
    """softrt's sleeping worker records its own latency (the permit seen after clock_nanosleep to the
    edge); watching it from outside finds the same expiries, each returning to user space before
    the worker read its clock."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "softrt",
            "run",
            "--wait",
            "sleep",
            "--cpu",
            str(CPU),
            "--duration",
            "1s",
            "--no-trace",
            "--json",
            "-q",
            "--out-dir",
            str(tmp_path / "run"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        worker = None
        for _ in range(1000):  # its worker, once it went SCHED_FIFO (armed)
            kids = [
                p
                for p in psutil.Process(proc.pid).children(recursive=True)
                if os.sched_getscheduler(p.pid) == os.SCHED_FIFO
            ]
            if kids:
                worker = kids[0].pid
                break
            time.sleep(0.01)
        assert worker is not None, "the run's worker never went SCHED_FIFO"
        result = watch(
            WatchConfig(
                target=Target(tid=worker),
                duration_ns=20_000_000_000,
                period_ns=250_000,
                late_threshold_ns=200_000,
                out_dir=tmp_path / "watch",
            )
        )
    finally:
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    [(summary, path)] = result.runs
    assert summary.watch.period_agrees and summary.watch.waits == "timer"
    theirs, mine = read_samples(tmp_path / "run" / json.loads(out)["run_id"]), read_samples(path)
    common, a, b = np.intersect1d(theirs["edge_ns"], mine["edge_ns"], return_indices=True)
    assert common.size > 0.8 * mine.size > 1000, (common.size, mine.size)
    # The return to user space (the trace prints µs: 1 µs) comes before the worker's clock read.
    gap = theirs["detect_ns"][a] - mine["detect_ns"][b]
    assert (gap >= -1_000).all(), gap.min()
    assert np.median(gap) < 50_000, np.median(gap)


def test_ctrl_c_ends_the_watch_and_keeps_what_it_measured(tmp_path, state_dir, run_cli):
    """Ctrl-C stops the watch; its runs are stored, partial, exit 1. (The thread watched is this
    test's own, which sleeps 50 ms at a time in the watch's loop.)"""
    timer = threading.Timer(1.5, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    try:
        code, out, err = run_cli(
            "watch",
            "--tid",
            str(threading.get_native_id()),
            "--duration",
            "30s",
            "--json",
            "-q",
            "--out-dir",
            str(tmp_path / "runs"),
        )
    finally:
        timer.cancel()
    assert code == 1, err
    [row] = json.loads(out)["threads"]
    assert row["status"] == "partial" and "interrupted by Ctrl-C" in row["partial_reason"]
    assert (
        row["cycles"] > 5 and row["waits"] == "timer" and (tmp_path / "runs" / row["run_id"] / "summary.json").exists()
    )
