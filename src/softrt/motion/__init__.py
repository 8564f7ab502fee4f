"""The seed's motion test: repeated point-to-point moves and what missed cycles do to them.

* :mod:`.profile` plans one jerk-limited S-curve or trapezoidal move;
* :mod:`.config` holds :class:`MotionConfig` (the test's parameters);
* :mod:`.trajectory` computes the target of each cycle (:meth:`Trajectory.next_target`, the
  real-time path) and the same targets vectorised (:meth:`Trajectory.positions`);
* :mod:`.impact` reconstructs what the board delivered from the per-write board cycles.
"""

from __future__ import annotations

from .config import MAX_AXES, MotionConfig, axis_scales
from .impact import MotionImpactStream, MotionTrace, motion_impact, motion_trace
from .profile import SHAPES, MoveProfile, plan_move, plan_scurve, plan_trapezoid
from .trajectory import Trajectory

__all__ = [
    "MAX_AXES",
    "SHAPES",
    "MotionConfig",
    "MotionImpactStream",
    "MotionTrace",
    "MoveProfile",
    "Trajectory",
    "axis_scales",
    "motion_impact",
    "motion_trace",
    "plan_move",
    "plan_scurve",
    "plan_trapezoid",
]
