"""Plan every run-time fix for a set of real-time CPUs; change nothing (audit layer).

A plan is a list of :class:`Step` (write a kernel file, move a thread, stop a unit), each naming
the check it fixes, plus the kernel command line for what only a reboot can change (isolcpus,
nohz_full, rcu_nocbs, preempt=, processor.max_cstate, nosmt). IRQs the kernel does not let user
space move (managed or per-CPU, :func:`softrt.audit.linux.irqs.movable`) are reboot-only too: no step,
but ``isolcpus=managed_irq`` ("Isolate from being targeted by managed interrupts",
Documentation/admin-guide/kernel-parameters.txt), so that ``--apply`` never tries what the kernel
refuses.
"""

from __future__ import annotations

from ...cpus import CpuSet
from ...platform.linux import fairserver, kfacts
from ..model import Report, Status
from ..plan import AFFINITY, FILE, SERVICE, Plan, Step
from . import irqs as _irqs
from .checks.cores import floating
from .checks.kernel import preemption
from .checks.services import check_irqbalance
from .checks.updates import stoppable_timers
from .context import Context
from .runner import online_cpus, run_checks, validate_rt_cpus

CPUIDLE_DISABLE = "{state}/disable"


def _file(ctx: Context, rel: str, after: str, check: str, why: str) -> Step | None:
    now = ctx.text(rel)
    if now is None or now == after:
        return None
    return Step(kind=FILE, target=rel, now=now, after=after, check=check, why=why)


def _mask_away(ctx: Context, cpus: CpuSet | None) -> CpuSet:
    """Keep what was allowed outside the RT CPUs; if nothing, use every housekeeping CPU."""
    return ((cpus or CpuSet()) - ctx.rt_cpus) or ctx.housekeeping


def _service_steps(ctx: Context) -> list[Step]:
    if not ctx.systemd_running:
        return []
    steps = []
    if ctx.process_names.get("irqbalance") and check_irqbalance(ctx).status is Status.FAIL:
        steps.append(
            Step(
                kind=SERVICE,
                target="irqbalance.service",
                now="active",
                after="inactive",
                check="services.irqbalance",
                why="it would move the IRQs back onto the RT CPUs within 10 s",
            )
        )
    for timer in stoppable_timers(ctx):
        steps.append(
            Step(
                kind=SERVICE,
                target=timer,
                now="active",
                after="inactive",
                check="updates.agents",
                why="no automatic update starts until the next boot (or softrt tune --revert)",
            )
        )
    return steps


def _fixed_irqs(ctx: Context) -> list[str]:
    """The IRQs allowed on the RT CPUs that the kernel will not move at run time."""
    return [
        irq.label()
        for irq in ctx.irqs
        if not irq.movable and irq.affinity is not None and not irq.affinity.isdisjoint(ctx.rt_cpus)
    ]


def _irq_steps(ctx: Context) -> list[Step]:
    steps = []
    width = max(ctx.online, default=0) + 1
    for irq in ctx.irqs:
        if irq.affinity is None or irq.affinity.isdisjoint(ctx.rt_cpus) or not irq.movable:
            continue
        step = _file(
            ctx,
            f"/proc/irq/{irq.number}/smp_affinity",
            _mask_away(ctx, irq.affinity).to_mask(width),
            "irq.nic" if irq.nic else "irq.devices",
            f"{irq.label()} off the RT CPUs",
        )
        if step:
            steps.append(step)
    default = _irqs.default_affinity(ctx.root)
    if default is not None and not default.isdisjoint(ctx.rt_cpus):
        step = _file(
            ctx,
            "/proc/irq/default_smp_affinity",
            _mask_away(ctx, default).to_mask(width),
            "irq.default_affinity",
            "IRQs requested later start off the RT CPUs",
        )
        steps.extend([step] if step else [])
    return steps


def _sysctl_steps(ctx: Context) -> list[Step]:
    steps: list[Step | None] = []
    wq = ctx.text("/sys/devices/virtual/workqueue/cpumask")
    if wq is not None:
        cpus = CpuSet.from_mask(wq)
        if not cpus.isdisjoint(ctx.rt_cpus):
            steps.append(
                _file(
                    ctx,
                    "/sys/devices/virtual/workqueue/cpumask",
                    _mask_away(ctx, cpus).to_mask(max(ctx.online) + 1),
                    "cores.workqueue",
                    "unbound kworkers stay on the housekeeping CPUs",
                )
            )
    wd = kfacts.cpulist(ctx.root, "/proc/sys/kernel/watchdog_cpumask")
    if wd is not None and not wd.isdisjoint(ctx.rt_cpus):
        steps.append(
            _file(
                ctx,
                "/proc/sys/kernel/watchdog_cpumask",
                str(_mask_away(ctx, wd)),
                "services.watchdog",
                "no lockup-detector timer on the RT CPUs",
            )
        )
    steps.append(
        _file(
            ctx,
            "/proc/sys/kernel/sched_rt_runtime_us",
            "-1",
            "kernel.rt_throttling",
            "a real-time loop is never throttled",
        )
    )
    for cpu in ctx.rt_cpus:
        for state in kfacts.idle_states(ctx.root, cpu) or []:
            if not state.disabled and not state.is_poll:
                steps.append(
                    _file(
                        ctx,
                        CPUIDLE_DISABLE.format(state=state.path),
                        "1",
                        "idle.states",
                        f"cpu{cpu} never enters {state.name} (exit {state.exit_latency_us} µs)",
                    )
                )
        freq = kfacts.cpufreq(ctx.root, cpu)
        if freq and freq.governor != "performance" and "performance" in freq.available:
            steps.append(
                _file(ctx, freq.path, "performance", "kernel.governor", f"cpu{cpu} at a fixed, high frequency")
            )
    if ctx.text("/sys/kernel/mm/ksm/run") == "1":
        steps.append(_file(ctx, "/sys/kernel/mm/ksm/run", "0", "services.ksm", "ksmd stops (merged pages stay merged)"))
    for name in ("enabled", "defrag"):
        rel = f"/sys/kernel/mm/transparent_hugepage/{name}"
        if kfacts.selected_word(ctx.text(rel)) == "always":
            steps.append(_file(ctx, rel, "madvise", "services.thp", f"THP {name} only where a program asks for it"))
    nodes = kfacts.cpulist(ctx.root, "/sys/devices/system/node/online")
    if ctx.text("/proc/sys/kernel/numa_balancing") not in (None, "0") and (nodes is None or len(nodes) > 1):
        steps.append(
            _file(ctx, "/proc/sys/kernel/numa_balancing", "0", "services.numa_balancing", "no NUMA hinting faults")
        )
    steps.append(
        _file(
            ctx,
            "/proc/sys/kernel/timer_migration",
            "0",
            "kernel.timer_migration",
            "timers stay on the CPU that armed them",
        )
    )
    cs = "/sys/devices/system/clocksource/clocksource0"
    current = ctx.text(f"{cs}/current_clocksource")
    if current and current != "tsc" and "tsc" in (ctx.text(f"{cs}/available_clocksource") or "").split():
        steps.append(_file(ctx, f"{cs}/current_clocksource", "tsc", "kernel.clocksource", "clock reads in user space"))
    return [s for s in steps if s]


def _fair_server(ctx: Context, plan: Plan) -> None:
    """Runtime 0 for the fair server on the RT CPUs where debugfs allows it (kernel.fair_server); where
    it is locked down or absent, say so: moving every movable task off the RT CPUs is then the fix."""
    fair = fairserver.read(ctx.root, ctx.rt_cpus)
    cpus = [cpu for cpu in ctx.rt_cpus if fair.in_force(cpu)]
    if not cpus:
        return
    if fair.debugfs in ("locked", "absent"):
        plan.skipped.append(
            f"the fair server's runtime on CPU {CpuSet(cpus)}: {fair.unreadable}; every movable task is "
            "moved off the RT CPUs instead (cores.tasks), so no SCHED_OTHER task but the per-CPU "
            "kernel threads is there for it to run"
        )
        return
    for cpu in cpus:
        step = _file(
            ctx,
            fairserver.RUNTIME.format(cpu=cpu),
            "0",
            "kernel.fair_server",
            f"cpu{cpu}: SCHED_OTHER tasks no longer run ahead of the loop",
        )
        plan.steps.extend([step] if step else [])
    if any(s.check == "kernel.fair_server" for s in plan.steps):
        plan.notes.append(
            f"fair server off on CPU {CpuSet(cpus)}: its per-CPU kernel threads (ksoftirqd, kworkers) "
            "can starve while a loop spins there, as with sched_rt_runtime_us = -1"
        )


def _task_steps(ctx: Context) -> list[Step]:
    steps = []
    for task in floating(ctx):
        after = _mask_away(ctx, task.allowed)
        steps.append(
            Step(
                kind=AFFINITY,
                target=str(task.pid),
                now=str(task.allowed),
                after=str(after),
                check="cores.tasks",
                why="kernel thread off the RT CPUs" if task.kthread else "process off the RT CPUs",
                tid=task.tid,
                starttime=task.starttime,
                comm=task.comm,
            )
        )
    return steps


def _kernel_params(ctx: Context, report: Report) -> list[tuple[str, str]]:
    bad = {f.id for f in report.findings if f.status in (Status.FAIL, Status.WARN)}
    rt, params = ctx.rt_cpus, []
    if "cores.isolation" in bad:
        params.append((f"isolcpus=managed_irq,domain,{rt}", "cores.isolation"))
    if "cores.nohz_full" in bad and ctx.config("CONFIG_NO_HZ_FULL"):
        params.append((f"nohz_full={rt}", "cores.nohz_full"))
    if "cores.rcu_nocbs" in bad:
        params.append((f"rcu_nocbs={rt}", "cores.rcu_nocbs"))
    if {"irq.nic", "irq.devices", "irq.default_affinity"} & bad:
        params.append((f"irqaffinity={ctx.housekeeping}", "irq.default_affinity"))
    _, flags = kfacts.parse_isolcpus((ctx.cmdline or {}).get("isolcpus", ""))
    if _fixed_irqs(ctx) and "managed_irq" not in flags and not any(p.startswith("isolcpus=") for p, _ in params):
        params.append((f"isolcpus=managed_irq,domain,{rt}", "irq.devices"))
    model, _ = preemption(ctx)
    if "kernel.preemption" in bad and model in ("none", "voluntary") and ctx.config("CONFIG_PREEMPT_DYNAMIC") == "y":
        params.append(("preempt=full", "kernel.preemption"))
    if "idle.cmdline" in bad:
        params.append(("processor.max_cstate=1 intel_idle.max_cstate=1", "idle.cmdline"))
    if "kernel.smt" in bad:
        params.append(("nosmt", "kernel.smt"))
    return params


def plan_tune(rt_cpus: CpuSet, root: str = "/") -> Plan:
    """Return every run-time fix for *rt_cpus* (nothing is changed).

    On a captured tree (root other than "/") only kernel-file steps are planned: thread ids and
    systemd units there do not belong to this machine.

    Raises:
        ConfigError: bad real-time CPUs (as :func:`softrt.audit.validate_rt_cpus`).
    """
    root = str(root)
    rt_cpus, housekeeping = validate_rt_cpus(rt_cpus, root)
    ctx = Context(root, rt_cpus, online_cpus(root))
    report = run_checks(rt_cpus, root, sample_s=0)
    plan = Plan(rt_cpus, housekeeping, root, report=report)
    if ctx.live:
        plan.steps += _service_steps(ctx)
    else:
        plan.skipped.append("threads and services: a captured tree's processes are not this machine's")
    plan.steps += _irq_steps(ctx) + _sysctl_steps(ctx)
    _fair_server(ctx, plan)
    if ctx.live:
        plan.steps += _task_steps(ctx)
        if ctx.own_lineage:
            plan.skipped.append(
                f"softrt and the processes that started it (pids {', '.join(map(str, ctx.own_lineage))}) "
                "keep their CPUs, so that softrt run from this shell can use the RT CPUs"
            )
    plan.fixed_irqs = _fixed_irqs(ctx)
    plan.kernel_params = _kernel_params(ctx, report)
    fixed = {s.check for s in plan.steps} | {c for _, c in plan.kernel_params}
    if "cores.tasks" in fixed:
        fixed.add("cores.sample")  # what the sample saw is what the task moves fix
        if any("fair server" in note for note in plan.skipped):
            fixed.add("kernel.fair_server")  # locked down: the task moves are all there is
    plan.manual = [
        (f.id, f.fix) for f in report.findings if f.status in (Status.FAIL, Status.WARN) and f.fix and f.id not in fixed
    ]
    return plan
