"""A check of one kernel knob: one file under /proc or /sys, quiet at one value (audit layer).

KSM's scanner (Documentation/admin-guide/mm/ksm.rst, ``run``) and timer migration
(Documentation/admin-guide/sysctl/kernel.rst, ``timer_migration``) are such knobs: n/a when the
kernel lacks the file, ok when it holds the quiet value, else a warning that ``softrt tune`` can fix.
"""

from __future__ import annotations

from collections.abc import Callable

from ....cpus import CpuSet
from ...model import Finding, Found
from ..context import Context


def knob(
    ctx: Context,
    found: Found,
    rel: str,
    *,
    quiet: Callable[[str], bool],
    ok: str,
    warn: str,
    why: str,
    fix: str,
    missing: str = "",
) -> Finding:
    """n/a without *rel* (saying *missing*: the kernel option that makes it), ok when ``quiet(value)``,
    else a tunable warning with *why* and *fix*; the file and its value are the evidence."""
    value = ctx.text(rel)
    if value is None:
        return found.na(f"{rel} is missing{missing}")
    evidence = (f"{rel}: {value}",)
    if quiet(value):
        return found.ok(ok, evidence)
    return found.warn(warn, evidence, why=why, fix=fix, tunable=True)


def mask_knob(ctx: Context, found: Found, rel: str, raw: str, cpus: CpuSet, *, ok: str, may: str, why: str) -> Finding:
    """A CPU mask file (*rel*, holding *raw*, parsed as *cpus*) that should leave the RT CPUs out, as
    default_smp_affinity (Documentation/core-api/irq/irq-affinity.rst) and the unbound workqueue cpumask
    (Documentation/core-api/workqueue.rst): ok (*ok*) when *cpus* avoid them, else a tunable warning that
    "*may* <the RT CPUs in the mask>" with *why*; the fix writes the housekeeping mask into *rel*."""
    evidence = (f"{rel}: {raw} (CPUs {cpus})",)
    if cpus.isdisjoint(ctx.rt_cpus):
        return found.ok(ok, evidence)
    return found.warn(
        f"{may} {ctx.describe_cpus(cpus & ctx.rt_cpus)}",
        evidence,
        why=why,
        fix=f"echo {ctx.housekeeping.to_mask()} > {rel}",
        tunable=True,
    )
