"""The fair server's reader off Linux: Windows' Python has no ``os.geteuid``, and under Wine "/" is
the Linux host's, whose /proc/version says 6.18 (issue 19: `softrt run` must not crash on Windows)."""

from __future__ import annotations

import os
import sys

from softrt.platform.linux import fairserver


def test_this_machine_off_linux_has_no_fair_server(monkeypatch):
    monkeypatch.setattr(sys, "platform", "win32")
    monkeypatch.delattr(os, "geteuid", raising=False)
    assert fairserver.read("/", [1]).present is False


def test_a_linux_tree_is_read_without_geteuid(tmp_path, monkeypatch):
    """A captured Linux tree (check --root on Windows) still says what it can: not mounted, no root."""
    (tmp_path / "proc/sys/kernel").mkdir(parents=True)
    (tmp_path / "proc/sys/kernel/osrelease").write_text("6.18.0\n")
    (tmp_path / "proc/filesystems").write_text("nodev\tdebugfs\n")
    (tmp_path / "proc/mounts").write_text("proc /proc proc rw 0 0\n")
    monkeypatch.setattr(sys, "platform", "win32")
    monkeypatch.delattr(os, "geteuid", raising=False)
    fair = fairserver.read(str(tmp_path), [1])
    assert fair.present and fair.runtime_ns == {} and fair.debugfs == "not mounted"
    assert "debugfs is not mounted" in fair.unreadable
