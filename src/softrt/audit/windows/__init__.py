"""softrt check and tune on Windows: Microsoft's Soft Real-Time steps, read and (partly) applied (audit layer).

The same five functions as :mod:`..linux` (``default_rt_cpu``, ``run_checks``, ``plan_tune``,
``apply_plan``, ``revert``); :mod:`softrt.audit` picks one of the two once per root.
"""

from __future__ import annotations

from .runner import CHECKS, applies, default_rt_cpu, gather, run_checks
from .tune import apply_plan, plan_tune, revert

#: Who may change what this backend's tune changes (softrt tune says "as Administrator", not "as root").
PRIVILEGE = "Administrator"

__all__ = [
    "CHECKS",
    "PRIVILEGE",
    "applies",
    "apply_plan",
    "default_rt_cpu",
    "gather",
    "plan_tune",
    "revert",
    "run_checks",
]
