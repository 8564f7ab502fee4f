"""softrt check and tune on Windows: Microsoft's Soft Real-Time steps, read and (partly) applied (audit layer).

Chosen when the platform layer says this is Windows, or when ``--root`` is a directory of captured
Windows command outputs (:func:`softrt.platform.wincmd.is_capture`), so that the same checks run on
Linux against captures. Source: learn.microsoft.com/windows/iot/iot-enterprise/soft-real-time/
soft-real-time-device, and the seed's four points (``../shared/seed/brief.md``).
"""

from __future__ import annotations

import os

from ...cpus import CpuSet
from ...errors import ConfigError, NotSupported
from ...platform import get_platform, wincmd
from ..model import Finding, Report, Severity, Status
from . import checks, sample
from .facts import WinFacts

#: Every Windows check, in model.GROUPS order; the live sample is the last of the reserved cores'.
CHECKS = (*checks.CHECKS[:3], sample.check_sample, *checks.CHECKS[3:])


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
    """The facts of *root* through *runner* (default: this machine, or the captures under *root*)."""
    return WinFacts(runner or wincmd.runner_for(root), rt_cpus, str(root))


def default_rt_cpu(root: str, runner: wincmd.Runner | None = None) -> int:
    """The highest logical processor (SetRTCores reserves from the top down); 0 when the count is unknown."""
    count = gather(CpuSet(), root, runner).cpu_count
    return count - 1 if count else 0


def run_checks(rt_cpus: CpuSet, root: str, sample_s: float = 2.0, runner: wincmd.Runner | None = None) -> Report:
    """Audit a Windows machine (or its captured outputs) for a 250 µs loop on *rt_cpus*.

    An RT CPU the machine does not have, a missing CSP or an unreadable source is a finding,
    never an exception.

    Raises:
        ConfigError: no RT CPU at all (bad input, exit status 2).
    """
    if not rt_cpus:
        raise ConfigError("no real-time CPU given", hint="name one or more CPUs, e.g. --rt-cpus 3")
    w = gather(rt_cpus, root, runner)
    if sample_s > 0 and w.existing_rt:
        w.sample = sample.sample(w, sample_s)
    findings = []
    for check in CHECKS:
        try:
            findings.append(check(w))
        except (OSError, ValueError, KeyError, TypeError) as err:
            title = (check.__doc__ or check.__name__).strip().splitlines()[0]
            findings.append(Finding(f"kernel.{check.__name__.removeprefix('check_')}", title, Status.NA,
                                    Severity.LOW, f"could not be read: {err}"))
    meta = {"os": "windows", "logical_processors": w.cpu_count, "sample_s": w.sample["seconds"] if w.sample else 0}
    return Report(rt_cpus, w.housekeeping, findings, w.sample, str(root), meta)


__all__ = ["CHECKS", "applies", "default_rt_cpu", "gather", "run_checks"]
