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
INVALID_CLASS = "Get-CimInstance : Invalid class\nCategoryInfo : MetadataError: (root\\cimv2\\mdm\\dmmap:MDM_Windows...)"


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
    ("cores.reserved", lambda c: c.replace(F.KERNEL, "003C000000000000", "0030000000000000"), FAIL,
     "CPUs 10-11 are not reserved", ("cores.sample",)),  # with 10-11 unreserved, the sample credits them again
    ("cores.reserved", lambda c: c.fail(F.KERNEL, "ERROR: Access is denied."), NA, "reg query", ("irq.threaded_dpc", "cores.sample")),
    ("cores.csp", None, OK, "SetRTCores=4", ()),
    ("cores.csp", _no_csp, WARN, "not Windows 10/11 IoT Enterprise", ()),
    ("cores.csp", lambda c: (_no_csp(c), _no_reserved(c)), FAIL, "not present", ("cores.reserved", "cores.sample")),
    ("cores.csp", lambda c: c.fail(F.CSP, "Get-CimInstance : Access denied"), NA, "SYSTEM", ()),
    ("cores.csp", _set_rt_cores(None), FAIL, "not set", ()),
    ("cores.csp", _set_rt_cores(2), FAIL, "reserves 12-13, not CPUs 10-11", ()),
    ("cores.sample", None, OK, "nothing but the pinned application", ()),
    ("cores.sample", _counter("MsMpEng", 3.12), WARN, "MsMpEng (62.4 ms)", ()),
    ("cores.sample", _dpc_on(11, 2.5), FAIL, "CPU 11", ()),
    ("cores.sample", lambda c: c.fail(TYPEPERF, "Error: No valid counters."), NA, "No valid counters", ()),
    ("idle.idle_disable", None, OK, "disabled", ()),
    ("idle.idle_disable", lambda c: c.replace(F.POWER, "AC Power Setting Index: 0x00000001", "AC Power Setting Index: 0x00000000"),
     FAIL, "enabled", ()),
    ("idle.idle_disable", lambda c: c.fail(F.POWER, "Invalid Parameters -- try \"/?\" for help"), NA, "Invalid Parameters", ()),
    ("services.sysmain", None, OK, "stopped and disabled", ()),
    ("services.sysmain", _service("SysMain", "auto", "running"), FAIL, "running (start type auto)", ()),
    ("services.sysmain", _service("SysMain", "demand", "stopped"), WARN, "starts again (demand)", ()),
    ("services.sysmain", lambda c: (c.fail(F.sc_qc("SysMain"), "[SC] OpenService FAILED 1060:\n\nThe specified service does not "
                                          "exist as an installed service.", rc=1060)), OK, "not installed", ()),
    ("services.dps", _service("DPS", "auto", "running"), FAIL, "DPS is running", ()),
    ("services.audiosrv", _service("Audiosrv", "auto", "running"), FAIL, "Audiosrv is running", ()),
    ("services.defender", None, OK, "1 process", ()),
    ("services.defender", lambda c: c.edit_json(F.DEFENDER, lambda d: d.update(ExclusionProcess=None)), WARN, "no exclusion", ()),
    ("services.defender", lambda c: c.edit_json(F.DEFENDER, lambda d: d.update(DisableRealtimeMonitoring=True)), OK, "off", ()),
    ("services.defender", lambda c: c.fail(F.DEFENDER, "Get-MpPreference : Operation failed with the following error: 0x800106ba"),
     NA, "another antivirus", ()),
    ("updates.wuauserv", None, OK, "stopped and disabled", ()),
    ("updates.wuauserv", _service("wuauserv", "demand", "running"), FAIL, "wuauserv is running (start type demand)", ()),
    ("updates.policy", None, OK, "off by policy", ()),
    ("updates.policy", lambda c: c.fail(F.WU_POLICY, "ERROR: The system was unable to find the specified registry key or value."),
     WARN, "allowed", ()),
    ("irq.rss", None, OK, "no adapter", ()),
    ("irq.rss", _rss(MaxProcessorNumber=13), FAIL, "RSS of Ethernet", ()),
    ("irq.rss", _rss(BaseProcessorGroup=1), FAIL, "RSS of Ethernet", ()),  # another group: its processors are not 0-9
    ("irq.rss", lambda c: c.edit_json(F.RSS, lambda d: d[0]), OK, "no adapter", ()),  # one adapter: a bare object
    ("irq.rss", lambda c: c.set(F.RSS, ""), NA, "no adapter supports RSS", ()),
    ("irq.threaded_dpc", None, OK, "off", ()),
    ("irq.threaded_dpc", lambda c: c.replace(F.KERNEL, "    ThreadDpcEnable    REG_DWORD    0x0\n", ""), WARN, "the default", ()),
]


@pytest.mark.parametrize("check_id,breaks,status,words,also", CASES,
                         ids=[f"{c[0]}-{c[2].value}-{i}" for i, c in enumerate(CASES)])
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
    assert {k for k, f in found.items() if f.status is OK} == {"cores.rt_cpus"}
    assert found["idle.idle_disable"].fix == ("powercfg.exe /setacvalueindex SCHEME_CURRENT SUB_PROCESSOR IdleDisable 1 & "
                                              "powercfg.exe /setactive SCHEME_CURRENT")
    assert found["services.sysmain"].fix == "sc stop SysMain & sc config SysMain start= disabled"
    assert found["irq.rss"].fix == ("Set-NetAdapterRss -Name 'Ethernet' -BaseProcessorNumber 0 -MaxProcessorNumber 9 ; "
                                    "Set-NetAdapterRss -Name 'EtherCAT' -BaseProcessorNumber 0 -MaxProcessorNumber 9")
    assert "$obj.SetRTCores = 4" in found["cores.reserved"].fix and found["cores.reserved"].reboot
    assert found["irq.threaded_dpc"].fix.startswith('reg add "HKLM\\SYSTEM\\CurrentControlSet\\Control\\Session Manager\\kernel" '
                                                    "/v ThreadDpcEnable /t REG_DWORD /f /d 0")
    assert not report(bad).ready


def test_the_seeds_msmpeng_finding_on_the_untuned_machine(bad):
    sample = report(bad).sample
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
    from softrt.platform.wincmd import CapturedRunner
    runner = CapturedRunner(good.root)
    found = win_checks(RT, str(good), sample_s=0, runner=runner)
    assert not any(c.startswith("typeperf") for c in runner.calls)
    assert next(f for f in found.findings if f.id == "cores.sample").status is NA


def test_json_report_says_it_is_windows(good):
    data = report(good).to_dict()
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


@pytest.mark.parametrize("procs,paths,words", [
    ("C:\\softrt\\python.exe", None, "with 1 process and 0 path exclusion(s)"),  # a lone string, not 20 letters
    (["C:\\softrt\\python.exe"], 5, "with 1 process and 0 path exclusion(s)"),  # a number is no exclusion (no crash)
])
def test_defender_exclusions_in_any_json_shape(good, procs, paths, words):
    good.set(F.DEFENDER, json.dumps({"DisableRealtimeMonitoring": False, "ExclusionProcess": procs,
                                     "ExclusionPath": paths}))
    f = next(f for f in report(good).findings if f.id == "services.defender")
    assert f.status is OK and words in f.summary
