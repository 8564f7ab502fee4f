"""softrt.audit: is this machine ready for a 250 µs loop, and make it so, reversibly.

``run_checks()`` reads /proc and /sys under a root (a captured tree in tests) and returns a
:class:`Report`; ``plan_tune()``/``apply_plan()``/``revert()`` change what can be changed at run
time and undo it exactly. The library never prints; ``softrt check`` and ``softrt tune`` format.
"""

from __future__ import annotations

from .model import GROUPS, Finding, Report, Severity, Status
from .runner import default_rt_cpu, online_cpus, run_checks, validate_rt_cpus

__all__ = ["GROUPS", "Finding", "Report", "Severity", "Status", "default_rt_cpu", "online_cpus", "run_checks",
           "validate_rt_cpus"]
