"""softrt tune: plan the run-time fixes, apply them with a journal, revert them exactly (audit layer)."""

from __future__ import annotations

from .apply import Outcome, Result, apply_plan, revert, run_command, write_kernel_file
from .plan import Plan, Step, plan_tune
from .state import default_path

__all__ = ["Outcome", "Plan", "Result", "Step", "apply_plan", "default_path", "plan_tune", "revert", "run_command",
           "write_kernel_file"]
