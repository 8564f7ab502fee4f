"""The trace in a run: off, unavailable, and removed on every path (normal end, Ctrl-C, a killed
worker, a killed softrt: then the next command removes it). Real runs on the last CPU."""

from __future__ import annotations

import glob

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from softrt.schema.config import RunConfig
from softrt.session.run import run
from softrt.trace import tracefs

pytestmark = pytest.mark.rt
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="tracefs needs root")


def _quick(tmp_path, **kw) -> dict:
    return run(RunConfig(duration_ns=300_000_000, out_dir=tmp_path, **kw)).summary.to_dict()


def test_no_trace_says_so(tmp_path, state_dir):
    summary = _quick(tmp_path, trace=False)
    assert summary["why_late"] == {"tracing": "off (--no-trace)"} and summary["status"] == "complete"


def test_an_untuned_run_has_no_rt_cpu_to_trace(tmp_path, state_dir):
    summary = _quick(tmp_path, profile="none")
    assert summary["why_late"]["tracing"].startswith("unavailable: the loop is not pinned")


@pytest.mark.root
@needs_root
def test_an_instance_that_cannot_be_created_leaves_the_run_going(tmp_path, state_dir):
    path, mounted = tracefs.find_or_mount()
    taken = path / "instances" / f"softrt-{os.getpid()}"
    taken.mkdir()  # the name this run's instance would get
    try:
        summary = _quick(tmp_path)
    finally:
        tracefs.remove_instance(taken)
        if mounted is not None:
            mounted.undo()
    assert summary["status"] == "complete" and summary["cycles"] > 0
    assert summary["why_late"]["tracing"].startswith("unavailable: ") and "File exists" in summary["why_late"]["tracing"]


# A run in a child process.
SCRIPT = textwrap.dedent("""
    import json
    from softrt.schema.config import RunConfig
    from softrt.session.run import run
    if __name__ == "__main__":
        r = run(RunConfig(duration_ns=20_000_000_000, out_dir={out!r}))
        print(json.dumps(r.summary.to_dict()))
""")


def _instances() -> set[str]:
    found = tracefs.find()
    return {p.name for p in (found / "instances").iterdir()} if found else set()


def _start(tmp_path) -> tuple[subprocess.Popen, str]:
    script = tmp_path / "run.py"
    script.write_text(SCRIPT.format(out=str(tmp_path / "runs")))
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    name = f"softrt-{proc.pid}"
    for _ in range(300):
        if name in _instances():
            time.sleep(0.5)
            return proc, name
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    proc.kill()
    raise AssertionError(f"the run's trace instance never appeared: {proc.communicate()[1][-2000:]}")


@pytest.mark.root
@needs_root
def test_ctrl_c_removes_the_instance_and_keeps_the_attribution(tmp_path, state_dir, rt_settings_restored):
    mounted_before = tracefs.find() is not None
    proc, name = _start(tmp_path)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    s = json.loads(out)
    assert s["status"] == "partial" and "Ctrl-C" in s["partial_reason"]
    assert s["why_late"]["tracing"] == "on" and "culprits" in s["why_late"]
    assert s["why_late"]["trace"]["events_read"] > 0
    assert name not in _instances()
    assert (tracefs.find() is not None) == mounted_before  # a mount made for the run is undone
    assert all(c["restored"] for c in s["tuning"]["system_changes"])


@pytest.mark.root
@needs_root
def test_a_killed_worker_still_removes_the_instance(tmp_path, state_dir, rt_settings_restored):
    import psutil

    proc, name = _start(tmp_path)
    psutil.Process(proc.pid).children()[-1].kill()
    out, _ = proc.communicate(timeout=60)
    s = json.loads(out)
    assert s["status"] == "partial" and "died" in s["partial_reason"]
    assert name not in _instances() and s["why_late"]["tracing"] == "on"


@pytest.mark.root
@needs_root
def test_a_killed_softrt_leaves_an_instance_the_next_command_removes(tmp_path, state_dir, rt_settings_restored, run_cli):
    import psutil

    mounted_before = tracefs.find() is not None
    proc, name = _start(tmp_path)
    worker = psutil.Process(proc.pid).children()[-1]
    proc.kill()
    # Not reaped yet: while the killed supervisor is a zombie its pid exists, so no other softrt
    # command (a parallel test, another user) takes this test's "next command" from it.
    os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)
    worker.wait(timeout=10)
    assert name in _instances()
    rings = glob.glob(f"/dev/shm/softrt-{proc.pid}-*")  # the killed supervisor's ring, left behind
    proc.communicate()
    code, _, err = run_cli("history")  # the next command, at once
    assert code == 0 and f"removed the trace instance {name}" in err, err
    assert rings and not any(os.path.exists(r) for r in rings)  # ... and removed by the next command
    assert f"removed the shared-memory ring {os.path.basename(rings[0])}" in err, err
    assert name not in _instances()
    assert (tracefs.find() is not None) == mounted_before


@pytest.mark.parametrize("runtime, release, config, expected", [
    ("-1", "6.18.44", None, False),
    ("950000", "6.1.0-28-amd64", None, True),
    ("950000", "6.18.44", "CONFIG_SMP=y\n# CONFIG_RT_GROUP_SCHED is not set\n", False),  # the fair server instead
    ("950000", "6.18.44", "CONFIG_SMP=y\nCONFIG_RT_GROUP_SCHED=y\n", True),
    ("950000", "6.18.44", None, None),  # config not exposed: either
    (None, "6.18.44", None, None)])
def test_rt_throttling_in_force_from_the_sysctl_and_the_kernel(tmp_path, runtime, release, config, expected):
    import gzip

    from softrt.trace.session import rt_throttling

    (tmp_path / "proc/sys/kernel").mkdir(parents=True)
    (tmp_path / "proc/sys/kernel/osrelease").write_text(release + "\n")
    if runtime is not None:
        (tmp_path / "proc/sys/kernel/sched_rt_runtime_us").write_text(runtime + "\n")
    if config is not None:
        with gzip.open(tmp_path / "proc/config.gz", "wt") as fh:
            fh.write(config)
    assert rt_throttling(str(tmp_path)) is expected
