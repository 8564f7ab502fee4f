"""softrt tune on Windows: the reversible subset of Microsoft's Soft Real-Time steps (audit layer).

Applied, journalled first and undone by ``--revert``: the active power scheme's idle-disable
setting (step 1), the start type and state of SysMain, DPS, Audiosrv (step 2) and wuauserv
(step 3), and each adapter's RSS processor range (step 5), through the commands of
:mod:`softrt.platform.windows.winsettings`. Printed, never applied: the WindowsIoT CSP's SetRTCores
(step 4; the guide warns it cannot be undone without reimaging), the Windows Update policy,
threaded DPCs (step 6, a restart) and the Defender exclusions (a security decision).

The contract is Linux's (:mod:`..linux.apply`): every previous value reaches the state file before its
change; revert restores newest first and reads every value back.
"""

from __future__ import annotations

import time
from pathlib import Path

from ...cpus import CpuSet
from ...errors import ConfigError
from ...platform.journal import Outcome
from ...platform.windows import wincmd, winsettings
from ...platform.windows.winsettings import WIN_POWER, WIN_RSS, WIN_SERVICE
from .. import state
from ..model import Status
from ..plan import Plan, Result, Step  # the tune model both backends share
from . import checks
from . import runner as windows
from .facts import WinFacts

#: ``sc start``/``sc stop`` return once the service reports START_PENDING/STOP_PENDING (sc.exe
#: start, "Remarks"): revert reads a service back until it leaves the pending state, this long at most.
SERVICE_SETTLE_S = 30.0
SERVICE_POLL_S = 0.5

NEVER_APPLIED = (
    "the WindowsIoT CSP (SetRTCores) and the registry values take effect only after a restart and are "
    "printed, never applied: the CSP cannot be undone without reimaging"
)


def _steps(w: WinFacts, report) -> list[Step]:
    bad = {f.id for f in report.findings if f.status in (Status.FAIL, Status.WARN)}
    steps = []
    _res, setting = w.power
    if "idle.idle_disable" in bad and setting:
        steps.append(
            Step(
                kind=WIN_POWER,
                target=setting.scheme,
                now=str(setting.ac),
                after="1",
                check="idle.idle_disable",
                why=f"idle states off on the active scheme ({setting.scheme_name})",
            )
        )
    for name, svc in w.services.items():
        cid = f"{'updates' if name == 'wuauserv' else 'services'}.{name.lower()}"
        if cid in bad and svc.readable:
            steps.append(
                Step(
                    kind=WIN_SERVICE,
                    target=name,
                    now=svc.value,
                    after=winsettings.service_value("disabled", "stopped"),
                    check=cid,
                    why=f"{name} stopped and disabled",
                )
            )
    wanted = checks.rss_range_off(w)
    adapters = checks.rss_adapters(w) if "irq.rss" in bad and wanted else None
    for a in adapters or []:
        cpus = checks.rss_cpus(a)
        if a.get("Enabled") and cpus is not None and not cpus.isdisjoint(w.existing_rt):
            steps.append(
                Step(
                    kind=WIN_RSS,
                    target=str(a["Name"]),
                    now=f"{min(cpus)}-{max(cpus)}",
                    after=f"{wanted[0]}-{wanted[1]}",
                    check="irq.rss",
                    why=f"receive DPCs of {a['Name']} on CPUs {wanted[0]}-{wanted[1]} only",
                )
            )
    return steps


def plan_tune(rt_cpus: CpuSet, root: str, runner: wincmd.Runner | None = None) -> Plan:
    """Every reversible fix for *rt_cpus* on a Windows machine (or its captures); nothing is changed.

    Raises:
        ConfigError: an RT CPU the machine does not have, or no CPU left to Windows (exit status 2).
    """
    w = windows.gather(rt_cpus, root, runner)
    report = windows.run_checks(rt_cpus, root, sample_s=0, runner=w.runner)
    rt_check = next(f for f in report.findings if f.id == "cores.rt_cpus")
    if rt_check.status is Status.FAIL:
        raise ConfigError(rt_check.summary, hint=rt_check.fix)
    plan = Plan(rt_cpus, w.housekeeping, str(root), report=report)
    plan.steps = _steps(w, report)
    fixed = {s.check for s in plan.steps}
    todo = {}  # fix -> the first check it fixes (SetRTCores fixes two)
    for f in report.findings:
        if f.status in (Status.FAIL, Status.WARN) and f.fix and f.id not in fixed:
            todo.setdefault(f.fix, f.id)
    plan.manual = [(cid, fix) for fix, cid in todo.items()]
    plan.skipped.append(NEVER_APPLIED)
    return plan


def _machine_runner(root: str, runner: wincmd.Runner | None, what: str) -> wincmd.Runner:
    """The runner that changes settings: this machine, as Administrator (captured outputs cannot be changed)."""
    if runner is not None:
        return runner
    windows.elevated_here(
        root,
        captured=ConfigError(
            f"{root} holds captured command outputs: softrt tune {what} changes a real machine only",
            hint="run softrt tune on the Windows machine itself; without --apply it shows the plan",
        ),
        needs_admin=f"softrt tune {what} changes Windows settings and needs Administrator",
    )
    return wincmd.run


def current(w: WinFacts, kind: str, target: str) -> str | None:
    """What a setting holds now (the journal's form), None when it cannot be read."""
    if kind == WIN_POWER:
        _res, setting = w.power
        return str(setting.ac) if setting and setting.scheme == target.lower() else None
    if kind == WIN_SERVICE:
        svc = w.services.get(target)
        return svc.value if svc and svc.readable else None
    for a in checks.rss_adapters(w) or []:
        cpus = checks.rss_cpus(a)
        if a.get("Name") == target and cpus:
            return f"{min(cpus)}-{max(cpus)}"
    return None


def _read_back(rt: CpuSet, root: str, runner: wincmd.Runner, kind: str, target: str) -> str | None:
    """What a setting holds after its restore; a service read again while it is still starting or stopping."""
    deadline = time.monotonic() + SERVICE_SETTLE_S
    while True:
        value = current(windows.gather(rt, root, runner), kind, target)
        if kind != WIN_SERVICE or not (value or "").endswith("_pending") or time.monotonic() >= deadline:
            return value
        time.sleep(SERVICE_POLL_S)


def _run_all(w: WinFacts, cmds: list[list[str]]) -> str | None:
    """Run *cmds* in order; the first failure's message, or None."""
    for argv in cmds:
        res = w.run(argv)
        if not res.ok:
            said = (res.err or res.out).strip().splitlines()
            return f"{wincmd.key(argv)}: {said[-1] if said else f'exit status {res.rc}'}"
    return None


def apply_plan(plan: Plan, state_path: Path | None = None, runner: wincmd.Runner | None = None) -> Result:
    """Apply every step of a Windows *plan*, journalling each previous value before its change.

    Raises:
        ConfigError: not Administrator, or a previous tune is still applied (nothing changed).
    """
    runner = _machine_runner(plan.root, runner, "--apply")
    path = state_path or state.default_path()
    journal = state.create(
        path, plan.root, rt_cpus=str(plan.rt_cpus), housekeeping=str(plan.housekeeping), boot_id=None, os="windows"
    )
    result, entries = Result(path), 0
    try:
        for step in plan.steps:
            w = windows.gather(plan.rt_cpus, plan.root, runner)  # read again just before the change
            now = current(w, step.kind, step.target)
            if now is None:
                result.outcomes.append(Outcome(target=step.target, status="skipped", detail="cannot be read any more"))
                continue
            if now == step.after:
                result.outcomes.append(Outcome(target=step.target, status="skipped", detail="already set"))
                continue
            try:
                journal.append(
                    {"kind": step.kind, "target": step.target, "before": now, "after": step.after, "check": step.check}
                )
            except ConfigError as err:  # what it holds now could not be put back (a pending state): leave it
                result.outcomes.append(Outcome(target=step.target, status="skipped", detail=f"refused: {err.msg}"))
                continue
            entries += 1
            failed = _run_all(w, winsettings.commands(step.kind, step.target, now, step.after))
            if failed:
                result.complete = False
                result.outcomes.append(Outcome(target=step.target, status="failed", detail=failed))
            else:
                result.outcomes.append(Outcome(target=step.target, status="applied", detail=f"{now} -> {step.after}"))
    finally:
        journal.close()
        if entries == 0:
            path.unlink(missing_ok=True)
            result.saved = False
    return result


def revert(root: str, state_path: Path | None = None, runner: wincmd.Runner | None = None) -> Result:
    """Put back every Windows setting the state file saved, newest first, and read each back.

    Raises:
        ConfigError: no state, a corrupt or foreign state file, or not Administrator.
    """
    root = str(root)
    path = state_path or state.default_path()
    header, entries = state.load(path, root)
    runner = _machine_runner(root, runner, "--revert")
    rt = CpuSet.parse(header.get("rt_cpus") or "0")
    result = Result(path)
    for entry in reversed(entries):
        kind, target, before = entry["kind"], entry["target"], entry["before"]
        if kind not in winsettings.KINDS:
            result.outcomes.append(
                Outcome(target=target, status="failed", detail=f"a {kind} entry is not a Windows setting")
            )
            result.complete = False
            continue
        w = windows.gather(rt, root, runner)
        now = current(w, kind, target)
        if now == before:
            result.outcomes.append(Outcome(target=target, status="restored", detail=before))
            continue
        failed = _run_all(w, winsettings.commands(kind, target, now or entry.get("after", ""), before))
        readback = _read_back(rt, root, runner, kind, target)
        fix = winsettings.manual_fix(entry) or None  # (none for this kind: no key)
        if failed:
            result.outcomes.append(Outcome(target=target, status="failed", detail=failed, fix=fix))
        elif readback != before:
            result.outcomes.append(
                Outcome(target=target, status="mismatch", detail=f"reads {readback!r}, saved {before!r}", fix=fix)
            )
        else:
            result.outcomes.append(Outcome(target=target, status="restored", detail=before))
            continue
        result.complete = False
    if result.complete:
        path.unlink()
    return result


__all__ = ["apply_plan", "current", "plan_tune", "revert"]
