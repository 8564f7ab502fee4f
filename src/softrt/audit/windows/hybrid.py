"""Hybrid cores, SMT siblings and power throttling of the RT CPUs on Windows (audit layer).

Issue 34 item 6: the seed's i5-14500 has 6 P-cores with Hyper-Threading (12 logical processors) and 8 E-cores;
Windows numbers the P-cores first, so the top cores SetRTCores reserves are E-cores, and with HT on an RT core's
sibling runs whatever Windows schedules there (the seed turned HT off in firmware). Read from
GetSystemCpuSetInformation (EfficiencyClass, CoreIndex) and GetProcessInformation(ProcessPowerThrottling) through
:mod:`softrt.platform.windows.wincpusets`; Microsoft Learn pages "SYSTEM_CPU_SET_INFORMATION structure" and
"Quality of Service" (EcoQoS).
"""

from __future__ import annotations

from ...cpus import CpuSet
from ...platform.windows import wincpusets
from ..model import LOOP_PERIOD_US, Finding, Found, Severity, declare
from .facts import CPU_SETS, THROTTLING, WinFacts


def topology(w: WinFacts) -> tuple[wincpusets.Topology | None, str]:
    """The CPU sets' topology and where it came from; (None, why) when unreadable."""
    raw, where = w.buffer(CPU_SETS)
    if raw is None:
        return None, where
    try:
        return wincpusets.topology(raw), "GetSystemCpuSetInformation"
    except ValueError as err:
        return None, f"GetSystemCpuSetInformation: {err}"


def default_performance_cpu(w: WinFacts, usable: CpuSet) -> int | None:
    """The highest usable logical processor of the top efficiency class (a P-core); None when unknown or
    when every core is of one class (then softrt.cpus.choose_cpus's highest usable CPU stands: under
    Wine, whose two CPU sets are of one class, the CPU sets even describe another machine than a
    test's platform)."""
    topo, _ = topology(w)
    if topo is None or not topo.hybrid:
        return None
    perf = topo.performance() & usable
    return perf.last() if perf else None


@declare("cores.hybrid", "RT CPUs on performance cores", Severity.HIGH)
def check_hybrid(w: WinFacts, found: Found) -> Finding:
    """The RT CPUs are performance cores (the top efficiency class)."""
    topo, where = topology(w)
    if topo is None:
        return found.unreadable(f"the CPU sets could not be read: {where}", Severity.HIGH)
    classes = {cpu: topo.efficiency_of(cpu) for cpu in w.existing_rt}
    evidence = (
        f"{where}: efficiency class of each RT CPU: " + ", ".join(f"{cpu}={c}" for cpu, c in classes.items()),
        f"performance CPUs (class {topo.top_class}): {topo.performance()}"
        + (f"; efficiency CPUs: {topo.efficiency()}" if topo.hybrid else ""),
    )
    if not topo.hybrid:
        return found.ok("one efficiency class: every core is a performance core", evidence)
    slow = w.existing_rt & topo.efficiency()
    if slow:
        perf = topo.performance() - topo.siblings(topo.performance().last()) - CpuSet([0])
        return found.warn(
            f"{w.describe_cpus(slow)} {'is an' if len(slow) == 1 else 'are'} efficiency "
            f"core{'s' if len(slow) > 1 else ''}",
            evidence,
            why="an E-core runs the loop's work slower and at a lower clock, eating into the "
            f"{LOOP_PERIOD_US} µs cycle; Windows numbers the P-cores first, so the top cores "
            "SetRTCores reserves are E-cores",
            fix=f"run the loop on a P-core (--rt-cpus {perf.last() if perf else topo.performance().last()}) "
            "and reserve it (ReservedCpuSets)",
        )
    return found.ok(f"{w.describe_cpus(w.existing_rt)} on performance cores", evidence)


@declare("cores.smt", "SMT siblings of the RT CPUs", Severity.MEDIUM)
def check_smt(w: WinFacts, found: Found) -> Finding:
    """No RT CPU shares its physical core with an SMT sibling Windows may schedule on."""
    topo, where = topology(w)
    if topo is None:
        return found.unreadable(f"the CPU sets could not be read: {where}", Severity.MEDIUM)
    reserved = (w.reserved or CpuSet()) | topo.realtime() | w.rt_cpus
    pairs = {cpu: topo.siblings(cpu) for cpu in w.existing_rt}
    evidence = (
        f"{where}: "
        + (
            ", ".join(f"CPU {c} shares its core with {s}" for c, s in pairs.items() if s)
            or "no RT CPU has an SMT sibling"
        ),
        f"reserved or RT CPUs: {reserved}",
    )
    busy = CpuSet(cpu for sib in pairs.values() for cpu in sib) - reserved
    if busy:
        return found.warn(
            f"SMT sibling{'s' if len(busy) > 1 else ''} {busy} of the RT CPUs "
            f"{'are' if len(busy) > 1 else 'is'} online and not reserved",
            evidence,
            why="a sibling shares the core's execution units and caches: whatever Windows runs there slows the loop",
            fix="turn Hyper-Threading off in the firmware (the seed did), or reserve the siblings too "
            "and leave them idle",
        )
    return found.ok("no RT CPU shares its core with an unreserved sibling", evidence)


@declare("cores.power_throttling", "Power throttling (EcoQoS)", Severity.MEDIUM)
def check_power_throttling(w: WinFacts, found: Found) -> Finding:
    """Power throttling (EcoQoS) does not apply to the loop's process."""
    raw, where = w.buffer(THROTTLING)
    if raw is None:
        return found.unreadable(f"could not be read: {where}", Severity.MEDIUM)
    state = wincpusets.parse_throttling(raw)
    # Read of this process: softrt run's loop runs the same interpreter, and powercfg's override is by path.
    who = w.interpreter or "<path of python.exe>"
    evidence = (
        f"GetProcessInformation(ProcessPowerThrottling) of {'this process' if w.interpreter else 'the capture'}"
        f" ({who}): {raw.hex()} ({state})",
    )
    fix = f'powercfg.exe /powerthrottling disable /path "{who}"'
    if state == "on":
        return found.fail(
            "EcoQoS throttles the loop's process",
            evidence,
            why="Windows runs a throttled process at a low clock or on efficiency cores",
            fix=fix,
        )
    if state == "system":
        return found.warn(
            "Windows decides: it throttles the process when its window is in the background",
            evidence,
            why="a minimized or background console gets EcoQoS on a hybrid or battery-powered machine",
            fix=fix,
        )
    return found.ok("power throttling is off for the loop's process", evidence)


CHECKS = (check_hybrid, check_smt, check_power_throttling)
