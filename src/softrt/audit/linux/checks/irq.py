"""(4) Interrupts: which IRQs can fire on the real-time CPUs? (audit layer)

The seed called this step "important": network-card interrupts (RSS queues) must be handled on
non-real-time cores. On Linux every device IRQ has an allowed mask (smp_affinity) and, on most
architectures, the CPU it is actually routed to (effective_affinity); new IRQs start from
default_smp_affinity (Documentation/core-api/irq/irq-affinity.rst).
"""

from __future__ import annotations

from collections.abc import Callable

from ...model import Finding, Found, Severity, declare
from ..context import Context
from ..irqs import Irq, default_affinity
from .knob import mask_knob

_SHOW = 12


def _where(irq: Irq, ctx: Context) -> str:
    eff = f", effective {irq.effective}" if irq.effective is not None else ""
    hits = sum(irq.counts.get(c, 0) for c in ctx.rt_cpus)
    kept = "" if irq.movable else "; the kernel moves it only at boot (managed or per-CPU)"
    return (
        f"{irq.label()}: affinity {irq.affinity}{eff}, {hits} interrupts so far on "
        f"{ctx.describe_cpus(ctx.rt_cpus)}{kept}"
    )


def _problem(
    report: Callable[..., Finding],
    summary: str,
    evidence: tuple[str, ...],
    *,
    why: str,
    irqs: list[Irq],
    ctx: Context,
    **kw: Severity,
) -> Finding:
    """*report* (found.fail or found.warn) about *irqs*, with the affinity fix: softrt tune fixes what it can
    move; IRQs the kernel keeps need the boot parameter."""
    tunable = any(i.movable for i in irqs)
    return report(summary, evidence, why=why, fix=_fix(ctx), tunable=tunable, reboot=not tunable, **kw)


def _classify(irqs: list[Irq], ctx: Context) -> tuple[list[Irq], list[Irq]]:
    """(routed to an RT CPU now, merely allowed there)."""
    routed, allowed = [], []
    for irq in irqs:
        if irq.affinity is None or irq.affinity.isdisjoint(ctx.rt_cpus):
            continue
        target = irq.effective if irq.effective is not None else irq.affinity
        (allowed if target.isdisjoint(ctx.rt_cpus) else routed).append(irq)
    return routed, allowed


def _evidence(routed: list[Irq], allowed: list[Irq], ctx: Context) -> tuple[str, ...]:
    lines = [_where(i, ctx) for i in routed + allowed]
    if len(lines) > _SHOW:
        lines = [*lines[:_SHOW], f"… and {len(lines) - _SHOW} more"]
    return tuple(lines)


def _fix(ctx: Context) -> str:
    # Managed interrupts (multi-queue NVMe, virtio-blk) refuse user changes (EPERM); only the
    # managed_irq flag of isolcpus= keeps them off (kernel-parameters.txt, isolcpus=).
    return (
        f"softrt tune --rt-cpus {ctx.rt_cpus} --apply, or for each IRQ N: "
        f"echo {ctx.housekeeping} > /proc/irq/N/smp_affinity_list; IRQs the kernel refuses to move are "
        f"managed: isolcpus=managed_irq,domain,{ctx.rt_cpus} (reboot)"
    )


@declare("irq.nic", "Network-card IRQs (RSS queues)", Severity.HIGH)
def check_nic(ctx: Context, found: Found) -> Finding:
    """Network-card interrupts (RSS queues) that can fire on the RT CPUs."""
    if not ctx.irqs:
        return found.na("/proc/irq is unreadable")
    nic = [i for i in ctx.irqs if i.nic]
    if not nic:
        return found.ok(
            "no network-card IRQs found", ("/sys/class/net: no interface with a PCI device and interrupts",)
        )
    routed, allowed = _classify(nic, ctx)
    names = sorted({i.nic for i in nic})
    if routed:
        return _problem(
            found.fail,
            f"{len(routed)} network IRQ(s) routed to {ctx.describe_cpus(ctx.rt_cpus)} ({', '.join(names)})",
            _evidence(routed, allowed, ctx),
            why="every received packet interrupts the loop and runs the driver's NAPI softirq on its CPU; "
            "the seed called moving RSS off the real-time cores important",
            irqs=routed + allowed,
            ctx=ctx,
        )
    if allowed:
        return _problem(
            found.warn,
            f"{len(allowed)} network IRQ(s) allowed on the RT CPUs, routed elsewhere for now",
            _evidence(routed, allowed, ctx),
            why="the kernel may reroute them to any allowed CPU (CPU hot-plug, vector pressure, irqbalance)",
            irqs=allowed,
            ctx=ctx,
            severity=Severity.MEDIUM,
        )
    return found.ok(
        f"all {len(nic)} network IRQs ({', '.join(names)}) stay off the RT CPUs",
        tuple(f"{i.label()}: affinity {i.affinity}" for i in nic[:_SHOW]),
    )


@declare("irq.devices", "Other device IRQs", Severity.MEDIUM)
def check_devices(ctx: Context, found: Found) -> Finding:
    """Every other device IRQ that can fire on the RT CPUs."""
    if not ctx.irqs:
        return found.na("/proc/irq is unreadable")
    others = [i for i in ctx.irqs if not i.nic]
    routed, allowed = _classify(others, ctx)
    evidence = _evidence(routed, allowed, ctx)
    if routed:
        return _problem(
            found.fail,
            f"{len(routed)} IRQ(s) routed to {ctx.describe_cpus(ctx.rt_cpus)}, {len(allowed)} more allowed there",
            evidence,
            why="each interrupt runs its handler (and often a softirq) ahead of the loop, whatever its priority "
            "on a non-RT kernel",
            irqs=routed + allowed,
            ctx=ctx,
        )
    if allowed:
        return _problem(
            found.warn,
            f"{len(allowed)} IRQ(s) allowed on the RT CPUs, routed elsewhere for now",
            evidence,
            why="the kernel may reroute them to any allowed CPU",
            irqs=allowed,
            ctx=ctx,
            severity=Severity.LOW,
        )
    return found.ok(f"none of {len(others)} device IRQs may fire on the RT CPUs", evidence)


@declare("irq.default_affinity", "Default IRQ affinity", Severity.MEDIUM)
def check_default_affinity(ctx: Context, found: Found) -> Finding:
    """default_smp_affinity, the mask every newly requested IRQ starts with."""
    rel = "/proc/irq/default_smp_affinity"
    mask = default_affinity(ctx.root)
    if mask is None:
        return found.na(f"{rel} is unreadable")
    return mask_knob(
        ctx,
        found,
        rel,
        ctx.text(rel) or "",
        mask,
        ok=f"new IRQs start on CPUs {mask}",
        may="new IRQs may start on",
        why="a driver loaded later (a USB stick, a VPN) gets its IRQ on the loop's CPU",
    )


CHECKS = (check_nic, check_devices, check_default_affinity)
