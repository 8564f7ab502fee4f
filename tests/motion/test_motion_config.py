"""MotionConfig validation and defaults; Trajectory construction errors."""

from __future__ import annotations

import math

import numpy as np
import pytest

from softrt.errors import ConfigError, SoftRTError
from softrt.motion import MAX_AXES, MotionConfig, Trajectory, axis_scales


def test_defaults_make_several_moves_in_ten_seconds():
    cfg = MotionConfig()
    prof = cfg.plan()
    move_plus_dwell_s = prof.duration_s + cfg.dwell_s
    assert 1.0 <= move_plus_dwell_s <= 2.0
    assert 10.0 / move_plus_dwell_s >= 5
    assert prof.case == "vmax+amax"  # the default exercises all seven segments
    assert cfg.axes == 1 and cfg.shape == "scurve"


@pytest.mark.parametrize(
    "kwargs,field",
    [
        ({"axes": 0}, "axes"),
        ({"axes": -3}, "axes"),
        ({"axes": 1.5}, "axes"),
        ({"axes": True}, "axes"),
        ({"axes": "4"}, "axes"),
        ({"axes": MAX_AXES + 1}, "axes"),
        ({"shape": "sine"}, "shape"),
        ({"shape": ""}, "shape"),
        ({"distance_counts": 0}, "distance_counts"),
        ({"distance_counts": -10}, "distance_counts"),
        ({"distance_counts": math.nan}, "distance_counts"),
        ({"distance_counts": math.inf}, "distance_counts"),
        ({"velocity_counts_per_s": 0}, "velocity_counts_per_s"),
        ({"velocity_counts_per_s": -1.0}, "velocity_counts_per_s"),
        ({"accel_counts_per_s2": 0}, "accel_counts_per_s2"),
        ({"accel_counts_per_s2": "fast"}, "accel_counts_per_s2"),
        ({"jerk_counts_per_s3": 0}, "jerk_counts_per_s3"),
        ({"jerk_counts_per_s3": -4e7}, "jerk_counts_per_s3"),
        ({"jerk_counts_per_s3": math.inf}, "jerk_counts_per_s3"),  # an S-curve needs a finite jerk
        ({"dwell_s": -0.1}, "dwell_s"),
        ({"dwell_s": math.nan}, "dwell_s"),
        ({"dwell_s": None}, "dwell_s"),
        # Limits whose planning overflows or divides by an underflowed zero (issue 32).
        ({"distance_counts": 1e300}, "distance_counts"),
        ({"velocity_counts_per_s": 1e-300}, "velocity_counts_per_s"),
        ({"accel_counts_per_s2": 1e-300}, "accel_counts_per_s2"),
        ({"jerk_counts_per_s3": 1e-300}, "jerk_counts_per_s3"),
        ({"dwell_s": 1e300}, "dwell_s"),
        ({"shape": "trapezoid", "jerk_counts_per_s3": math.inf, "accel_counts_per_s2": 1e-300}, "accel_counts_per_s2"),
    ],
)
def test_bad_values_raise_config_error_naming_the_field(kwargs, field):
    with pytest.raises(ConfigError) as err:
        MotionConfig(**kwargs)
    text = str(err.value)
    assert field.split("_")[0] in text
    assert err.value.hint  # says how to fix it
    assert "\n" not in text  # one line
    assert isinstance(err.value, SoftRTError)


def test_a_move_longer_than_the_run_may_last_is_refused_with_its_figures():
    """The trajectory counts a move's cycles in int64 (issue 32: ``--velocity 1e-300`` was float
    infinity to integer): the move and its dwell must fit in the cycles the run may last."""
    slow = MotionConfig(velocity_counts_per_s=1e-3)  # 1e8 s
    slow.check_run(250_000, 1 << 62)  # plenty of cycles: fine
    with pytest.raises(ConfigError, match="more than the 2,419,200,000 cycles") as err:
        slow.check_run(250_000, 2_419_200_000)  # 7 days at 250 µs
    assert "--max-duration" in err.value.hint
    Trajectory(
        MotionConfig(
            distance_counts=2.0**62, velocity_counts_per_s=1e18, accel_counts_per_s2=1e18, jerk_counts_per_s3=1e18
        ),
        250_000,
    )  # the bounds themselves plan and count


def test_valid_variants_and_normalisation():
    cfg = MotionConfig(axes=np.int64(64), distance_counts=5, velocity_counts_per_s=np.float32(1000), dwell_s=0)
    assert cfg.axes == 64 and type(cfg.axes) is int
    assert type(cfg.distance_counts) is float and type(cfg.velocity_counts_per_s) is float
    trap = MotionConfig(shape="trapezoid", jerk_counts_per_s3=math.inf)
    assert trap.plan().shape == "trapezoid"
    assert trap.to_dict()["jerk_counts_per_s3"] is None
    with pytest.raises(AttributeError):  # dataclasses.FrozenInstanceError is one
        cfg.axes = 2  # frozen


def test_from_mapping():
    cfg = MotionConfig.from_mapping({"axes": 8, "shape": "trapezoid", "jerk_counts_per_s3": None})
    assert cfg.axes == 8 and math.isinf(cfg.jerk_counts_per_s3)
    assert MotionConfig.from_mapping(MotionConfig().to_dict()) == MotionConfig()
    with pytest.raises(ConfigError, match="velocity_counts"):
        MotionConfig.from_mapping({"velocity_counts": 5})


def test_axis_scales():
    k = axis_scales(64)
    assert k.shape == (64,)
    assert k[0] == 1.0
    assert np.all(np.diff(k) < 0)
    assert np.all(k > 0.5)
    assert np.array_equal(axis_scales(1), [1.0])
    assert np.array_equal(MotionConfig(axes=4).scales(), [1.0, 0.875, 0.75, 0.625])


@pytest.mark.parametrize("period", [0, -250_000, 250_000.0, True, None])
def test_trajectory_rejects_bad_period(period):
    with pytest.raises(ConfigError, match="period"):
        Trajectory(MotionConfig(), period)


def test_trajectory_rejects_non_config():
    with pytest.raises(ConfigError):
        Trajectory({"axes": 1}, 250_000)
    assert Trajectory(None, 250_000).config == MotionConfig()  # None: the defaults


def test_a_runs_unlimited_jerk_is_stored_as_json_softrt_reads_back():
    """``softrt run --motion trapezoid --jerk inf`` wrote ``Infinity`` into config.json and summary.json:
    no JSON (RFC 8259), so show and report refused the run it had just stored."""
    import json

    from softrt.schema.config import Config, RunConfig
    from softrt.store.validate import parse_json

    trap = MotionConfig(shape="trapezoid", jerk_counts_per_s3=math.inf)
    text = json.dumps(RunConfig(motion=trap).document().to_dict(), allow_nan=False)
    motion = Config.from_dict(parse_json(text, "config.json")).motion
    assert motion is not None and motion["jerk_counts_per_s3"] is None
    assert MotionConfig.from_mapping(motion) == trap
