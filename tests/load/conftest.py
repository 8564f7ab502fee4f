"""Shared helpers for the load tests: CPU 0 for loads (CPU 1 is the RT CPU), leftover checks."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import psutil
import pytest

from softrt.cpus import CpuSet
from softrt.platform import procs

LOAD_CPU = 0

needs_stress_ng = pytest.mark.skipif(shutil.which("stress-ng") is None, reason="stress-ng is not installed")
needs_ffmpeg = pytest.mark.skipif(shutil.which("ffmpeg") is None, reason="ffmpeg is not installed")


@pytest.fixture(autouse=True)
def no_private_dir_leaks(monkeypatch):
    """Every private directory a load makes (also in /tmp or /var/tmp) is gone after the test.

    The real make_private_dir runs; the wrapper only records its paths, so loads started by other
    programs on this machine at the same time do not disturb the check.
    """
    made: list[Path] = []
    real = procs.make_private_dir

    def recording(*args, **kwargs):
        path = real(*args, **kwargs)
        made.append(path)
        return path

    monkeypatch.setattr(procs, "make_private_dir", recording)
    yield made
    assert [p for p in made if p.exists()] == []


@pytest.fixture
def load_cpus() -> CpuSet:
    if LOAD_CPU not in os.sched_getaffinity(0):
        pytest.skip(f"CPU {LOAD_CPU} is not available to this process")
    return CpuSet([LOAD_CPU])


_BEFORE: set[psutil.Process] = set()  # below the test process when the test started (pid and start time)


@pytest.fixture(autouse=True)
def _descendants_before():
    """Processes below the test process before the test began are not the test's.

    E.g. multiprocessing's resource tracker, which an earlier test in the same pytest process
    (a pytest-xdist worker runs many) started, and which lives as long as that process.
    """
    _BEFORE.clear()
    _BEFORE.update(_below())
    yield


def _below() -> list[psutil.Process]:
    for _ in range(5):
        try:  # a child may exit while psutil walks the tree; walk again
            return [p for p in psutil.Process().children(recursive=True) if _running(p)]
        except psutil.NoSuchProcess:
            time.sleep(0.05)
    return [p for p in psutil.Process().children(recursive=True) if _running(p)]


def descendants() -> list[psutil.Process]:
    """Every living process below the test process that the test started."""
    return [p for p in _below() if p not in _BEFORE]


def _running(p: psutil.Process) -> bool:
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def wait_gone(procs: list[psutil.Process], timeout_s: float = 5.0) -> list[psutil.Process]:
    """Return the processes of *procs* still running after *timeout_s*."""
    deadline = time.monotonic() + timeout_s
    left = [p for p in procs if _running(p)]
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = [p for p in left if _running(p)]
    return left


def processes_in_sessions(session_ids: set[int]) -> list[psutil.Process]:
    """Living processes (anywhere, also orphans adopted by init) in the given sessions."""
    found = []
    for p in psutil.process_iter():
        try:
            if os.getsid(p.pid) in session_ids and _running(p):
                found.append(p)
        except (ProcessLookupError, PermissionError, psutil.NoSuchProcess):
            continue
    return found


def assert_nothing_left(snapshot: list[psutil.Process], sessions: set[int], workdir: Path | None = None) -> None:
    """No process the load made, no descendant, no process in its sessions, no file."""
    still = [p for p in snapshot if _running(p)]
    assert not still, f"load processes still running: {still}"
    assert not descendants(), f"descendants left: {descendants()}"
    assert not processes_in_sessions(sessions), "processes left in the loads' sessions"
    if workdir is not None:
        assert list(workdir.iterdir()) == [], f"files left in {workdir}: {list(workdir.rglob('*'))}"
