"""tracefs: finding it in /proc/mounts (captured trees), the event list, and on the real kernel:
a private instance, and the sweep of instances (and a mount) that a killed softrt left."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from softrt.cpus import CpuSet
from softrt.trace import tracefs


def _tree(tmp_path, mounts: str, dirs=()):
    (tmp_path / "proc").mkdir(parents=True)
    (tmp_path / "proc/mounts").write_text(mounts)
    for d in dirs:
        (tmp_path / d.lstrip("/")).mkdir(parents=True)
    return str(tmp_path)


def test_find_reads_proc_mounts(tmp_path):
    root = _tree(tmp_path, "sysfs /sys sysfs rw 0 0\nnodev /sys/kernel/tracing tracefs rw 0 0\n",
                 ["/sys/kernel/tracing/instances"])
    assert tracefs.find(root) == tmp_path / "sys/kernel/tracing"


def test_find_prefers_the_standard_mount_point(tmp_path):
    root = _tree(tmp_path, "nodev /tmp/private tracefs rw 0 0\nnodev /sys/kernel/tracing tracefs rw 0 0\n",
                 ["/tmp/private/instances", "/sys/kernel/tracing/instances"])
    assert tracefs.find(root) == tmp_path / "sys/kernel/tracing"


def test_find_falls_back_to_debugfs_and_needs_instances(tmp_path):
    root = _tree(tmp_path, "debugfs /sys/kernel/debug debugfs rw 0 0\n", ["/sys/kernel/debug/tracing/instances"])
    assert tracefs.find(root) == tmp_path / "sys/kernel/debug/tracing"
    assert tracefs.find(_tree(tmp_path / "x", "sysfs /sys sysfs rw 0 0\n")) is None


def test_wanted_events_take_what_the_kernel_has():
    from softrt.trace.session import wanted_events

    available = {"sched:sched_switch", "irq_vectors:local_timer_entry", "irq_vectors:local_timer_exit",
                 "irq_vectors:vector_alloc", "ipi:ipi_send_cpu", "raw_syscalls:sys_enter"}
    wanted = dict(wanted_events(available))
    assert "irq_vectors:local_timer_entry" in wanted and "irq_vectors:vector_alloc" not in wanted
    assert "ipi:ipi_send_cpu" in wanted and wanted["raw_syscalls:sys_enter"] == "worker"
    assert wanted["exceptions:page_fault_user"] == "worker"  # asked for; the session skips what is missing
    assert wanted["sched:sched_wakeup"] == "wakeup" and wanted["sched:sched_switch"] is None  # only the worker's wakeups
    # a sleeping loop's own clock_nanosleep would pay the syscall tracepoint on every wake-up
    assert "raw_syscalls:sys_enter" not in dict(wanted_events(available, "sleep"))
    # a device worker polls its socket with one call after another: the trace would flood
    assert "raw_syscalls:sys_enter" not in dict(wanted_events(available, "spin", "ethercat"))


root_only = pytest.mark.skipif(os.geteuid() != 0, reason="tracefs needs root")


@pytest.fixture
def live_tracefs(state_dir):
    """The real tracefs (mounted for the test if it was not, and unmounted again)."""
    path, mounted = tracefs.find_or_mount()
    yield path
    if mounted is not None:
        mounted.undo()


@root_only
@pytest.mark.root
def test_instance_is_private_mono_on_the_cpu_and_removed(live_tracefs):
    cpu = max(os.sched_getaffinity(0))
    inst = tracefs.Instance.create(live_tracefs, f"softrt-test-{os.getpid()}", CpuSet([cpu]), 256)
    try:
        assert "[mono]" in (inst.path / "trace_clock").read_text()
        assert int((inst.path / "tracing_cpumask").read_text(), 16) == 1 << cpu
        assert int((inst.path / f"per_cpu/cpu{cpu}/buffer_size_kb").read_text().split()[0]) >= 256  # in whole pages
        inst.enable("sched:sched_switch")
        inst.enable("raw_syscalls:sys_enter", "common_pid == 1")
        assert (inst.path / "events/raw_syscalls/sys_enter/filter").read_text().strip() == "common_pid == 1"
        assert "stats" not in inst.stats(cpu) and "overrun" in inst.stats(cpu)
    finally:
        inst.remove()
    assert not inst.path.exists()
    assert (live_tracefs / "tracing_on").exists()  # the global buffer is untouched


@root_only
@pytest.mark.root
def test_sweep_removes_instances_of_dead_softrt_processes_only(live_tracefs):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(dead.stdout)
    orphan = live_tracefs / "instances" / f"softrt-{dead_pid}"
    alive = live_tracefs / "instances" / f"softrt-{os.getpid()}"
    foreign = live_tracefs / "instances" / "not-softrt-1"
    for d in (orphan, alive, foreign):
        d.mkdir()
    try:
        removed = tracefs.sweep_orphans()
        assert f"trace instance softrt-{dead_pid}" in removed
        assert not orphan.exists() and alive.exists() and foreign.exists()
    finally:
        for d in (orphan, alive, foreign):
            tracefs.remove_instance(d)


@root_only
@pytest.mark.root
def test_a_mount_left_by_a_dead_softrt_is_undone(state_dir):
    if tracefs.find() is not None:
        pytest.skip("tracefs is mounted by someone else; the mount path cannot be tested")
    path, mounted = tracefs.find_or_mount()
    assert mounted is not None and tracefs.find() == path
    marker = state_dir / "trace" / f"mounted-{os.getpid()}"
    assert marker.exists()
    marker.rename(marker.with_name("mounted-999999999"))  # as if the process that mounted it was killed
    assert "tracefs mount at /sys/kernel/tracing" in tracefs.sweep_orphans()
    assert tracefs.find() is None and not list((state_dir / "trace").iterdir())
