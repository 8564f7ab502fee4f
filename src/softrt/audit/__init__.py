"""softrt.audit: is this machine ready for a 250 µs loop, and make it so, reversibly.

Two backends with the same five functions: :mod:`.linux` reads /proc and /sys under a root (a
captured tree in tests), :mod:`.windows` runs Microsoft's Soft Real-Time steps on this Windows
machine or reads a directory of captured Windows command outputs. :func:`backend` picks one for a
root, here and nowhere else, as :func:`softrt.platform.get_platform` does for the OS.
``run_checks()`` returns a :class:`Report`; ``plan_tune()``/``apply_plan()``/``revert()`` change
what can be changed at run time and undo it exactly. The library never prints; ``softrt check``
and ``softrt tune`` format.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

from ..cpus import CpuSet
from ..errors import ConfigError
from . import linux, windows
from .model import GROUPS, Finding, Report, Severity, Status
from .plan import AFFINITY, KINDS, Plan, Result, Step, change_kind, short_target
from .state import default_path


def backend(root: str = "/") -> ModuleType:
    """The audit backend for *root*: :mod:`.windows` for this Windows machine or a capture of one, else :mod:`.linux`."""
    return windows if windows.applies(str(root)) else linux


def default_rt_cpu(root: str = "/") -> int | None:
    """The CPU ``softrt run`` uses by default on *root* (None: a Windows capture that does not say)."""
    return backend(root).default_rt_cpu(str(root))


def privilege(root: str = "/") -> str:
    """Who may apply a tune on *root*: ``root``, or ``Administrator`` for Windows (a capture of one too)."""
    return backend(root).PRIVILEGE


def run_checks(rt_cpus: CpuSet, root: str = "/", sample_s: float = 2.0, as_system: bool = False) -> Report:
    """Audit *root* for a 250 µs loop on *rt_cpus* (see the backends' ``run_checks``); *as_system*: read
    Windows' SYSTEM-only source (the CSP) as SYSTEM, nothing else moved.

    Raises:
        ConfigError: *as_system* where there is no SYSTEM-only read (Linux).
    """
    if not as_system:
        return backend(root).run_checks(rt_cpus, str(root), sample_s)
    if backend(root) is not windows:
        raise ConfigError(
            "--as-system reads Windows' SoftRealTime CSP as SYSTEM; this is not a Windows machine or a capture of one",
            hint="drop --as-system",
        )
    return windows.run_checks(rt_cpus, str(root), sample_s, as_system=True)


def plan_tune(rt_cpus: CpuSet, root: str = "/") -> Plan:
    """Every run-time fix for *rt_cpus*; nothing is changed."""
    return backend(root).plan_tune(rt_cpus, str(root))


def apply_plan(plan: Plan, state_path: Path | None = None, **kwargs) -> Result:
    """Apply *plan*, journalling every previous value before its change."""
    return backend(plan.root).apply_plan(plan, state_path, **kwargs)


def revert(root: str = "/", state_path: Path | None = None, **kwargs) -> Result:
    """Restore what the state file saved, and read every value back."""
    return backend(root).revert(str(root), state_path, **kwargs)


__all__ = [
    "AFFINITY",
    "GROUPS",
    "KINDS",
    "Finding",
    "Plan",
    "Report",
    "Result",
    "Severity",
    "Status",
    "Step",
    "apply_plan",
    "backend",
    "change_kind",
    "default_path",
    "default_rt_cpu",
    "plan_tune",
    "privilege",
    "revert",
    "run_checks",
    "short_target",
]
