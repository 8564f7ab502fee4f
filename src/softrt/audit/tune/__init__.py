"""softrt tune: plan the run-time fixes, apply them with a journal, revert them exactly (audit layer).

On Windows (or a capture of a Windows machine) the same three calls plan, apply and revert
Microsoft's reversible Soft Real-Time steps (:mod:`.windows`).
"""

from __future__ import annotations

from pathlib import Path

from ...cpus import CpuSet
from .. import windows as _win
from . import apply as _apply
from . import plan as _plan
from . import windows as _wintune
from .apply import Outcome, Result, run_command, write_kernel_file
from .plan import Plan, Step
from .state import default_path


def plan_tune(rt_cpus: CpuSet, root: str = "/") -> Plan:
    """Every run-time fix for *rt_cpus* (see :func:`.plan.plan_tune`, or :func:`.windows.plan_tune`)."""
    if _win.applies(root):
        return _wintune.plan_tune(rt_cpus, str(root))
    return _plan.plan_tune(rt_cpus, root)


def apply_plan(plan: Plan, state_path: Path | None = None, **kwargs) -> Result:
    """Apply *plan*, journalling first (see :func:`.apply.apply_plan`, or :func:`.windows.apply_plan`)."""
    if _win.applies(plan.root):
        return _wintune.apply_plan(plan, state_path, **kwargs)
    return _apply.apply_plan(plan, state_path, **kwargs)


def revert(root: str = "/", state_path: Path | None = None, **kwargs) -> Result:
    """Restore what the state file saved (see :func:`.apply.revert`, or :func:`.windows.revert`)."""
    if _win.applies(root):
        return _wintune.revert(str(root), state_path, **kwargs)
    return _apply.revert(root, state_path, **kwargs)


__all__ = ["Outcome", "Plan", "Result", "Step", "apply_plan", "default_path", "plan_tune", "revert", "run_command",
           "write_kernel_file"]
