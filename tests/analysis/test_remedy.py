"""Each culprit kind maps to a fix named by softrt check's own ids, and every id named exists."""

from __future__ import annotations

import pytest

from softrt.analysis import remedy
from softrt.analysis.remedy import remedy_for
from softrt.audit.linux.checks import ALL


def test_every_check_id_a_remedy_names_is_one_of_audits_checks():
    # A check's id is <module>.<function without check_> (audit.runner), e.g. cores.tasks.
    ids = {f"{c.__module__.rsplit('.', 1)[-1]}.{c.__name__.removeprefix('check_')}" for c in ALL}
    named = {check for r in remedy.every_remedy() for check in r.checks}
    assert named and named <= ids, sorted(named - ids)


@pytest.mark.parametrize("kind,name,detail,checks", [
    ("thread", "servo-poller", "FIFO/RR 90", ("cores.tasks",)),
    ("thread", "python3", "OTHER, through the fair server", ("kernel.fair_server", "cores.tasks")),
    ("kernel", "fair server: SCHED_OTHER tasks ran while the worker was runnable", None,
     ("kernel.fair_server", "cores.tasks")),
    ("kernel", "RT throttling (worker runnable, parked by sched_rt_runtime_us)", None, ("kernel.rt_throttling",)),
    ("thread", "kworker/1:0 [lru_add_drain_per_cpu]", None, ("cores.workqueue", "cores.rcu_nocbs")),
    ("softirq", "BLOCK", None, ("cores.workqueue", "cores.rcu_nocbs")),
    ("irq", "virtio0-input.0", None, ("irq.nic",)),
    ("irq", "ahci[0000:00:1f.2]", None, ("irq.devices",)),
    ("kernel", "local timer", None, ("cores.nohz_full",)),
    ("kernel", "exit from idle to the woken worker", None, ("idle.states",)),
    ("outside", "no guest activity on CPU 1", None, ()),
    ("loop", "the loop's own work", None, ()),
])
def test_each_kind_of_culprit_has_its_fix(kind, name, detail, checks):
    r = remedy_for(kind, name, detail)
    assert r is not None and r.checks == checks and r.fix and r.short


def test_the_hypervisor_gets_the_guests_answer_and_nohz_full_needs_a_reboot():
    outside = remedy_for("outside", "no guest activity on CPU 1")
    assert outside.fix.format(steal=" (steal 30.0 ms)") == \
        "the hypervisor or firmware took the CPU (steal 30.0 ms): bare metal, or a dedicated vCPU"
    assert remedy_for("kernel", "local timer").reboot and not remedy_for("thread", "x").reboot
    assert remedy_for("kernel", "a page fault of the loop") is None  # nothing known: no fix made up
