"""Reserved cores: is anything else allowed, or seen, on the real-time CPUs? (audit layer)

The seed reserved cores with Windows' SetRTCores and then found Windows Defender (MsMpEng.exe)
running on them anyway. On Linux the reservation is isolcpus= or a cgroup-v2 cpuset partition
(Documentation/admin-guide/cgroup-v2.rst, "cpuset.cpus.partition"), and what may still run there
is every task whose affinity includes the real-time CPUs.
"""

from __future__ import annotations

import os

from ....cpus import CpuSet
from ....errors import ConfigError
from ....platform.kfiles import kpath
from ....platform.linux import kfacts
from ....schema.audit import SampledTask
from ...model import Finding, Found, Severity, declare
from ..context import Context
from .knob import mask_knob

_TUNE = "softrt tune --rt-cpus {rt} --apply"


def _isolated_partitions(ctx: Context) -> tuple[CpuSet, list[str]]:
    """CPUs in cgroup-v2 isolated partitions, and where they were found (depth ≤ 3)."""
    mp = kfacts.mount_point(ctx.root, "cgroup2")
    if mp is None:
        return CpuSet(), []
    cpus, where = CpuSet(), []
    root_isolated = kfacts.cpulist(ctx.root, f"{mp}/cpuset.cpus.isolated")  # Linux 6.7+
    if root_isolated:
        return root_isolated, [f"{mp}/cpuset.cpus.isolated: {root_isolated}"]
    stack = [(mp, 0)]
    while stack:
        rel, depth = stack.pop()
        partition = ctx.text(f"{rel}/cpuset.cpus.partition")
        if partition and partition.split()[0] == "isolated":
            eff = kfacts.cpulist(ctx.root, f"{rel}/cpuset.cpus.effective") or CpuSet()
            cpus = cpus | eff
            where.append(f"{rel}/cpuset.cpus.partition: isolated ({eff})")
        if depth < 3:
            try:
                subdirs = [e.name for e in os.scandir(kpath(ctx.root, rel)) if e.is_dir()]
            except OSError:
                subdirs = []
            stack.extend((f"{rel}/{d}", depth + 1) for d in subdirs)
    return cpus, where


@declare("cores.isolation", "CPU isolation (isolcpus / cpuset partition)", Severity.MEDIUM)
def check_isolation(ctx: Context, found: Found) -> Finding:
    """RT CPUs reserved with isolcpus=domain or an isolated cpuset partition."""
    isolated = kfacts.cpulist(ctx.root, "/sys/devices/system/cpu/isolated")
    params = ctx.cmdline or {}
    boot_cpus, flags = kfacts.parse_isolcpus(params["isolcpus"]) if "isolcpus" in params else (CpuSet(), ())
    part_cpus, part_where = _isolated_partitions(ctx)
    evidence = [
        f"/sys/devices/system/cpu/isolated: {isolated if isolated is not None else 'unreadable'}",
        f"/proc/cmdline isolcpus: {params.get('isolcpus', '(not set)')}",
        *part_where,
    ]
    if isolated is None and ctx.cmdline is None:
        return found.na("neither /sys/devices/system/cpu/isolated nor /proc/cmdline is readable")
    domain = (isolated or CpuSet()) | (boot_cpus if "domain" in flags else CpuSet())
    covered = domain | part_cpus
    if ctx.rt_cpus <= covered:
        how = "isolcpus" if ctx.rt_cpus <= domain else "an isolated cpuset partition"
        return found.ok(f"{ctx.describe_cpus(ctx.rt_cpus)} reserved by {how}", tuple(evidence))
    missing = ctx.rt_cpus - covered
    return found.fail(
        f"{ctx.describe_cpus(missing)} not reserved: the scheduler may place any new task there",
        tuple(evidence),
        why="without a reservation every new process and thread can land on the loop's CPU (the seed's Defender case); "
        "softrt tune moves those that exist now, not those started later",
        fix=f"kernel parameter isolcpus=managed_irq,domain,{ctx.rt_cpus} (reboot); or at run time a cgroup-v2 "
        f"partition: echo {ctx.rt_cpus} > <cg>/cpuset.cpus; echo isolated > <cg>/cpuset.cpus.partition",
        reboot=True,
    )


@declare("cores.nohz_full", "Adaptive tick (nohz_full)", Severity.LOW)
def check_nohz_full(ctx: Context, found: Found) -> Finding:
    """Tick stopped on the RT CPUs while one task runs (nohz_full=)."""
    nohz = kfacts.cpulist(ctx.root, "/sys/devices/system/cpu/nohz_full")
    from_cmdline = kfacts.cmdline_cpus(ctx.cmdline, "nohz_full")
    cpus = nohz if nohz is not None else from_cmdline
    if ctx.config("CONFIG_NO_HZ_FULL") is None and ctx.kconfig is not None:
        evidence = (f"{ctx.kconfig[1]}: CONFIG_NO_HZ_FULL is not set",)
        return found.warn(
            "this kernel is built without CONFIG_NO_HZ_FULL: the tick always runs on the RT CPUs",
            evidence,
            why="a busy-polling loop (the seed's) is interrupted by every tick (HZ times a second); a sleeping "
            "loop is better off with the tick (kernel-configuration.rst, NO_HZ_FULL)",
            fix=f"only if the loop busy-polls: a kernel built with CONFIG_NO_HZ_FULL=y, then nohz_full={ctx.rt_cpus}",
            reboot=True,
        )
    evidence = (
        f"/sys/devices/system/cpu/nohz_full: {nohz if nohz is not None else 'absent'}",
        f"/proc/cmdline nohz_full: {(ctx.cmdline or {}).get('nohz_full', '(not set)')}",
    )
    if cpus is not None and ctx.rt_cpus <= cpus:
        return found.ok(
            f"nohz_full covers {ctx.describe_cpus(ctx.rt_cpus)}",
            evidence,
            why="good for a busy-polling loop; a loop that sleeps each cycle pays extra tick "
            "restart work (kernel-configuration.rst, NO_HZ_FULL)",
        )
    return found.warn(
        f"the scheduler tick keeps running on {ctx.describe_cpus(ctx.rt_cpus)}",
        evidence,
        why="a busy-polling loop (the seed's) is interrupted by every tick; a sleeping loop does better with "
        "the tick running (kernel-configuration.rst, NO_HZ_FULL)",
        fix=f"only if the loop busy-polls: kernel parameter nohz_full={ctx.rt_cpus} (reboot)",
        reboot=True,
    )


@declare("cores.rcu_nocbs", "RCU callback offload (rcu_nocbs)", Severity.LOW)
def check_rcu_nocbs(ctx: Context, found: Found) -> Finding:
    """RCU callbacks offloaded from the RT CPUs (rcu_nocbs=, implied by nohz_full=)."""
    if ctx.cmdline is None:
        return found.na("/proc/cmdline is unreadable")
    nocbs = kfacts.cmdline_cpus(ctx.cmdline, "rcu_nocbs") or CpuSet()
    nohz = kfacts.cmdline_cpus(ctx.cmdline, "nohz_full") or CpuSet()
    evidence = (
        f"/proc/cmdline rcu_nocbs: {ctx.cmdline.get('rcu_nocbs', '(not set)')}",
        f"/proc/cmdline nohz_full: {ctx.cmdline.get('nohz_full', '(not set)')}",
        f"CONFIG_RCU_NOCB_CPU: {ctx.config('CONFIG_RCU_NOCB_CPU') or 'not set or unknown'}",
    )
    if ctx.rt_cpus <= (nocbs | nohz):  # nohz_full= implies rcu_nocbs= (Documentation/timers/no_hz.rst)
        return found.ok(f"RCU callbacks of {ctx.describe_cpus(ctx.rt_cpus)} run in rcuo kthreads elsewhere", evidence)
    return found.warn(
        f"RCU callbacks are invoked on {ctx.describe_cpus(ctx.rt_cpus)} in softirq context",
        evidence,
        why="callback batches after memory frees run in softirq on the loop's CPU, ahead of a SCHED_FIFO task "
        "on non-RT kernels",
        fix=f"kernel parameter rcu_nocbs={ctx.rt_cpus} (reboot; needs CONFIG_RCU_NOCB_CPU=y)",
        reboot=True,
    )


def floating(ctx: Context):
    """Tasks allowed on the RT CPUs *and* elsewhere that may be moved: what tune moves.

    A task whose affinity lies inside the RT CPUs was put there on purpose (the real-time
    application itself, like the seed's SetProcessAffinityMask), so it is left alone; so are
    softrt and the shell that started it (:attr:`Context.own_lineage`).
    """
    own = set(ctx.own_lineage)
    return [
        t
        for t in ctx.tasks
        if t.movable and not t.allowed.isdisjoint(ctx.rt_cpus) and not t.allowed <= ctx.rt_cpus and t.pid not in own
    ]


@declare("cores.tasks", "Tasks allowed on the RT CPUs", Severity.HIGH)
def check_tasks(ctx: Context, found: Found) -> Finding:
    """Every user process and movable kernel thread whose affinity includes the RT CPUs."""
    if not ctx.tasks:
        return found.na("no readable /proc/PID/task entries")
    movable = floating(ctx)
    user = sorted({t.label() if t.pid == t.tid else f"{t.comm} ({t.pid})" for t in movable if not t.kthread})
    kthreads = sorted({t.label() for t in movable if t.kthread})
    only_rt = [
        t for t in ctx.tasks if not t.kthread and t.allowed <= ctx.rt_cpus and not t.allowed.isdisjoint(ctx.rt_cpus)
    ]
    pinned = sorted({f"{t.label()} {t.policy_name}" for t in only_rt if t.realtime})
    pinned_other = sorted({f"{t.label()} {t.policy_name}" for t in only_rt if not t.realtime})
    percpu = sum(1 for t in ctx.tasks if t.kthread and not t.movable and not t.allowed.isdisjoint(ctx.rt_cpus))
    evidence = [
        f"user processes that may run there ({len(user)}): {_some(user)}",
        f"movable kernel threads that may run there ({len(kthreads)}): {_some(kthreads)}",
        f"pinned to the RT CPUs only, SCHED_FIFO/RR/DEADLINE (taken to be the real-time application): "
        f"{_some(pinned) if pinned else 'none'}",
        f"pinned to the RT CPUs only but not real-time (reported by the live sample if they run there): "
        f"{_some(pinned_other) if pinned_other else 'none'}",
        f"per-CPU kernel threads there (cannot move, expected): {percpu}",
    ]
    if ctx.own_lineage:
        evidence.append(
            f"softrt itself and the processes that started it (pids {', '.join(map(str, ctx.own_lineage))}) "
            "are left out: the next softrt run starts from that shell"
        )
    fix = f"{_TUNE.format(rt=ctx.rt_cpus)} (moves them); to keep new ones off: isolcpus=domain,{ctx.rt_cpus}"
    if user:
        return found.fail(
            f"{len(user)} user process(es) and {len(kthreads)} kernel thread(s) may run on "
            f"{ctx.describe_cpus(ctx.rt_cpus)}",
            tuple(evidence),
            why="any of them can take the loop's CPU or its cache at any moment, as Windows Defender did on the "
            "seed's real-time cores",
            fix=fix,
            tunable=True,
        )
    if kthreads:
        return found.warn(
            f"{len(kthreads)} movable kernel thread(s) may run on {ctx.describe_cpus(ctx.rt_cpus)}",
            tuple(evidence),
            why="kswapd, khugepaged, kcompactd and unbound kworkers wake up on any allowed "
            "CPU and run ahead of SCHED_OTHER work there",
            fix=fix,
            tunable=True,
            severity=Severity.MEDIUM,
        )
    return found.ok(
        f"only per-CPU kernel threads{' and the pinned application' if pinned else ''} may run on "
        f"{ctx.describe_cpus(ctx.rt_cpus)}",
        tuple(evidence),
    )


@declare("cores.workqueue", "Unbound workqueue CPUs", Severity.MEDIUM)
def check_workqueue(ctx: Context, found: Found) -> Finding:
    """Unbound workqueues kept off the RT CPUs (/sys/devices/virtual/workqueue/cpumask)."""
    rel = "/sys/devices/virtual/workqueue/cpumask"
    raw = ctx.text(rel)
    if raw is None:
        return found.na(f"{rel} is unreadable")
    try:
        cpus = CpuSet.from_mask(raw)
    except ConfigError:
        return found.na(f"{rel} holds {raw!r}, not a CPU mask")
    return mask_knob(
        ctx,
        found,
        rel,
        raw,
        cpus,
        ok=f"unbound work runs on CPUs {cpus} only",
        may="unbound kworkers may run on",
        why="writeback, crypto and other deferred kernel work is queued on unbound kworkers that go to any CPU "
        "in this mask (Documentation/core-api/workqueue.rst)",
    )


@declare("cores.sample", "Live sample of the RT CPUs", Severity.HIGH)
def check_sample(ctx: Context, found: Found) -> Finding:
    """What actually ran on the RT CPUs during a short live sample."""
    sample = ctx.sample
    if sample is None:
        return found.na("no live sample taken (sampling off, or a captured tree)")
    if sample.error:
        return found.na(f"sampling failed: {sample.error}")
    # Exited tasks count too: short-lived processes (compilers, scripts) are typical intruders. A
    # SCHED_OTHER task pinned to the RT CPUs is one too: only a FIFO/RR/DEADLINE task there may be
    # the real-time application (the seed's Defender ran there at normal priority).
    others = [e for e in sample.tasks if e.kind in ("user", "kthread-movable", "exited", "pinned")]
    expected = [e for e in sample.tasks if e.kind == "rt-app"]
    top = ", ".join(f"{e.comm} {e.cpu_ms:.2f} ms" for e in sample.tasks[:6] if e.kind != "idle")
    evidence = (
        f"method: {sample.method}, {sample.seconds:.1f} s on {ctx.describe_cpus(ctx.rt_cpus)}",
        f"busiest: {top or 'nothing but idle'}",
        f"idle share: {sample.idle_share * 100:.1f} % (from {sample.idle_source or '?'})"
        if sample.idle_share is not None
        else "idle share: unknown",
        f"events lost by the trace buffer: {sample.lost_events or 0}",
    )
    if others:
        ms = sum(e.cpu_ms or 0.0 for e in others)
        return found.warn(
            f"{len(others)} task(s) other than the real-time application used {ms:.2f} ms on the RT CPUs: "
            + ", ".join(_used(e) for e in others[:5]),
            evidence,
            why="every one of them delays a loop on that CPU (the seed's MsMpEng.exe finding); a "
            "SCHED_OTHER task pinned there is not the real-time application, whoever pinned it",
            fix=_TUNE.format(rt=ctx.rt_cpus) + _pinned_fix(ctx, others),
            tunable=True,
        )
    return found.ok(
        "only idle, per-CPU kernel threads"
        + (" and the pinned application" if expected else "")
        + " ran on the RT CPUs",
        evidence,
    )


def _pinned_fix(ctx: Context, others: list[SampledTask]) -> str:
    """softrt tune leaves tasks pinned to the RT CPUs alone: say what to do with those."""
    pids = sorted({e.pid for e in others if e.kind == "pinned" and e.pid is not None})
    if not pids:
        return ""
    some = " ".join(str(p) for p in pids[:5])
    return (
        f"; it leaves tasks pinned to the RT CPUs alone: move them (for p in {some}; do taskset -apc "
        f"{ctx.housekeeping} $p; done) or, if one is your real-time application, give it a real-time "
        "policy (chrt -f -p 80 PID)"
    )


def _used(entry: SampledTask) -> str:
    """``name (pid N) 12.50 ms``, saying why a task counts: exited, or pinned but not real-time."""
    why = {"exited": ", exited", "pinned": ", pinned to the RT CPUs but SCHED_OTHER"}.get(entry.kind or "", "")
    return f"{entry.comm} (pid {entry.pid}{why}) {entry.cpu_ms:.2f} ms"


def _some(items: list[str], n: int = 8) -> str:
    return ", ".join(items[:n]) + (f", … (+{len(items) - n})" if len(items) > n else "") if items else "none"


CHECKS = (check_isolation, check_nohz_full, check_rcu_nocbs, check_tasks, check_workqueue, check_sample)
