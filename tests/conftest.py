"""Shared test helpers: a softrt command runner, the RT-loop fixtures, and the machine's state.

The suite passes whatever state the machine is in: tuned (``softrt tune --apply``, RT throttling
already off) or not, and while another softrt run holds the RT CPU. Tests that run a real-time
loop or change the system (markers ``rt`` and ``root``) first take the machine's real-time lock,
the one ``softrt run`` and ``softrt tune`` take, waiting for a run in progress to end
(``SOFTRT_TEST_LOCK_WAIT``, 120 s) and skipping with the reason when it does not; their own runs
use a lock of their own (``SOFTRT_STATE_DIR``), so they never refuse each other.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

RT_RUNTIME = Path("/proc/sys/kernel/sched_rt_runtime_us")
RT_RUNTIME_DEFAULT = "950000"  # the kernel's default (Documentation/scheduler/sched-rt-group.rst)
LOCK_WAIT_S = float(os.environ.get("SOFTRT_TEST_LOCK_WAIT", "120"))
_lock_waits = {"timed_out": False}  # after one wait in vain, later tests skip at once


def _real_lock_path() -> Path:
    """The machine's real-time lock as softrt run takes it (never a test's SOFTRT_STATE_DIR one)."""
    from softrt.platform import get_platform

    saved = os.environ.pop("SOFTRT_STATE_DIR", None)
    try:
        return get_platform().machine_lock_path("rt-loop")
    finally:
        if saved is not None:
            os.environ["SOFTRT_STATE_DIR"] = saved


@pytest.fixture(autouse=True)
def machine_lock(request, tmp_path, monkeypatch):
    """Hold the machine's real-time lock during a test that runs a real-time loop or changes the system."""
    if request.node.get_closest_marker("rt") is None and request.node.get_closest_marker("root") is None:
        yield None
        return
    from softrt.errors import SoftRTError
    from softrt.platform import get_platform

    plat, path = get_platform(), _real_lock_path()
    end = time.monotonic() + (0 if _lock_waits["timed_out"] else LOCK_WAIT_S)
    try:
        while (fd := plat.try_lock(path)) is None and time.monotonic() < end:
            time.sleep(0.2)
    except SoftRTError as err:
        pytest.skip(f"cannot take the machine's real-time lock: {err}")
    if fd is None:
        _lock_waits["timed_out"] = True
        pytest.skip(f"another softrt run (pid {plat.lock_holder(path)}) holds this machine's RT CPU "
                    f"(waited {LOCK_WAIT_S:g} s; SOFTRT_TEST_LOCK_WAIT)")
    monkeypatch.setenv("SOFTRT_STATE_DIR", str(tmp_path / "state"))  # the test's own runs: their own lock
    try:
        yield path
    finally:
        os.close(fd)


@pytest.fixture
def rt_throttling_on(machine_lock):
    """RT throttling as an untuned machine has it, for tests of a run switching it off and back.

    On a tuned machine (``sched_rt_runtime_us`` already -1) it is turned on for the test and off
    again afterwards; under the machine lock no softrt run can be relying on it meanwhile. A user
    who is not root can change nothing here (and a run of theirs changes nothing either).
    """
    before = RT_RUNTIME.read_text()
    if before.strip() == "-1" and os.geteuid() == 0:
        RT_RUNTIME.write_text(RT_RUNTIME_DEFAULT)
    try:
        yield
    finally:
        RT_RUNTIME.write_text(before)


@pytest.fixture(autouse=True)
def softrt_home(tmp_path, monkeypatch):
    """Every test gets its own softrt data directory (SOFTRT_HOME: history, imports), never the user's."""
    home = tmp_path / "softrt-home"
    monkeypatch.setenv("SOFTRT_HOME", str(home))
    return home


@pytest.fixture
def state_dir(tmp_path, monkeypatch):
    """An isolated softrt state directory (restore journals, tune state)."""
    d = tmp_path / "state"
    monkeypatch.setenv("SOFTRT_STATE_DIR", str(d))
    return d


def _softrt_cmd(*args: str, prefix: tuple[str, ...] = (), **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([*prefix, sys.executable, "-m", "softrt", *args], capture_output=True, text=True,
                          env={**os.environ, "COLUMNS": "120"}, **kwargs)


@pytest.fixture
def run_cli(capsys):
    """Run the softrt command line in this process: return (exit status, stdout, stderr)."""
    from softrt.cli import main

    def run(*args: str):
        with pytest.raises(SystemExit) as exit_info:
            main(list(args))
        captured = capsys.readouterr()
        return exit_info.value.code, captured.out, captured.err

    return run


@pytest.fixture
def softrt_cmd():
    """Run ``python -m softrt ARGS`` as a user would, capturing its output."""
    return _softrt_cmd


@pytest.fixture
def rt_settings_restored():
    """Assert that a test leaves RT throttling as it found it."""
    before = RT_RUNTIME.read_text()
    yield
    assert RT_RUNTIME.read_text() == before
