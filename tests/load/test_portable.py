"""The load paths Windows takes, run here on Linux where they are portable (placement through the
platform object, spawn-based churn, os.times CPU time, the stop request)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time

import pytest

from softrt.cpus import CpuSet
from softrt.load import _worker
from softrt.platform import procs


def test_churn_without_fork_creates_real_processes():
    """Windows has no fork: the worker creates each process with subprocess (CreateProcess there)."""
    counters = _worker.churn({"program": sys.executable, "args": ["-c", "pass"], "spawn": True}, time.monotonic() + 0.5)
    assert counters.ops >= 1 and counters.failures == 0


def test_churn_without_fork_counts_a_program_that_fails():
    counters = _worker.churn({"program": "/nonexistent/softrt-no-such-program", "spawn": True}, time.monotonic() + 0.2)
    assert counters.ops == 0 and counters.failures >= 1


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
    proc = subprocess.Popen(
        [sys.executable, _worker.__file__, __import__("json").dumps(cfg)],
        stdout=subprocess.PIPE,
        start_new_session=True,
    )
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
        proc = subprocess.Popen(
            [sys.executable, _worker.__file__, json.dumps(cfg)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            pass_fds=(srv.fileno(),),
        )
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


def test_the_gpu_load_on_windows_says_what_it_lacks_not_that_dev_dri_is_missing(monkeypatch, tmp_path):
    """Windows' GPU load is ffmpeg decoding on the GPU (d3d11va): without ffmpeg, or with one that lacks
    d3d11va (this Linux build), it is skipped with that one reason."""
    from softrt.load import media

    monkeypatch.setattr(procs, "gpu_video_api", lambda: "d3d11va")
    monkeypatch.setenv("PATH", str(tmp_path))  # no ffmpeg
    reason = media.gpu_skip_reason("builtin")
    assert "ffmpeg is not on PATH" in reason and "d3d11va" in reason and "/dev/dri" not in reason
    monkeypatch.undo()
    if shutil.which("ffmpeg") is None:
        pytest.skip("ffmpeg is not installed")
    monkeypatch.setattr(procs, "gpu_video_api", lambda: "d3d11va")
    assert media.gpu_skip_reason("builtin") == (
        "this ffmpeg cannot decode on the GPU through d3d11va (ffmpeg -hwaccels does not list it)"
    )


def test_the_disk_worker_without_pwrite_and_pread_writes_and_reads_at_each_offset(monkeypatch, tmp_path):
    """Windows' os has no pwrite/pread (nor posix_fadvise): lseek + write/read do the same, byte for byte."""
    for name in ("pwrite", "pread", "posix_fadvise"):
        monkeypatch.delattr(os, name)
    path = tmp_path / "f"
    fd = os.open(path, os.O_RDWR | os.O_CREAT)
    try:
        assert _worker._pwrite(fd, b"abcd", 8) == 4 and _worker._pwrite(fd, b"XY", 1) == 2
        assert _worker._pread(fd, 3, 8) == b"abc" and _worker._pread(fd, 100, 0) == b"\0XY" + b"\0" * 5 + b"abcd"
    finally:
        os.close(fd)
    counters = _worker.disk({"dir": str(tmp_path), "passes": 1, "file_bytes": 2 << 20}, time.monotonic() + 30)
    assert counters == _worker.DiskCounts(
        bytes_written=(2 << 20) + 256 * 4096, bytes_read=2 << 20, fsyncs=2 + 16, uncached_reads=0
    )
    assert list(tmp_path.iterdir()) == [path]  # its file removed


def test_a_gpu_load_whose_gpu_cannot_decode_is_failed_with_ffmpegs_words(tmp_path):
    """No device for the hardware decoder (vaapi here; d3d11va on a Windows VM without a GPU): ffmpeg exits
    at once, and the load's result says so in its problems, and achieved nothing (shown FAILED)."""
    if shutil.which("ffmpeg") is None:
        pytest.skip("ffmpeg is not installed")
    from softrt.load.media import VideoLoad
    from softrt.schema.summary import LoadRun

    load = VideoLoad(CpuSet([min(os.sched_getaffinity(0))]), hwaccel="vaapi", workdir=tmp_path, timeout_s=30)
    load.start()
    deadline = time.monotonic() + 20
    while load.alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    load.stop()
    run = LoadRun.from_dict(load.result().to_dict(), "a load's result")
    assert run.name == "gpu" and run.failed
    assert run.describe() == "gpu (ffmpeg): FAILED, it achieved nothing (see its problems)"
    assert run.problems[0].startswith("ffmpeg ended on its own before stop (exit")
    assert any("vaapi" in p for p in run.problems[1:]), run.problems
