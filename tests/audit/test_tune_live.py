"""softrt tune on this machine (root): apply on the last CPU, check, revert, compare byte for byte.

Only kernel files, kernel threads and a process started here are touched: other people's
processes (and the machine's own agents) are left where they are. Every test reverts in a
``finally``, also when it fails, and checks that sched_rt_runtime_us is back.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from softrt.audit import AFFINITY, Status, apply_plan, plan_tune, revert, run_checks
from softrt.audit.linux import online_cpus, write_kernel_file
from softrt.audit.linux.irqs import irqs
from softrt.audit.plan import FILE
from softrt.cpus import CpuSet
from softrt.platform.linux import ktasks

pytestmark = [pytest.mark.root, pytest.mark.skipif(os.geteuid() != 0, reason="needs root")]


@pytest.fixture
def rt():
    online = online_cpus()
    if len(online) < 2:
        pytest.skip("needs a housekeeping CPU and a real-time CPU")
    return CpuSet([online.last()])


@pytest.fixture
def victim(rt):
    """A process that floats over every CPU, like the seed's MsMpEng.exe."""
    proc = subprocess.Popen(["sleep", "120"])
    os.sched_setaffinity(proc.pid, online_cpus().to_frozenset())
    yield proc
    proc.kill()
    proc.wait()


def plan_for_test(rt, victim):
    """The full plan, minus moves of processes this test did not start."""
    plan = plan_tune(rt)
    kthreads = {t.tid for t in ktasks.tasks("/") if t.kthread}
    plan.steps = [
        s
        for s in plan.steps
        if s.kind == FILE or (s.kind == AFFINITY and (s.tid in kthreads or int(s.target) == victim.pid))
    ]
    return plan


def snapshot(plan) -> dict:
    """Raw bytes of every kernel file the plan touches, and the CPUs of every thread it moves."""
    snap = {}
    for step in plan.steps:
        if step.kind == FILE:
            snap[step.target] = Path(step.target).read_bytes()
        else:
            try:
                snap[f"tid {step.tid}"] = sorted(os.sched_getaffinity(step.tid))
            except ProcessLookupError:
                pass  # a kernel thread that went away (kworkers come and go)
    return snap


def test_apply_then_revert_restores_every_byte(rt, victim, tmp_path):
    plan = plan_for_test(rt, victim)
    assert plan.steps, "an untuned machine has something to tune"
    rt_runtime = Path("/proc/sys/kernel/sched_rt_runtime_us").read_bytes()
    before = snapshot(plan)
    state = tmp_path / "tune-state.jsonl"
    applied = report = undone = None
    try:
        applied = apply_plan(plan, state_path=state)
        report = run_checks(rt, sample_s=0)
    finally:
        if state.exists():
            undone = revert(state_path=state)
        after = snapshot(plan)
    fixed = {s.check for s in plan.steps if s.kind == FILE}
    refused = {s.check for s, o in zip(plan.steps, applied.outcomes) if o.status == "failed"}
    # An IRQ the kernel keeps (a managed virtio-blk queue here) has no step: its check stays as it was.
    refused |= {
        "irq.nic" if i.nic else "irq.devices"
        for i in irqs("/")
        if not i.movable and i.affinity is not None and not i.affinity.isdisjoint(rt)
    }
    statuses = {f.id: f.status for f in report.findings}
    assert {c: statuses[c] for c in fixed - refused if statuses[c] is not Status.OK} == {}
    tasks = next(f for f in report.findings if f.id == "cores.tasks")
    assert f"sleep ({victim.pid})" not in " ".join(tasks.evidence)
    assert undone is not None and undone.complete, [o for o in undone.outcomes if o.status != "restored"]
    assert {k: v for k, v in after.items() if k in before} == before
    assert Path("/proc/sys/kernel/sched_rt_runtime_us").read_bytes() == rt_runtime
    assert sorted(os.sched_getaffinity(victim.pid)) == sorted(online_cpus())


def test_revert_after_an_interrupted_apply(rt, victim, tmp_path):
    plan = plan_for_test(rt, victim)
    files = [s for s in plan.steps if s.kind == FILE]
    if len(files) < 2:  # the same interruption on an untuned tree: test_tune_apply.py
        pytest.skip(f"this machine is tuned already ({len(files)} kernel file(s) to change): nothing to interrupt")
    rt_runtime = Path("/proc/sys/kernel/sched_rt_runtime_us").read_bytes()
    before = snapshot(plan)
    state = tmp_path / "tune-state.jsonl"
    writes = []

    def interrupted(path, value):
        write_kernel_file(path, value)
        writes.append(path)
        if len(writes) == len(files) // 2:
            raise KeyboardInterrupt  # ^C half way through the kernel files

    undone = None
    try:
        with pytest.raises(KeyboardInterrupt):
            apply_plan(plan, state_path=state, writer=interrupted)
    finally:
        if state.exists():
            undone = revert(state_path=state)
        after = snapshot(plan)
    assert len(writes) == len(files) // 2
    assert undone is not None and undone.complete
    assert undone.count("restored") == len(undone.outcomes) >= len(writes)
    assert {k: v for k, v in after.items() if k in before} == before
    assert Path("/proc/sys/kernel/sched_rt_runtime_us").read_bytes() == rt_runtime


def test_the_plan_never_moves_softrt_or_the_shell_that_started_it(rt):
    """Issue 12, defect 7: the calling shell moved off the RT CPUs could not start softrt run there."""
    plan = plan_tune(rt)
    moved = {int(s.target) for s in plan.steps if s.kind == AFFINITY}
    lineage, pid = [], os.getpid()
    while pid > 1:
        lineage.append(pid)
        pid = int(Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[1])
    assert moved.isdisjoint(lineage)


@pytest.mark.rt
def test_tune_apply_then_run_from_the_same_shell(rt, victim, tmp_path, state_dir):
    """``softrt tune --apply && softrt run`` from one shell: the shell keeps its CPUs, the run starts.

    The apply is the real one, limited (as above) to kernel files, kernel threads, the victim and
    the shell's own process tree, so that other people's processes are left where they are.
    """
    import sys

    state = tmp_path / "tune-state.jsonl"
    apply_code = (
        "import os, sys\nfrom pathlib import Path\n"
        "from softrt.platform.linux import ktasks\n"
        "from softrt.audit import apply_plan, plan_tune\n"
        "from softrt.cpus import CpuSet\n"
        "plan = plan_tune(CpuSet.parse(sys.argv[1]))\n"
        "mine = {os.getpid(), os.getppid(), int(sys.argv[2])}\n"
        "kthreads = {t.tid for t in ktasks.tasks('/') if t.kthread}\n"
        "plan.steps = [s for s in plan.steps if s.kind == 'file' or s.kind == 'affinity' and (\n"
        "    s.tid in kthreads or int(s.target) in mine)]\n"
        "apply_plan(plan, state_path=Path(sys.argv[3]))\n"
    )
    script = (
        f"grep Cpus_allowed_list /proc/$$/status > {tmp_path}/before && "
        f'"{sys.executable}" -c "$APPLY" {rt} {victim.pid} {state} && '
        f"grep Cpus_allowed_list /proc/$$/status > {tmp_path}/after && "
        f'"{sys.executable}" -m softrt run --duration 0.3s --json --out-dir {tmp_path}/runs > {tmp_path}/run.json'
    )
    rt_runtime = Path("/proc/sys/kernel/sched_rt_runtime_us").read_bytes()
    try:
        proc = subprocess.run(
            ["sh", "-c", script], env={**os.environ, "APPLY": apply_code}, capture_output=True, text=True, timeout=120
        )
    finally:
        undone = revert(state_path=state) if state.exists() else None
    assert undone is not None and undone.complete, proc.stderr
    assert Path("/proc/sys/kernel/sched_rt_runtime_us").read_bytes() == rt_runtime
    assert (tmp_path / "after").read_text() == (tmp_path / "before").read_text()
    assert proc.returncode == 0, proc.stderr
    assert sorted(os.sched_getaffinity(victim.pid)) == sorted(online_cpus())
