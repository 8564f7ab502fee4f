"""Fixtures of the command-line tests."""

import signal
import time
from types import SimpleNamespace

import psutil
import pytest


@pytest.fixture
def home(softrt_home, monkeypatch):
    """The test's softrt data directory, with a terminal wide enough for every table column."""
    monkeypatch.setenv("COLUMNS", "160")
    return softrt_home


def _worker_started(pid: int) -> bool:
    """True once *pid* has spawned a run's worker (other children, e.g. ldconfig or loads, do not count)."""
    for child in psutil.Process(pid).children():
        try:
            if any("spawn_main" in part for part in child.cmdline()):
                return True
        except psutil.Error:
            pass
    return False


def _sigint_burst(proc, n: int = 20, interval_s: float = 0.05) -> None:
    """Send *n* SIGINTs to *proc*, *interval_s* apart (Ctrl-C held down), until it exits."""
    for _ in range(n):
        if proc.poll() is not None:
            return
        proc.send_signal(signal.SIGINT)
        time.sleep(interval_s)


def wait_dead(process: psutil.Process, timeout_s: float = 10.0) -> None:
    """Wait until *process* (not our child: a killed supervisor's worker) has died.

    Dead is a zombie too: psutil's ``wait()`` waits for its reaping by init, which here took ~1.6 s.
    """
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        try:
            if process.status() == psutil.STATUS_ZOMBIE:
                return
        except psutil.NoSuchProcess:
            return
        time.sleep(0.01)
    raise AssertionError(f"pid {process.pid} still runs after {timeout_s:g} s")


def _wait_for(condition, timeout_s: float = 60.0) -> None:
    """Poll *condition* until it is true; fail the test after *timeout_s*."""
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if condition():
            return
        time.sleep(0.02)
    raise AssertionError("timed out")


@pytest.fixture
def interrupts():
    """Helpers of the Ctrl-C tests: ``wait_for(condition)``, ``worker_started(pid)``, ``sigint_burst(proc)``."""
    return SimpleNamespace(wait_for=_wait_for, worker_started=_worker_started, sigint_burst=_sigint_burst)
