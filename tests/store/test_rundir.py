"""The writing side of a run directory on a disk that fills up (a real, small tmpfs)."""

from __future__ import annotations

import os
import subprocess

import numpy as np
import pyarrow.parquet as pq
import pytest

from softrt.errors import ConfigError
from softrt.ipc.layout import RECORD_DTYPE
from softrt.store.rundir import RunDir

pytestmark = [pytest.mark.root, pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")]


@pytest.fixture
def tmpfs(tmp_path):
    mnt = tmp_path / "tmpfs"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mnt)], check=True)
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def _fill(mnt) -> None:
    fd = os.open(mnt / "filler", os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        for size in (65536, 1):
            try:
                while True:
                    os.write(fd, b"\xff" * size)
            except OSError:
                pass
    finally:
        os.close(fd)


def _chunk(start: int, n: int) -> np.ndarray:
    rec = np.zeros(n, dtype=RECORD_DTYPE)
    rec["seq"] = rec["cycle"] = np.arange(start, start + n)
    rec["detect_ns"] = rec["seq"] * 250_000 + np.random.default_rng(start).integers(0, 50_000, n)
    return rec


def test_a_full_disk_keeps_what_was_written_readable_and_counts_the_rest(tmpfs):
    rundir = RunDir(tmpfs, "run")
    _fill(tmpfs)
    for k in range(4):
        rundir.append(_chunk(k * 16384, 16384))
    rundir.close()
    assert rundir.failure.startswith("disk full at cycle")
    assert rundir.rows > 0 and rundir.rows + rundir.unwritten == 4 * 16384
    table = pq.read_table(rundir.path / "samples.parquet")
    assert table.num_rows == rundir.rows
    assert table.column("seq").to_pylist() == list(range(rundir.rows))
    rundir.write_json("summary.json", {"ok": True})  # the reserve left room for the results
    assert sorted(p.name for p in rundir.path.iterdir()) == ["samples.parquet", "summary.json"]


def test_the_space_check_refuses_with_the_figures(tmpfs):
    from softrt.store.rundir import check_space

    check_space(tmpfs / "runs", 1000)  # a 1,000-cycle run fits in 4 MB
    _fill(tmpfs)
    with pytest.raises(ConfigError, match=r"needs ~[\d.]+ MB in .*runs, 0\.0 MB free"):
        check_space(tmpfs / "runs", 1000)


def test_a_full_disk_in_a_late_run_keeps_both_files_readable_and_counts_the_rest(tmpfs):
    from softrt.store.late import read_aggregates

    rundir = RunDir(tmpfs, "run", samples="late", period_ns=250_000, late_threshold_ns=20_000)
    _fill(tmpfs)
    for k in range(4):
        chunk = _chunk(k * 16384, 16384)
        chunk["edge_ns"] = chunk["detect_ns"] - 30_000  # every permit seen late: every record is kept
        rundir.append(chunk)
    rundir.close()
    assert rundir.failure.startswith("disk full at cycle")
    assert rundir.rows > 0 and rundir.rows + rundir.unwritten == 4 * 16384
    assert pq.read_table(rundir.path / "samples.parquet").column("seq").to_pylist() == list(range(rundir.rows))
    cols, _ = read_aggregates(rundir.path)  # its last rows are written at the close, after the reserve went
    assert int(cols["records"].sum()) >= rundir.rows
