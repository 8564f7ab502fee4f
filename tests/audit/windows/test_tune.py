"""softrt tune on Windows against a fake machine: the exact commands of apply and revert, journal first."""

from __future__ import annotations

import json

import pytest

from softrt.audit import Status, apply_plan, plan_tune, revert, run_checks
from softrt.audit.windows import tune as tune_windows
from softrt.audit.windows.tune import NEVER_APPLIED
from softrt.cpus import CpuSet
from softrt.errors import ConfigError

from .fake import FakeWindows

RT = CpuSet(range(10, 14))
SCHEME = "8c5e7fda-e8bf-4a96-9a85-a6e23a8c635c"
RSS = "powershell.exe -NoProfile -NonInteractive -Command Set-NetAdapterRss -Name '{}' -BaseProcessorNumber {} -MaxProcessorNumber {}"
APPLY = [
    f"powercfg.exe /setacvalueindex {SCHEME} SUB_PROCESSOR IDLEDISABLE 1",
    f"powercfg.exe /setactive {SCHEME}",
    "sc.exe stop SysMain",
    "sc.exe config SysMain start= disabled",
    "sc.exe stop DPS",
    "sc.exe config DPS start= disabled",
    "sc.exe stop Audiosrv",
    "sc.exe config Audiosrv start= disabled",
    "sc.exe stop wuauserv",
    "sc.exe config wuauserv start= disabled",
    RSS.format("Ethernet", 0, 9),
    RSS.format("EtherCAT", 0, 9),
]
REVERT = [
    RSS.format("EtherCAT", 0, 13),
    RSS.format("Ethernet", 0, 13),
    "sc.exe config wuauserv start= demand",
    "sc.exe start wuauserv",
    "sc.exe config Audiosrv start= auto",
    "sc.exe start Audiosrv",
    "sc.exe config DPS start= auto",
    "sc.exe start DPS",
    "sc.exe config SysMain start= auto",
    "sc.exe start SysMain",
    f"powercfg.exe /setacvalueindex {SCHEME} SUB_PROCESSOR IDLEDISABLE 0",
    f"powercfg.exe /setactive {SCHEME}",
]
TUNED = {"idle.idle_disable", "services.sysmain", "services.dps", "services.audiosrv", "updates.wuauserv", "irq.rss"}


@pytest.fixture
def state_path(tmp_path, monkeypatch):
    monkeypatch.setenv("SOFTRT_STATE_DIR", str(tmp_path / "state"))
    return tmp_path / "state" / "tune-state.jsonl"


def outputs(caps):
    return {p.name: p.read_text() for p in caps.root.iterdir()}


def without_index(files):
    return {k: v for k, v in files.items() if k != "commands.json"}


def test_the_plan_applies_the_reversible_subset_and_prints_the_rest(bad):
    plan = plan_tune(RT, str(bad))
    assert {s.check for s in plan.steps} == TUNED
    manual = dict(plan.manual)
    assert set(manual) == {
        "cores.reserved",
        "services.defender",
        "updates.policy",
        "irq.threaded_dpc",
        "cores.hybrid",
        "cores.power_throttling",
    }
    assert "$obj.SetRTCores = 4" in manual["cores.reserved"]
    assert NEVER_APPLIED in plan.skipped


def test_apply_runs_exactly_the_guides_commands_and_revert_undoes_them_in_reverse(bad, state_path):
    before = outputs(bad)
    statuses_before = {f.id: f.status for f in run_checks(RT, str(bad), sample_s=0).findings}
    fake = FakeWindows(bad)
    result = apply_plan(plan_tune(RT, str(bad)), runner=fake)
    assert result.complete and result.count("applied") == 7
    assert fake.changes() == APPLY
    after = {f.id: f.status for f in run_checks(RT, str(bad), sample_s=0).findings}
    assert all(after[c] is Status.OK for c in TUNED), after

    entries = [json.loads(line) for line in state_path.read_text().splitlines()[1:]]
    assert [(e["kind"], e["target"], e["before"]) for e in entries][:2] == [
        ("win-power", SCHEME, "0"),
        ("win-service", "SysMain", "auto/running"),
    ]

    fake = FakeWindows(bad)
    undone = revert(str(bad), runner=fake)
    assert undone.complete and undone.count("restored") == 7
    assert fake.changes() == REVERT
    assert without_index(outputs(bad)) == without_index(before)  # every output byte as it was
    assert {f.id: f.status for f in run_checks(RT, str(bad), sample_s=0).findings} == statuses_before
    assert not state_path.exists()


def test_every_value_is_journalled_before_its_change(bad, state_path):
    """Interrupted right after the third change: the journal holds it, and revert restores all three."""
    fake = FakeWindows(bad)
    seen = []

    def dies(argv, timeout_s=30.0):
        res = fake(argv, timeout_s)
        if argv[:2] == ["sc.exe", "config"]:
            seen.append(argv[2])
            # the entry for this service was fsync'd before the first of its commands ran
            assert argv[2] in state_path.read_text()
            if len(seen) == 2:
                raise KeyboardInterrupt
        return res

    with pytest.raises(KeyboardInterrupt):
        apply_plan(plan_tune(RT, str(bad)), runner=dies)
    undone = revert(str(bad), runner=FakeWindows(bad))
    assert undone.complete and undone.count("restored") == 3
    statuses = {f.id: f.status for f in run_checks(RT, str(bad), sample_s=0).findings}
    assert statuses["services.sysmain"] is Status.FAIL and statuses["idle.idle_disable"] is Status.FAIL


def test_a_refused_command_fails_that_step_and_the_rest_goes_on(bad, state_path):
    fake = FakeWindows(bad, refuse="sc.exe stop DPS")
    result = apply_plan(plan_tune(RT, str(bad)), runner=fake)
    failed = [o for o in result.outcomes if o.status == "failed"]
    assert not result.complete and [o.target for o in failed] == ["DPS"] and "Access is denied" in failed[0].detail
    assert result.count("applied") == 6
    assert revert(str(bad), runner=FakeWindows(bad)).complete


def test_revert_reports_a_value_that_does_not_come_back(bad, state_path):
    apply_plan(plan_tune(RT, str(bad)), runner=FakeWindows(bad))
    undone = revert(str(bad), runner=FakeWindows(bad, refuse="sc.exe config SysMain"))
    miss = [o for o in undone.outcomes if o.status not in ("restored",)]
    assert not undone.complete and [o.target for o in miss] == ["SysMain"]
    assert miss[0].fix == "sc.exe config SysMain start= auto & sc.exe start SysMain"
    assert state_path.exists()  # kept until everything reads back


def test_a_tuned_machine_has_nothing_to_apply(good, state_path):
    plan = plan_tune(RT, str(good))
    assert plan.steps == [] and plan.manual == []
    result = apply_plan(plan, runner=FakeWindows(good))
    assert result.complete and not result.saved and not state_path.exists()


def test_an_rt_cpu_the_machine_does_not_have_is_refused_before_anything(bad):
    with pytest.raises(ConfigError, match="CPU 16 does not exist"):
        plan_tune(CpuSet([16]), str(bad))


@pytest.mark.parametrize(
    "entry",
    [
        {"kind": "win-service", "target": "WinDefend", "before": "auto/running"},  # not a service tune stops
        {"kind": "win-service", "target": "SysMain", "before": "auto/running & calc"},  # not a start type
        {"kind": "win-power", "target": "SCHEME_CURRENT; calc", "before": "0"},  # not a GUID
        {"kind": "win-rss", "target": "Eth'; Remove-Item C:\\ -Recurse; '", "before": "0-3"},  # a quote in the name
        {"kind": "win-rss", "target": "Ethernet", "before": "9-3"},
    ],
)
def test_a_forged_windows_entry_is_refused(bad, state_path, entry):
    state_path.parent.mkdir(mode=0o700)
    header = {"format": "softrt-tune-state", "version": 1, "root": str(bad.root)}
    state_path.write_text(json.dumps(header) + "\n" + json.dumps(entry) + "\n")
    fake = FakeWindows(bad)
    with pytest.raises(ConfigError, match="corrupt or forged"):
        revert(str(bad), runner=fake)
    assert fake.changes() == []


def test_a_service_caught_in_a_pending_state_is_left_alone(bad, state_path):
    """'auto/stop_pending' could not be put back by revert: it is skipped, never journalled or changed."""
    from softrt.audit.windows import facts as F

    plan = plan_tune(RT, str(bad))
    bad.replace(F.sc_query("DPS"), "4  RUNNING", "3  STOP_PENDING")
    fake = FakeWindows(bad)
    result = apply_plan(plan, runner=fake)
    dps = next(o for o in result.outcomes if o.target == "DPS")
    assert dps.status == "skipped" and "refused" in dps.detail
    assert not any(" DPS" in c for c in fake.changes())
    assert "DPS" not in state_path.read_text()


def test_revert_waits_for_a_service_that_is_still_starting(bad, state_path, monkeypatch):
    """sc start returns at START_PENDING: the read-back waits for RUNNING instead of reporting a mismatch."""
    monkeypatch.setattr(tune_windows, "SERVICE_POLL_S", 0.01, raising=False)
    apply_plan(plan_tune(RT, str(bad)), runner=FakeWindows(bad, pending=True))
    undone = revert(str(bad), runner=FakeWindows(bad, pending=True))
    assert undone.complete and undone.count("restored") == 7, undone.outcomes
    assert not state_path.exists()
