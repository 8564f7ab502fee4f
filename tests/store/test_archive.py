"""store.archive: each run folder copied once, immutable, under rig=<id>/date=<day>/<run id>/."""

from __future__ import annotations

import os
import stat
import subprocess
import sys

import pytest

from softrt.errors import ConfigError
from softrt.store.archive import _host, archive_root, archive_run

from ..synthetic import write_synthetic_run


@pytest.fixture
def run(tmp_path):
    return write_synthetic_run(tmp_path / "runs", cycles=200, run_id="20261130-235959-rig-00aa")


def test_a_run_is_copied_once_read_only_under_its_rig_and_utc_day(run, tmp_path):
    root = tmp_path / "archive"
    copy = archive_run(run, root, run.name, "2026-12-01T00:30:00+01:00", rig="c49e52cc6fcd360d")
    assert copy == root / "rig=c49e52cc6fcd360d" / "date=2026-11-30" / run.name  # the day in UTC
    assert sorted(p.name for p in copy.iterdir()) == sorted(p.name for p in run.iterdir())
    assert all((copy / p.name).read_bytes() == p.read_bytes() for p in run.iterdir() if p.is_file())
    assert all(
        not (p.stat().st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH)) for p in copy.iterdir() if p.is_file()
    )
    before = {p.name: (p.stat().st_ino, p.stat().st_mtime_ns) for p in copy.iterdir()}
    (run / "summary.json").write_text((run / "summary.json").read_text().replace("synthetic", "changed"))
    assert archive_run(run, root, run.name, "2026-12-01T00:30:00+01:00", rig="c49e52cc6fcd360d") == copy
    assert {p.name: (p.stat().st_ino, p.stat().st_mtime_ns) for p in copy.iterdir()} == before  # never rewritten


def test_a_copy_left_by_a_killed_softrt_is_removed_and_a_live_ones_kept(run, tmp_path):
    root = tmp_path / "archive"
    day = root / "rig=r" / "date=2026-11-30"
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    ).stdout.strip()
    stale, live = (day / f".{run.name}.{_host()}.{pid}.0a0b{'.tmp'}" for pid in (dead, os.getppid()))
    for d in (stale, live):
        (d / "sub").mkdir(parents=True)
    copy = archive_run(run, root, run.name, "2026-11-30T08:00:00Z", rig="r")
    assert not stale.exists() and live.exists() and (copy / "summary.json").is_file()


def test_bad_archives_and_run_ids_are_refused(run, tmp_path, monkeypatch):
    with pytest.raises(ConfigError, match="cannot name a folder"):
        archive_run(run, tmp_path / "a", "../escape", None, rig="r")
    with pytest.raises(ConfigError, match="not to s3://") as err:
        archive_root("s3://lab-bucket/softrt")
    assert "mount" in str(err.value)
    assert archive_root(None) is None
    monkeypatch.setenv("SOFTRT_ARCHIVE", str(tmp_path / "shared"))
    assert archive_root(None) == tmp_path / "shared"
