"""softrt tune's plan: what it would change, and the kernel command line for the rest."""

from __future__ import annotations

import pytest

from softrt.audit import plan_tune
from softrt.cpus import CpuSet

from .trees import CAPTURED

RT = CpuSet([3])
KCONFIG_DYNAMIC_NONE = (
    "CONFIG_PREEMPT_DYNAMIC=y\nCONFIG_PREEMPT_NONE=y\nCONFIG_HZ=250\nCONFIG_NO_HZ_IDLE=y\nCONFIG_RT_GROUP_SCHED=y\n"
)


def break_everything(t):
    """The synthetic machine before anyone tuned it: a desktop with everything on CPU 3."""
    t.set("/proc/cmdline", "BOOT_IMAGE=/boot/vmlinuz root=/dev/sda1 ro quiet splash")
    t.set("/sys/devices/system/cpu/isolated", "").set("/sys/devices/system/cpu/nohz_full", "(null)")
    t.rm("/sys/kernel/realtime").kconfig(KCONFIG_DYNAMIC_NONE)
    t.set("/proc/sys/kernel/version", "#1 SMP PREEMPT_DYNAMIC Debian 6.12.0-1")
    t.irq(120, "eth0-TxRx-0", "f", "8").irq(121, "nvme0q1", "f", "1")
    t.set("/proc/irq/default_smp_affinity", "f").set("/sys/devices/virtual/workqueue/cpumask", "f")
    t.set("/proc/sys/kernel/watchdog_cpumask", "0-3").set("/proc/sys/kernel/sched_rt_runtime_us", "950000")
    t.idle_state(3, 1, "C1", 1, False).idle_state(3, 2, "C6", 133, False)
    t.set("/sys/devices/system/cpu/cpu3/cpufreq/scaling_governor", "powersave")
    t.set("/sys/kernel/mm/ksm/run", "1")
    t.set("/sys/kernel/mm/transparent_hugepage/enabled", "[always] madvise never")
    t.set("/sys/kernel/mm/transparent_hugepage/defrag", "[always] defer defer+madvise madvise never")
    t.set("/proc/sys/kernel/numa_balancing", "1").set("/sys/devices/system/node/online", "0-1")
    t.set("/proc/sys/kernel/timer_migration", "1")
    t.set("/sys/devices/system/clocksource/clocksource0/current_clocksource", "hpet")
    t.rm("/proc/500/fd")
    t.task(900, "MsMpEng", "0-3")
    t.set("/sys/kernel/debug/sched/fair_server/cpu3/runtime", "50000000")
    return t


def test_a_tuned_machine_needs_nothing(good):
    plan = plan_tune(RT, str(good))
    assert plan.steps == [] and plan.kernel_params == []


def test_plan_for_an_untuned_machine(good):
    plan = plan_tune(RT, str(break_everything(good)))
    steps = {s.target: (s.now, s.after, s.check) for s in plan.steps}
    assert steps == {
        "/proc/irq/120/smp_affinity": ("f", "00000007", "irq.nic"),
        "/proc/irq/121/smp_affinity": ("f", "00000007", "irq.devices"),
        "/proc/irq/default_smp_affinity": ("f", "00000007", "irq.default_affinity"),
        "/sys/devices/virtual/workqueue/cpumask": ("f", "00000007", "cores.workqueue"),
        "/proc/sys/kernel/watchdog_cpumask": ("0-3", "0-2", "services.watchdog"),
        "/proc/sys/kernel/sched_rt_runtime_us": ("950000", "-1", "kernel.rt_throttling"),
        "/sys/devices/system/cpu/cpu3/cpuidle/state1/disable": ("0", "1", "idle.states"),
        "/sys/devices/system/cpu/cpu3/cpuidle/state2/disable": ("0", "1", "idle.states"),
        "/sys/devices/system/cpu/cpu3/cpufreq/scaling_governor": ("powersave", "performance", "kernel.governor"),
        "/sys/kernel/mm/ksm/run": ("1", "0", "services.ksm"),
        "/sys/kernel/mm/transparent_hugepage/enabled": ("[always] madvise never", "madvise", "services.thp"),
        "/sys/kernel/mm/transparent_hugepage/defrag": (
            "[always] defer defer+madvise madvise never",
            "madvise",
            "services.thp",
        ),
        "/proc/sys/kernel/numa_balancing": ("1", "0", "services.numa_balancing"),
        "/proc/sys/kernel/timer_migration": ("1", "0", "kernel.timer_migration"),
        "/sys/devices/system/clocksource/clocksource0/current_clocksource": ("hpet", "tsc", "kernel.clocksource"),
        "/sys/kernel/debug/sched/fair_server/cpu3/runtime": ("50000000", "0", "kernel.fair_server"),
    }
    assert plan.notes == [
        "fair server off on CPU 3: its per-CPU kernel threads (ksoftirqd, kworkers) can starve "
        "while a loop spins there, as with sched_rt_runtime_us = -1"
    ]
    assert plan.steps[0].target.startswith("/proc/irq/")  # IRQs first: the seed's "important" step
    # No nohz_full=: this kernel is built without CONFIG_NO_HZ_FULL (the check says so instead).
    assert plan.kernel_cmdline == (
        "isolcpus=managed_irq,domain,3 rcu_nocbs=3 irqaffinity=0-2 preempt=full "
        "processor.max_cstate=1 intel_idle.max_cstate=1"
    )
    # A captured tree's processes are not this machine's: the MsMpEng move is left out, and said so.
    assert not [s for s in plan.steps if s.kind != "file"]
    assert any("captured tree" in note for note in plan.skipped)
    assert "cores.tasks" in {c for c, _ in plan.manual}


def test_plan_keeps_irqs_on_their_other_cpus(good):
    good.set("/proc/irq/121/smp_affinity", "c")  # CPUs 2-3: only CPU 2 stays
    plan = plan_tune(RT, str(good))
    assert [(s.target, s.after) for s in plan.steps] == [("/proc/irq/121/smp_affinity", "00000004")]


def test_plan_for_the_captured_vm():
    plan = plan_tune(CpuSet([1]), str(CAPTURED))
    irq_steps = [s for s in plan.steps if s.target.startswith("/proc/irq/") and s.target.endswith("/smp_affinity")]
    assert len(irq_steps) == 19 and all(s.after == "00000001" for s in irq_steps)
    assert {s.target for s in plan.steps} >= {
        "/proc/sys/kernel/sched_rt_runtime_us",
        "/sys/devices/system/cpu/cpu1/cpuidle/state1/disable",
        "/proc/sys/kernel/watchdog_cpumask",
        "/proc/irq/default_smp_affinity",
    }
    assert "preempt=full" in plan.kernel_cmdline and "isolcpus=managed_irq,domain,1" in plan.kernel_cmdline
    assert "cpu1/cpuidle/state0" not in " ".join(s.target for s in plan.steps)  # POLL is never disabled


def _managed(tree, irq: int, how: str):
    """Make *irq* one the kernel keeps: read-only smp_affinity (kernel/irq/proc.c) or its debugfs states."""
    if how == "mode":
        tree.path(f"/proc/irq/{irq}/smp_affinity").chmod(0o444)
    else:
        tree.set(
            f"/sys/kernel/debug/irq/irqs/{irq}",
            "handler:  handle_edge_irq\ndstate:   0x33600200\n"
            "            IRQD_ACTIVATED\n            IRQD_AFFINITY_MANAGED\n",
        )
    return tree


@pytest.mark.parametrize("how", ["mode", "debugfs"])
def test_an_irq_the_kernel_keeps_is_reboot_only(good, how):
    good.set(
        "/proc/cmdline",
        "BOOT_IMAGE=/boot/vmlinuz ro isolcpus=domain,3 nohz_full=3 rcu_nocbs=3 irqaffinity=0-2 "
        "processor.max_cstate=1 intel_idle.max_cstate=1 nosmt",
    )
    good.set("/proc/irq/121/smp_affinity", "c")  # nvme0q1 on CPUs 2-3, a managed queue
    plan = plan_tune(RT, str(_managed(good, 121, how)))
    assert plan.steps == []  # no write the kernel would refuse
    assert plan.fixed_irqs == ["IRQ 121 nvme0q1"] and plan.document().to_dict()["reboot_only_irqs"] == [
        "IRQ 121 nvme0q1"
    ]
    assert ("isolcpus=managed_irq,domain,3", "irq.devices") in plan.kernel_params


def test_a_kept_irq_off_the_rt_cpus_or_under_managed_irq_needs_nothing(good):
    plan = plan_tune(RT, str(_managed(good, 121, "mode")))  # isolcpus=managed_irq already, IRQ on CPU 2
    assert plan.steps == [] and plan.fixed_irqs == [] and plan.kernel_params == []


def test_plan_without_a_usable_debugfs_relies_on_moving_the_tasks(good):
    """No debugfs in the kernel (as a locked-down one, the runtime cannot be set): no step, and the
    plan says what it does instead; the check's fix is not repeated as a manual step."""
    good.set("/sys/kernel/debug/sched/fair_server/cpu3/runtime", "50000000").task(900, "MsMpEng", "0-3")
    good.set("/proc/mounts", "proc /proc proc rw 0 0").rm("/sys/kernel/debug").set("/proc/filesystems", "nodev\tproc")
    plan = plan_tune(RT, str(good))
    assert not [s for s in plan.steps if s.check == "kernel.fair_server"] and plan.notes == []
    (note,) = [n for n in plan.skipped if "fair server" in n]
    assert "CONFIG_DEBUG_FS off" in note and "moved off the RT CPUs instead (cores.tasks)" in note
    # a captured tree moves no task, so the check's fix stays a manual one there
    assert "kernel.fair_server" in {c for c, _ in plan.manual}
