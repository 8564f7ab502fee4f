"""The Windows checks: Microsoft's Soft Real-Time steps, one finding each (audit layer).

Grouped as the seed did it (model.GROUPS): reserved cores (the WindowsIoT CSP's SetRTCores and
the ReservedCpuSets value it writes), (1) idle states, (2) the services the guide stops and
Windows Defender, (3) Windows Update, (4) NIC RSS and threaded DPCs. Every fix is the command of
learn.microsoft.com/windows/iot/iot-enterprise/soft-real-time/soft-real-time-device (steps 1-6),
or of the cmdlet's own reference where the guide gives none (Set-NetAdapterRss, Add-MpPreference).
"""

from __future__ import annotations

from ...cpus import CpuSet
from ...platform.windows.wincmd import NOT_FOUND_RC, TIMEOUT_RC
from ..model import LOOP_PERIOD_US, Finding, Found, Severity, Status, declare
from . import parse
from .defender import check_defender
from .facts import (
    CSP_CLASS,
    CSP_NAMESPACE,
    KERNEL_KEY,
    SYSTEM,
    WU_POLICY_KEY,
    WinFacts,
    needs,
    rt_core_readings,
    said,
)

GUIDE = "Microsoft's Soft Real-Time guide"
GROUP_CPUS = 64  # logical processors in one processor group (PROCESSOR_NUMBER.Number: 0-63)


#: WMI's own error codes, printed whatever the display language (WbemErrorEnum): no such class or
#: namespace (no IoT Enterprise CSP), access denied (the MDM bridge answers only to SYSTEM).
WBEM_NOT_PRESENT = ("0x80041010", "0x8004100e", "invalid class", "invalid namespace")
WBEM_ACCESS_DENIED = ("0x80041003", "access denied", "access is denied")


def csp_fix(count: int | None, rt: CpuSet) -> str:
    """The guide's MDM-bridge script for SetRTCores, as one line (run as SYSTEM, then restart)."""
    n = count - min(rt) if count and rt else "<number of RT cores>"
    return (
        f"as SYSTEM (psexec.exe -s -i powershell.exe): $obj = Get-CimInstance -Namespace {CSP_NAMESPACE} "
        f"-ClassName {CSP_CLASS}; $obj.SetRTCores = {n}; Set-CimInstance -CimInstance $obj; then restart "
        "(cannot be undone without reimaging: do the other steps first)"
    )


@declare("cores.rt_cpus", "Real-time CPUs exist", Severity.FATAL)
def check_rt_cpus(w: WinFacts, found: Found) -> Finding:
    """The real-time CPUs exist on this machine."""
    cpus, where = w.cpus
    if cpus is None:
        return found.unreadable(
            "the number of logical processors could not be read",
            Severity.FATAL,
            where,
            reader="a working Windows PowerShell (Get-CimInstance "
            "Win32_ComputerSystem), or softrt check on the machine itself",
        )
    if not w.rt_cpus:
        return found.unreadable("no RT CPU named and none could be chosen", Severity.FATAL, where)
    evidence = (where,)
    missing = w.rt_cpus - w.online
    if missing:
        return found.fail(
            f"{w.describe_cpus(missing)} {'does' if len(missing) == 1 else 'do'} not exist: "
            f"this machine has CPUs {w.online}",
            evidence,
            why="the loop cannot be placed on a processor Windows does not have",
            fix=f"choose CPUs within {w.online}, e.g. --rt-cpus {w.online.last()}",
        )
    if not w.housekeeping:
        return found.fail(
            f"every CPU ({w.online}) is a real-time CPU",
            evidence,
            why="Windows needs at least core 0 for itself (SetRTCores takes fewer than all cores)",
            fix=f"leave CPU 0 to Windows, e.g. --rt-cpus {w.online - CpuSet([0])}",
        )
    return found.ok(f"{w.describe_cpus(w.rt_cpus)} of {w.online}", evidence)


@declare("cores.reserved", "Reserved CPU sets", Severity.HIGH)
def check_reserved(w: WinFacts, found: Found) -> Finding:
    """The RT CPUs are reserved (ReservedCpuSets, written by SetRTCores)."""
    if w.reserved is None:
        return found.unreadable(
            f"reg query {KERNEL_KEY} failed or its ReservedCpuSets is not a CPU mask",
            Severity.HIGH,
            reader=needs(w.kernel, w.admin),
        )
    kind, data = (w.kernel_values or {}).get("ReservedCpuSets", ("", ""))
    evidence = (
        f"{KERNEL_KEY}\\ReservedCpuSets: {f'{kind} {data}' if kind else 'absent'}",
        f"reserved CPUs: {w.reserved or 'none'}",
    )
    rt = w.existing_rt
    outside = rt - w.reserved
    why = (
        "Windows schedules every thread and routes every interrupt over all cores that are not reserved: "
        f"anything may take the loop's CPU for longer than {LOOP_PERIOD_US} µs"
    )
    if not w.reserved:
        return found.fail(
            "no CPU is reserved for real-time work", evidence, why=why, fix=csp_fix(w.cpu_count, rt), reboot=True
        )
    if outside:
        return found.fail(
            f"{w.describe_cpus(outside)} {'is' if len(outside) == 1 else 'are'} not reserved (reserved: {w.reserved})",
            evidence,
            why=why,
            fix=f"run the loop on the reserved CPUs (--rt-cpus {w.reserved}), or {csp_fix(w.cpu_count, rt)}",
            reboot=True,
        )
    extra = w.reserved - rt
    tail = f"; {w.describe_cpus(extra)} reserved too (unused by this loop)" if extra else ""
    return found.ok(f"{w.describe_cpus(rt)} reserved{tail}", evidence)


@declare("cores.csp", "WindowsIoT CSP SetRTCores", Severity.MEDIUM)
def check_csp(w: WinFacts, found: Found) -> Finding:
    """The WindowsIoT CSP's SetRTCores (MDM bridge WMI)."""
    res = w.csp
    told = said(res)
    if res.err.startswith("as SYSTEM:"):  # check --as-system: the task that runs the query as SYSTEM failed
        return found.unreadable(f"could not be read {res.err.strip().splitlines()[0]}", Severity.MEDIUM, reader=SYSTEM)
    if res.rc in (NOT_FOUND_RC, TIMEOUT_RC):  # the exit status first: powershell.exe did not run at all
        return found.unreadable(f"could not be read: {told}", Severity.MEDIUM, reader=needs(res, w.admin))
    # PowerShell may exit 0 after a non-terminating error: what it said on stderr decides.
    if not res.ok or res.err.strip():
        low = (res.err + res.out).lower()
        if any(code in low for code in WBEM_NOT_PRESENT):
            reserved = bool(w.reserved)
            return found(
                Status.WARN if reserved else Status.FAIL,
                f"{CSP_CLASS} is not present: this is not Windows 10/11 IoT Enterprise (21H2 or later)"
                + ("; the cores are reserved through ReservedCpuSets instead (undocumented)" if reserved else ""),
                (f"Get-CimInstance {CSP_CLASS}: {told}",),
                why="Soft Real-Time (reserved cores, 16 RT priority levels) is an IoT Enterprise feature",
                fix="use Windows 10 IoT Enterprise LTSC 2021 (21H2) or later, then set SetRTCores",
            )
        if any(code in low for code in WBEM_ACCESS_DENIED):
            return found.unreadable(
                "the MDM bridge answers only to SYSTEM: run softrt check --as-system (elevated) to read SetRTCores",
                Severity.MEDIUM,
                told,
                reader=SYSTEM,
            )
        return found.unreadable(f"could not be read: {told}", Severity.MEDIUM, reader=needs(res, w.admin))
    if not res.out.strip():
        return found.unreadable(f"could not be read: {told}", Severity.MEDIUM, reader=needs(res, w.admin))
    try:
        rows = parse.json_list(res.out)
    except ValueError:
        return found.unreadable("Get-CimInstance did not print JSON", Severity.MEDIUM, reader=needs(res, w.admin))
    value = rows[0].get("SetRTCores") if rows else None
    evidence = (f"{CSP_CLASS}.SetRTCores: {value if value is not None else 'not set'}",)
    if not isinstance(value, int) or value <= 0:
        return found.fail(
            "SetRTCores is not set: no core is real-time",
            evidence,
            why="without it Windows schedules everything on every core",
            fix=csp_fix(w.cpu_count, w.existing_rt),
            reboot=True,
        )
    return _csp_cores(w, found, value, evidence)


def _csp_cores(w: WinFacts, found: Found, value: int, evidence: tuple[str, ...]) -> Finding:
    """SetRTCores=N judged by the ReservedCpuSets mask it wrote (the truth the kernel reads), not by a reading of N:
    the seed read N as the first RT core, softrt once as a count, and Microsoft's CSP page settles neither."""
    readings = rt_core_readings(w.cpu_count or 0, value)
    told = "; ".join(f"as {name}: {cpus or 'none'}" for name, cpus in readings.items())
    kind, data = (w.kernel_values or {}).get("ReservedCpuSets", ("", ""))
    if w.reserved:
        match = [name for name, cpus in readings.items() if cpus == w.reserved]
        evidence += (
            f"{KERNEL_KEY}\\ReservedCpuSets: {kind} {data} = CPUs {w.reserved}",
            f"SetRTCores={value} read {told}; the mask matches "
            + (" and ".join(match) if match else "neither reading"),
        )
        cores, source = w.reserved, "the ReservedCpuSets mask"
    else:
        match = []
        evidence += (
            f"ReservedCpuSets: {'unreadable' if w.reserved is None else 'absent'}, so N is read both ways: {told}",
        )
        fits = [cpus for cpus in readings.values() if cpus and w.existing_rt <= cpus]
        if len(fits) == 1 and len({str(cpus) for cpus in readings.values()}) > 1:
            return found.warn(
                f"SetRTCores={value} reserves {fits[0]} under one reading of N only (no mask to settle it)",
                evidence,
                why="the ReservedCpuSets mask it writes says which cores are reserved",
                fix=f"read it: reg query {KERNEL_KEY} /v ReservedCpuSets (after the restart)",
            )
        cores, source = (fits[0] if fits else next(iter(readings.values()))), "SetRTCores"
    if not w.existing_rt <= cores:
        return found.fail(
            f"SetRTCores={value} reserves {cores or 'no core'} ({source}), not "
            f"{w.describe_cpus(w.existing_rt - cores)}",
            evidence,
            why="the loop would run on a core Windows still schedules everything on",
            fix=f"run the loop on CPUs {cores}" if cores else csp_fix(w.cpu_count, w.existing_rt),
        )
    if source != "SetRTCores" and not match:
        return found.warn(
            f"the mask (CPUs {cores}) matches neither reading of SetRTCores={value}: set since the last restart?",
            evidence,
            why="the CSP writes ReservedCpuSets; the kernel reads it at boot",
            fix="restart, then run softrt check again",
            reboot=True,
        )
    return found.ok(f"SetRTCores={value}: CPUs {cores} are real-time ({source})", evidence)


@declare("idle.idle_disable", "Processor idle disable", Severity.HIGH)
def check_idle(w: WinFacts, found: Found) -> Finding:
    """Processor idle states on the active power scheme (IDLEDISABLE)."""
    res, setting = w.power
    if setting is None:
        return found.unreadable(
            f"powercfg /qh did not show IDLEDISABLE: {said(res)}", Severity.HIGH, reader=needs(res, w.admin)
        )
    evidence = (
        f"power scheme: {setting.scheme} ({setting.scheme_name})",
        f"IDLEDISABLE AC index: {setting.ac}, DC index: {setting.dc}",
    )
    if setting.ac != 1:
        return found.fail(
            "processor idle states are enabled",
            evidence,
            why="a core woken from a deep C-state needs tens to hundreds of µs before the loop runs, "
            f"on every cycle of {LOOP_PERIOD_US} µs ({GUIDE}, step 1)",
            fix="powercfg.exe /setacvalueindex SCHEME_CURRENT SUB_PROCESSOR IdleDisable 1 & "
            "powercfg.exe /setactive SCHEME_CURRENT",
            tunable=True,
        )
    return found.ok("idle states are disabled (the cores spin: 100 % busy in Task Manager)", evidence)


def _service_check(name: str, label: str, group: str, severity: Severity, why: str):
    @declare(f"{group}.{name.lower()}", f"{label} ({name})", severity)
    def check(w: WinFacts, found: Found) -> Finding:
        svc = w.services[name]
        if not svc.installed:
            return found.ok(
                "not installed",
                (f"sc qc {name}: exit status {parse.SERVICE_NOT_INSTALLED} (ERROR_SERVICE_DOES_NOT_EXIST)",),
            )
        if not svc.readable:
            return found.unreadable(
                f"sc qc/query {name} could not be read"
                + (f" (exit status {svc.error}{f': {svc.said}' if svc.said else ''})" if svc.error else ""),
                severity,
                reader=needs(svc.qc if not svc.qc.ok else svc.query, w.admin),
            )
        evidence = (f"sc qc {name}: start type {svc.start}", f"sc query {name}: {svc.state}")
        fix = f"sc stop {name} & sc config {name} start= disabled"
        if svc.state != "stopped":
            return found.fail(
                f"{name} is {svc.state} (start type {svc.start})", evidence, why=why, fix=fix, tunable=True
            )
        if svc.start != "disabled":
            return found.warn(
                f"{name} is stopped but starts again ({svc.start})",
                evidence,
                why="it comes back at the next boot or when something triggers it",
                fix=f"sc config {name} start= disabled",
                tunable=True,
                severity=Severity.LOW,
            )
        return found.ok(f"{name} is stopped and disabled", evidence)

    check.__name__ = f"check_{name.lower()}"
    check.__doc__ = f"{label} ({name}): stopped and disabled."
    return check


check_sysmain = _service_check(
    "SysMain",
    "Superfetch",
    "services",
    Severity.MEDIUM,
    f"it prefetches and compresses memory in the background ({GUIDE}, step 2)",
)
check_dps = _service_check(
    "DPS",
    "Diagnostic Policy Service",
    "services",
    Severity.MEDIUM,
    f"it runs diagnostics and troubleshooters whenever it sees fit ({GUIDE}, step 2)",
)
check_audiosrv = _service_check(
    "Audiosrv",
    "Windows Audio",
    "services",
    Severity.MEDIUM,
    f"its audio engine runs periodic high-priority work ({GUIDE}, step 2)",
)
check_wuauserv = _service_check(
    "wuauserv",
    "Windows Update",
    "updates",
    Severity.HIGH,
    f"the Windows Update agent does not respect CPU core isolation ({GUIDE}, step 3)",
)


@declare("updates.policy", "Windows Update policy", Severity.MEDIUM)
def check_update_policy(w: WinFacts, found: Found) -> Finding:
    """Windows Update automatic-update policy (NoAutoUpdate)."""
    res = w.wu_policy
    if res.rc in (NOT_FOUND_RC, TIMEOUT_RC):  # reg.exe did not run; exit status 1 is a key that is absent
        return found.unreadable(f"could not be read: {said(res)}", Severity.MEDIUM, reader=needs(res, w.admin))
    values = parse.reg_values(res.out) if res.ok else {}
    no_auto = parse.reg_dword(values, "NoAutoUpdate")
    options = parse.reg_dword(values, "AUOptions")
    evidence = (
        f"{WU_POLICY_KEY}: {'present' if res.ok else 'absent'}",
        f"NoAutoUpdate: {no_auto if no_auto is not None else 'not set'}",
        f"AUOptions: {options if options is not None else 'not set'}",
    )
    if no_auto == 1:
        return found.ok(
            "automatic updates are off by policy", evidence, why="plan maintenance windows for security updates"
        )
    return found.warn(
        "automatic updates are allowed by policy",
        evidence,
        why=f"updates download and install while the loop runs ({GUIDE}, step 3)",
        fix=f'reg add "{WU_POLICY_KEY}" /v NoAutoUpdate /t REG_DWORD /d 1 /f',
    )


def rss_range_off(w: WinFacts) -> tuple[int, int] | None:
    """The processor range RSS should use: from the lowest housekeeping CPU up to the first RT CPU."""
    if not w.housekeeping:
        return None
    base = min(w.housekeeping)
    top = base
    while top + 1 in w.housekeeping:
        top += 1
    return base, top


def rss_adapters(w: WinFacts) -> list[dict] | None:
    """Get-NetAdapterRss rows, None when unreadable (its script always prints a JSON list, ``[]`` for none)."""
    if not w.rss.ok or not w.rss.out.strip():
        return None
    try:
        return parse.json_list(w.rss.out)
    except ValueError:
        return None


def rss_cpus(adapter: dict) -> CpuSet | None:
    """The group-0 processors an adapter's RSS may use (base..max), None when not in group 0 or unknown.

    A processor number is within its group (0-63, PROCESSOR_NUMBER.Number): one beyond is not a
    range of processors (and would not fit in memory as one).
    """
    base, top = adapter.get("BaseProcessorNumber"), adapter.get("MaxProcessorNumber")
    if adapter.get("BaseProcessorGroup", 0) != 0 or not isinstance(base, int) or not isinstance(top, int):
        return None
    if not 0 <= base <= top < GROUP_CPUS:
        return None
    return CpuSet(range(base, top + 1))


@declare("irq.rss", "NIC RSS processors", Severity.HIGH)
def check_rss(w: WinFacts, found: Found) -> Finding:
    """NIC receive-side scaling kept off the RT CPUs."""
    adapters = rss_adapters(w)
    if adapters is None:
        return found.unreadable(f"Get-NetAdapterRss failed: {said(w.rss)}", Severity.HIGH, reader=needs(w.rss, w.admin))
    if not adapters:
        return found.na("no adapter supports RSS (the guide's step 5 does not apply)", Severity.HIGH)
    evidence, bad = [], []
    for a in adapters:
        cpus = rss_cpus(a)
        span = f"processors {a.get('BaseProcessorNumber')}-{a.get('MaxProcessorNumber')}"
        evidence.append(
            f"{a.get('Name')}: RSS {'on' if a.get('Enabled') else 'off'}, {span}"
            f" (group {a.get('BaseProcessorGroup', 0)})"
        )
        if a.get("Enabled") and (cpus is None or not cpus.isdisjoint(w.existing_rt)):
            bad.append(a)
    if bad:
        wanted = rss_range_off(w)
        fix = (
            " ; ".join(
                f"Set-NetAdapterRss -Name '{a.get('Name')}' -BaseProcessorNumber {wanted[0]} "
                f"-MaxProcessorNumber {wanted[1]}"
                for a in bad
            )
            if wanted
            else None
        )
        names = ", ".join(str(a.get("Name")) for a in bad)
        return found.fail(
            f"RSS of {names} may run receive DPCs on {w.describe_cpus(w.existing_rt)}",
            tuple(evidence),
            why="each received packet's ISR/DPC then preempts the loop, for tens of µs per burst "
            f'({GUIDE}, step 5: "important" in the seed)',
            fix=fix,
            tunable=fix is not None,
        )
    return found.ok("no adapter's RSS reaches the RT CPUs", tuple(evidence))


@declare("irq.threaded_dpc", "Threaded DPCs", Severity.LOW)
def check_threaded_dpc(w: WinFacts, found: Found) -> Finding:
    """Threaded DPCs (ThreadDpcEnable)."""
    if w.kernel_values is None:
        return found.unreadable(f"reg query {KERNEL_KEY} failed", reader=needs(w.kernel, w.admin))
    value = parse.reg_dword(w.kernel_values, "ThreadDpcEnable")
    evidence = (f"{KERNEL_KEY}\\ThreadDpcEnable: {value if value is not None else 'not set (enabled)'}",)
    if value == 0:
        return found.ok("threaded DPCs are off", evidence)
    return found.warn(
        "threaded DPCs are on (the default)",
        evidence,
        why="the guide's optional step 6: run every DPC at DISPATCH_LEVEL (for debugging latency)",
        fix=f'reg add "{KERNEL_KEY}" /v ThreadDpcEnable /t REG_DWORD /f /d 0 (then restart)',
        reboot=True,
    )


CHECKS = (
    check_rt_cpus,
    check_reserved,
    check_csp,
    check_idle,
    check_sysmain,
    check_dps,
    check_audiosrv,
    check_defender,
    check_wuauserv,
    check_update_policy,
    check_rss,
    check_threaded_dpc,
)
