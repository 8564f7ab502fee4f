"""session.run: during a real run no thread of any softrt process but the loop may run on the RT CPU,
not even while the metrics endpoint is flooded with scrapes (issue 31, item 2).

One traced run of 2 s with ``--metrics-port`` serves both tests: its threads are read from
``/proc/<pid>/task/*/status`` (``Cpus_allowed_list``, proc(5)) every 0.1 s while 20 clients scrape
its ``/metrics`` on loopback, and its summary's culprits are read afterwards.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import urllib.request

import psutil
import pytest
from tests.conftest import held_machine_lock

from softrt.platform.linux.threads import masks

FLOOD_CLIENTS = 20
FLOOD_S = 2.0


def _softrt_threads(pid: int) -> dict[int, dict[int, tuple[str, object]]]:
    """Every thread of process *pid* and of its descendants: pid -> tid -> (name, allowed CPUs)."""
    try:
        procs = [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]
    except psutil.Error:
        return {}
    return {p.pid: masks(p.pid) for p in procs}


def _worker_pid(pid: int) -> int | None:
    try:
        for child in psutil.Process(pid).children():
            if any("spawn_main" in part for part in child.cmdline()):
                return child.pid
    except psutil.Error:
        pass
    return None


def _flood(url: str, stop: threading.Event, scrapes: list[int], housekeeping: set[int]) -> None:
    os.sched_setaffinity(0, housekeeping)  # the flood crowds the CPUs softrt's threads must stay on
    while not stop.is_set():
        try:
            with urllib.request.urlopen(url, timeout=2) as reply:
                reply.read()
            scrapes.append(1)
        except OSError:
            time.sleep(0.01)  # the run ended (or the endpoint pushed us out): try again until told to stop


@pytest.fixture(scope="module")
def flooded_run(tmp_path_factory):
    """A real ``softrt run --duration 2s --metrics-port 0`` under a bounded scrape flood: its summary,
    RT CPU, the softrt threads seen while it ran and the worker's pid."""
    base = tmp_path_factory.mktemp("flooded-run")
    env = {**os.environ, "SOFTRT_STATE_DIR": str(base / "state"), "SOFTRT_HOME": str(base / "home")}
    rt_cpu = max(os.sched_getaffinity(0))
    housekeeping = set(os.sched_getaffinity(0)) - {rt_cpu}
    samples: list[dict] = []
    scrapes: list[int] = []
    with held_machine_lock():
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "softrt",
                "run",
                "--duration",
                "2s",
                "--wait",
                "sleep",
                "--json",
                "--cpu",
                str(rt_cpu),
                "--metrics-port",
                "0",
                "--metrics-linger",
                "0",
                "--out-dir",
                str(base / "runs"),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        url, said = None, []
        for line in proc.stderr:  # said once the loop runs: the supervisor's threads were walked before "go"
            said.append(line)
            if "serving metrics at" in line:
                url = line.rsplit(" ", 1)[-1].strip()
                break
        assert url is not None, "".join(said)
        stop = threading.Event()
        clients = [
            threading.Thread(target=_flood, args=(url, stop, scrapes, housekeeping), daemon=True)
            for _ in range(FLOOD_CLIENTS)
        ]
        for c in clients:
            c.start()
        worker = _worker_pid(proc.pid)
        end = time.monotonic() + FLOOD_S
        while time.monotonic() < end and proc.poll() is None:
            samples.append(_softrt_threads(proc.pid))
            time.sleep(0.1)
        stop.set()
        out, err = proc.communicate(timeout=60)
        for c in clients:
            c.join(5)
    assert proc.returncode == 0, err
    return dict(
        summary=json.loads(out),
        rt_cpu=rt_cpu,
        samples=samples,
        worker=worker,
        supervisor=proc.pid,
        scrapes=len(scrapes),
    )


@pytest.mark.rt
def test_only_the_loop_thread_may_run_on_the_rt_cpu(flooded_run):
    rt_cpu, worker, supervisor = flooded_run["rt_cpu"], flooded_run["worker"], flooded_run["supervisor"]
    # The supervisor is read first: a worker still there means it was read during the loop, not after
    # it (the cleanup puts each thread's mask back once the worker is gone).
    samples = [s for s in flooded_run["samples"] if s.get(worker) and s.get(supervisor)]
    assert worker is not None and samples
    assert max(len(s[supervisor]) for s in samples) >= 3  # the metrics server's and pyarrow's threads exist
    for sample in samples:
        on_rt = [
            (pid, tid, name)
            for pid, threads in sample.items()
            for tid, (name, cpus) in threads.items()
            if rt_cpu in cpus
        ]
        assert on_rt == [(worker, worker, sample[worker][worker][0])], sample  # the loop: the worker's main thread
        assert set(sample[worker][worker][1]) == {rt_cpu}
    tuning = flooded_run["summary"]["tuning"]
    applied = [a for a in tuning["applied"] if a["what"] == "supervisor_affinity"]
    assert applied and "threads" in applied[0]["detail"], tuning
    assert not [a for a in tuning["not_applied"] if a["what"] == "supervisor_affinity"]


@pytest.mark.rt
def test_a_scrape_flood_never_makes_softrt_a_culprit(flooded_run):
    assert flooded_run["scrapes"] > FLOOD_CLIENTS  # the endpoint was really flooded
    why = flooded_run["summary"]["why_late"]
    assert why["tracing"] == "on", why  # the run was traced: a late cycle's culprits are named
    # softrt's threads but the loop's (its own work is the culprit kind "loop", not a thread)
    ours = {tid for s in flooded_run["samples"] for threads in s.values() for tid in threads} - {flooded_run["worker"]}
    named = [c for c in why.get("culprits") or [] if c["kind"] == "thread" and c.get("id") in ours]
    assert named == [], named
