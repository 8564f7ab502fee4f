"""audit.state.in_force: what an applied tune has changed, for a run's provenance; nothing once reverted."""

from __future__ import annotations

from softrt.audit import apply_plan, plan_tune, revert
from softrt.audit.state import in_force
from softrt.cpus import CpuSet

from .test_tune_plan import break_everything
from .trees import kernel_writer


def test_an_applied_tune_is_in_force_until_reverted(good, state_dir):
    tree = break_everything(good)
    assert in_force(root=str(tree)) is None  # no tune applied
    result = apply_plan(plan_tune(CpuSet([3]), str(tree)), writer=kernel_writer)
    changes = in_force(result.state_path, str(tree))
    assert changes and any(c.startswith("/proc/sys/kernel/") and "=" in c for c in changes)
    assert changes == sorted(changes[:-1]) + changes[-1:] and changes == in_force(result.state_path, str(tree))
    revert(str(tree), writer=kernel_writer)
    assert in_force(result.state_path, str(tree)) is None
