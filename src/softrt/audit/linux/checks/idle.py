"""(1) CPU idle states: can the real-time CPUs fall into a state that is slow to leave? (audit layer)

The seed's first step was "disable CPU idle states". On Linux each state has an exit latency and a
per-CPU ``disable`` switch (Documentation/admin-guide/pm/cpuidle.rst); the kernel's real-time
checklist advises capping at C1 (``processor.max_cstate=1``) rather than building without
CONFIG_CPU_IDLE (kernel-configuration.rst). A PM QoS request on /dev/cpu_dma_latency keeps every
CPU out of states slower than the requested latency (Documentation/power/pm_qos_interface.rst).
"""

from __future__ import annotations

import struct

from ....platform.kfiles import read_bytes
from ....platform.linux import kfacts, ktasks
from ...model import Finding, Found, Severity, declare
from ..context import Context

#: Exit latencies above this count as "deep" (C1 is 1-2 µs; C1E is about 10, C6 about 100+).
DEEP_EXIT_LATENCY_US = 5
DMA_LATENCY = "/dev/cpu_dma_latency"


def pm_qos_limit_us(root: str) -> int | None:
    """Return the current system-wide CPU latency limit in µs (a native s32), or None.

    Opening the device adds a default (no-limit) request that closing removes again
    (kernel/power/qos.c, cpu_latency_qos_open/release), so reading it changes nothing.
    """
    try:
        data = read_bytes(root, DMA_LATENCY, 4, special_ok=True)  # a device; in a --root tree never waited on
    except OSError:
        return None
    return struct.unpack("=i", data)[0] if len(data) == 4 else None


@declare("idle.states", "Idle states on the RT CPUs", Severity.HIGH)
def check_states(ctx: Context, found: Found) -> Finding:
    """Enabled idle states on the RT CPUs and their exit latencies."""
    params = ctx.cmdline or {}
    per_cpu = {cpu: kfacts.idle_states(ctx.root, cpu) for cpu in ctx.rt_cpus}
    driver = kfacts.cpuidle_driver(ctx.root)
    if all(states is None for states in per_cpu.values()):
        evidence = (f"cpuidle driver: {driver or 'none'}", f"/proc/cmdline idle: {params.get('idle', '(not set)')}")
        if params.get("idle") == "poll":
            return found.ok("idle=poll: the CPUs never halt", evidence)
        return found.warn(
            "no cpuidle states: the kernel halts idle CPUs (C1-like) and this cannot be switched off at run time",
            evidence,
            why="each wake-up from halt costs about a microsecond plus a cold pipeline",
            fix="kernel parameter idle=poll (reboot; the CPUs then never sleep)",
            reboot=True,
            severity=Severity.LOW,
        )
    limit = pm_qos_limit_us(ctx.root)
    evidence, deep, shallow, held_off = [], [], [], []
    for cpu, states in per_cpu.items():
        if states is None:
            evidence.append(f"cpu{cpu}: no cpuidle directory")
            continue
        evidence.append(
            f"cpu{cpu}: "
            + ", ".join(f"{s.name} {s.exit_latency_us} µs {'off' if s.disabled else 'on'}" for s in states)
        )
        for s in states:
            if s.disabled or s.is_poll:
                continue
            # cpuidle governors skip states slower than the PM QoS limit (menu.c, teo.c).
            if s.exit_latency_us <= DEEP_EXIT_LATENCY_US:
                shallow.append(s)
            elif limit is None or s.exit_latency_us <= limit:
                deep.append(s)
            else:
                held_off.append(s)
    evidence.append(f"{DMA_LATENCY} limit: {f'{limit} µs' if limit is not None else 'unreadable'}; driver: {driver}")
    fix = f"softrt tune --rt-cpus {ctx.rt_cpus} --apply, or: cpupower -c {ctx.rt_cpus} idle-set -D 1"
    if deep:
        worst = max(deep, key=lambda s: s.exit_latency_us)
        return found.fail(
            f"{len(deep)} deep state(s) enabled, worst {worst.name} on cpu{worst.cpu}: exit {worst.exit_latency_us} µs",
            tuple(evidence),
            why=f"leaving {worst.name} takes {worst.exit_latency_us} µs, "
            f"{worst.exit_latency_us / 250:.0%} of a 250 µs period, on every wake-up",
            fix=fix,
            tunable=True,
        )
    if shallow:
        names = sorted({s.name for s in shallow})
        return found.warn(
            f"only shallow states enabled ({', '.join(names)}, exit ≤ {DEEP_EXIT_LATENCY_US} µs)",
            tuple(evidence),
            why="a wake-up from halt still costs a microsecond or two; the seed switched every idle state off "
            "(the CPU then polls at 100 %)",
            fix=fix,
            tunable=True,
            severity=Severity.LOW,
        )
    if held_off:
        return found.ok(
            f"deep states are enabled, but the PM QoS limit of {limit} µs keeps the CPUs out of them "
            "(while its holder keeps it open)",
            tuple(evidence),
        )
    return found.ok("no idle state that halts the CPU can be entered on the RT CPUs", tuple(evidence))


@declare("idle.cmdline", "Boot-time idle cap", Severity.LOW)
def check_cmdline(ctx: Context, found: Found) -> Finding:
    """A boot-time cap on C-states (processor.max_cstate / intel_idle.max_cstate / idle=)."""
    if ctx.cmdline is None:
        return found.na("/proc/cmdline is unreadable")
    keys = ("processor.max_cstate", "intel_idle.max_cstate", "idle")
    evidence = tuple(f"/proc/cmdline {k}: {ctx.cmdline.get(k, '(not set)')}" for k in keys)
    capped = ctx.cmdline.get("idle") == "poll" or any(
        ctx.cmdline.get(k, "").isdigit() and int(ctx.cmdline[k]) <= 1 for k in keys[:2]
    )
    deepest = max(
        (s.exit_latency_us for cpu in ctx.online for s in (kfacts.idle_states(ctx.root, cpu) or [])), default=0
    )
    if capped:
        return found.ok("C-states are capped at boot", evidence)
    if deepest <= DEEP_EXIT_LATENCY_US:
        return found.ok(f"no deep state exists here (deepest exit latency {deepest} µs): nothing to cap", evidence)
    return found.warn(
        f"no boot-time cap; states up to {deepest} µs exit latency exist",
        evidence,
        why="softrt tune disables idle states until the next reboot only; the kernel checklist recommends "
        "processor.max_cstate=1 (kernel-configuration.rst, CONFIG_CPU_IDLE)",
        fix="kernel parameters processor.max_cstate=1 intel_idle.max_cstate=1 (reboot)",
        reboot=True,
    )


@declare("idle.pm_qos", f"PM QoS ({DMA_LATENCY})", Severity.LOW)
def check_pm_qos(ctx: Context, found: Found) -> Finding:
    """Who holds /dev/cpu_dma_latency, and at what value."""
    limit = pm_qos_limit_us(ctx.root)
    holders = ktasks.fd_holders(ctx.root, DMA_LATENCY)
    if limit is None and not holders:
        return found.na(f"{DMA_LATENCY} is unreadable (needs root, or CONFIG_PM)")
    who = ", ".join(f"{comm} ({pid})" for pid, comm in holders) or "nobody"
    evidence = (f"{DMA_LATENCY}: {limit if limit is not None else '?'} µs", f"held open by: {who}")
    if holders:
        return found.ok(
            f"held by {who}: no CPU enters a state slower than {limit} µs while it stays open",
            evidence,
            why="the limit disappears when the holder exits; it applies to every CPU, not just the RT CPUs",
        )
    return found.ok("nobody holds it: no system-wide exit-latency limit (idle states decide alone)", evidence)


CHECKS = (check_states, check_cmdline, check_pm_qos)
