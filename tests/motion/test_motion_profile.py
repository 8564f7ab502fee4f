"""Kinematics of the planned moves: limits, exact end position, continuity, reduced cases."""

from __future__ import annotations

import math

import numpy as np
import pytest

from softrt.errors import ConfigError
from softrt.motion import MoveProfile, plan_move, plan_scurve, plan_trapezoid

EPS = np.finfo(np.float64).eps
V, A, J = 200_000.0, 2.0e6, 4.0e7

# (shape, distance, velocity, accel, jerk, expected case)
CASES = [
    ("scurve", 100_000.0, V, A, J, "vmax+amax"),  # the default: all 7 segments
    ("scurve", 100_000.0, V, A, 1.0e7, "vmax"),  # v*j < a^2: amax never reached
    ("scurve", 20_000.0, V, A, J, "amax"),  # too short for vmax (needs 30,000)
    ("scurve", 5_000.0, V, A, J, "neither"),  # too short for amax (needs 10,000)
    ("scurve", 1.0, V, A, J, "neither"),  # one count
    ("scurve", 30_000.0, V, A, J, None),  # exactly at the vmax boundary
    ("scurve", 10_000.0, V, A, J, None),  # exactly at the amax boundary
    ("scurve", 3_000.0, V, A, 1.0e7, "neither"),  # short and v*j < a^2
    ("scurve", 1.0e9, V, A, J, "vmax+amax"),  # very long move
    ("scurve", 12_345.678, 1_000.0, 5.0e5, 1.0e9, "vmax+amax"),  # high jerk, low velocity
    ("trapezoid", 100_000.0, V, A, math.inf, "vmax+amax"),
    ("trapezoid", 10_000.0, V, A, math.inf, "amax"),  # triangular
    ("trapezoid", 20_000.0, V, A, math.inf, None),  # exactly at the boundary
    ("trapezoid", 1.0, V, A, math.inf, "amax"),
]


def _plan(shape, d, v, a, j) -> MoveProfile:
    return plan_move(d, v, a, j, shape)


def _tol(limit: float, distance: float, dt: float, order: int) -> float:
    """Limit tolerance for an order-th finite difference: relative 1e-9 plus the rounding of
    positions of size ~distance (each difference adds at most 2**order such errors)."""
    return limit * 1e-9 + (2**order) * 4 * EPS * max(distance, 1.0) / dt**order


@pytest.mark.parametrize("shape,d,v,a,j,case", CASES)
def test_limits_end_position_and_continuity(shape, d, v, a, j, case):
    prof = _plan(shape, d, v, a, j)
    if case is not None:
        assert prof.case == case
    T = prof.duration_s
    assert T > 0
    # exact end points
    assert prof.position(0.0) == 0.0
    assert prof.position(T) == d
    assert prof.position(T * 1.5) == d
    assert prof.position(-1.0) == 0.0
    assert abs(prof.position(prof.half_s) - d / 2) <= 1e-9 * d
    # analytic derivatives within the limits on a fine grid
    n = 20_001
    t = np.linspace(0.0, T, n)
    dt = t[1] - t[0]
    vel, acc, jer = prof.velocity(t), prof.acceleration(t), prof.jerk(t)
    assert np.all(np.abs(vel) <= v * (1 + 1e-9))
    assert np.all(np.abs(acc) <= a * (1 + 1e-9))
    if shape == "scurve":
        assert np.all(np.abs(jer) <= j * (1 + 1e-9))
    else:
        assert np.all(jer == 0.0)
    assert np.all(vel >= -1e-9 * v)  # a forward move never goes backwards
    # numeric derivatives of the position itself (what the axis gets), within the limits
    p = prof.position(t)
    fd1 = np.diff(p) / dt
    fd2 = np.diff(p, 2) / dt**2
    fd3 = np.diff(p, 3) / dt**3
    assert np.all(np.abs(fd1) <= v + _tol(v, d, dt, 1))
    assert np.all(np.abs(fd2) <= a + _tol(a, d, dt, 2))
    if shape == "scurve":
        assert np.all(np.abs(fd3) <= j + _tol(j, d, dt, 3))
    # continuity: no jump larger than the limits allow over one grid step
    assert np.max(np.abs(np.diff(vel))) <= a * dt * (1 + 1e-6) + 1e-9 * v
    if shape == "scurve":
        assert np.max(np.abs(np.diff(acc))) <= j * dt * (1 + 1e-6) + 1e-9 * a
    # the velocity polynomial is the derivative of the position polynomial (and acceleration of
    # velocity): central differences over a small h, which differ from the derivative by at most
    # max|next derivative| * h even across a kink, plus rounding
    h = 1e-4 * prof.t_accel_s
    tc = np.linspace(h, T - h, 5_001)
    cd_v = (prof.position(tc + h) - prof.position(tc - h)) / (2 * h)
    assert np.all(np.abs(cd_v - prof.velocity(tc)) <= a * h + _tol(v, d, 2 * h, 1))
    if shape == "scurve":
        cd_a = (prof.velocity(tc + h) - prof.velocity(tc - h)) / (2 * h)
        assert np.all(np.abs(cd_a - prof.acceleration(tc)) <= j * h + 1e-9 * a + 8 * EPS * v / h)
    # point symmetry of a rest-to-rest move: p(t) + p(T - t) = D
    assert np.allclose(p + prof.position(T - t), d, rtol=0, atol=1e-9 * d + 1e-12)


@pytest.mark.parametrize("shape,d,v,a,j,case", [c for c in CASES if c[5] is not None])
def test_reaches_the_limits_its_case_says(shape, d, v, a, j, case):
    """Time-optimality sanity: the limits the case names are reached, the others are not."""
    prof = _plan(shape, d, v, a, j)
    t = np.linspace(0.0, prof.duration_s, 200_001)
    vpeak = np.max(prof.velocity(t))
    apeak = np.max(np.abs(prof.acceleration(t)))
    if "vmax" in case:
        assert vpeak == pytest.approx(v, rel=1e-9)
        assert prof.t_const_s > 0
    else:
        assert vpeak < v * (1 - 1e-6)
        assert prof.t_const_s == 0
    if "amax" in case:
        assert apeak == pytest.approx(a, rel=1e-6)
    else:
        assert apeak < a * (1 - 1e-6)


def test_known_durations():
    # default S-curve: Tj = a/j = 0.05, Ta = Tj + v/a = 0.15, Tv = D/v - Ta = 0.35
    p = plan_scurve(100_000, V, A, J)
    assert (p.t_jerk_s, p.t_accel_s, p.t_const_s) == pytest.approx((0.05, 0.15, 0.35), rel=1e-12)
    assert p.duration_s == pytest.approx(0.65, rel=1e-12)
    # pure-jerk short move: D = 2 j Tj^3, T = 4 Tj
    p = plan_scurve(5_000, V, A, J)
    tj = (5_000 / (2 * J)) ** (1 / 3)
    assert p.duration_s == pytest.approx(4 * tj, rel=1e-12)
    assert p.peak_velocity_counts_per_s == pytest.approx(J * tj * tj, rel=1e-9)
    # amax reached, vmax not: D = a Ta (Ta - Tj)
    p = plan_scurve(20_000, V, A, J)
    ta = p.t_accel_s
    assert A * ta * (ta - 0.05) == pytest.approx(20_000, rel=1e-12)
    # trapezoid: Ta = v/a = 0.1, Tv = 0.4; triangle: Ta = sqrt(D/a)
    p = plan_trapezoid(100_000, V, A)
    assert (p.t_accel_s, p.t_const_s, p.duration_s) == pytest.approx((0.1, 0.4, 0.6), rel=1e-12)
    p = plan_trapezoid(10_000, V, A)
    assert p.duration_s == pytest.approx(2 * math.sqrt(10_000 / A), rel=1e-12)
    assert p.peak_velocity_counts_per_s == pytest.approx(A * math.sqrt(10_000 / A), rel=1e-12)


def test_scurve_is_slower_than_trapezoid_and_converges_to_it():
    trap = plan_trapezoid(100_000, V, A)
    soft = plan_scurve(100_000, V, A, J)
    stiff = plan_scurve(100_000, V, A, 1e15)
    assert soft.duration_s > trap.duration_s
    assert stiff.duration_s == pytest.approx(trap.duration_s, rel=1e-6)


def test_infinite_jerk_means_trapezoid():
    assert plan_move(50_000, V, A).shape == "trapezoid"
    assert plan_move(50_000, V, A, math.inf, "scurve").shape == "trapezoid"
    assert plan_move(50_000, V, A, J, "trapezoid").jerk_counts_per_s3 == 0.0


def test_zero_distance_is_an_empty_move():
    p = plan_scurve(0, V, A, J)
    assert p.duration_s == 0.0
    assert np.all(p.position(np.linspace(-1, 1, 11)) == 0.0)


@pytest.mark.parametrize(
    "args",
    [
        (100, 0, A, J),
        (100, -1, A, J),
        (100, V, 0, J),
        (100, V, -A, J),
        (100, V, A, 0),
        (100, V, A, -J),
        (100, math.nan, A, J),
        (100, V, math.inf, J),
        (100, V, A, math.inf),
        (-5, V, A, J),
        (math.nan, V, A, J),
        (math.inf, V, A, J),
        ("100", V, A, J),
        (100, True, A, J),
        (100, V, None, J),
    ],
)
def test_scurve_rejects_bad_limits(args):
    with pytest.raises(ConfigError) as err:
        plan_scurve(*args)
    assert err.value.hint


def test_unknown_shape():
    with pytest.raises(ConfigError, match="shape"):
        plan_move(100, V, A, J, "sine")
