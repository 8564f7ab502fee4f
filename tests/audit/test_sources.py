"""The readers: kernel formats parsed right, and a missing or garbled source never crashes an audit."""

from __future__ import annotations

import pytest

from softrt.audit import Status, run_checks
from softrt.audit.linux import irqs
from softrt.cpus import CpuSet
from softrt.platform.linux import kfacts, ktasks

from .trees import CAPTURED


def test_cmdline_keeps_quotes_and_drops_init_arguments(good):
    good.set("/proc/cmdline", 'root=/dev/sda1 isolcpus=2 acpi_osi="Windows 2015" isolcpus=3 quiet -- --init-flag')
    params = kfacts.cmdline(str(good))
    assert params["isolcpus"] == "3"  # the last one wins
    assert params["acpi_osi"] == "Windows 2015"
    assert params["quiet"] == ""
    assert "--init-flag" not in params


@pytest.mark.parametrize(
    "value,cpus,flags",
    [
        ("3", "3", ("domain",)),
        ("managed_irq,domain,2-3", "2-3", ("managed_irq", "domain")),
        ("nohz,1,3-4", "1,3-4", ("nohz",)),
        ("domain,garbage", "", ("domain",)),
    ],
)
def test_parse_isolcpus(value, cpus, flags):
    got_cpus, got_flags = kfacts.parse_isolcpus(value)
    assert got_cpus == CpuSet.parse(cpus) and got_flags == flags


def test_stat_with_parentheses_and_spaces_in_comm(good):
    good.task(800, "a) (b c", "0-3", policy=1, rt_priority=50, processor=2)
    task = ktasks.read_task(str(good), 800, 800)
    assert (task.comm, task.policy_name, task.rt_priority, task.processor) == ("a) (b c", "SCHED_FIFO", 50, 2)
    assert task.allowed == CpuSet.parse("0-3") and not task.kthread and task.movable


def test_thread_of_another_process_reports_its_process_id(good):
    task = ktasks.read_task(str(good), 501, 501) or ktasks.read_task(str(good), 500, 501)
    assert task.pid == 500 and task.tid == 501


def test_interrupts_table_and_nic_detection_on_the_captured_vm():
    table = irqs.interrupts_table(str(CAPTURED))
    counts, description = table["38"]
    assert set(counts) == {0, 1} and "virtio2-input.0" in description
    assert "LOC" in table
    nic = irqs.nic_irqs(str(CAPTURED))
    assert {n for n, name in nic.items() if name == "eth0"} == {37, 38, 39}  # the virtio-net PCI function


def test_selected_word():
    assert kfacts.selected_word("always [madvise] never") == "madvise"
    assert kfacts.selected_word("performance") == "performance"
    assert kfacts.selected_word(None) is None


def test_an_empty_root_gives_reasons_not_crashes(tmp_path):
    (tmp_path / "sys/devices/system/cpu").mkdir(parents=True)
    (tmp_path / "sys/devices/system/cpu/online").write_text("0-1\n")
    report = run_checks(CpuSet([1]), str(tmp_path), sample_s=0)
    assert len(report.findings) == 30
    na = [f for f in report.findings if f.status is Status.NA]
    assert len(na) >= 20
    assert all(f.summary for f in na)


GARBAGE = [
    "/proc/cmdline",
    "/proc/interrupts",
    "/proc/irq/120/smp_affinity",
    "/proc/irq/default_smp_affinity",
    "/proc/sys/kernel/sched_rt_runtime_us",
    "/proc/sys/kernel/watchdog_cpumask",
    "/proc/sys/kernel/osrelease",
    "/sys/devices/system/cpu/isolated",
    "/sys/devices/system/cpu/cpu3/cpuidle/state2/latency",
    "/sys/devices/system/cpu/nohz_full",
    "/proc/500/task/500/stat",
    "/proc/500/task/500/status",
    "/sys/devices/virtual/workqueue/cpumask",
    "/proc/swaps",
    "/sys/kernel/mm/transparent_hugepage/enabled",
    "/sys/devices/system/cpu/cpu3/topology/core_cpus_list",
    "/dev/cpu_dma_latency",
    "/proc/self/status",
]


@pytest.mark.parametrize("rel", GARBAGE)
def test_garbage_in_any_file_never_crashes(good, rel):
    good.set(rel, "\x00zz (( ]] -1-\n")
    report = run_checks(CpuSet([3]), str(good), sample_s=0)
    assert len(report.findings) == 30


def test_unreadable_file_gives_a_reason(good):
    good.rm("/proc/sys/kernel/sched_rt_runtime_us")
    good.path("/proc/sys/kernel/sched_rt_runtime_us").mkdir()  # read() fails with EISDIR
    f = next(f for f in run_checks(CpuSet([3]), str(good), sample_s=0).findings if f.id == "kernel.rt_throttling")
    assert f.status is Status.NA and "unreadable" in f.summary


def test_lineage_follows_the_parents_up_to_init_and_survives_a_loop(good):
    good.task(700, "sshd", "0-3").task(800, "bash", "0-3").task(900, "softrt", "0-3")

    def parent(pid, ppid):
        good.set(f"/proc/{pid}/stat", good.read(f"/proc/{pid}/stat").replace(") S 1 ", f") S {ppid} ", 1))

    parent(800, 700)
    parent(900, 800)
    assert ktasks.lineage(str(good), 900) == [900, 800, 700]  # init (pid 1) left out
    parent(700, 900)  # a loop, as only a crafted tree has
    assert ktasks.lineage(str(good), 900) == [900, 800, 700]
    assert ktasks.lineage(str(good), 4242) == [4242]  # gone: itself only
