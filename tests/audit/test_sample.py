"""The live sampler: trace parsing and accounting (pure), and one short real sample."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from softrt.audit.linux import sample
from softrt.cpus import CpuSet

TRACE = """\
# tracer: nop
#
          <idle>-0       [003] d..2.   100.000100: sched_switch: prev_comm=swapper/3 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=MsMpEng prev x next_pid=900 next_prio=120
         MsMpEng-900     [003] d..2.   100.000600: sched_switch: prev_comm=MsMpEng prev_pid=900 prev_prio=120 prev_state=S ==> next_comm=swapper/3 next_pid=0 next_prio=120
          <idle>-0       [003] d..2.   100.001000: sched_switch: prev_comm=swapper/3 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=ksoftirqd/3 next_pid=30 next_prio=120
     ksoftirqd/3-30      [003] d..2.   100.001010: sched_switch: prev_comm=ksoftirqd/3 prev_pid=30 prev_prio=120 prev_state=S ==> next_comm=swapper/3 next_pid=0 next_prio=120
          <idle>-0       [002] d..2.   100.000500: sched_switch: prev_comm=swapper/2 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=bash next_pid=77 next_prio=120
CPU:3 [LOST 12 EVENTS]
"""


def test_parse_and_account_switches():
    rows, lost = sample.parse_sched_switch(TRACE)
    assert lost == 12 and len(rows) == 5
    assert rows[0][:3] == (3, 100_000_100_000, 0)
    totals, seen = sample.account_switches(rows, CpuSet([3]), start_ns=100_000_000_000, end_ns=100_002_000_000)
    assert seen == {3}
    assert totals[(900, "MsMpEng prev x")] == 500_000  # 100.000100 → 100.000600
    assert totals[(30, "ksoftirqd/3")] == 10_000
    # idle: before the first switch (100 µs), between (400 µs), after the last (990 µs)
    assert totals[(0, "swapper/3")] == 100_000 + 400_000 + 990_000
    assert not any(tid == 77 for tid, _ in totals)  # CPU 2 is not an RT CPU


def test_sample_with_a_trace_classifies_tasks_and_takes_idle_from_the_switches(good, monkeypatch):
    monkeypatch.setattr(sample, "tracefs_dir", lambda root: good.path("/sys/kernel/tracing"))
    monkeypatch.setattr(sample, "trace_switches", lambda path, cpus, s: (TRACE, 100_000_000_000, 100_002_000_000))
    result = sample.sample(CpuSet([3]), 0.0, root=str(good)).to_dict()
    kinds = {t["pid"]: t["kind"] for t in result["tasks"]}
    assert kinds == {0: "idle", 900: "exited", 30: "kthread-percpu"}
    assert result["method"] == "tracefs sched_switch" and result["lost_events"] == 12
    assert result["idle_source"] == "sched_switch" and result["idle_share"] == pytest.approx(1.49 / 2.0)
    assert result["tasks"][0]["pid"] == 0  # busiest first


def test_proc_snapshots_credit_the_last_cpu():
    run = sample.ThreadRun
    before = {10: run("a", 1_000, 3), 11: run("b", 5_000, 0)}
    after = {10: run("a", 4_000, 3), 11: run("b", 9_000, 0), 12: run("new", 7_000, 3)}
    assert sample.diff_snapshots(before, after, CpuSet([3])) == {(10, "a"): 3_000}


def test_idle_share():
    before = {3: [10, 0, 10, 100, 0, 0, 0, 0, 0, 0]}
    after = {3: [20, 0, 20, 180, 0, 0, 0, 0, 0, 0]}
    assert sample.idle_share(before, after, CpuSet([3])) == pytest.approx(0.8)


def test_sample_of_this_machine_sees_a_busy_child():
    """A child kept busy on the *first* CPU for a moment shows up there as a user task.

    CPU 0 plays the real-time CPU so that nothing spins on the last CPU, where real-time
    measurements may be running.
    """
    allowed = os.sched_getaffinity(0)
    if 0 not in allowed or len(allowed) < 2:
        pytest.skip("needs CPU 0 and one more")
    # It says when it spins: a busy CPU 0 (a simulator, the other tests) can delay its start past
    # a sample taken at once (seen: no task of its pid in the sample).
    code = "import sys, time\nprint(flush=True)\nend = time.monotonic() + 10\nwhile time.monotonic() < end: pass\n"
    child = subprocess.Popen(["taskset", "-c", "0", sys.executable, "-c", code], stdout=subprocess.PIPE)
    try:
        child.stdout.readline()
        os.sched_setaffinity(0, allowed - {0})
        result = sample.sample(CpuSet([0]), 0.3).to_dict()
    finally:
        os.sched_setaffinity(0, allowed)
        child.kill()
        child.wait()
        child.stdout.close()
    assert result["error"] is None and result["tasks"]
    mine = [t for t in result["tasks"] if t["pid"] == child.pid]
    assert mine and mine[0]["cpu_ms"] > 0
    assert mine[0]["kind"] in ("user", "exited", "pinned")  # taskset -c 0, SCHED_OTHER: never "rt-app"


@pytest.fixture
def tracefs(tmp_path):
    """tracefs mounted at a private mount point (same trace buffers, nobody else's mount touched)."""
    if os.geteuid() != 0:
        pytest.skip("mounting tracefs needs root")
    mp = tmp_path / "tracing"
    mp.mkdir()
    if subprocess.run(["mount", "-t", "tracefs", "nodev", str(mp)], capture_output=True).returncode != 0:
        pytest.skip("tracefs cannot be mounted here")
    try:
        yield mp
    finally:
        subprocess.run(["umount", str(mp)], check=True)


@pytest.mark.root
def test_trace_sample_uses_a_private_instance_and_removes_it(tracefs):
    allowed = os.sched_getaffinity(0)
    if 0 not in allowed or len(allowed) < 2:
        pytest.skip("needs CPU 0 and one more")
    os.sched_setaffinity(0, allowed - {0})
    # An idle CPU 0 may not switch at all in 0.3 s (tickless idle): give it a task that sleeps
    # and wakes a few times while the trace runs.
    waker = subprocess.Popen(["taskset", "-c", "0", "sh", "-c", "for i in 1 2 3 4 5 6 7 8 9 10; do sleep 0.02; done"])
    try:
        text, start, end = sample.trace_switches(tracefs, CpuSet([0]), 0.3)
    finally:
        os.sched_setaffinity(0, allowed)
        waker.wait()
    rows, _ = sample.parse_sched_switch(text)
    assert end > start and rows, "CPU 0 switches tasks within 0.3 s on any running system"
    assert {r[0] for r in rows} == {0}  # tracing_cpumask kept the other CPUs out
    assert all(start - 1_000_000 <= r[1] <= end + 1_000_000 for r in rows)  # the mono trace clock
    # Its own instance is gone (another softrt check, a parallel test's, may have one meanwhile).
    assert not (tracefs / "instances" / f"softrt-check-{os.getpid()}").exists()
