"""The Linux backend's machine lock: shared by every user, held only by a living process, named by the kernel."""

from __future__ import annotations

import os
import pwd
from pathlib import Path

import pytest

from softrt.platform.linux.backend import LinuxPlatform

from ...child import call_as, need_root, nobody


@pytest.fixture
def victim(tmp_path):
    f = tmp_path / "victim"
    f.write_text("precious\n")
    return f


@pytest.mark.skipif(os.geteuid() != 0, reason="SCHED_FIFO needs root")
def test_the_holders_real_time_cpu_is_read_from_its_fifo_thread():
    """Issue 32.5: a refused run names the CPU the holder's loop runs on: the affinity of the holder's (or
    its children's) SCHED_FIFO/RR threads. The child here sleeps at FIFO 1 (it never spins)."""
    import subprocess
    import sys
    import time

    from softrt.platform.linux.backend import realtime_cpus

    assert realtime_cpus(os.getpid()) is None  # pytest has no real-time thread, nor a child with one
    cpu = max(os.sched_getaffinity(0))
    code = (
        f"import os, sys, time; os.sched_setaffinity(0, {{{cpu}}}); "
        "os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1)); print(flush=True); time.sleep(30)"
    )
    parent = subprocess.Popen(
        [sys.executable, "-c", f"import subprocess, sys; subprocess.run([sys.executable, '-c', {code!r}])"],
        stdout=subprocess.PIPE,
    )
    try:
        while not any(os.sched_getscheduler(c) == os.SCHED_FIFO for c in _children(parent.pid)):
            assert parent.poll() is None
            time.sleep(0.005)
        assert str(realtime_cpus(parent.pid)) == str(cpu)  # found in its child, as a run's worker is
    finally:
        for pid in [*_children(parent.pid), parent.pid]:
            os.kill(pid, 9)
        parent.wait()


def _children(pid: int) -> list[int]:
    import psutil

    try:
        return [c.pid for c in psutil.Process(pid).children(recursive=True)]
    except psutil.Error:
        return []


def test_the_lock_is_held_until_closed_and_its_holder_named_by_the_kernel(tmp_path):
    plat = LinuxPlatform()
    path = tmp_path / "softrt-rt-loop.lock"
    fd = plat.try_lock(path)
    assert fd is not None
    try:
        assert plat.try_lock(path) is None  # a second holder, even in the same process
        assert plat.try_lock(tmp_path / "other.lock") is not None  # another name is another lock
        holder = plat.lock_holder(path)
        assert holder.startswith(f"{os.getpid()} (user {pwd.getpwuid(os.geteuid()).pw_name}: ")
        command = Path("/proc/self/cmdline").read_bytes().split(b"\0")[0].decode()  # pytest, or its xdist worker
        assert f": {command}" in holder and "since " in holder
    finally:
        os.close(fd)
    assert plat.lock_holder(path) == "?"
    again = plat.try_lock(path)  # released with its fd: nothing is left behind
    assert again is not None
    os.close(again)


@pytest.mark.parametrize("planted", ["symlink", "root_0600", "fifo", "foreign"])
def test_nothing_planted_at_the_lock_path_blocks_the_lock_or_is_touched(tmp_path, victim, planted):
    path = tmp_path / "softrt-rt-loop.lock"
    if planted == "symlink":
        path.symlink_to(victim)
    elif planted == "fifo":
        os.mkfifo(path)
    else:  # a run of an older softrt left a 0600 file, or another user made one first
        path.write_text("4242")
        path.chmod(0o600)
        if planted == "foreign" and os.geteuid() == 0:
            os.chown(path, *nobody())
    fd = LinuxPlatform().try_lock(path)
    assert fd is not None
    os.close(fd)
    assert victim.read_text() == "precious\n" and os.path.lexists(path)


def _hold_lock_as_user(path: str, ready: int, release: int) -> str:
    """In the unprivileged child: take the lock, say so, hold it until told, then release it."""
    plat = LinuxPlatform()
    fd = plat.try_lock(Path(path))
    os.write(ready, b"1" if fd is not None else b"0")
    os.read(release, 1)
    os.close(fd)
    return "released"


def _try_as_user(path: str) -> tuple[bool, str]:
    plat = LinuxPlatform()
    fd = plat.try_lock(Path(path))
    if fd is not None:
        os.close(fd)
    return fd is not None, plat.lock_holder(Path(path))


def test_root_and_other_users_exclude_each_other_and_neither_blocks_the_other_after(tmp_path):
    """Issue 22.5: after a root run a user may run; what a user holds blocks root only while it lives."""
    need_root()
    uid, gid = nobody()
    plat = LinuxPlatform()
    path = tmp_path / "softrt-rt-loop.lock"
    fd = plat.try_lock(path)
    try:
        took, holder = call_as(uid, gid, _try_as_user, str(path))
        assert not took and holder.startswith(f"{os.getpid()} (user root")
    finally:
        os.close(fd)
    took, _ = call_as(uid, gid, _try_as_user, str(path))  # root's run ended: nothing of it stops the user
    assert took

    ready_r, ready_w = os.pipe()
    release_r, release_w = os.pipe()
    import threading

    result = {}
    child = threading.Thread(
        target=lambda: result.update(out=call_as(uid, gid, _hold_lock_as_user, str(path), ready_w, release_r))
    )
    child.start()
    try:
        assert os.read(ready_r, 1) == b"1"
        assert plat.try_lock(path) is None
        assert "(user nobody: " in plat.lock_holder(path)
    finally:
        os.write(release_w, b"x")
        child.join(30)
    assert result["out"] == "released"
    fd = plat.try_lock(path)
    assert fd is not None
    os.close(fd)


def test_process_identity_from_a_captured_proc_tree(tmp_path):
    (tmp_path / "proc/sys/kernel/random").mkdir(parents=True)
    (tmp_path / "proc/sys/kernel/random/boot_id").write_text("b00t\n")
    (tmp_path / "proc/4242").mkdir()
    # comm may hold spaces and parentheses; starttime is field 22
    fields = ["S"] + [str(n) for n in range(4, 22)] + ["987654"] + ["0"] * 30
    (tmp_path / "proc/4242/stat").write_text("4242 (a (b) c) " + " ".join(fields) + "\n")
    from softrt.platform import get_platform

    plat = get_platform()
    assert plat.process_identity(4242, root=str(tmp_path)) == "b00t/4242/987654"
    assert plat.process_identity(4243, root=str(tmp_path)) is None


def test_only_memory_locking_comes_before_the_device_opens():
    """mlockall(2) faults every page in while the process stands still (47-660 ms measured here
    beside other work): before the device opens, so an EtherCAT keep-alive thread between OP and
    the first cycle never pauses past the slaves' 100 ms SM watchdog (it did: SAFEOP+ERR 0x001B).
    What a helper thread would inherit (the RT CPU, SCHED_FIFO) still comes after."""
    controls = LinuxPlatform().worker_controls(1, 80)
    assert [c.what for c in controls if c.before_device] == ["mlockall"]
    assert {"cpu_affinity", "sched_fifo"} <= {c.what for c in controls if not c.before_device}


def test_children_started_in_the_block_start_on_its_cpus():
    """The real-time worker starts on its RT CPU (session.run), and this thread gets its CPUs back."""
    import subprocess
    import sys

    from softrt.cpus import CpuSet

    before = os.sched_getaffinity(0)
    last = max(before)
    with LinuxPlatform().children_start_on(CpuSet([last])):
        child = subprocess.run(
            [sys.executable, "-c", "import os; print(sorted(os.sched_getaffinity(0)))"],
            capture_output=True,
            text=True,
            check=True,
        )
    assert child.stdout.strip() == f"[{last}]"
    assert os.sched_getaffinity(0) == before
