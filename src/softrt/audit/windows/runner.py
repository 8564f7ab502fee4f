"""The Windows checks run against this machine or a capture of one, and the default RT CPU (audit layer).

Chosen when the platform layer says this is Windows, or when ``--root`` is a directory of captured
Windows command outputs (:func:`softrt.platform.windows.wincmd.is_capture`), so that the same checks run on
Linux against captures. Source: learn.microsoft.com/windows/iot/iot-enterprise/soft-real-time/
soft-real-time-device, and the seed's four points (``docs/field-report.md``).
"""

from __future__ import annotations

import os
import sys

from ...cpus import CpuSet, choose_cpus
from ...errors import ConfigError, NotSupported, SoftRTError
from ...platform import get_platform
from ...platform.windows import wincmd, wincpusets, winsystem
from ..model import Report, crashed
from . import checks, hybrid, sample
from .facts import CPU_SETS, ELEVATED, THROTTLING, WinFacts

#: Every Windows check, in model.GROUPS order; the live sample is the last of the reserved cores'.
CHECKS = (*checks.CHECKS[:3], *hybrid.CHECKS, sample.check_sample, *checks.CHECKS[3:])


def applies(root: str) -> bool:
    """True when *root* is this Windows machine or a capture of one."""
    if wincmd.is_capture(root):
        return True
    try:
        this_os = get_platform().caps.soft_rt_steps
    except NotSupported:
        return False
    return this_os and os.path.realpath(str(root)) == os.path.realpath(os.sep)


def gather(rt_cpus: CpuSet, root: str, runner: wincmd.Runner | None = None) -> WinFacts:
    """The facts of *root* through *runner* (default: this machine, or the captures under *root*).

    On this machine the processors come from the platform (GetProcessAffinityMask, else
    os.cpu_count()), never from a command that may print nothing, and the loop's interpreter is this one.
    """
    runner = runner or wincmd.runner_for(root)
    if wincmd.is_capture(root):
        return WinFacts(runner, rt_cpus, str(root))
    plat = get_platform()
    try:
        online, allowed = plat.online_cpus(), plat.allowed_cpus()
    except SoftRTError:
        online = allowed = CpuSet(range(os.cpu_count() or 1))
    facts = WinFacts(
        runner,
        rt_cpus,
        str(root),
        online=online,
        allowed=allowed,
        interpreter=sys.executable,
        counters=plat.sample_counters,
        raw=_this_machine,
    )
    facts.admin = wincmd.is_admin()
    return facts


def elevated_here(root: str, *, captured: ConfigError, needs_admin: str) -> None:
    """Raise *captured* when *root* is a capture directory (only this machine can be acted on), and a
    ConfigError saying *needs_admin* when softrt is not elevated (wincmd.is_admin)."""
    if wincmd.is_capture(root):
        raise captured
    if not wincmd.is_admin():
        raise ConfigError(needs_admin, hint=f"run it from {ELEVATED}")


def _system_runner(root: str) -> wincmd.Runner:
    """This machine's SYSTEM runner, for an elevated softrt only (registering a task for SYSTEM needs it)."""
    elevated_here(
        root,
        captured=ConfigError(
            f"{root} holds captured command outputs: --as-system reads this machine",
            hint="drop --as-system, or run softrt check --as-system on the Windows machine itself",
        ),
        needs_admin="softrt check --as-system registers a one-off task that runs as SYSTEM, which needs Administrator",
    )
    return winsystem.run_as_system


def _this_machine(name: str) -> bytes:
    """This machine's Win32 buffer *name* (:mod:`softrt.platform.windows.wincpusets`)."""
    return {CPU_SETS: wincpusets.system_cpu_sets, THROTTLING: wincpusets.process_throttling}[name]()


def default_rt_cpu(root: str, runner: wincmd.Runner | None = None) -> int | None:
    """The CPU ``softrt check`` defaults to: the highest performance core this process may use (the
    highest one of all, :func:`softrt.cpus.choose_cpus`, where SetRTCores reserves from, when the CPU sets
    are unreadable or every core is of one class); None when a capture does not say how many there are."""
    w = gather(CpuSet(), root, runner)
    if w.cpus[0] is None:
        return None
    rt_cpu, _ = choose_cpus(w.cpus[0], w.allowed or w.cpus[0])
    # On a hybrid CPU the top cores are E-cores (Windows numbers the P-cores first): take the highest P-core.
    perf = hybrid.default_performance_cpu(w, w.cpus[0] & (w.allowed or w.cpus[0]))
    return rt_cpu if perf is None else perf


def run_checks(
    rt_cpus: CpuSet,
    root: str,
    sample_s: float = 2.0,
    runner: wincmd.Runner | None = None,
    as_system: bool = False,
    system_runner: wincmd.Runner | None = None,
) -> Report:
    """Audit a Windows machine (or its captured outputs) for a 250 µs loop on *rt_cpus*.

    An RT CPU the machine does not have, a missing CSP or an unreadable source is a finding,
    never an exception; so is no RT CPU at all (:func:`default_rt_cpu` found none to choose).
    *as_system* reads the CSP as SYSTEM (:func:`softrt.platform.windows.winsystem.run_as_system`, or
    *system_runner*); everything else, and softrt's own files, stay the caller's.

    Raises:
        ConfigError: *as_system* on a capture, or without Administrator (exit status 2).
    """
    w = gather(rt_cpus, root, runner)
    if as_system:
        w.system_runner = system_runner or _system_runner(root)
    if sample_s > 0 and w.existing_rt:
        w.sample = sample.sample(w, sample_s)
    findings = []
    for check in CHECKS:
        try:
            findings.append(check(w))
        except (OSError, ValueError, KeyError, TypeError) as err:
            findings.append(crashed(check, err))
    meta = {"os": "windows", "logical_processors": w.cpu_count, "sample_s": w.sample.seconds if w.sample else 0}
    return Report(rt_cpus, w.housekeeping, findings, w.sample, str(root), meta)


__all__ = ["CHECKS", "applies", "default_rt_cpu", "gather", "run_checks"]
