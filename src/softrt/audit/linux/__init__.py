"""softrt check and tune on Linux: /proc and /sys under a root, read and (reversibly) written (audit layer).

The same five functions as :mod:`..windows` (``default_rt_cpu``, ``run_checks``, ``plan_tune``,
``apply_plan``, ``revert``); :mod:`softrt.audit` picks one of the two once per root. The tune model
(``Plan``, ``Step``, ``Result``) is the neutral :mod:`softrt.audit.plan`'s, not re-exported here.
"""

from __future__ import annotations

from .apply import apply_plan, revert, run_command, write_kernel_file
from .plan import plan_tune
from .runner import default_rt_cpu, online_cpus, run_checks, validate_rt_cpus

#: Who may change what this backend's tune changes (softrt tune says "as root").
PRIVILEGE = "root"

__all__ = [
    "PRIVILEGE",
    "apply_plan",
    "default_rt_cpu",
    "online_cpus",
    "plan_tune",
    "revert",
    "run_checks",
    "run_command",
    "validate_rt_cpus",
    "write_kernel_file",
]
