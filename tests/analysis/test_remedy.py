"""Each culprit kind maps to a fix named by softrt check's own ids, and every id named exists."""

from __future__ import annotations

import pytest

from softrt.analysis import remedy
from softrt.analysis.remedy import remedy_for
from softrt.audit.linux.checks import ALL
from softrt.schema.why_late import Culprit


def test_every_check_id_a_remedy_names_is_one_of_audits_checks():
    # A check's id is <module>.<function without check_> (audit.runner), e.g. cores.tasks.
    ids = {f"{c.__module__.rsplit('.', 1)[-1]}.{c.__name__.removeprefix('check_')}" for c in ALL}
    named = {check for r in remedy.every_remedy() for check in r.checks}
    assert named and named <= ids, sorted(named - ids)


@pytest.mark.parametrize(
    "kind,name,detail,checks",
    [
        ("thread", "servo-poller", "FIFO/RR 90", ("cores.tasks",)),
        ("thread", "python3", "OTHER, through the fair server", ("kernel.fair_server", "cores.tasks")),
        ("thread", "python3", "OTHER, through RT throttling", ("kernel.rt_throttling",)),
        ("thread", "python3", "OTHER, through RT throttling or the fair server", ("kernel.fair_server", "cores.tasks")),
        (
            "kernel",
            "fair server: SCHED_OTHER tasks ran while the worker was runnable",
            None,
            ("kernel.fair_server", "cores.tasks"),
        ),
        ("kernel", "RT throttling (worker runnable, parked by sched_rt_runtime_us)", None, ("kernel.rt_throttling",)),
        ("thread", "kworker/1:0 [lru_add_drain_per_cpu]", None, ("cores.workqueue", "cores.rcu_nocbs")),
        ("softirq", "BLOCK", None, ("cores.workqueue", "cores.rcu_nocbs")),
        ("irq", "virtio0-input.0", None, ("irq.nic",)),
        ("irq", "ahci[0000:00:1f.2]", None, ("irq.devices",)),
        ("kernel", "local timer", None, ("cores.nohz_full",)),
        ("kernel", "exit from idle to the woken worker", None, ("idle.states",)),
        # the lean trace's wake-up is the timer, the idle exit and the switch: its fix is to split it
        (
            "kernel",
            "wake-up from idle: timer interrupt, exit from idle and switch (lean trace: not split)",
            None,
            ("cores.nohz_full", "idle.states"),
        ),
        (
            "kernel",
            "wake-up past a lower-priority task: timer interrupt and switch (lean trace: not split)",
            None,
            ("cores.nohz_full", "idle.states"),
        ),
        ("outside", "no guest activity on CPU 1", "or an unrecorded timer interrupt: lean trace", ()),
        ("outside", "no guest activity on CPU 1", None, ()),
        ("loop", "the loop's own work", None, ()),
    ],
)
def test_each_kind_of_culprit_has_its_fix(kind, name, detail, checks):
    via = {
        "OTHER, through the fair server": "fair_server",
        "OTHER, through RT throttling": "rt_throttling",
        "OTHER, through RT throttling or the fair server": "rt_throttling_or_fair_server",
    }.get(detail)
    r = remedy_for(Culprit(kind=kind, name=name, detail=detail, via=via))
    assert r is not None and r.checks == checks and r.fix and r.short


def test_the_hypervisor_gets_the_guests_answer_and_nohz_full_needs_a_reboot():
    outside = remedy_for(Culprit(kind="outside", name="no guest activity on CPU 1"))
    assert (
        outside.fix.format(steal=" (steal 30.0 ms)")
        == "the hypervisor or firmware took the CPU (steal 30.0 ms): bare metal, or a dedicated vCPU"
    )
    assert remedy_for(Culprit(kind="kernel", name="local timer")).reboot
    assert not remedy_for(Culprit(kind="thread", name="x")).reboot
    assert remedy_for(Culprit(kind="kernel", name="a page fault of the loop")) is None  # nothing known: no fix made up


def test_the_mechanism_is_read_from_via_not_from_the_text():
    # A task named like a mechanism is a task; the mechanism is the culprit's via.
    assert remedy_for(Culprit(kind="thread", name="fair server", detail="OTHER")).checks == ("cores.tasks",)
    assert remedy_for(Culprit(kind="irq", name="eth0", via="fair_server")).checks[0] == "kernel.fair_server"
