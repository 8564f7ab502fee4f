"""The load paths Windows takes, run here on Linux where they are portable (placement through the
platform object, spawn-based churn, os.times CPU time, the stop request)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from softrt.cpus import CpuSet
from softrt.load import _worker
from softrt.platform import procs


def test_churn_without_fork_creates_real_processes():
    """Windows has no fork: the worker creates each process with subprocess (CreateProcess there)."""
    counters = _worker.churn({"program": sys.executable, "args": ["-c", "pass"], "spawn": True},
                             time.monotonic() + 0.5)
    assert counters["ops"] >= 1 and counters["failures"] == 0


def test_churn_without_fork_counts_a_program_that_fails():
    counters = _worker.churn({"program": "/nonexistent/softrt-no-such-program", "spawn": True},
                             time.monotonic() + 0.2)
    assert counters["ops"] == 0 and counters["failures"] >= 1


def test_cpu_time_without_getrusage_comes_from_os_times(monkeypatch):
    """Windows has no resource module: os.times() gives the same user + system seconds."""
    with_rusage = _worker._cpu_s()
    monkeypatch.setattr(_worker, "resource", None)
    x = 0.0
    t0 = time.process_time()
    while time.process_time() - t0 < 0.2:  # burn CPU, so the two readings must differ
        x += 1.0
    assert _worker._cpu_s() >= with_rusage + 0.15


def test_place_puts_a_started_process_on_its_cpus_through_the_platform():
    """What spawn does on Windows after the process starts (SetProcessAffinityMask there)."""
    cpu = max(os.sched_getaffinity(0))
    proc = subprocess.Popen(["sleep", "5"])
    try:
        procs.place(proc, CpuSet([cpu]))
        assert os.sched_getaffinity(proc.pid) == {cpu}
    finally:
        proc.kill()
        proc.wait()


def test_a_refused_placement_ends_the_process_before_it_runs_misplaced():
    from softrt.errors import SoftRTError
    proc = subprocess.Popen(["sleep", "5"])
    with pytest.raises(SoftRTError):
        procs.place(proc, CpuSet([4095]))  # no such CPU: the platform refuses
    assert proc.poll() is not None


def test_ask_to_stop_makes_a_worker_report():
    cfg = {"kind": "spin", "cpus": sorted(os.sched_getaffinity(0)), "timeout_s": 30}
    proc = subprocess.Popen([sys.executable, _worker.__file__, __import__("json").dumps(cfg)],
                            stdout=subprocess.PIPE, start_new_session=True)
    time.sleep(0.5)
    procs.ask_to_stop(proc)
    out, _ = proc.communicate(timeout=10)
    assert proc.returncode == 0 and b'"counters"' in out


def test_a_worker_without_a_console_stops_when_its_stdin_closes():
    """Windows' CTRL_BREAK_EVENT needs a console the supervisor may not have: under Wine every built-in
    load was killed before it reported (the network load "moved 0 bytes"). Closing its stdin asks it
    there; here no signal is sent at all."""
    import json

    cfg = {"kind": "net_server", "cpus": sorted(os.sched_getaffinity(0)), "timeout_s": 30, "stop_on_eof": True}
    import socket

    with socket.create_server(("127.0.0.1", 0)) as srv:
        cfg["fd"] = srv.fileno()
        proc = subprocess.Popen([sys.executable, _worker.__file__, json.dumps(cfg)], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, pass_fds=(srv.fileno(),))
        with socket.create_connection(srv.getsockname()) as c:
            c.sendall(b"x" * 1000)
        time.sleep(0.5)
        t0 = time.monotonic()
        proc.stdin.close()  # no signal
        proc.wait(timeout=10)
        out = proc.stdout.read()
        proc.stdout.close()
    assert proc.returncode == 0 and time.monotonic() - t0 < 5
    assert json.loads(out)["counters"] == {"connections": 1, "bytes_received": 1000}


def test_the_gpu_load_on_windows_says_it_is_not_there_not_that_dev_dri_is_missing(monkeypatch):
    from softrt.load import media

    monkeypatch.setattr(procs, "IS_WINDOWS", True)
    reason = media.gpu_skip_reason("builtin")
    assert reason.startswith("not on Windows") and "/dev/dri" not in reason
