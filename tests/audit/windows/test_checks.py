"""Every Windows check against the well-tuned machine's outputs, and those outputs broken in exactly the way it detects."""

from __future__ import annotations

import json

import pytest

from softrt.audit import Status, run_checks
from softrt.audit.windows import facts as F
from softrt.audit.windows.sample import typeperf_argv
from softrt.cpus import CpuSet

RT = CpuSet(range(10, 14))
OK, WARN, FAIL, NA = Status.OK, Status.WARN, Status.FAIL, Status.NA
TYPEPERF = typeperf_argv(RT, 2)
INVALID_CLASS = (
    "Get-CimInstance : Invalid class\nCategoryInfo : MetadataError: (root\\cimv2\\mdm\\dmmap:MDM_Windows...)"
)


def report(caps, rt=RT, sample_s=2.0):
    return run_checks(rt, str(caps), sample_s=sample_s)


def statuses(caps, rt=RT):
    return {f.id: f.status for f in report(caps, rt).findings}


def _no_reserved(c):
    c.replace(F.KERNEL, "    ReservedCpuSets    REG_BINARY    003C000000000000\n", "")


def _no_csp(c):
    c.fail(F.CSP, INVALID_CLASS)


def _set_rt_cores(n):
    return lambda c: c.edit_json(F.CSP, lambda d: d.update(SetRTCores=n))


def _service(name, start, state):
    def brk(c):
        c.replace(F.sc_qc(name), "4   DISABLED", {"auto": "2   AUTO_START", "demand": "3   DEMAND_START"}[start])
        if state == "running":
            c.replace(F.sc_query(name), "1  STOPPED", "4  RUNNING")

    return brk


def _counter(name, value):
    """Add a process's % Processor Time to typeperf's sample."""

    def brk(c):
        lines = c.read(TYPEPERF).split("\n")
        lines[1] += f',"\\\\IPC-01\\Process({name})\\% Processor Time"'
        lines[2] += f',"{value:.6f}"'
        c.set(TYPEPERF, "\n".join(lines))

    return brk


def _dpc_on(cpu, pct):
    def brk(c):
        lines = c.read(TYPEPERF).split("\n")
        header, row = lines[1].split('","'), lines[2].split('","')
        col = next(i for i, h in enumerate(header) if h.endswith(f"Processor({cpu})\\% DPC Time"))
        row[col] = f"{pct:.6f}"
        lines[2] = '","'.join(row)
        c.set(TYPEPERF, "\n".join(lines))

    return brk


def _rss(**change):
    return lambda c: c.edit_json(F.RSS, lambda d: d[0].update(change))


CASES = [
    # (check, how to break the good machine, expected status, words in the summary, other checks it may flip)
    ("cores.rt_cpus", None, OK, "10-13 of 0-13", ()),
    ("cores.reserved", None, OK, "10-13 reserved", ()),
    ("cores.reserved", _no_reserved, FAIL, "no CPU is reserved", ("cores.sample",)),
    (
        "cores.reserved",
        lambda c: c.replace(F.KERNEL, "003C000000000000", "0030000000000000"),
        FAIL,
        "CPUs 10-11 are not reserved",
        ("cores.sample", "cores.csp"),
    ),  # with 10-11 unreserved, the sample credits them again
    (
        "cores.reserved",
        lambda c: c.fail(F.KERNEL, "ERROR: Access is denied."),
        NA,
        "reg query",
        ("irq.threaded_dpc", "cores.sample"),
    ),
    ("cores.csp", None, OK, "SetRTCores=4", ()),
    ("cores.csp", _no_csp, WARN, "not Windows 10/11 IoT Enterprise", ()),
    ("cores.csp", lambda c: (_no_csp(c), _no_reserved(c)), FAIL, "not present", ("cores.reserved", "cores.sample")),
    ("cores.csp", lambda c: c.fail(F.CSP, "Get-CimInstance : Access denied"), NA, "SYSTEM", ()),
    ("cores.csp", _set_rt_cores(None), FAIL, "not set", ()),
    ("cores.csp", _set_rt_cores(2), WARN, "matches neither reading of SetRTCores=2", ()),
    ("cores.csp", _set_rt_cores(10), OK, "CPUs 10-13 are real-time (the ReservedCpuSets mask)", ()),
    (
        "cores.csp",
        lambda c: c.replace(F.KERNEL, "003C000000000000", "0030000000000000"),
        FAIL,
        "reserves 12-13 (the ReservedCpuSets mask), not CPUs 10-11",
        ("cores.reserved", "cores.sample"),
    ),
    ("cores.csp", _no_reserved, OK, "CPUs 10-13 are real-time (SetRTCores)", ("cores.reserved", "cores.sample")),
    (
        "cores.csp",
        lambda c: (_no_reserved(c), _set_rt_cores(12)(c)),
        WARN,
        "reserves 2-13 under one reading of N only",
        ("cores.reserved", "cores.sample"),
    ),
    ("cores.sample", None, OK, "nothing but the pinned application", ()),
    ("cores.sample", _counter("MsMpEng", 3.12), WARN, "MsMpEng (62.4 ms)", ()),
    ("cores.sample", _dpc_on(11, 2.5), FAIL, "CPU 11", ()),
    ("cores.sample", lambda c: c.fail(TYPEPERF, "Error: No valid counters."), NA, "No valid counters", ()),
    ("idle.idle_disable", None, OK, "disabled", ()),
    (
        "idle.idle_disable",
        lambda c: c.replace(F.POWER, "AC Power Setting Index: 0x00000001", "AC Power Setting Index: 0x00000000"),
        FAIL,
        "enabled",
        (),
    ),
    (
        "idle.idle_disable",
        lambda c: c.fail(F.POWER, 'Invalid Parameters -- try "/?" for help'),
        NA,
        "Invalid Parameters",
        (),
    ),
    ("services.sysmain", None, OK, "stopped and disabled", ()),
    ("services.sysmain", _service("SysMain", "auto", "running"), FAIL, "running (start type auto)", ()),
    ("services.sysmain", _service("SysMain", "demand", "stopped"), WARN, "starts again (demand)", ()),
    (
        "services.sysmain",
        lambda c: c.fail(
            F.sc_qc("SysMain"),
            "[SC] OpenService FAILED 1060:\n\nThe specified service does not exist as an installed service.",
            rc=1060,
        ),
        OK,
        "not installed",
        (),
    ),
    ("services.dps", _service("DPS", "auto", "running"), FAIL, "DPS is running", ()),
    ("services.audiosrv", _service("Audiosrv", "auto", "running"), FAIL, "Audiosrv is running", ()),
    ("services.defender", None, OK, "1 process", ()),
    (
        "services.defender",
        lambda c: c.edit_json(F.DEFENDER, lambda d: d.update(ExclusionProcess=None)),
        WARN,
        "no exclusion",
        (),
    ),
    (
        "services.defender",
        lambda c: c.edit_json(F.DEFENDER, lambda d: d.update(DisableRealtimeMonitoring=True)),
        OK,
        "off",
        (),
    ),
    (
        "services.defender",
        lambda c: c.fail(F.DEFENDER, "Get-MpPreference : Operation failed with the following error: 0x800106ba"),
        NA,
        "another antivirus",
        (),
    ),
    ("updates.wuauserv", None, OK, "stopped and disabled", ()),
    (
        "updates.wuauserv",
        _service("wuauserv", "demand", "running"),
        FAIL,
        "wuauserv is running (start type demand)",
        (),
    ),
    ("updates.policy", None, OK, "off by policy", ()),
    (
        "updates.policy",
        lambda c: c.fail(F.WU_POLICY, "ERROR: The system was unable to find the specified registry key or value."),
        WARN,
        "allowed",
        (),
    ),
    ("irq.rss", None, OK, "no adapter", ()),
    ("irq.rss", _rss(MaxProcessorNumber=13), FAIL, "RSS of Ethernet", ()),
    ("irq.rss", _rss(BaseProcessorGroup=1), FAIL, "RSS of Ethernet", ()),  # another group: its processors are not 0-9
    ("irq.rss", lambda c: c.edit_json(F.RSS, lambda d: d[0]), OK, "no adapter", ()),  # one adapter: a bare object
    ("irq.rss", lambda c: c.set(F.RSS, "[]\r\n"), NA, "no adapter supports RSS", ()),
    ("irq.rss", lambda c: c.set(F.RSS, ""), NA, "powershell.exe printed nothing", ()),  # Wine's stub PowerShell
    ("irq.threaded_dpc", None, OK, "off", ()),
    (
        "irq.threaded_dpc",
        lambda c: c.replace(F.KERNEL, "    ThreadDpcEnable    REG_DWORD    0x0\n", ""),
        WARN,
        "the default",
        (),
    ),
]


@pytest.mark.parametrize(
    "check_id,breaks,status,words,also", CASES, ids=[f"{c[0]}-{c[2].value}-{i}" for i, c in enumerate(CASES)]
)
def test_each_break_flips_exactly_its_check(good, check_id, breaks, status, words, also):
    before = statuses(good)
    assert all(s is OK for s in before.values()), before
    if breaks:
        breaks(good)
    found = report(good)
    f = next(f for f in found.findings if f.id == check_id)
    assert f.status is status, f
    assert words in f.summary, f.summary
    after = {x.id: x.status for x in found.findings}
    flipped = {k for k in after if after[k] != before[k]}
    assert flipped <= {check_id, *also}, flipped
    if f.status in (WARN, FAIL):
        assert f.fix and f.why and f.evidence


def test_the_untuned_machine_fails_every_step_with_the_guides_commands(bad):
    found = {f.id: f for f in report(bad).findings}
    # the seed's i5-14500 with HT off: no SMT sibling, but 10-13 are E-cores
    assert {k for k, f in found.items() if f.status is OK} == {"cores.rt_cpus", "cores.smt"}
    assert found["cores.hybrid"].status is WARN and "--rt-cpus 5" in found["cores.hybrid"].fix
    assert found["idle.idle_disable"].fix == (
        "powercfg.exe /setacvalueindex SCHEME_CURRENT SUB_PROCESSOR IdleDisable 1 & "
        "powercfg.exe /setactive SCHEME_CURRENT"
    )
    assert found["services.sysmain"].fix == "sc stop SysMain & sc config SysMain start= disabled"
    assert found["irq.rss"].fix == (
        "Set-NetAdapterRss -Name 'Ethernet' -BaseProcessorNumber 0 -MaxProcessorNumber 9 ; "
        "Set-NetAdapterRss -Name 'EtherCAT' -BaseProcessorNumber 0 -MaxProcessorNumber 9"
    )
    assert "$obj.SetRTCores = 4" in found["cores.reserved"].fix and found["cores.reserved"].reboot
    assert found["irq.threaded_dpc"].fix.startswith(
        'reg add "HKLM\\SYSTEM\\CurrentControlSet\\Control\\Session Manager\\kernel" '
        "/v ThreadDpcEnable /t REG_DWORD /f /d 0"
    )
    assert not report(bad).ready


def test_the_seeds_msmpeng_finding_on_the_untuned_machine(bad):
    sample = report(bad).sample.to_dict()
    mpeng = next(t for t in sample["tasks"] if t["comm"] == "MsMpEng")
    assert mpeng == {"comm": "MsMpEng", "cpu_ms": 62.4, "kind": "affinity unknown"}
    assert sample["cores"]["10"]["% DPC Time"] == 1.25


@pytest.mark.parametrize("rt,words", [(CpuSet([16]), "CPU 16 does not exist"), (CpuSet(range(14)), "every CPU")])
def test_an_rt_cpu_windows_does_not_have_is_a_finding_not_a_crash(good, rt, words):
    found = report(good, rt)
    f = next(f for f in found.findings if f.id == "cores.rt_cpus")
    assert f.status is FAIL and words in f.summary and not found.ready


def test_an_unreadable_processor_count_is_not_a_crash(good):
    good.fail(F.CPU_COUNT, "Get-CimInstance : Access denied")
    found = {f.id: f for f in report(good).findings}
    assert found["cores.rt_cpus"].status is NA


def test_no_sample_asked_runs_no_typeperf(good):
    from softrt.audit.windows import run_checks as win_checks
    from softrt.platform.windows.wincmd import CapturedRunner

    runner = CapturedRunner(good.root)
    found = win_checks(RT, str(good), sample_s=0, runner=runner)
    assert not any(c.startswith("typeperf") for c in runner.calls)
    assert next(f for f in found.findings if f.id == "cores.sample").status is NA


def test_json_report_says_it_is_windows(good):
    data = report(good).document().to_dict()
    assert data["meta"]["os"] == "windows" and data["meta"]["logical_processors"] == 14
    json.dumps(data)


def test_a_csp_error_printed_with_exit_status_0_is_still_read(good):
    """PowerShell exits 0 after a non-terminating error: the class is missing all the same."""
    good.set(F.CSP, "", rc=0, err=INVALID_CLASS)
    f = next(f for f in report(good).findings if f.id == "cores.csp")
    assert f.status is WARN and "not present" in f.summary


def test_a_capture_missing_an_output_file_is_a_finding_not_a_crash(good):
    """The index names cpu_count.txt but the directory lacks it (a partial copy)."""
    (good.root / "cpu_count.txt").unlink()
    found = {f.id: f for f in report(good).findings}
    assert found["cores.rt_cpus"].status is NA


@pytest.mark.parametrize("number", [64, 10**9])
def test_an_rss_processor_number_beyond_its_group_is_unknown_not_a_huge_range(good, number):
    """A processor number is 0-63 within its group; 10**9 once built a range of a billion CPUs (MemoryError)."""
    good.edit_json(F.RSS, lambda data: data[0].update(MaxProcessorNumber=number))
    f = next(f for f in report(good).findings if f.id == "irq.rss")
    assert f.status is FAIL and "may run receive DPCs" in f.summary


def test_a_processor_count_beyond_any_windows_is_unreadable(good):
    good.set(F.CPU_COUNT, "99999999999999999999\r\n")
    found = {f.id: f for f in report(good).findings}
    assert found["cores.rt_cpus"].status is NA


@pytest.mark.parametrize(
    "procs,paths,words",
    [
        ("C:\\softrt\\python.exe", None, "1 process and 0 path exclusion(s)"),  # a lone string, not 20 letters
        (["C:\\softrt\\python.exe"], 5, "1 process and 0 path exclusion(s)"),  # a number is no exclusion (no crash)
    ],
)
def test_defender_exclusions_in_any_json_shape(good, procs, paths, words):
    good.set(
        F.DEFENDER, json.dumps({"DisableRealtimeMonitoring": False, "ExclusionProcess": procs, "ExclusionPath": paths})
    )
    f = next(f for f in report(good).findings if f.id == "services.defender")
    assert f.status is OK and words in f.summary


# --- what running under Wine showed (issue 19): tools that print nothing, localized text ---------------------


def _wine_like(caps):
    """Every command as Wine answers it: PowerShell a stub that exits 0 printing nothing, no powercfg or
    typeperf at all, sc unable to read a configuration."""
    index = json.loads((caps.root / "commands.json").read_text())
    for line in index:
        argv = line.split(" ")
        if argv[0] == "powershell.exe":
            caps.set(argv, "")
        elif argv[0] in ("powercfg.exe", "typeperf.exe"):
            caps.set(argv, "", rc=127, err=f"{argv[0]}: not found")
        elif argv[0] == "sc.exe":
            caps.set(argv, "", rc=1, err="")
    return caps


def test_a_machine_that_answers_nothing_is_unknown_never_ready(good):
    """Wine's `check` said READY with 11 n/a: a fatal check n/a, or high ones unreadable, are not a pass."""
    found = report(_wine_like(good), sample_s=0)
    assert not found.ready and found.verdict.startswith("UNKNOWN")
    assert {f.id for f in found.unknown} >= {"cores.rt_cpus", "idle.idle_disable", "irq.rss", "updates.wuauserv"}
    assert all(f.status is NA and f.unreadable for f in found.unknown)


def test_the_cli_says_unknown_and_exits_1_for_a_capture_that_says_nothing(good, run_cli):
    code, out, _ = run_cli("check", "--root", str(_wine_like(good)), "--sample", "0")
    assert code == 1 and "UNKNOWN" in out and "READY:" not in out


def test_an_unknown_processor_count_never_defaults_to_cpu_0(good):
    from softrt.audit import default_rt_cpu

    good.set(F.CPU_COUNT, "")  # PowerShell printed nothing
    assert default_rt_cpu(str(good)) is None
    f = next(f for f in report(good).findings if f.id == "cores.rt_cpus")
    assert f.status is NA and "printed nothing" in " ".join(f.evidence)


def test_a_missing_powershell_is_unreadable_not_a_machine_without_the_csp(good):
    """wincmd's own "not found" once matched the CSP check's "class not found" and said "not IoT Enterprise"."""
    good.fail(F.CSP, "powershell.exe: not found (No such file or directory)", rc=127)
    f = next(f for f in report(good).findings if f.id == "cores.csp")
    assert f.status is NA and f.unreadable and "not found" in f.summary


def test_an_empty_csp_answer_is_unreadable_not_setrtcores_unset(good):
    good.set(F.CSP, "")
    f = next(f for f in report(good).findings if f.id == "cores.csp")
    assert f.status is NA and "printed nothing" in f.summary


def test_a_localized_sc_is_read_by_its_exit_status(good):
    """sc.exe exits with the Win32 error it prints: 1060 is "no such service" in any language."""
    good.fail(
        F.sc_qc("SysMain"),
        "[SC] OpenService FEHLER 1060:\n\nDer angegebene Dienst ist kein installierter Dienst.",
        rc=1060,
    )
    f = next(f for f in report(good).findings if f.id == "services.sysmain")
    assert f.status is OK and "not installed" in f.summary


def test_a_localized_powercfg_is_read_by_shape(good):
    good.set(
        F.POWER,
        "GUID des Energieschemas: 8c5e7fda-e8bf-4a96-9a85-a6e23a8c635c  (Höchstleistung)\n"
        "  GUID der Untergruppe: 54533251-82be-4824-96c1-47b60b740d00  (Prozessorenergieverwaltung)\n"
        "    GUID-Alias: SUB_PROCESSOR\n"
        "    GUID der Energieeinstellung: 5d76a2ca-e8c0-402f-a133-2158492d58ad  (Leerlauf deaktivieren)\n"
        "      Mögliche Einstellung Index: 000\n"
        "    Index der aktuellen Wechselstromeinstellung: 0x00000000\n"
        "    Index der aktuellen Gleichstromeinstellung: 0x00000001\n",
    )
    f = next(f for f in report(good).findings if f.id == "idle.idle_disable")
    assert (
        f.status is FAIL
        and "IDLEDISABLE AC index: 0, DC index: 1" in f.evidence[1]
        and "Höchstleistung" in f.evidence[0]
    )


def test_defender_exclusions_hidden_from_a_non_administrator_are_unreadable(good):
    """Get-MpPreference without Administrator prints "N/A: Must be and administrator …" for each list."""
    hidden = ["N/A: Must be and administrator to view exclusions"]
    good.set(
        F.DEFENDER,
        json.dumps({"DisableRealtimeMonitoring": False, "ExclusionProcess": hidden, "ExclusionPath": hidden}),
    )
    f = next(f for f in report(good).findings if f.id == "services.defender")
    assert f.status is NA and f.unreadable and "Administrators only" in f.summary


@pytest.mark.parametrize(
    "procs,paths,status",
    [
        (["C:\\Tools\\other.exe"], [], WARN),
        (["c:\\python312\\PYTHON.EXE"], [], OK),  # case-insensitive, as Windows paths are
        (["python.exe"], [], OK),  # a bare image name matches that image anywhere
        ([], ["C:\\Python312\\"], OK),
        ([], ["C:\\Python3"], WARN),  # a path exclusion covers its folder, not a name prefix
    ],
)
def test_defender_exclusions_are_compared_with_the_loops_interpreter(good, procs, paths, status):
    from softrt.audit.windows.checks import check_defender
    from softrt.audit.windows.facts import WinFacts
    from softrt.platform.windows.wincmd import CapturedRunner

    good.set(
        F.DEFENDER, json.dumps({"DisableRealtimeMonitoring": False, "ExclusionProcess": procs, "ExclusionPath": paths})
    )
    w = WinFacts(CapturedRunner(good.root), RT, str(good), interpreter="C:\\Python312\\python.exe")
    f = check_defender(w)
    assert f.status is status, f
    assert f.status is OK or f.fix == 'Add-MpPreference -ExclusionProcess "C:\\Python312\\python.exe"'


def test_a_check_that_raises_keeps_its_id_and_severity(good, monkeypatch):
    """A crashed Windows check was reported as ``kernel.<name>``, low severity: a fatal one could not stop READY."""
    from softrt.audit.windows import runner

    def broken(w, found):
        raise ValueError("bad bytes")

    crashing = runner.checks.declare("cores.rt_cpus", "Real-time CPUs exist", runner.checks.Severity.FATAL)(broken)
    monkeypatch.setattr(runner, "CHECKS", (crashing, *runner.CHECKS[1:]))
    found = report(good)
    f = next(f for f in found.findings if f.id == "cores.rt_cpus")
    assert f.status is NA and f.severity.value == "fatal" and "bad bytes" in f.summary and not found.ready


def test_this_windows_machines_cpus_come_from_the_platform_not_powershell(monkeypatch):
    """Under Wine PowerShell printed nothing and the RT CPU defaulted to CPU 0, the core SetRTCores never reserves."""
    import os
    import sys

    import softrt.platform as P
    from softrt.audit.windows import runner
    from softrt.platform.base import Capabilities
    from softrt.platform.windows.wincmd import CmdResult

    class FourCpuWindows:
        caps = Capabilities(rt_throttling=False, kernel_trace=False, soft_rt_steps=True)

        def online_cpus(self):
            return CpuSet(range(4))

        def allowed_cpus(self):
            return CpuSet(range(3))  # this process may not use CPU 3

        def sample_counters(self, paths, seconds):  # pdh.dll, English paths
            return {p.replace("(*)", "(MsMpEng)"): 0.5 if p.startswith("\\Process(") else 0.0 for p in paths}

    monkeypatch.setattr(P, "_platform", FourCpuWindows())
    prints_nothing = lambda argv, timeout_s=30.0: CmdResult(tuple(argv), 0, "")  # noqa: E731
    assert runner.default_rt_cpu(os.sep, prints_nothing) == 2
    w = runner.gather(CpuSet([2]), os.sep, prints_nothing)
    assert w.cpu_count == 4 and w.housekeeping == CpuSet([0, 1, 3]) and w.interpreter == sys.executable
    f = runner.checks.check_rt_cpus(w)
    assert f.status is OK and "GetProcessAffinityMask" in f.evidence[0]
    report = runner.run_checks(CpuSet([2]), os.sep, sample_s=1, runner=prints_nothing)
    sample = next(f for f in report.findings if f.id == "cores.sample")
    assert sample.status is WARN and "MsMpEng" in sample.summary and "(pdh.dll)" in sample.evidence[0]
    assert not report.ready  # every other source printed nothing


def test_setrtcores_readings_on_the_seeds_14_cores():
    """The seed set 10 on 14 cores and describes 10-13 as RT ("core N and above"); softrt read N as a count."""
    assert {k: str(v) for k, v in F.rt_core_readings(14, 10).items()} == {
        "the 10 highest": "4-13",
        "core 10 and above": "10-13",
    }


def test_the_csp_evidence_quotes_the_mask_and_which_reading_it_matches(good):
    """The seed's setting (SetRTCores=10, mask 003C = 10-13): the mask is the truth, matched by "core 10 and above"."""
    _set_rt_cores(10)(good)
    f = next(f for f in report(good).findings if f.id == "cores.csp")
    text = " ".join(f.evidence)
    assert "REG_BINARY 003C000000000000 = CPUs 10-13" in text and "matches core 10 and above" in text
    assert "as the 10 highest: 4-13" in text
