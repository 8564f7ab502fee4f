"""Shared test helpers: a softrt command runner and the RT-loop fixtures."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

RT_RUNTIME = Path("/proc/sys/kernel/sched_rt_runtime_us")


def pytest_collection_modifyitems(config, items):
    """The real-time and system-changing tests (markers ``rt``, ``root``) form one pytest-xdist group.

    They run one at a time on the last CPU, so with ``-n`` (``--dist loadgroup``) they all go to one
    worker, in order, while the other workers share the rest of the suite. The group is the largest
    scope, so xdist hands it out first (``--loadscope-reorder``, its default): the longest chain of
    the suite starts at once.
    """
    for item in items:
        if item.get_closest_marker("rt") is not None or item.get_closest_marker("root") is not None:
            item.add_marker(pytest.mark.xdist_group("rt"))


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
