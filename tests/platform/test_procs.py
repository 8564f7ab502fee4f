"""platform.procs helpers on their failure paths: a chown that fails, a leader that never reaps."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from pathlib import Path

import pytest

from softrt.platform import procs


def test_private_dir_is_removed_when_chown_fails(monkeypatch, tmp_path):
    made: list[Path] = []
    real_mkdtemp = procs.tempfile.mkdtemp

    def recording_mkdtemp(*args, **kwargs):
        made.append(Path(real_mkdtemp(*args, **kwargs)))
        return str(made[-1])

    def refused(path, uid, gid):
        raise PermissionError(1, "Operation not permitted", str(path))

    monkeypatch.setattr(procs.tempfile, "mkdtemp", recording_mkdtemp)
    monkeypatch.setattr(procs.os, "chown", refused)
    with pytest.raises(PermissionError):
        procs.make_private_dir(None, owner_uid=65534)
    assert len(made) == 1 and made[0].name.startswith("softrt-load-")
    assert not made[0].exists()


class _NeverReaps:
    """A leader whose wait() always times out (stuck in the kernel), around a real process group."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode = None
        self.stdin = None  # as a Popen without stdin=PIPE

    def poll(self):
        return None

    def send_signal(self, sig):
        pass

    def wait(self, timeout=None):
        raise subprocess.TimeoutExpired("stuck", timeout)


def test_terminate_cleans_the_group_even_if_wait_times_out_after_sigkill():
    member = subprocess.Popen(["sleep", "60"], start_new_session=True)
    reaper = threading.Thread(target=member.wait, daemon=True)  # reaped at once: no zombie in the group
    reaper.start()
    try:
        assert procs.terminate(_NeverReaps(member.pid), grace_s=0.01) is None
        reaper.join(5)
        assert member.returncode in (-signal.SIGTERM, -signal.SIGKILL)
        assert not procs._group_exists(member.pid)
    finally:
        if member.poll() is None:
            os.killpg(member.pid, signal.SIGKILL)
            member.wait()
