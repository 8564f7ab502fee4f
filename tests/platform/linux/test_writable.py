"""The allow-list of kernel files softrt writes: resolved first, compared after, values checked."""

from __future__ import annotations

import pytest

from softrt.errors import ConfigError
from softrt.platform.linux import writable

RT = "/proc/sys/kernel/sched_rt_runtime_us"
FAIR = "/sys/kernel/debug/sched/fair_server/cpu1/runtime"


@pytest.fixture
def root(tmp_path):
    """A tree with one file of each kind, and the links a real /sys has."""
    r = tmp_path / "root"
    for rel, text in (
        (RT, "950000"),
        ("/proc/sys/kernel/sched_rt_period_us", "1000000"),
        ("/proc/irq/38/smp_affinity", "3"),
        ("/proc/sys/kernel/watchdog_cpumask", "0-1"),
        ("/sys/devices/system/cpu/cpu1/cpuidle/state2/disable", "0"),
        ("/sys/devices/system/cpu/cpufreq/policy1/scaling_governor", "schedutil"),
        ("/sys/kernel/mm/transparent_hugepage/enabled", "always [madvise] never"),
        (FAIR, "50000000"),
        ("/sys/kernel/debug/sched/fair_server/cpu1/period", "1000000000"),
    ):
        f = r / rel.lstrip("/")
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(text + "\n")
    (r / "sys/devices/system/cpu/cpu1/cpufreq").symlink_to("../cpufreq/policy1")  # as sysfs links it
    return r


@pytest.mark.parametrize(
    "rel,value",
    [
        (RT, "-1"),
        (RT, "950000"),
        (RT, "1000000"),
        (RT, "0\n"),
        (FAIR, "0"),
        (FAIR, "50000000"),
        (FAIR, "1000000000"),
        ("/proc/irq/38/smp_affinity", "00000001"),
        ("/proc/irq/38/smp_affinity", "ffffffff,ffffffff"),
        ("/proc/sys/kernel/watchdog_cpumask", "0,2-3"),
        ("/sys/devices/system/cpu/cpu1/cpuidle/state2/disable", "1"),
        ("/sys/devices/system/cpu/cpu1/cpufreq/scaling_governor", "performance"),  # through the policy link
        ("/sys/devices/system/cpu/cpufreq/policy1/scaling_governor", "schedutil"),
        ("/sys/kernel/mm/transparent_hugepage/enabled", "madvise"),
    ],
)
def test_what_softrt_writes_is_accepted(root, rel, value):
    assert writable.check(root, rel, value).is_file()


@pytest.mark.parametrize(
    "rel,value,words",
    [
        (RT, "-2", "takes an integer"),
        (RT, "1000001", "takes an integer"),
        (RT, "1e6", "takes an integer"),
        (RT, "-1\n-1", "takes an integer"),
        (RT, 5, "takes an integer"),
        (FAIR, "-1", "fair server's period"),
        (FAIR, "1000000001", "fair server's period"),
        (FAIR, "5e7", "period"),
        ("/proc/irq/38/smp_affinity", "0x3", "hex CPU mask"),
        ("/proc/irq/38/smp_affinity", "", "hex CPU mask"),
        ("/proc/irq/38/smp_affinity", "f" * 3000, "hex CPU mask"),
        ("/proc/sys/kernel/watchdog_cpumask", "0-", "CPU list"),
        ("/sys/devices/system/cpu/cpu1/cpuidle/state2/disable", "2", "0 or 1"),
        ("/sys/devices/system/cpu/cpu1/cpufreq/scaling_governor", "../x", "governor"),
        ("/sys/devices/system/cpu/cpu1/cpufreq/scaling_governor", "a b", "governor"),
        ("/proc/sys/kernel/core_pattern", "core", "not a kernel file softrt writes"),
        ("/proc/sys/kernel/../kernel/sched_rt_runtime_us", "-1", "not a kernel file softrt writes"),
        ("//proc/sys/kernel/sched_rt_runtime_us", "-1", "not a kernel file softrt writes"),
        ("/proc/self/root/proc/sys/kernel/sched_rt_runtime_us", "-1", "not a kernel file softrt writes"),
        ("/proc/1/root/proc/sys/kernel/sched_rt_runtime_us", "-1", "not a kernel file softrt writes"),
        ("proc/sys/kernel/sched_rt_runtime_us", "-1", "not an absolute"),
        (None, "-1", "not an absolute"),
    ],
)
def test_anything_else_is_refused(root, rel, value, words):
    with pytest.raises(ConfigError, match=words):
        writable.check(root, rel, value)


def test_a_symlink_is_compared_after_resolution(root, tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    target = root / "proc/irq/38/smp_affinity"
    target.unlink()
    target.symlink_to(victim)
    with pytest.raises(ConfigError, match=r"resolves to .*victim"):
        writable.check(root, "/proc/irq/38/smp_affinity", "1")
    target.unlink()
    target.symlink_to(root / "sys/devices/system/cpu/cpu1/cpuidle/state2/disable")  # another allowed file
    assert (
        writable.check(root, "/proc/irq/38/smp_affinity", "1")
        == root / "sys/devices/system/cpu/cpu1/cpuidle/state2/disable"
    )
    with pytest.raises(ConfigError, match="disable takes 0 or 1"):  # the value must suit both
        writable.check(root, "/proc/irq/38/smp_affinity", "f")


def test_a_root_of_slash_refuses_the_proc_root_links(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    for link in ("/proc/self/root", "/proc/1/root", "/proc/thread-self/root"):
        with pytest.raises(ConfigError):
            writable.check("/", f"{link}{victim}", "1")
    assert victim.read_text() == "precious\n"
