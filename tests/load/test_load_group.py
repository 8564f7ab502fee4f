"""LoadGroup's lifecycle (start, settle, stop in finally), placement, and dying loads."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import psutil
import pytest

from softrt.cpus import CpuSet
from softrt.errors import ConfigError
from softrt.load import LoadFailed, LoadGroup, LoadState, check_placement, make_load, media

from .conftest import assert_nothing_left, descendants, needs_stress_ng, processes_in_sessions, wait_gone

RT_CPU = CpuSet([1])

pytestmark = pytest.mark.housekeeping("load")  # real loads on the housekeeping CPU (tests/conftest.py)


def test_group_runs_loads_and_collects_results(load_cpus, tmp_path):
    loads = [make_load(n, load_cpus, "builtin", timeout_s=60, workdir=tmp_path) for n in ("cpu", "network")]
    with LoadGroup(loads, settle_s=0.5) as group:
        assert all(load.alive() for load in loads)
        procs = descendants()
        group.check_alive()
    assert [r.name for r in group.results] == ["cpu", "network"]
    assert group.results[0].achieved["ops_per_s"] > 0
    assert group.results[1].achieved["connections_per_s"] > 0
    assert_nothing_left(procs, {pid for load in loads for pid in load.pids()}, tmp_path)


def test_group_includes_skipped_loads(load_cpus, tmp_path):
    gpu = make_load("gpu", load_cpus, "builtin")  # the builtin backend never renders on a GPU
    with LoadGroup([gpu], settle_s=0.1) as group:
        pass
    (result,) = group.results
    assert result.skipped_reason and "GPU" in result.skipped_reason


def _kill_soon(pid: int, delay_s: float) -> threading.Timer:
    timer = threading.Timer(delay_s, os.kill, args=(pid, signal.SIGKILL))
    timer.start()
    return timer


@pytest.mark.parametrize("backend", [pytest.param("stress-ng", marks=needs_stress_ng), "builtin"])
def test_load_that_dies_while_settling_is_reported(backend, load_cpus, tmp_path):
    victim = make_load("cpu", load_cpus, backend, timeout_s=60, workdir=tmp_path)
    other = make_load("memory", load_cpus, backend, timeout_s=60, workdir=tmp_path)
    seen: list[psutil.Process] = []

    class Watch(threading.Thread):  # record the load processes while they run
        def run(self):
            while victim.state is LoadState.NEW:
                time.sleep(0.01)
            time.sleep(0.3)
            seen.extend(descendants())
            os.kill(victim.pids()[0], signal.SIGKILL)

    watcher = Watch()
    watcher.start()
    with pytest.raises(LoadFailed) as info, LoadGroup([victim, other], settle_s=5.0):
        pytest.fail("the group must not hand over with a dead load")
    watcher.join()
    assert info.value.name == "cpu"
    assert "settled" in str(info.value)
    assert seen
    assert_nothing_left(seen, set(victim.pids()) | set(other.pids()), tmp_path)


def test_keyboard_interrupt_stops_every_load(load_cpus, tmp_path):
    loads = [make_load(n, load_cpus, "builtin", timeout_s=60, workdir=tmp_path) for n in ("cpu", "disk")]
    with pytest.raises(KeyboardInterrupt), LoadGroup(loads, settle_s=0.3) as group:
        procs = descendants()
        raise KeyboardInterrupt
    assert {r.name for r in group.results} == {"cpu", "disk"}
    assert_nothing_left(procs, {pid for load in loads for pid in load.pids()}, tmp_path)


def test_duplicate_load_names_are_refused(load_cpus):
    loads = [make_load("cpu", load_cpus, "builtin") for _ in range(2)]
    with pytest.raises(ConfigError, match="more than once"):
        LoadGroup(loads)


# -- placement -----------------------------------------------------------------------------------


def test_load_on_rt_cpu_is_refused_unless_declared(load_cpus):
    loads = [make_load("cpu", load_cpus, "builtin"), make_load("disk", load_cpus | RT_CPU, "builtin")]
    with pytest.raises(ConfigError) as info:
        check_placement(loads, rt_cpus=RT_CPU, allow_rt=False)
    msg = str(info.value)
    assert "'disk'" in msg and "real-time CPU 1" in msg and "\n" not in msg
    check_placement(loads, rt_cpus=RT_CPU, allow_rt=True)
    check_placement(loads[:1], rt_cpus=RT_CPU, allow_rt=False)
    assert not descendants()  # checking placement starts nothing


# -- losing softrt itself ------------------------------------------------------------------------

_OWNER = textwrap.dedent(
    """
    import sys, time
    from softrt.cpus import CpuSet
    from softrt.load import make_load
    load = make_load("cpu", CpuSet([0]), sys.argv[1], timeout_s=120, workdir=sys.argv[2])
    load.start()
    print(load.pids()[0], flush=True)
    time.sleep(120)
    """
)


@pytest.mark.parametrize("backend", [pytest.param("stress-ng", marks=needs_stress_ng), "builtin"])
def test_loads_die_when_softrt_is_killed(backend, load_cpus, tmp_path):
    src = str(Path(__file__).resolve().parents[2] / "src")
    env = {**os.environ, "PYTHONPATH": src + os.pathsep + os.environ.get("PYTHONPATH", "")}
    owner = subprocess.Popen(
        [sys.executable, "-c", _OWNER, backend, str(tmp_path)], stdout=subprocess.PIPE, env=env, text=True
    )
    procs: list[psutil.Process] = []
    try:
        leader = int(owner.stdout.readline())
        time.sleep(0.5)
        procs = psutil.Process(owner.pid).children(recursive=True)
        assert procs
        owner.kill()  # SIGKILL: softrt gets no chance to clean up
        owner.wait()
        assert wait_gone(procs, timeout_s=10) == []
        assert processes_in_sessions({leader}) == []
    finally:
        owner.kill()
        owner.wait()
        owner.stdout.close()
        for p in wait_gone(procs, timeout_s=0):  # if the test failed, do not leave orphans
            p.kill()


@needs_stress_ng
def test_gpu_load_that_cannot_render_is_reported_with_stress_ngs_reason(load_cpus, tmp_path):
    # A render node path that does not exist: stress-ng's gpu stressor skips itself and exits,
    # which is exactly what happens on a machine whose GPU has no usable EGL/GBM driver.
    load = media.gpu(load_cpus, str(tmp_path / "renderD128"), timeout_s=60, workdir=tmp_path)
    with pytest.raises(LoadFailed) as info, LoadGroup([load], settle_s=3.0):
        pytest.fail("the group must not hand over with a dead load")
    assert info.value.name == "gpu"
    assert "renderD128" in str(info.value)
    assert not descendants()
    assert list(tmp_path.iterdir()) == []
