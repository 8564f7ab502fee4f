"""A run directory where os has no posix_fallocate (Windows' Python): the reserve still holds
its bytes, and an error that is not a disk error leaves no run directory behind (issue 19)."""

from __future__ import annotations

import os
import stat

import pytest

import softrt.platform as platform
from softrt.store import rundir as rundir_mod
from softrt.store.rundir import RESERVE, RunDir, reserve_bytes


def test_reserve_without_posix_fallocate(tmp_path, monkeypatch):
    monkeypatch.setattr(platform, "IS_WINDOWS", True)
    monkeypatch.delattr(os, "posix_fallocate", raising=False)  # as on Windows (where it is absent already)
    run = RunDir(tmp_path, "r1", expected_rows=1000)
    try:
        assert (run.path / RESERVE).stat().st_size == reserve_bytes(1000)
    finally:
        run.discard()


def test_non_oserror_leaves_no_run_directory(tmp_path, monkeypatch):
    def broken(fd, nbytes):
        raise AttributeError("module 'os' has no attribute 'posix_fallocate'")

    monkeypatch.setattr(rundir_mod, "preallocate", broken)
    with pytest.raises(AttributeError):
        RunDir(tmp_path, "r2", expected_rows=10)
    assert not (tmp_path / "r2").exists()


def test_a_run_directory_is_never_writable_by_others_whatever_the_umask(tmp_path):
    """Issue 32: no other user may plant a link among a run's files (aggregates.parquet is opened by name)."""
    old = os.umask(0)
    try:
        run = RunDir(tmp_path, "r-umask", expected_rows=10)
    finally:
        os.umask(old)
    try:
        assert stat.S_IMODE(run.path.stat().st_mode) & 0o022 == 0
    finally:
        run.discard()
