"""tracefs: finding it in /proc/mounts (captured trees), the event list, and on the real kernel:
a private instance, and the sweep of instances (and a mount) that a killed softrt left."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import types

import pytest

from softrt.cpus import CpuSet
from softrt.errors import ConfigError
from softrt.trace import tracefs


def _tree(tmp_path, mounts: str, dirs=()):
    (tmp_path / "proc").mkdir(parents=True)
    (tmp_path / "proc/mounts").write_text(mounts)
    for d in dirs:
        (tmp_path / d.lstrip("/")).mkdir(parents=True)
    return str(tmp_path)


def test_find_reads_proc_mounts(tmp_path):
    root = _tree(
        tmp_path,
        "sysfs /sys sysfs rw 0 0\nnodev /sys/kernel/tracing tracefs rw 0 0\n",
        ["/sys/kernel/tracing/instances"],
    )
    assert tracefs.find(root) == tmp_path / "sys/kernel/tracing"


def test_find_prefers_the_standard_mount_point(tmp_path):
    root = _tree(
        tmp_path,
        "nodev /tmp/private tracefs rw 0 0\nnodev /sys/kernel/tracing tracefs rw 0 0\n",
        ["/tmp/private/instances", "/sys/kernel/tracing/instances"],
    )
    assert tracefs.find(root) == tmp_path / "sys/kernel/tracing"


def test_find_falls_back_to_debugfs_and_needs_instances(tmp_path):
    root = _tree(tmp_path, "debugfs /sys/kernel/debug debugfs rw 0 0\n", ["/sys/kernel/debug/tracing/instances"])
    assert tracefs.find(root) == tmp_path / "sys/kernel/debug/tracing"
    assert tracefs.find(_tree(tmp_path / "x", "sysfs /sys sysfs rw 0 0\n")) is None


def test_wanted_events_take_what_the_kernel_has():
    from softrt.trace.session import wanted_events

    available = {
        "sched:sched_switch",
        "irq_vectors:local_timer_entry",
        "irq_vectors:local_timer_exit",
        "irq_vectors:vector_alloc",
        "ipi:ipi_send_cpu",
        "raw_syscalls:sys_enter",
    }
    wanted = dict(wanted_events(available))
    assert "irq_vectors:local_timer_entry" in wanted and "irq_vectors:vector_alloc" not in wanted
    assert "ipi:ipi_send_cpu" in wanted and wanted["raw_syscalls:sys_enter"] == "worker"
    assert wanted["exceptions:page_fault_user"] == "worker"  # asked for; the session skips what is missing
    assert (
        wanted["sched:sched_wakeup"] == "wakeup" and wanted["sched:sched_switch"] is None
    )  # only the worker's wakeups
    # a sleeping loop's own clock_nanosleep would pay the syscall tracepoint on every wake-up
    assert "raw_syscalls:sys_enter" not in dict(wanted_events(available, "sleep"))
    # a device worker polls its socket with one call after another: the trace would flood
    assert "raw_syscalls:sys_enter" not in dict(wanted_events(available, "spin", "ethercat"))
    # the lean trace: the wake-up path records only the switch (LEAN_LEFT_OUT); the rest is kept
    lean = dict(wanted_events(available, "sleep", "virtual", "lean"))
    assert not {"sched:sched_wakeup", "irq_vectors:local_timer_entry", "irq_vectors:local_timer_exit"} & set(lean)
    assert {"sched:sched_switch", "irq:irq_handler_entry", "ipi:ipi_send_cpu"} <= set(lean)


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


def _dead_process_makes(state_dir, code: str) -> None:
    """Run *code* (with ``tracefs`` and ``CpuSet`` imported) in a process that then dies without cleaning up."""
    subprocess.run(
        [
            sys.executable,
            "-c",
            "import os\nfrom softrt.cpus import CpuSet\nfrom softrt.trace import tracefs\n" + code + "\nos._exit(0)",
        ],
        check=True,
        env={**os.environ, "SOFTRT_STATE_DIR": str(state_dir)},
    )


@root_only
@pytest.mark.root
def test_sweep_removes_only_what_a_dead_softrt_marked_as_its_own(live_tracefs, state_dir):
    """Issue 22.4: an instance named softrt-<dead pid> is not softrt's by its name alone."""
    _dead_process_makes(
        state_dir,
        "tracefs.Instance.create(tracefs.find(), f'softrt-{os.getpid()}', CpuSet([0]), 16)\nprint(os.getpid())",
    )
    (marker,) = (state_dir / "trace").glob("instance-softrt-*.json")
    orphan = live_tracefs / "instances" / marker.name.removeprefix("instance-").removesuffix(".json")
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    foreign = live_tracefs / "instances" / f"softrt-{int(dead.stdout)}"  # someone else's, named like ours
    alive = tracefs.Instance.create(live_tracefs, f"softrt-test-{os.getpid()}", CpuSet([0]), 16)
    foreign.mkdir()
    try:
        assert orphan.is_dir()
        removed = tracefs.sweep_orphans()
        assert removed == [f"trace instance {orphan.name}"]
        assert not orphan.exists() and not marker.exists()
        assert foreign.is_dir() and alive.path.is_dir() and alive.marker.exists()
    finally:
        tracefs.remove_instance(foreign)
        alive.remove()
    assert not alive.marker.exists()


@root_only
@pytest.mark.root
@pytest.mark.parametrize("forged", ["legacy", "other_mount_point", "another_users"])
def test_a_marker_softrt_did_not_write_never_unmounts_anything(tmp_path, state_dir, forged):
    """Issue 22.4: a marker naming a tmpfs made root unmount it (and lose its files)."""
    from softrt.platform.linux.mounts import mount, umount

    target = tmp_path / "precious"
    target.mkdir()
    mount("tmpfs", str(target), "tmpfs")
    try:
        (target / "data").write_text("kept\n")
        markers = state_dir / "trace"
        markers.mkdir(parents=True, mode=0o700)
        state_dir.chmod(0o700)
        boot = open("/proc/sys/kernel/random/boot_id").read().strip()
        if forged == "legacy":  # what softrt used to write, naming any path
            (markers / "mounted-999999999").write_text(str(target))
        else:
            (markers / "mount-999999999.json").write_text(
                json.dumps(
                    {
                        "format": "softrt-trace-marker",
                        "version": 1,
                        "kind": "mount",
                        "what": str(target),
                        "identity": f"{boot}/999999999/1",
                    }
                )
            )
        if forged == "another_users":
            os.chown(state_dir, 65534, 65534)
            with pytest.raises(ConfigError, match="belongs to uid 65534"):
                tracefs.sweep_orphans()
        else:
            (said,) = tracefs.sweep_orphans()
            assert "which softrt did not write (nothing it names was touched; set aside as" in said
            assert list(markers.glob("m*")) == [] and len(list((markers / "failed").iterdir())) == 2
        assert (target / "data").read_text() == "kept\n"
    finally:
        umount(str(target))


@root_only
@pytest.mark.root
def test_an_instance_that_cannot_be_removed_stops_tracing_and_the_run_says_so(live_tracefs, state_dir, monkeypatch):
    """Issue 22.6: its rmdir failed (a reader held it) and it went on tracing, silently."""
    from softrt.trace.session import TraceSession

    monkeypatch.setattr(tracefs, "REMOVE_TRIES", 3)
    session = TraceSession(types.SimpleNamespace(trace=True))
    session.instance = inst = tracefs.Instance.create(live_tracefs, f"softrt-test-{os.getpid()}", CpuSet([0]), 16)
    inst.enable("raw_syscalls:sys_enter", "common_pid == 1")
    inst.write("tracing_on", "1")
    reader = open(inst.path / "trace_pipe", "rb", buffering=0)  # someone reading it: rmdir gives EBUSY
    try:
        session.close()
        assert inst.path.is_dir() and inst.marker.exists()
        assert (inst.path / "tracing_on").read_text().strip() == "0"
        assert (inst.path / "events/raw_syscalls/sys_enter/enable").read_text().strip() == "0"
        (change,) = session.system_changes()
        assert change.restored is False and change.path == str(inst.path)
        assert change.note.startswith(
            f"trace instance {inst.path} could not be removed (busy: a reader still holds "
            f"it open); its tracing and events are off; remove it by hand: rmdir "
        )
    finally:
        reader.close()
    assert tracefs.sweep_orphans() == []  # its process (this one) is alive: the next command's to remove
    assert inst.remove() and not inst.marker.exists()


@root_only
@pytest.mark.root
def test_a_mount_left_by_a_dead_softrt_is_undone(state_dir):
    if tracefs.find() is not None:
        pytest.skip("tracefs is mounted by someone else; the mount path cannot be tested")
    _dead_process_makes(state_dir, "tracefs.find_or_mount()")
    assert tracefs.find() is not None and len(list((state_dir / "trace").glob("mount-*.json"))) == 1
    assert tracefs.sweep_orphans() == ["tracefs mount at /sys/kernel/tracing"]
    assert tracefs.find() is None and not list((state_dir / "trace").iterdir())
