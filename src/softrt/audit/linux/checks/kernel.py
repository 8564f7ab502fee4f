"""Kernel and CPU: scheduler, preemption, tick, SMT, frequency, clocks, swap (audit layer).

Severities follow Documentation/core-api/real-time/kernel-configuration.rst where it has a rule
(PREEMPT_RT: fatal; performance governor: high; NO_HZ: medium for periodic loops).
"""

from __future__ import annotations

from ....cpus import CpuSet
from ....platform.linux import fairserver, kfacts
from ...model import Finding, Found, Severity, Status, declare
from ..context import Context
from .knob import knob

RT_RUNTIME = "/proc/sys/kernel/sched_rt_runtime_us"
RT_KERNEL_FIX = "boot a PREEMPT_RT kernel (Debian: linux-image-rt-amd64; Fedora/RHEL: kernel-rt)"


@declare("kernel.rt_throttling", "RT throttling (sched_rt_runtime_us)", Severity.HIGH)
def check_rt_throttling(ctx: Context, found: Found) -> Finding:
    """RT throttling: sched_rt_runtime_us, and the fair deadline server of Linux 6.12+."""
    runtime = ctx.text(RT_RUNTIME)
    if runtime is None:
        return found.na(f"{RT_RUNTIME} is unreadable")
    period = ctx.text("/proc/sys/kernel/sched_rt_period_us")
    version = kfacts.kernel_version_tuple(ctx.root)
    group = ctx.config("CONFIG_RT_GROUP_SCHED")
    evidence = [
        f"{RT_RUNTIME}: {runtime}",
        f"/proc/sys/kernel/sched_rt_period_us: {period}",
        f"kernel {kfacts.kernel_release(ctx.root)}; CONFIG_RT_GROUP_SCHED: "
        f"{group or ('not set' if ctx.kconfig else 'unknown')}",
    ]
    # Since 6.12 the fair server replaced RT throttling unless RT_GROUP_SCHED is built in
    # (commit "sched/rt: Remove default bandwidth control"); then the sysctl only bounds admission.
    throttles = runtime != "-1" and not (version and version >= (6, 12) and ctx.kconfig is not None and group is None)
    if throttles:
        return found.fail(
            f"SCHED_FIFO/RR tasks may run only {runtime} µs of every {period} µs",
            tuple(evidence),
            why="a busy-polling real-time loop (the seed's) is stopped for the rest of every period, "
            "e.g. 50 ms each second (Documentation/scheduler/sched-rt-group.rst)",
            fix="sysctl kernel.sched_rt_runtime_us=-1",
            tunable=True,
        )
    summary = "RT throttling is off" if runtime == "-1" else "the sysctl only bounds admission on this kernel"
    return found.ok(
        summary,
        tuple(evidence),
        why="since Linux 6.12 the fair server still gives SCHED_OTHER tasks queued on the loop's CPU up to "
        "50 ms a second (kernel.fair_server)"
        if version and version >= (6, 12)
        else "",
    )


@declare("kernel.fair_server", "Fair server (Linux 6.12+)", Severity.HIGH)
def check_fair_server(ctx: Context, found: Found) -> Finding:
    """The fair server (Linux 6.12+): SCHED_OTHER tasks it runs on the RT CPUs ahead of the loop."""
    fair = fairserver.read(ctx.root, ctx.rt_cpus)
    if not fair.present:
        return found.na(f"Linux {kfacts.kernel_release(ctx.root) or '?'} has no fair server (it came with 6.12)")
    evidence = [f"cpu{cpu}: {fair.describe(cpu)}" for cpu in ctx.rt_cpus]
    in_force = CpuSet([cpu for cpu in ctx.rt_cpus if fair.in_force(cpu)])
    own = set(ctx.own_lineage)
    others = [t for t in ctx.tasks if not t.realtime and not t.allowed.isdisjoint(in_force)]
    movable = sorted({f"{t.comm} ({t.pid})" for t in others if t.movable and t.pid not in own})
    percpu = sorted({t.comm for t in others if not t.movable})
    evidence += [
        f"SCHED_OTHER tasks that may run there ({len(movable)}): {', '.join(movable[:8]) or 'none'}"
        + (", …" if len(movable) > 8 else ""),
        f"per-CPU kernel threads there ({len(percpu)}): {', '.join(percpu[:6]) or 'none'}"
        + (", …" if len(percpu) > 6 else ""),
    ]
    if not in_force:
        return found.ok(
            "off on the RT CPUs (runtime 0)",
            tuple(evidence),
            why="per-CPU kernel threads there wait while the loop spins, as with "
            "sched_rt_runtime_us = -1: keep the loop's duty cycle below 100 % if they must run",
        )
    cpus = ctx.describe_cpus(in_force)
    if fair.debugfs in ("locked", "absent"):
        fix = (
            f"the runtime cannot be changed here ({'debugfs is locked down' if fair.debugfs == 'locked' else fair.unreadable}): "
            f"keep every SCHED_OTHER task off {cpus}; softrt tune --rt-cpus {ctx.rt_cpus} moves the movable ones, "
            f"isolcpus={ctx.rt_cpus} keeps new ones off at boot"
        )
    elif fair.debugfs == "not mounted":
        fix = (
            f"mount -t debugfs none {fairserver.DEBUGFS}, then softrt tune --rt-cpus {ctx.rt_cpus} (runtime 0 "
            f"there, and the movable tasks off {cpus})"
        )
    else:
        fix = (
            "; ".join(f"echo 0 > {fairserver.RUNTIME.format(cpu=cpu)}" for cpu in in_force)
            + f" (softrt tune does it, and moves the movable tasks off {cpus})"
        )
    status, severity = (Status.FAIL, Severity.HIGH) if movable else (Status.WARN, Severity.MEDIUM)
    who = (
        f"{len(movable)} SCHED_OTHER tasks may run there, e.g. {', '.join(movable[:3])}"
        if movable
        else "only per-CPU kernel threads may run there"
    )
    return found(
        status,
        f"in force on {cpus}: {who}",
        tuple(evidence),
        why="the fair server runs SCHED_OTHER tasks queued on the loop's CPU ahead of SCHED_FIFO, up to its "
        "runtime every period (50 ms a second by default), even with RT throttling off: stalls of "
        'milliseconds (Documentation/scheduler/sched-deadline.rst; commit "sched/fair: Fair server '
        'interface")',
        fix=fix,
        tunable=True,
        severity=severity,
    )


def preemption(ctx: Context) -> tuple[str | None, str]:
    """Return (model, where it was read): PREEMPT_RT, full, lazy, voluntary or none."""
    version = ctx.text("/proc/sys/kernel/version") or ""
    if (
        ctx.text("/sys/kernel/realtime") == "1"
        or ctx.config("CONFIG_PREEMPT_RT") == "y"
        or "PREEMPT_RT" in version.split()
    ):
        return "PREEMPT_RT", "/sys/kernel/realtime, CONFIG_PREEMPT_RT or uname -v"
    dynamic = ctx.config("CONFIG_PREEMPT_DYNAMIC") == "y" or "PREEMPT_DYNAMIC" in version.split()
    if dynamic:
        mode = ctx.text("/sys/kernel/debug/sched/preempt")  # "none voluntary (full) lazy"
        if mode and "(" in mode:
            return mode.split("(", 1)[1].split(")", 1)[0], "/sys/kernel/debug/sched/preempt"
        param = (ctx.cmdline or {}).get("preempt")
        if param:
            return param, "preempt= on /proc/cmdline"
    for option, model in (
        ("CONFIG_PREEMPT_LAZY", "lazy"),
        ("CONFIG_PREEMPT", "full"),
        ("CONFIG_PREEMPT_VOLUNTARY", "voluntary"),
        ("CONFIG_PREEMPT_NONE", "none"),
    ):
        if ctx.config(option) == "y":
            where = "the build default (debugfs not mounted, no preempt=)" if dynamic else "the build configuration"
            return model, f"{option}=y, {where}"
    if not dynamic and "PREEMPT" in version.split():
        return "full", "uname -v says PREEMPT"
    return None, "no kernel configuration, debugfs or uname tag to go by"


@declare("kernel.preemption", "Preemption model", Severity.FATAL)
def check_preemption(ctx: Context, found: Found) -> Finding:
    """The preemption model (PREEMPT_RT, or the PREEMPT_DYNAMIC mode)."""
    model, where = preemption(ctx)
    version = ctx.text("/proc/sys/kernel/version")
    evidence = (f"uname -v: {version}", f"model: {model or 'unknown'} (from {where})")
    if model is None:
        return found.na(f"cannot tell: {where}", Severity.FATAL, *evidence)
    if model == "PREEMPT_RT":
        return found.ok("PREEMPT_RT kernel", evidence)
    dynamic = "PREEMPT_DYNAMIC" in (version or "") or ctx.config("CONFIG_PREEMPT_DYNAMIC") == "y"
    if model in ("full", "lazy"):
        return found.warn(
            f"preempt={model}, not PREEMPT_RT",
            evidence,
            why="kernel code is preemptible, but spinlock sections, softirqs and IRQ handlers still run ahead of "
            "the loop; PREEMPT_RT bounds them (kernel-configuration.rst: fatal for hard real-time)",
            fix=RT_KERNEL_FIX,
            reboot=True,
            severity=Severity.HIGH,
        )
    runtime = "; at run time: echo full > /sys/kernel/debug/sched/preempt" if dynamic else ""
    return found.fail(
        f"preempt={model}: kernel code is not preempted for the loop",
        evidence,
        why="a wake-up waits until the kernel reaches a preemption point, milliseconds in bad cases "
        "(kernel-configuration.rst, CONFIG_PREEMPT_RT: fatal)",
        fix=(f"kernel parameter preempt=full (reboot){runtime}; better: " if dynamic else "") + RT_KERNEL_FIX,
        reboot=True,
    )


@declare("kernel.tick", "Tick (HZ, NO_HZ)", Severity.LOW)
def check_tick(ctx: Context, found: Found) -> Finding:
    """Tick rate (HZ) and NO_HZ mode."""
    if ctx.kconfig is None:
        return found.na("no /proc/config.gz or /boot/config-<release> to read")
    hz = ctx.config("CONFIG_HZ")
    mode = (
        "NO_HZ_FULL"
        if ctx.config("CONFIG_NO_HZ_FULL")
        else "NO_HZ_IDLE"
        if ctx.config("CONFIG_NO_HZ_IDLE")
        else "periodic"
        if ctx.config("CONFIG_HZ_PERIODIC")
        else "unknown"
    )
    nohz_param = (ctx.cmdline or {}).get("nohz")
    evidence = (f"{ctx.kconfig[1]}: CONFIG_HZ={hz}, {mode}", f"/proc/cmdline nohz: {nohz_param or '(not set)'}")
    if mode in ("periodic", "unknown") or nohz_param == "off":
        return found.ok(f"HZ={hz}, periodic tick", evidence)
    return found.warn(
        f"HZ={hz}, {mode}",
        evidence,
        why="stopping and restarting the tick around idle adds work to each wake-up; the checklist advises "
        "against NO_HZ for periodic control loops (kernel-configuration.rst, NO_HZ)",
        fix="only if the loop sleeps each cycle: kernel parameter nohz=off (reboot)",
        reboot=True,
    )


@declare("kernel.smt", "SMT siblings (Hyper-Threading)", Severity.MEDIUM)
def check_smt(ctx: Context, found: Found) -> Finding:
    """SMT (Hyper-Threading) siblings of the RT CPUs that run other work."""
    control = ctx.text("/sys/devices/system/cpu/smt/control")
    siblings = {cpu: kfacts.thread_siblings(ctx.root, cpu) for cpu in ctx.rt_cpus}
    evidence = [f"/sys/devices/system/cpu/smt/control: {control or 'absent'}"]
    evidence += [f"cpu{c} core siblings: {s if s is not None else 'unknown'}" for c, s in siblings.items()]
    if control in ("notsupported", "notimplemented", "off", "forceoff"):
        return found.ok(f"SMT is {control}", tuple(evidence))
    if all(s is None for s in siblings.values()):
        return found.na("no CPU topology in sysfs", Severity.MEDIUM, *evidence)
    shared = CpuSet()
    for cpu, sibs in siblings.items():
        shared = shared | ((sibs or CpuSet()) & ctx.online) - CpuSet([cpu])
    strangers = shared - ctx.rt_cpus
    if strangers:
        return found.fail(
            f"{ctx.describe_cpus(strangers)} share a core with the RT CPUs",
            tuple(evidence),
            why="a sibling thread shares the core's execution units and caches: any load there stretches the "
            "loop's processing time (the seed turned Hyper-Threading off)",
            fix=f"kernel parameter nosmt (reboot), or: echo 0 > /sys/devices/system/cpu/cpu{strangers.last()}/online",
            reboot=True,
        )
    if shared:
        return found.warn(
            "two RT CPUs share one core",
            tuple(evidence),
            why="two loops on sibling threads slow each other down",
            fix="choose RT CPUs on different cores",
            severity=Severity.LOW,
        )
    return found.ok("the RT CPUs have no online sibling", tuple(evidence))


@declare("kernel.governor", "CPU frequency governor", Severity.HIGH)
def check_governor(ctx: Context, found: Found) -> Finding:
    """cpufreq governor of the RT CPUs (kernel-configuration.rst: performance, high)."""
    freqs = {cpu: kfacts.cpufreq(ctx.root, cpu) for cpu in ctx.rt_cpus}
    if all(f is None for f in freqs.values()):
        return found.na(
            "no cpufreq driver: the frequency is not under OS control (a VM, or firmware-controlled)", Severity.HIGH
        )
    evidence = tuple(f"cpu{c}: {f.driver}/{f.governor}" if f else f"cpu{c}: no cpufreq" for c, f in freqs.items())
    slow = [f for f in freqs.values() if f and f.governor != "performance"]
    if slow:
        return found.fail(
            "governor " + ", ".join(sorted({f.governor or "?" for f in slow})) + " on the RT CPUs",
            evidence,
            why="the frequency follows the load, so the loop's processing time changes with it, and "
            "ramping up after idle costs tens of µs (kernel-configuration.rst, cpufreq: high)",
            fix=f"cpupower -c {ctx.rt_cpus} frequency-set -g performance",
            tunable=True,
        )
    return found.ok("performance governor on the RT CPUs", evidence)


@declare("kernel.boost", "Turbo / boost", Severity.LOW)
def check_boost(ctx: Context, found: Found) -> Finding:
    """Turbo/boost: the frequency then depends on temperature and the other cores' load."""
    boost = ctx.text("/sys/devices/system/cpu/cpufreq/boost")
    no_turbo = ctx.text("/sys/devices/system/cpu/intel_pstate/no_turbo")
    if boost is None and no_turbo is None:
        return found.na("no boost control in sysfs (no cpufreq boost support)")
    evidence = (f"cpufreq/boost: {boost or 'absent'}", f"intel_pstate/no_turbo: {no_turbo or 'absent'}")
    if boost == "1" or no_turbo == "0":
        fix = (
            "echo 1 > /sys/devices/system/cpu/intel_pstate/no_turbo"
            if no_turbo is not None
            else "echo 0 > /sys/devices/system/cpu/cpufreq/boost"
        )
        return found.warn(
            "turbo/boost is on",
            evidence,
            why="the turbo frequency drops when other cores get busy or the package warms up, so processing "
            "time drifts (kernel-configuration.rst: keep the frequency constant)",
            fix=fix,
        )
    return found.ok("turbo/boost is off", evidence)


@declare("kernel.clocksource", "Clocksource", Severity.MEDIUM)
def check_clocksource(ctx: Context, found: Found) -> Finding:
    """The clocksource behind clock_gettime (tsc is read in user space by the vDSO)."""
    base = "/sys/devices/system/clocksource/clocksource0"
    current, available = (
        ctx.text(f"{base}/current_clocksource"),
        (ctx.text(f"{base}/available_clocksource") or "").split(),
    )
    if current is None:
        return found.na(f"{base} is unreadable")
    evidence = (
        f"current: {current}",
        f"available: {' '.join(available)}",
        f"/proc/cmdline tsc: {(ctx.cmdline or {}).get('tsc', '(not set)')}",
    )
    if current in ("tsc", "arch_sys_counter", "riscv_clocksource"):
        return found.ok(f"{current}", evidence)
    fix = (
        f"echo tsc > {base}/current_clocksource; at boot: clocksource=tsc tsc=reliable"
        if "tsc" in available
        else "check the firmware's TSC settings; the TSC is not usable here"
    )
    return found.warn(
        f"{current}, not tsc",
        evidence,
        why="hpet and acpi_pm reads take about a microsecond and a system call, on every timestamp the loop "
        "takes (Documentation/virt/kvm/x86/timekeeping.rst)",
        fix=fix,
        tunable="tsc" in available,
    )


@declare("kernel.timer_migration", "Timer migration", Severity.LOW)
def check_timer_migration(ctx: Context, found: Found) -> Finding:
    """kernel.timer_migration: whether timers move between CPUs."""
    return knob(
        ctx,
        found,
        "/proc/sys/kernel/timer_migration",
        quiet=lambda value: value == "0",
        ok="timers stay on their CPU",
        warn="timer migration is on",
        why="idle CPUs hand their timers to a busy CPU of their group (kernel/time/timer_migration.c); a "
        "busy-polling RT CPU can end up expiring other CPUs' timers",
        fix="sysctl kernel.timer_migration=0",
    )


@declare("kernel.swap", "Swap", Severity.LOW)
def check_swap(ctx: Context, found: Found) -> Finding:
    """Active swap (a swapped-out page costs milliseconds to fault back)."""
    swaps = ctx.text("/proc/swaps")
    if swaps is None:
        return found.na("/proc/swaps is unreadable")
    devices = [line.split()[0] for line in swaps.splitlines()[1:] if line.strip()]
    swappiness = ctx.text("/proc/sys/vm/swappiness")
    evidence = (f"/proc/swaps: {', '.join(devices) or 'none'}", f"/proc/sys/vm/swappiness: {swappiness}")
    if not devices:
        return found.ok("no swap", evidence)
    return found.warn(
        f"swap active on {', '.join(devices)}",
        evidence,
        why="a page of the loop that was swapped out takes milliseconds to come back, unless the loop "
        "locks its memory (mlockall, as softrt run does)",
        fix="swapoff -a (and drop swap from /etc/fstab), or keep the loop's memory locked",
    )


CHECKS = (
    check_rt_throttling,
    check_fair_server,
    check_preemption,
    check_tick,
    check_smt,
    check_governor,
    check_boost,
    check_clocksource,
    check_timer_migration,
    check_swap,
)
