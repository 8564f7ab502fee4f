"""Run every check against a root and return a Report (audit layer).

``run_checks`` is the public entry point: ``softrt check`` and the rest of softrt call it.
"""

from __future__ import annotations

import os

from ...cpus import CpuSet, choose_cpus
from ...errors import ConfigError, InvalidCpu, SoftRTError
from ...platform import get_platform, performance_cpus
from ...platform.kfiles import read_text
from ...platform.linux import kfacts, ktasks
from ...schema.audit import LiveSample
from ..model import Report, crashed
from . import sample as _sample
from .checks import ALL
from .context import Context


def online_cpus(root: str = "/") -> CpuSet:
    """Return the online CPUs under *root* (this machine: falls back to os.cpu_count())."""
    online = kfacts.online_cpus(root)
    if online is None:
        if os.path.realpath(root) != "/":
            raise ConfigError(
                f"{root}/sys/devices/system/cpu/online is unreadable",
                hint="is this a captured tree (scripts/capture_sysfs.py)?",
            )
        online = CpuSet(range(os.cpu_count() or 1))
    return online


def _allowed(root: str) -> CpuSet | None:
    if os.path.realpath(root) == "/":
        return get_platform().allowed_cpus()
    return ktasks.allowed_list(read_text(root, "/proc/self/status", fallback=""))


def default_rt_cpu(root: str = "/") -> int:
    """Return the CPU ``softrt run`` uses by default (:func:`softrt.cpus.choose_cpus`: the highest P-core on an
    Intel hybrid CPU)."""
    online = online_cpus(root)
    allowed = _allowed(root)
    rt_cpu, _ = choose_cpus(online, allowed if allowed is not None else online, preferred=performance_cpus(root))
    return rt_cpu


def validate_rt_cpus(rt_cpus: CpuSet, root: str = "/") -> tuple[CpuSet, CpuSet]:
    """Check a set of real-time CPUs; return (rt_cpus, housekeeping CPUs).

    Raises ConfigError (exit status 2) for an empty set, a CPU that does not exist or is offline,
    and a set that leaves no housekeeping CPU.
    """
    online = online_cpus(root)
    if not rt_cpus:
        raise ConfigError(
            "no real-time CPU given", hint=f"name one or more online CPUs, e.g. --rt-cpus {online.last()}"
        )
    present = kfacts.cpulist(root, "/sys/devices/system/cpu/present") or online
    for cpu in rt_cpus:
        if cpu not in present:
            raise InvalidCpu(cpu, online, "does not exist")
        if cpu not in online:
            raise InvalidCpu(cpu, online, "is offline")
    # The *system's* housekeeping CPUs (where IRQs, kthreads and other tasks go): every online CPU
    # but the real-time ones, whatever this process's own affinity (cpus.choose_cpus is the rule for
    # where softrt's own supervisor and loads may run).
    housekeeping = online - rt_cpus
    if not housekeeping:
        raise ConfigError(
            f"every online CPU ({online}) cannot be a real-time CPU",
            hint="one housekeeping CPU must stay for the rest of the system, e.g. "
            f"--rt-cpus {online - CpuSet([min(online)])}"
            if len(online) > 1
            else "this machine has a single CPU",
        )
    return rt_cpus, housekeeping


def run_checks(rt_cpus: CpuSet, root: str = "/", sample_s: float = 2.0) -> Report:
    """Audit this machine (or a captured tree under *root*) for a 250 µs loop on *rt_cpus*.

    Args:
        rt_cpus: the CPUs the loop will run on (see :func:`default_rt_cpu`).
        root: where /proc and /sys are; a captured tree in tests.
        sample_s: seconds of live sampling of the RT CPUs (0: none; never on a captured tree).

    Returns:
        A :class:`Report` with one finding per check, in output order, and the verdict.

    Raises:
        ConfigError: bad real-time CPUs (see :func:`validate_rt_cpus`).
    """
    root = str(root)
    rt_cpus, _ = validate_rt_cpus(rt_cpus, root)
    ctx = Context(root, rt_cpus, online_cpus(root))
    ctx.sample = _live_sample(ctx, sample_s) if sample_s > 0 and ctx.live else None
    findings = []
    for check in ALL:
        try:
            findings.append(check(ctx))
        except (OSError, ValueError, SoftRTError) as err:
            findings.append(crashed(check, err))  # a source that exists but cannot be parsed: say so
    meta = {"kernel": kfacts.kernel_release(root), "sample_s": sample_s if ctx.sample else 0}
    return Report(rt_cpus, ctx.housekeeping, findings, ctx.sample, root, meta)


def _live_sample(ctx: Context, seconds: float) -> LiveSample:
    """Sample the RT CPUs with this process moved to the housekeeping CPUs meanwhile."""
    plat = get_platform()
    before = plat.allowed_cpus()
    away = ctx.housekeeping & before
    try:
        if away:
            plat.set_affinity(away)  # so the sampler itself does not show up on the RT CPUs
        return _sample.sample(ctx.rt_cpus, seconds, ctx.root)
    except (OSError, SoftRTError) as err:
        return LiveSample.build(error=str(err), method="none", seconds=seconds, tasks=[], idle_share=None)
    finally:
        if away:
            plat.set_affinity(before)
