"""(2) Services and kernel housekeeping that disturb the real-time CPUs (audit layer).

The seed's second step was "disable services that disturb the real-time cores" (Microsoft names
SysMain, DPS and Audiosrv). Their Linux counterparts: irqbalance (rewrites IRQ affinities every
10 s, irqbalance(1)), tuned (re-applies its profile), KSM's page scanner, the lockup detectors
(hard-IRQ timer callbacks every few seconds, kernel-configuration.rst LOCKUP_DETECTOR: high),
transparent huge pages (khugepaged, compaction stalls; Documentation/admin-guide/mm/transhuge.rst)
and automatic NUMA balancing (hinting faults; Documentation/admin-guide/sysctl/kernel.rst).
"""

from __future__ import annotations

from ....cpus import CpuSet
from ....errors import ConfigError
from ....platform.linux import kfacts
from ...model import Finding, Found, Severity, declare
from ..context import Context
from .knob import knob

RT_PROFILES = {
    "realtime",
    "realtime-virtual-guest",
    "realtime-virtual-host",
    "cpu-partitioning",
    "cpu-partitioning-powersave",
    "latency-performance",
    "network-latency",
}
IRQBALANCE_CONFIGS = ("/etc/default/irqbalance", "/etc/sysconfig/irqbalance")


def _banned_cpus(ctx: Context) -> tuple[CpuSet, list[str]]:
    """CPUs irqbalance leaves alone: its banned list, plus isolcpus and nohz_full (cputree.c)."""
    banned, evidence = CpuSet(), []
    for rel in IRQBALANCE_CONFIGS:
        for line in (ctx.text(rel) or "").splitlines():
            key, _, value = line.strip().partition("=")
            value = value.strip().strip('"')
            try:
                if key == "IRQBALANCE_BANNED_CPULIST" and value:
                    banned = banned | CpuSet.parse(value)
                    evidence.append(f"{rel}: {line.strip()}")
                elif key == "IRQBALANCE_BANNED_CPUS" and value:
                    banned = banned | CpuSet.from_mask(value)
                    evidence.append(f"{rel}: {line.strip()}")
            except ConfigError:
                evidence.append(f"{rel}: unparsable {line.strip()!r}")
    for rel in ("/sys/devices/system/cpu/isolated", "/sys/devices/system/cpu/nohz_full"):
        banned = banned | (kfacts.cpulist(ctx.root, rel) or CpuSet())
    return banned, evidence


@declare("services.irqbalance", "irqbalance", Severity.HIGH)
def check_irqbalance(ctx: Context, found: Found) -> Finding:
    """irqbalance running with the RT CPUs in its reach."""
    pids = ctx.process_names.get("irqbalance", [])
    enabled = "irqbalance.service" in ctx.enabled_units
    banned, evidence = _banned_cpus(ctx)
    evidence = [
        f"process: {'running, pid ' + ','.join(map(str, pids)) if pids else 'not running'}",
        f"irqbalance.service: {'enabled' if enabled else 'not enabled'}",
        *evidence,
        f"CPUs it leaves alone: {banned or 'none'}",
    ]
    stop = "systemctl disable --now irqbalance" if ctx.systemd_running else "kill the irqbalance process"
    fix = f"{stop}, or IRQBALANCE_BANNED_CPULIST={ctx.rt_cpus} in /etc/default/irqbalance"
    if pids and not ctx.rt_cpus <= banned:
        return found.fail(
            f"irqbalance is running and may move IRQs onto {ctx.describe_cpus(ctx.rt_cpus - banned)}",
            tuple(evidence),
            why="it rewrites /proc/irq/*/smp_affinity every 10 s, undoing any IRQ placement (softrt tune's included)",
            fix=fix,
            tunable=ctx.systemd_running,
        )
    if enabled and not pids and not ctx.rt_cpus <= banned:
        return found.warn(
            "irqbalance is not running but is enabled for the next boot",
            tuple(evidence),
            why="after a reboot it spreads IRQs over the RT CPUs again",
            fix=f"systemctl disable irqbalance, or IRQBALANCE_BANNED_CPULIST={ctx.rt_cpus}",
            severity=Severity.LOW,
        )
    return found.ok(
        "irqbalance leaves the RT CPUs alone" if pids or enabled else "irqbalance is not running", tuple(evidence)
    )


@declare("services.tuned", "tuned profile", Severity.MEDIUM)
def check_tuned(ctx: Context, found: Found) -> Finding:
    """tuned running with a profile that is not meant for low latency."""
    pids = ctx.process_names.get("tuned", [])
    profile = ctx.text("/etc/tuned/active_profile")
    evidence = (f"process: {'running' if pids else 'not running'}", f"/etc/tuned/active_profile: {profile or '(none)'}")
    if not pids:
        return found.ok("tuned is not running", evidence)
    if profile and set(profile.split()) & RT_PROFILES:
        return found.ok(f"tuned runs the {profile} profile", evidence)
    return found.warn(
        f"tuned runs the {profile or 'unknown'} profile",
        evidence,
        why="a throughput or powersave profile sets governors and sysctls of its own and re-applies them, "
        "undoing softrt tune",
        fix=f"tuned-adm profile realtime (isolated_cores={ctx.rt_cpus} in /etc/tuned/realtime-variables.conf)",
    )


@declare("services.ksm", "KSM page merging", Severity.MEDIUM)
def check_ksm(ctx: Context, found: Found) -> Finding:
    """Kernel same-page merging scanning memory (ksmd)."""
    rel = "/sys/kernel/mm/ksm/run"
    return knob(
        ctx,
        found,
        rel,
        missing=" (kernel without CONFIG_KSM)",
        quiet=lambda run: run != "1",  # 0: stopped, 2: stopped and pages unmerged
        ok="KSM is not running",
        warn="ksmd is scanning and merging pages",
        why="merged pages are copied on the next write (a page fault in the loop) and merging flushes TLBs "
        "on every CPU (Documentation/admin-guide/mm/ksm.rst)",
        fix=f"echo 0 > {rel}",
    )


@declare("services.watchdog", "Lockup detectors (watchdog)", Severity.HIGH)
def check_watchdog(ctx: Context, found: Found) -> Finding:
    """Soft-lockup and NMI watchdogs active on the RT CPUs."""
    base = "/proc/sys/kernel"
    names = ("watchdog", "soft_watchdog", "nmi_watchdog", "watchdog_cpumask", "watchdog_thresh")
    values = {k: ctx.text(f"{base}/{k}") for k in names}
    if values["watchdog"] is None and values["soft_watchdog"] is None:
        return found.na("no /proc/sys/kernel/watchdog (kernel without LOCKUP_DETECTOR)")
    evidence = tuple(f"{base}/{k}: {v if v is not None else 'absent'}" for k, v in values.items())
    active = values["watchdog"] != "0" and "1" in (values["soft_watchdog"], values["nmi_watchdog"])
    try:
        mask = CpuSet.parse(values["watchdog_cpumask"]) if values["watchdog_cpumask"] is not None else ctx.online
    except ConfigError:
        mask = ctx.online
    on_rt = mask & ctx.rt_cpus
    if active and on_rt:
        keep = (mask - ctx.rt_cpus) or ctx.housekeeping
        return found.fail(
            f"the lockup detector runs on {ctx.describe_cpus(on_rt)}",
            evidence,
            why="its hrtimer fires every few seconds in hard-IRQ context on each watched CPU, even on "
            "PREEMPT_RT (kernel-configuration.rst, LOCKUP_DETECTOR: high)",
            fix=f"sysctl kernel.watchdog_cpumask={keep}; at boot: nowatchdog",
            tunable=True,
        )
    return found.ok("no lockup detector runs on the RT CPUs" if active else "lockup detectors are off", evidence)


@declare("services.thp", "Transparent huge pages", Severity.MEDIUM)
def check_thp(ctx: Context, found: Found) -> Finding:
    """Transparent huge pages set to 'always' (khugepaged, fault-time compaction)."""
    base = "/sys/kernel/mm/transparent_hugepage"
    enabled, defrag = ctx.text(f"{base}/enabled"), ctx.text(f"{base}/defrag")
    if enabled is None:
        return found.na(f"{base} is missing (kernel without TRANSPARENT_HUGEPAGE)")
    evidence = (f"{base}/enabled: {enabled}", f"{base}/defrag: {defrag}")
    bad = [
        name for name, value in (("enabled", enabled), ("defrag", defrag)) if kfacts.selected_word(value) == "always"
    ]
    if bad:
        return found.warn(
            f"THP {' and '.join(bad)} set to always",
            evidence,
            why="a page fault may stall in direct compaction for milliseconds, and khugepaged collapses pages "
            "behind the application's back (Documentation/admin-guide/mm/transhuge.rst)",
            fix=" ; ".join(f"echo madvise > {base}/{n}" for n in bad),
            tunable=True,
        )
    return found.ok(f"THP is {kfacts.selected_word(enabled)} (defrag {kfacts.selected_word(defrag)})", evidence)


@declare("services.numa_balancing", "Automatic NUMA balancing", Severity.MEDIUM)
def check_numa_balancing(ctx: Context, found: Found) -> Finding:
    """Automatic NUMA balancing (kernel.numa_balancing)."""
    rel = "/proc/sys/kernel/numa_balancing"
    value = ctx.text(rel)
    nodes = kfacts.cpulist(ctx.root, "/sys/devices/system/node/online")
    if value is None:
        return found.na(f"{rel} is missing (kernel without NUMA_BALANCING)")
    evidence = (f"{rel}: {value}", f"NUMA nodes online: {nodes if nodes is not None else 'unknown'}")
    if value != "0" and (nodes is None or len(nodes) > 1):
        return found.warn(
            "automatic NUMA balancing is on",
            evidence,
            why="it unmaps pages periodically to sample accesses: the loop takes hinting page faults and its "
            "memory may migrate (Documentation/admin-guide/sysctl/kernel.rst, numa_balancing)",
            fix="sysctl kernel.numa_balancing=0",
            tunable=True,
        )
    why = "off" if value == "0" else "on, but with one NUMA node it has nothing to do"
    return found.ok(f"NUMA balancing is {why}", evidence)


CHECKS = (check_irqbalance, check_tuned, check_ksm, check_watchdog, check_thp, check_numa_balancing)
