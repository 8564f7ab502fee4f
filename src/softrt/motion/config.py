"""MotionConfig: the seed's motion test as parameters (pure, validated on construction).

The defaults are a plausible servo axis at a 250 µs cycle: a 100,000-count move at up to
200,000 counts/s, 2e6 counts/s² and 4e7 counts/s³ takes 0.65 s (jerk 0.05 s, accel 0.15 s,
cruise 0.35 s); with a 0.5 s dwell at each end a move plus dwell lasts 1.15 s, so a 10 s run
holds about eight moves. At 250 µs the commanded velocity changes by at most
2e6 * 250e-6 = 500 counts/s per cycle, while one missed update at full speed is a step of
200,000 counts/s (a 50-count position error): the contrast the motion-impact model reports.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

import numpy as np

from ..errors import ConfigError
from .profile import SHAPES, MoveProfile, plan_move

#: The most axes one softrt run (and one motion test) takes: the one bound, used by session.config
#: and the CLI too. The real-time loop computes every axis's target each cycle, so the per-cycle
#: vector must stay small; 1024 axes is far beyond any machine the seed describes (64 is large)
#: and well inside EtherCAT's 65,535 addressable slaves (16-bit station address, ETG.1000.4).
MAX_AXES = 1024
#: The longest move (with its dwell) a motion test plans, in ns: what an int64 nanosecond count
#: holds (about 292 years). A run's own bound, its cycles, is checked by :meth:`MotionConfig.check_run`.
MAX_MOVE_NS = (1 << 63) - 1
#: The longest move distance, in counts: an int64 position counter (a CiA 402 drive's is 32 bits;
#: softrt's master clamps the target to it). Beyond it the positions lose whole counts anyway.
MAX_DISTANCE_COUNTS = float(1 << 63)


def axis_scales(axes: int) -> np.ndarray:
    """Scale factor of each axis in the coordinated move: k_a = 1 - a / (2 axes), k_0 = 1.

    Every axis follows the lead axis's normalised path times k_a, so it reaches
    k_a * (velocity, acceleration, jerk) <= the limits, and all axes start and stop together
    (a coordinated linear move). 1 - a/(2 axes) > 1/2, so no axis stands still.
    """
    a = np.arange(axes, dtype=np.float64)
    return 1.0 - a / (2.0 * axes)


@dataclass(frozen=True)
class MotionConfig:
    """Repeated point-to-point moves 0 → D → 0 → … with a dwell at each end, on *axes* axes."""

    axes: int = 1
    shape: str = "scurve"  # "scurve" (jerk-limited, 7 segments) or "trapezoid" (jerk ignored)
    distance_counts: float = 100_000.0
    velocity_counts_per_s: float = 200_000.0
    accel_counts_per_s2: float = 2.0e6
    jerk_counts_per_s3: float = 4.0e7
    dwell_s: float = 0.5

    def __post_init__(self) -> None:
        axes = self.axes
        if isinstance(axes, bool) or not isinstance(axes, (int, np.integer)):
            raise ConfigError(f"motion axes must be a whole number, got {axes!r}", hint="use e.g. axes = 1 or 64")
        if not 1 <= axes <= MAX_AXES:
            raise ConfigError(
                f"motion axes must be between 1 and {MAX_AXES}, got {axes}",
                hint="use at least one axis (64 is a large machine)",
            )
        object.__setattr__(self, "axes", int(axes))
        if self.shape not in SHAPES:
            raise ConfigError(f"unknown motion shape {self.shape!r}", hint=f"use one of: {', '.join(SHAPES)}")
        for name, what in (
            ("distance_counts", "the move length"),
            ("velocity_counts_per_s", "the velocity limit"),
            ("accel_counts_per_s2", "the acceleration limit"),
            ("jerk_counts_per_s3", "the jerk limit"),
        ):
            object.__setattr__(
                self, name, _positive(name, getattr(self, name), what, allow_inf=name == "jerk_counts_per_s3")
            )
        if self.shape == "scurve" and math.isinf(self.jerk_counts_per_s3):
            raise ConfigError(
                "an S-curve needs a finite jerk_counts_per_s3", hint='use shape = "trapezoid" for an unlimited jerk'
            )
        dwell = self.dwell_s
        if (
            isinstance(dwell, bool)
            or not isinstance(dwell, (int, float, np.integer, np.floating))
            or not math.isfinite(float(dwell))
            or float(dwell) < 0.0
        ):
            raise ConfigError(
                f"dwell_s must be a finite number of seconds >= 0, got {dwell!r}",
                hint="use e.g. dwell_s = 0.5 (0 means back-to-back moves)",
            )
        object.__setattr__(self, "dwell_s", float(dwell))
        self._check_plan()

    def _check_plan(self) -> None:
        """Refuse limits whose move cannot be planned in finite, bounded figures (``--distance 1e300``,
        ``--velocity 1e-300``): the planner's arithmetic would overflow or divide by an underflowed 0."""
        if self.distance_counts > MAX_DISTANCE_COUNTS:
            raise ConfigError(
                f"distance_counts (the move length) must be at most {MAX_DISTANCE_COUNTS:.3g} counts "
                f"(an int64 position), got {self.distance_counts:.6g}",
                hint="give the move in encoder counts, e.g. --distance 100000",
            )
        try:
            plan = self.plan()
            figures = (
                plan.duration_s,
                plan.peak_velocity_counts_per_s,
                plan.peak_accel_counts_per_s2,
                plan.t_jerk_s,
                plan.t_accel_s,
                plan.t_const_s,
                *plan.bounds_s,
                *(c for piece in plan.coeffs for c in piece),
            )
            ok = all(math.isfinite(x) for x in figures)
        except (ArithmeticError, ValueError):  # OverflowError, ZeroDivisionError (an underflowed limit)
            ok = False
        if not ok or (plan.duration_s + self.dwell_s) * 1e9 > MAX_MOVE_NS:
            raise ConfigError(
                f"the move cannot be planned: {self.distance_counts:.6g} counts at velocity "
                f"{self.velocity_counts_per_s:.6g}, accel {self.accel_counts_per_s2:.6g}, jerk "
                f"{self.jerk_counts_per_s3:.6g} (and a {self.dwell_s:.6g} s dwell) would take "
                f"{'longer than 292 years' if ok else 'for ever'}",
                hint="use limits of the same order as the defaults (--distance 100000 --velocity 200000 "
                "--accel 2e6 --jerk 4e7)",
            )

    def check_run(self, period_ns: int, max_cycles: int) -> None:
        """Refuse a move that the run cannot hold in bounded figures: its cycles (move and dwell at
        *period_ns*) must not exceed *max_cycles*, the most the run may last (``--max-duration``):
        the trajectory and the impact model count samples in int64 (a position step over the
        period is finite once the distance is bounded, :data:`MAX_DISTANCE_COUNTS`). Raises ConfigError."""
        period_s = period_ns / 1e9
        half_s = self.plan().duration_s + self.dwell_s
        if half_s / period_s > max_cycles:
            raise ConfigError(
                f"one move and its dwell take {half_s:.6g} s, more than the {max_cycles:,} cycles "
                f"({max_cycles * period_s:,.0f} s) the run may last",
                hint="raise --velocity/--accel/--jerk or shorten --distance (a scenario: its [motion] "
                "table), or raise --max-duration",
            )

    # -- derived --------------------------------------------------------------------------
    def plan(self) -> MoveProfile:
        """The lead axis's single move 0 → distance_counts."""
        return plan_move(
            self.distance_counts,
            self.velocity_counts_per_s,
            self.accel_counts_per_s2,
            self.jerk_counts_per_s3,
            self.shape,
        )

    def scales(self) -> np.ndarray:
        """Per-axis scale factors of the coordinated move (see :func:`axis_scales`)."""
        return axis_scales(self.axes)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-friendly values (an infinite jerk becomes None)."""
        d = asdict(self)
        if math.isinf(d["jerk_counts_per_s3"]):
            d["jerk_counts_per_s3"] = None
        return d

    @classmethod
    def from_mapping(cls, values: Mapping[str, object]) -> MotionConfig:
        """Build from a mapping (a TOML table, JSON); unknown keys are an error, not ignored."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ConfigError(
                f"unknown motion setting(s) {', '.join(map(repr, unknown))}",
                hint=f"known settings: {', '.join(sorted(known))}",
            )
        kwargs = dict(values)
        if kwargs.get("jerk_counts_per_s3", 0.0) is None:
            kwargs["jerk_counts_per_s3"] = math.inf
        return cls(**kwargs)  # type: ignore[arg-type]


def _positive(name: str, value: object, what: str, *, allow_inf: bool) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ConfigError(f"{name} ({what}) must be a number, got {value!r}", hint=f"give {name} as a number above 0")
    value = float(value)
    if math.isnan(value) or value <= 0.0 or (math.isinf(value) and not allow_inf):
        raise ConfigError(
            f"{name} ({what}) must be a positive finite number, got {value!r}", hint=f"set {name} above 0"
        )
    return value
