import pytest

from softrt.board import DeviceOptions
from softrt.cpus import CpuSet
from softrt.errors import ConfigError, InvalidCpu
from softrt.schema.config import RunConfig
from softrt.session.config import validate

TWO = CpuSet([0, 1])


def test_defaults_pick_the_highest_cpu():
    assert validate(RunConfig(), TWO, TWO).cpu == 1
    assert validate(RunConfig(), CpuSet.parse("0-7"), CpuSet.parse("0-5")).cpu == 5


def test_profile_none_does_not_pin():
    assert validate(RunConfig(profile="none"), TWO, TWO).cpu is None


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"period_ns": 0}, "period"),
        ({"period_ns": 2_000_000_000}, "period"),
        ({"duration_ns": 0}, "duration must be positive"),
        ({"duration_ns": -5}, "duration must be positive"),
        ({"duration_ns": 8 * 86400 * 10**9}, "safety bound"),
        ({"priority": 0}, "priority"),
        ({"priority": 100}, "priority"),
        ({"profile": "turbo"}, "profile"),
        ({"wait": "yield"}, "wait strategy"),
        ({"axes": 0}, "axes"),
        ({"wait": "hybrid", "margin_ns": 300_000}, "margin"),
        ({"dc_lock": True}, "--dc-lock needs an EtherCAT device"),
        ({"device": "ethercat:eth1", "dc_shift_ns": -250_000}, "--dc-shift"),
        ({"samples": "some"}, "--samples"),
        ({"trace_mode": "light"}, "--trace-mode"),
    ],
)
def test_bad_values_say_what_and_how(kwargs, match):
    with pytest.raises(ConfigError, match=match) as info:
        validate(RunConfig(**kwargs), TWO, TWO)
    assert info.value.hint  # every message says how to fix it


def test_a_72_hour_run_is_a_normal_run_and_the_bound_says_how_to_raise_it():
    assert validate(RunConfig(duration_ns=72 * 3600 * 10**9), TWO, TWO).duration_ns == 72 * 3600 * 10**9
    with pytest.raises(
        ConfigError,
        match=r"864,000 s \(10 d 00 h\) exceeds the safety bound of 604,800 s "
        r"\(7 d 00 h\)",
    ) as info:
        validate(RunConfig(duration_ns=10 * 86400 * 10**9), TWO, TWO)
    assert "--max-duration 10d" in info.value.hint


def test_long_duration_allowed_when_raised_explicitly():
    cfg = RunConfig(duration_ns=10 * 86400 * 10**9, max_duration_ns=11 * 86400 * 10**9)
    assert validate(cfg, TWO, TWO).duration_ns == 10 * 86400 * 10**9


def test_samples_default_to_late_beyond_one_hour():
    hour = 3600 * 10**9
    assert validate(RunConfig(duration_ns=hour), TWO, TWO).samples == "all"
    long = RunConfig(duration_ns=hour + 10**9, max_duration_ns=2 * hour)
    assert validate(long, TWO, TWO).samples == "late"
    assert validate(RunConfig(samples="late"), TWO, TWO).samples == "late"


def test_cpu_that_does_not_exist_or_is_not_allowed():
    with pytest.raises(InvalidCpu, match="does not exist"):
        validate(RunConfig(cpu=7), TWO, TWO)
    with pytest.raises(InvalidCpu, match="not allowed"):
        validate(RunConfig(cpu=1), TWO, CpuSet([0]))


def test_refuses_to_spin_on_every_online_cpu():
    with pytest.raises(ConfigError, match="housekeeping"):
        validate(RunConfig(), CpuSet([0]), CpuSet([0]))
    with pytest.raises(ConfigError, match="housekeeping"):  # online 0-1, but we may use only CPU 1
        validate(RunConfig(), TWO, CpuSet([1]))
    assert validate(RunConfig(profile="none"), CpuSet([0]), CpuSet([0])).cpu is None


def test_dc_lock_goes_to_the_ethercat_device_only():
    from softrt.session.config import device_options

    config = validate(RunConfig(device="ethercat:eth1", dc_lock=True, dc_shift_ns=-50_000), TWO, TWO)
    assert device_options(config) == DeviceOptions(bus_timeout_ns=10_000_000, dc_lock=True, dc_shift_ns=-50_000)
    assert device_options(validate(RunConfig(), TWO, TWO)) is None


def test_a_run_is_resolved_once_into_a_frozen_plan(monkeypatch):
    import dataclasses

    import softrt.session.config as session_config
    from softrt.motion import MotionConfig

    calls = []
    real = session_config.choose_cpus
    monkeypatch.setattr(session_config, "choose_cpus", lambda *a, **k: calls.append(a) or real(*a, **k))
    plan = session_config.resolve_plan(
        RunConfig(device="ethercat:eth1", axes=2), CpuSet.parse("0-3"), CpuSet.parse("0-3")
    )
    assert len(calls) == 1  # the RT CPU and the housekeeping set come from one choice
    assert (plan.rt_cpu, plan.housekeeping, plan.config.cpu) == (3, CpuSet.parse("0-2"), 3)
    assert plan.device_options == DeviceOptions(bus_timeout_ns=10_000_000, dc_lock=False, dc_shift_ns=0, drives=None)
    assert isinstance(plan.motion, MotionConfig) and plan.motion.axes == 2 and plan.samples == "all"
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.rt_cpu = 0
    # a user's own step: no motion profile, and --profile none pins nothing, though the RT CPU is still named
    bare = session_config.resolve_plan(RunConfig(profile="none"), TWO, TWO, motion=False)
    assert (bare.motion, bare.config.cpu, bare.rt_cpu, bare.housekeeping) == (None, None, 1, CpuSet([0]))
