"""Choosing and validating the real-time CPUs; auditing the captured VM."""

from __future__ import annotations

import os

import pytest

from softrt.audit import Status, default_rt_cpu, run_checks
from softrt.audit.linux import validate_rt_cpus
from softrt.cpus import CpuSet
from softrt.errors import ConfigError, InvalidCpu

from .trees import CAPTURED


def test_default_rt_cpu_is_the_highest_allowed_online_cpu(good):
    assert default_rt_cpu(str(good)) == 3
    good.set("/proc/self/status", "Cpus_allowed_list:\t0-2")
    assert default_rt_cpu(str(good)) == 2
    good.set("/sys/devices/system/cpu/online", "0-1")
    assert default_rt_cpu(str(good)) == 1


def test_default_rt_cpu_on_this_machine():
    allowed = os.sched_getaffinity(0)
    assert default_rt_cpu() in allowed
    assert default_rt_cpu() == max(allowed & set(CpuSet.parse(open("/sys/devices/system/cpu/online").read())))


@pytest.mark.parametrize(
    "cpus,error,words",
    [
        ("", ConfigError, "no real-time CPU"),
        ("7", InvalidCpu, "CPU 7 does not exist"),
        ("0-3", ConfigError, "one housekeeping CPU must stay"),
    ],
)
def test_bad_rt_cpus(good, cpus, error, words):
    with pytest.raises(error) as info:
        validate_rt_cpus(CpuSet.parse(cpus), str(good))
    assert words in str(info.value)


def test_offline_cpu_is_refused(good):
    good.set("/sys/devices/system/cpu/online", "0-2")
    with pytest.raises(InvalidCpu, match="CPU 3 is offline"):
        run_checks(CpuSet([3]), str(good), sample_s=0)


def test_missing_online_file_in_a_tree_is_bad_input(tmp_path):
    with pytest.raises(ConfigError, match="unreadable"):
        run_checks(CpuSet([1]), str(tmp_path), sample_s=0)


def test_the_captured_vm():
    """What the Debian 12 VM looked like when captured: untuned, CPU 1 shared with everything."""
    report = run_checks(CpuSet([1]), str(CAPTURED), sample_s=2.0)  # no sampling on a captured tree
    by_id = {f.id: f for f in report.findings}
    assert report.sample is None and by_id["cores.sample"].status is Status.NA
    assert not report.ready
    assert {"kernel.preemption", "kernel.rt_throttling", "irq.nic", "cores.tasks", "services.watchdog"} <= {
        f.id for f in report.blocking
    }
    assert "none" in by_id["kernel.preemption"].summary
    assert "eth0" in by_id["irq.nic"].summary
    assert by_id["kernel.governor"].status is Status.NA  # a VM without cpufreq
    assert by_id["kernel.smt"].status is Status.OK
    assert by_id["updates.agents"].status is Status.OK and "systemd is not running" in by_id["updates.agents"].summary
    assert by_id["idle.states"].status is Status.WARN and "haltpoll" in by_id["idle.states"].summary
