"""What ran on the real-time cores, from performance counters (audit layer).

On this machine the counters are read through the platform (pdh.dll with English counter paths,
PdhAddEnglishCounterW, so a localized Windows reads the same); in a capture directory from
``typeperf``'s captured CSV (typeperf wants the translated names of the machine's language).

The seed looked in Windows Performance Analyzer (an ETW trace of context switches) and found
MsMpEng.exe on the reserved cores. Performance counters (typeperf, "Processor" and "Process"
objects) cannot name the core a process ran on; what they give exactly is each RT core's DPC and
interrupt time, and each process's CPU time over the sample. A process is credited to the RT
cores when its affinity (Get-Process ProcessorAffinity) lets it run there, or when its affinity
cannot be read at all (protected processes such as MsMpEng.exe): "may have run there", not "ran
there". A WPR/WPA trace (CPU usage, precise) says exactly; that is not automated here.
"""

from __future__ import annotations

import re

from ...cpus import CpuSet
from ...errors import SoftRTError
from ...platform.windows.wincmd import powershell
from ...schema.audit import LiveSample, SampledTask
from ..model import Finding, Found, Severity, declare
from . import parse
from .facts import WinFacts, said

PROCESSES = powershell("Get-Process | Select-Object -Property Id,ProcessName,ProcessorAffinity | ConvertTo-Json")
CORE_COUNTERS = ("% Processor Time", "% DPC Time", "% Interrupt Time")
#: DPC plus interrupt time above this share of an RT core (0.5 %: ~1 µs of every 250 µs cycle on average) is reported.
DPC_SHARE_LIMIT = 0.005
IGNORED = {"_Total", "Idle"}
#: Processes that host kernel threads: their time is the kernel's, which the per-core DPC and interrupt time shows.
KERNEL = {"System", "Registry", "Secure System", "Memory Compression"}
METHOD = (
    "performance counters (typeperf): per-core DPC and interrupt time; per-process CPU time credited to the "
    "RT cores by affinity (a WPR/WPA trace names the exact core)"
)


def counter_paths(rt_cpus: CpuSet) -> list[str]:
    """Each RT core's processor, DPC and interrupt time, and every process's CPU time (English paths)."""
    return [f"\\Processor({cpu})\\{name}" for cpu in rt_cpus for name in CORE_COUNTERS] + [
        "\\Process(*)\\% Processor Time"
    ]


def typeperf_argv(rt_cpus: CpuSet, seconds: int) -> list[str]:
    """``typeperf <counters> -si <seconds> -sc 1``: one sample averaged over *seconds*."""
    return ["typeperf.exe", *counter_paths(rt_cpus), "-si", str(seconds), "-sc", "1"]


def _counters(w: WinFacts, secs: int) -> tuple[dict[str, float], str | None, str]:
    """(values, why there are none, how they were read)."""
    if w.counters is not None:
        try:
            return w.counters(counter_paths(w.existing_rt), secs), None, "pdh.dll"
        except SoftRTError as err:
            return {}, str(err), "pdh.dll"
    res = w.run(typeperf_argv(w.existing_rt, secs), timeout_s=secs + 30)
    values = parse.typeperf(res.out) if res.ok else {}
    return values, None if values else f"typeperf: {said(res)}", "typeperf"


def _affinities(rows: list[dict]) -> dict[str, CpuSet | None]:
    """Process name → the union of its instances' affinities (None when any is unreadable)."""
    out: dict[str, CpuSet | None] = {}
    for row in rows:
        name, mask = str(row.get("ProcessName", "")), row.get("ProcessorAffinity")
        cpus = CpuSet(i for i in range(64) if mask >> i & 1) if isinstance(mask, int) and mask > 0 else None
        if name not in out:
            out[name] = cpus
        elif out[name] is None or cpus is None:
            out[name] = None
        else:
            out[name] = out[name] | cpus
    return out


def sample(w: WinFacts, seconds: float) -> LiveSample:
    """Sample the RT cores for *seconds* (whole seconds, at least 1); return a JSON-ready result."""
    secs = max(1, round(seconds))
    values, why, source = _counters(w, secs)
    if not values:
        return LiveSample.build(
            method="none",
            seconds=secs,
            tasks=[],
            cores={},
            idle_share=None,
            error=why or f"{source}: no counter values",
        )
    cores = {}
    for cpu in w.existing_rt:
        cores[str(cpu)] = {name: values.get(f"\\Processor({cpu})\\{name}") for name in CORE_COUNTERS}
    procs = w.run(PROCESSES)
    try:
        affinity = _affinities(parse.json_list(procs.out)) if procs.ok else {}
    except ValueError:
        affinity = {}
    reserved = w.reserved or CpuSet()
    tasks = []
    for path, pct in values.items():
        m = re.fullmatch(r"\\Process\((.+)\)\\% Processor Time", path)
        if not m or m[1] in IGNORED or pct <= 0:
            continue
        name = m[1].split("#", 1)[0]  # typeperf numbers same-named instances: svchost#3
        cpus = affinity.get(name)
        if name in KERNEL:
            kind = "kernel"
        elif cpus is None:
            kind = "affinity unknown"
        elif cpus <= w.existing_rt:
            kind = "pinned to the RT cores"
        elif cpus.isdisjoint(w.existing_rt) or w.existing_rt <= reserved:
            continue  # it cannot run there, or the cores are reserved and it did not ask for them
        else:
            kind = "may run there"
        tasks.append(SampledTask.build(comm=m[1], cpu_ms=round(pct / 100 * secs * 1000, 1), kind=kind))
    tasks.sort(key=lambda t: -(t.cpu_ms or 0.0))
    return LiveSample.build(
        method=METHOD.replace("(typeperf)", f"({source})"),
        seconds=secs,
        cores=cores,
        tasks=tasks,
        idle_share=None,
        error=None,
    )


@declare("cores.sample", "Live sample of the RT cores", Severity.MEDIUM)
def check_sample(w: WinFacts, found: Found) -> Finding:
    """What ran on the RT cores during the live sample."""
    s = w.sample
    if s is None:
        return found.na("no live sample taken (--sample 0)", Severity.MEDIUM)
    if s.error:
        return found.unreadable(
            f"sample failed: {s.error}",
            Severity.MEDIUM,
            reader="the performance counters (typeperf.exe, or PDH on the machine itself)",
        )
    evidence = [f"method: {s.method}"]
    heavy = []
    for cpu, c in (s.cores or {}).items():
        dpc, irq = c.get("% DPC Time") or 0.0, c.get("% Interrupt Time") or 0.0
        evidence.append(f"CPU {cpu}: busy {c.get('% Processor Time')} %, DPC {dpc:.2f} %, interrupt {irq:.2f} %")
        if (dpc + irq) / 100 > DPC_SHARE_LIMIT:
            heavy.append(cpu)
    others = [t for t in s.tasks if t.kind not in ("pinned to the RT cores", "kernel")]
    evidence += [f"{t.comm}: {t.cpu_ms} ms CPU in {s.seconds} s ({t.kind})" for t in s.tasks[:8]]
    if heavy:
        return found.fail(
            f"DPCs and interrupts took over {DPC_SHARE_LIMIT:.1%} of CPU {', '.join(heavy)}",
            tuple(evidence),
            why="a driver's ISR/DPC preempts every thread, the loop included",
            fix="move RSS off the RT cores (Set-NetAdapterRss) and find the driver with a WPR trace "
            "(wpr -start CPU … wpr -stop, then WPA's DPC/ISR view)",
            severity=Severity.HIGH,
        )
    if others:
        names = ", ".join(f"{t.comm} ({t.cpu_ms} ms)" for t in others[:3])
        mpeng = any((t.comm or "").lower().startswith("msmpeng") for t in others)
        return found.warn(
            f"{len(others)} process(es) may have run on the RT cores: {names}",
            tuple(evidence),
            why=(
                "MsMpEng.exe (Windows Defender) was the seed's unexpected process on the real-time cores"
                if mpeng
                else "any other process on the RT cores delays the loop"
            ),
            fix='Add-MpPreference -ExclusionProcess "<loop program>"; keep other programs\' affinity off '
            "the RT cores (SetRTCores reserves them)"
            if mpeng
            else "keep their affinity off the RT cores, or reserve the cores (SetRTCores)",
        )
    return found.ok("nothing but the pinned application ran on the RT cores", tuple(evidence))
