"""LinuxPlatform.cpu_limit: the bound for CPU lists, from a captured /sys tree (issue 12, defect 4)."""

from __future__ import annotations

import pytest

from softrt.cpus import MAX_CPUS, CpuSet
from softrt.errors import ConfigError
from softrt.platform import get_platform
from softrt.platform.linux.backend import LinuxPlatform
from softrt.scenario.model import LoadSpec


def _root(tmp_path, possible: str | None):
    cpu = tmp_path / "sys/devices/system/cpu"
    cpu.mkdir(parents=True)
    if possible is not None:
        (cpu / "possible").write_text(possible + "\n")
    return str(tmp_path)


@pytest.mark.parametrize(
    "possible,limit",
    [("0-3", 4), ("0", 1), ("0-7,16-31", 32), (None, MAX_CPUS), ("garbage", MAX_CPUS), ("0-99999999999", MAX_CPUS)],
)
def test_cpu_limit_from_possible(tmp_path, possible, limit):
    assert LinuxPlatform().cpu_limit(_root(tmp_path, possible)) == limit


def test_this_machine_limit_covers_its_online_cpus():
    plat = get_platform()
    assert plat.online_cpus().last() < plat.cpu_limit() <= MAX_CPUS


def test_scenario_cpus_are_bounded_by_this_machine():
    limit = get_platform().cpu_limit()
    online = get_platform().online_cpus()
    with pytest.raises(ConfigError, match="cannot exist"):
        LoadSpec("cpu", f"0-{limit}").resolve_cpus(CpuSet([online.last()]), online)
