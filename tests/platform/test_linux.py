"""The Linux backend's machine lock: never follows a planted link, never truncates another's file."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

from softrt.errors import SoftRTError
from softrt.platform.linux import LinuxPlatform


@pytest.fixture
def victim(tmp_path):
    f = tmp_path / "victim"
    f.write_text("precious\n")
    return f


def test_the_lock_is_taken_and_holds_our_pid(tmp_path):
    plat = LinuxPlatform()
    path = tmp_path / "softrt-rt-loop.lock"
    fd = plat.try_lock(path)
    try:
        assert fd is not None and path.read_text() == str(os.getpid())
        assert oct(path.stat().st_mode & 0o777) == oct(0o644)  # users take root's read-only
        assert plat.try_lock(path) is None  # a second holder (flock is per open file description)
        assert plat.lock_holder(path) == str(os.getpid())
    finally:
        os.close(fd)


def test_the_lock_holder_is_never_read_through_a_link(tmp_path, victim):
    path = tmp_path / "softrt-rt-loop.lock"
    path.symlink_to(victim)
    assert LinuxPlatform().lock_holder(path) == "?"
    (tmp_path / "garbage.lock").write_text("\x1b[2J not a pid")
    assert LinuxPlatform().lock_holder(tmp_path / "garbage.lock") == "?"


def test_a_planted_lock_symlink_is_refused_and_its_target_untouched(tmp_path, victim):
    path = tmp_path / "softrt-rt-loop.lock"
    path.symlink_to(victim)
    with pytest.raises(SoftRTError, match="symlink") as info:
        LinuxPlatform().try_lock(path)
    assert victim.read_text() == "precious\n"
    assert f"rm {path}" in str(info.value)


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root")
def test_a_lock_file_owned_by_another_user_is_only_locked_never_written(tmp_path):
    """A user's run made the lock first: root's run shares it (it was refused) and writes nothing through it."""
    path = tmp_path / "softrt-rt-loop.lock"
    path.write_text("someone else's\n")
    os.chown(path, 65534, 65534)
    fd = LinuxPlatform().try_lock(path)
    try:
        assert fd is not None and LinuxPlatform().try_lock(path) is None
    finally:
        os.close(fd)
    assert path.read_text() == "someone else's\n" and oct(path.stat().st_mode & 0o777) == oct(0o644)


def _as_user(uid: int, action) -> int:
    """Run *action* in a child process that has become *uid*; return its exit status."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 99
        try:
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
            code = action()
        finally:
            os._exit(code)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


@pytest.mark.skipif(os.geteuid() != 0, reason="becoming another user needs root")
def test_a_user_shares_roots_lock_read_only():
    """After root's first run a user's run takes the same lock (it used to fail: permission denied)."""
    with tempfile.TemporaryDirectory() as where:  # pytest's tmp_path is root's alone
        os.chmod(where, 0o755)
        _share(Path(where) / "softrt-rt-loop.lock")


def _share(path: Path) -> None:
    plat = LinuxPlatform()
    os.close(plat.try_lock(path))  # root ran once: the file stays

    def user_takes_it() -> int:
        fd = plat.try_lock(path)
        return 0 if fd is not None and path.read_text() == str(os.getppid()) else 1

    assert _as_user(65534, user_takes_it) == 0  # root's pid is left in it, untouched
    fd = plat.try_lock(path)
    try:
        assert _as_user(65534, lambda: 0 if plat.try_lock(path) is None else 1) == 0  # held by root: refused
    finally:
        os.close(fd)


def test_a_lock_path_that_is_a_hard_link_is_refused(tmp_path, victim):
    path = tmp_path / "softrt-rt-loop.lock"
    os.link(victim, path)
    with pytest.raises(SoftRTError, match="link"):
        LinuxPlatform().try_lock(path)
    assert victim.read_text() == "precious\n"


@pytest.mark.rt
def test_a_run_with_a_planted_lock_symlink_is_refused_with_one_line(tmp_path, state_dir, victim, softrt_cmd):
    state_dir.mkdir(parents=True)
    (state_dir / "rt-loop.lock").symlink_to(victim)
    proc = softrt_cmd("run", "--duration", "0.3s", "--out-dir", str(tmp_path / "runs"))
    assert proc.returncode != 0 and proc.stdout == ""
    assert proc.stderr.startswith("softrt: error: ") and proc.stderr.count("\n") == 1 and "symlink" in proc.stderr
    assert victim.read_text() == "precious\n"


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
