"""Point-to-point move planning: jerk-limited 7-segment S-curve and trapezoid (pure).

A rest-to-rest move (start and end velocity and acceleration zero) with the same limits for
acceleration and deceleration is point-symmetric about its middle: v(t) = v(T - t), so
p(t) = D - p(T - t). Only the first half is stored, as up to four polynomial pieces in local time
u = t - start (jerk-up, constant acceleration, jerk-down, constant velocity); the second half is
its mirror. The mirror is what makes the final position exactly D: p(T) = D - p_half(0) = D - 0.

Time parameters follow L. Biagiotti and C. Melchiorri, "Trajectory Planning for Automatic
Machines and Robots", Springer 2008, section 3.4 ("Trajectory with double S velocity profile"),
eqs. (3.19)-(3.26), specialised to v0 = v1 = 0 (rest to rest):

* ``Tj`` jerk time, ``Ta`` acceleration time (= deceleration time), ``Tv`` constant-velocity time;
* the maximum acceleration is reached when ``vmax * jmax >= amax**2`` (else the acceleration
  phase is jerk-up/jerk-down only, with ``Tj = sqrt(vmax / jmax)``);
* the maximum velocity is reached when the acceleration and deceleration distances fit in D,
  otherwise ``Tv = 0`` and, if D is long enough for amax (``D >= 2 amax**3 / jmax**2``),
  ``Ta = (Tj + sqrt(Tj**2 + 4 D / amax)) / 2`` (their eq. 3.26a with v0 = v1 = 0), else
  ``Tj = cbrt(D / (2 jmax))``, ``Ta = 2 Tj`` (pure jerk: the peak acceleration is jmax * Tj).

The trapezoid is the limit jmax -> infinity: Tj = 0, Ta = vmax / amax, or Ta = sqrt(D / amax)
for a triangular (short) move. Unlike the general planner of the book no iteration is needed:
rest to rest the reduced cases have the closed forms above.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..errors import ConfigError

SHAPES = ("scurve", "trapezoid")


@dataclass(frozen=True)
class MoveProfile:
    """One planned rest-to-rest move from 0 to ``distance_counts`` (times in s, counts)."""

    shape: str
    #: Which limits the move reaches: "vmax+amax", "vmax" (amax not reached), "amax" (vmax not
    #: reached) or "neither" (short move: jerk-up/jerk-down only, or a triangle for a trapezoid).
    case: str
    distance_counts: float
    #: Limits the plan was made for (jerk is ``math.inf`` for a trapezoid).
    velocity_limit_counts_per_s: float
    accel_limit_counts_per_s2: float
    jerk_limit_counts_per_s3: float
    #: What the move actually reaches (at most the limits; less in the reduced cases).
    peak_velocity_counts_per_s: float
    peak_accel_counts_per_s2: float
    jerk_counts_per_s3: float  # jerk used in the jerk pieces (0 for a trapezoid)
    t_jerk_s: float  # Tj: length of each jerk piece
    t_accel_s: float  # Ta: length of the acceleration phase (= deceleration phase)
    t_const_s: float  # Tv: length of the constant-velocity phase
    duration_s: float  # T = 2 Ta + Tv
    half_s: float  # T / 2: the mirror point
    #: Ends of the first three half-move pieces (jerk-up, constant accel, jerk-down); the fourth
    #: (constant velocity) runs to ``half_s``. Equal ends mean an empty piece.
    bounds_s: tuple[float, float, float]
    #: Start time of each of the four pieces.
    starts_s: tuple[float, float, float, float]
    #: Position polynomial of each piece: p = c0 + u*(c1 + u*(c2 + u*c3)), u = t - start.
    coeffs: tuple[tuple[float, float, float, float], ...]

    # -- vectorised evaluation (analysis and tests; the real-time path is in trajectory.py) ----
    def position(self, t_s: np.ndarray | float) -> np.ndarray:
        """Position at times *t_s* (0 before the move, D after it)."""
        return _evaluate(self, np.asarray(t_s, dtype=np.float64), 0)

    def velocity(self, t_s: np.ndarray | float) -> np.ndarray:
        """Velocity at times *t_s* (analytic derivative of :meth:`position`)."""
        return _evaluate(self, np.asarray(t_s, dtype=np.float64), 1)

    def acceleration(self, t_s: np.ndarray | float) -> np.ndarray:
        """Acceleration at times *t_s*."""
        return _evaluate(self, np.asarray(t_s, dtype=np.float64), 2)

    def jerk(self, t_s: np.ndarray | float) -> np.ndarray:
        """Jerk at times *t_s* (piecewise constant; at a piece boundary the later piece's)."""
        return _evaluate(self, np.asarray(t_s, dtype=np.float64), 3)


def half_position(profile: MoveProfile, tt: np.ndarray) -> np.ndarray:
    """First-half position at half-times *tt* (0 <= tt <= T/2), vectorised.

    Same piece choice (``tt < bound``) and the same Horner order as the real-time path in
    :class:`~softrt.motion.trajectory.Trajectory`, so both give bit-identical floats.
    """
    return half_position_tables(half_tables(profile), tt)


def half_tables(profile: MoveProfile) -> tuple[np.ndarray, ...]:
    """(bounds, starts, c0, c1, c2, c3) as float64 arrays, for :func:`half_position_tables`."""
    c = np.asarray(profile.coeffs, dtype=np.float64)
    return (
        np.asarray(profile.bounds_s, dtype=np.float64),
        np.asarray(profile.starts_s, dtype=np.float64),
        *(np.ascontiguousarray(c[:, i]) for i in range(4)),
    )


def half_position_tables(tables: tuple[np.ndarray, ...], tt: np.ndarray) -> np.ndarray:
    """:func:`half_position` with the tables precomputed (the analysis path calls it per block)."""
    bounds, starts, c0, c1, c2, c3 = tables
    piece = np.searchsorted(bounds, tt, side="right")  # number of bounds <= tt: the hot path's tt < b
    u = tt - starts.take(piece)
    return c0.take(piece) + u * (c1.take(piece) + u * (c2.take(piece) + u * c3.take(piece)))


def _evaluate(profile: MoveProfile, t: np.ndarray, order: int) -> np.ndarray:
    """Derivative *order* (0 = position … 3 = jerk) of the whole move at times *t*."""
    T = profile.duration_s
    moving = (t >= 0.0) & (t < T)
    second = t >= profile.half_s
    tt = np.where(second, T - t, t)
    tt = np.clip(tt, 0.0, profile.half_s)
    piece = np.searchsorted(np.asarray(profile.bounds_s), tt, side="right")
    c = np.asarray(profile.coeffs, dtype=np.float64)[piece]
    u = tt - np.asarray(profile.starts_s)[piece]
    if order == 0:
        half = c[..., 0] + u * (c[..., 1] + u * (c[..., 2] + u * c[..., 3]))
        out = np.where(second, profile.distance_counts - half, half)
        out = np.where(t >= T, profile.distance_counts, out)
        return np.where(t < 0.0, 0.0, out)
    if order == 1:
        d = c[..., 1] + u * (2.0 * c[..., 2] + u * 3.0 * c[..., 3])
        sign = 1.0  # p(t) = D - p_half(T - t)  =>  v(t) = v_half(T - t)
    elif order == 2:
        d = 2.0 * c[..., 2] + 6.0 * c[..., 3] * u
        sign = -1.0  # a(t) = -a_half(T - t)
    else:
        d = 6.0 * c[..., 3] + 0.0 * u
        sign = 1.0  # j(t) = j_half(T - t)
    d = np.where(second, sign * d, d)
    return np.where(moving, d, 0.0)


# -- planning --------------------------------------------------------------------------------
def _check_limit(name: str, value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ConfigError(f"{name} must be a number, got {value!r}", hint=f"give {name} as a positive number")
    value = float(value)
    if not math.isfinite(value) or value <= 0.0:
        raise ConfigError(f"{name} must be a positive finite number, got {value!r}", hint=f"set {name} above 0")
    return value


def _check_distance(distance: float) -> float:
    if isinstance(distance, bool) or not isinstance(distance, (int, float, np.integer, np.floating)):
        raise ConfigError(f"distance must be a number of counts, got {distance!r}", hint="give it as a number >= 0")
    distance = float(distance)
    if not math.isfinite(distance) or distance < 0.0:
        raise ConfigError(
            f"distance must be a finite number >= 0 counts, got {distance!r}",
            hint="plan the move forward; the reverse move is its mirror",
        )
    return distance


def plan_scurve(
    distance_counts: float, velocity_counts_per_s: float, accel_counts_per_s2: float, jerk_counts_per_s3: float
) -> MoveProfile:
    """Plan a jerk-limited (7-segment, "double S") rest-to-rest move of *distance_counts*."""
    D = _check_distance(distance_counts)
    vmax = _check_limit("velocity", velocity_counts_per_s)
    amax = _check_limit("acceleration", accel_counts_per_s2)
    jmax = _check_limit("jerk", jerk_counts_per_s3)
    # Acceleration phase that reaches vmax (Biagiotti-Melchiorri eq. 3.19 with v0 = 0).
    if vmax * jmax >= amax * amax:
        Tj = amax / jmax
        Ta = Tj + vmax / amax
        a_peak, case = amax, "vmax+amax"
    else:  # amax is never reached: jerk-up straight into jerk-down
        Tj = math.sqrt(vmax / jmax)
        Ta = 2.0 * Tj
        a_peak, case = jmax * Tj, "vmax"
    # The acceleration profile is point-symmetric, so the phase's mean velocity is vmax / 2
    # and the two phases cover vmax * Ta together.
    Tv = D / vmax - Ta
    if Tv <= 0.0:  # vmax is not reached (or just touched): no constant-velocity phase
        Tv = 0.0
        if 2.0 * amax**3 / (jmax * jmax) <= D:  # amax is still reached (eq. 3.26a, v0 = v1 = 0)
            Tj = amax / jmax
            Ta = 0.5 * (Tj + math.sqrt(Tj * Tj + 4.0 * D / amax))
            Ta = max(Ta, 2.0 * Tj)  # rounding at the boundary of the two cases
            a_peak, case = amax, "amax"
        else:  # pure jerk: D = 2 jmax Tj**3
            Tj = (D / (2.0 * jmax)) ** (1.0 / 3.0)
            Ta = 2.0 * Tj
            a_peak, case = jmax * Tj, "neither"
    return _build("scurve", D, vmax, amax, jmax, jmax, Tj, Ta, Tv, a_peak, case)


def plan_trapezoid(distance_counts: float, velocity_counts_per_s: float, accel_counts_per_s2: float) -> MoveProfile:
    """Plan a trapezoidal (infinite jerk) rest-to-rest move; triangular when vmax is not reached."""
    D = _check_distance(distance_counts)
    vmax = _check_limit("velocity", velocity_counts_per_s)
    amax = _check_limit("acceleration", accel_counts_per_s2)
    Ta = vmax / amax
    Tv = D / vmax - Ta
    case = "vmax+amax"
    if Tv <= 0.0:  # triangular: D = amax Ta**2
        Tv = 0.0
        Ta = math.sqrt(D / amax)
        case = "amax" if D > 0.0 else "neither"
    return _build("trapezoid", D, vmax, amax, math.inf, 0.0, 0.0, Ta, Tv, amax if Ta > 0.0 else 0.0, case)


def plan_move(
    distance_counts: float,
    velocity_counts_per_s: float,
    accel_counts_per_s2: float,
    jerk_counts_per_s3: float = math.inf,
    shape: str = "scurve",
) -> MoveProfile:
    """Plan a move of *shape* ("scurve" or "trapezoid"); an infinite jerk means a trapezoid."""
    if shape not in SHAPES:
        raise ConfigError(f"unknown motion shape {shape!r}", hint=f"use one of {', '.join(SHAPES)}")
    if shape == "trapezoid" or jerk_counts_per_s3 == math.inf:
        return plan_trapezoid(distance_counts, velocity_counts_per_s, accel_counts_per_s2)
    return plan_scurve(distance_counts, velocity_counts_per_s, accel_counts_per_s2, jerk_counts_per_s3)


def _build(
    shape: str,
    D: float,
    vmax: float,
    amax: float,
    jlimit: float,
    j: float,
    Tj: float,
    Ta: float,
    Tv: float,
    a_peak: float,
    case: str,
) -> MoveProfile:
    """Integrate the half move piece by piece into position polynomials (local time u)."""
    Tc = max(Ta - 2.0 * Tj, 0.0)  # constant-acceleration time
    # piece 0: jerk +j from rest               p = j u^3 / 6
    c0 = (0.0, 0.0, 0.0, j / 6.0)
    p1 = j * Tj**3 / 6.0
    v1 = 0.5 * j * Tj * Tj
    # piece 1: constant acceleration a_peak    p = p1 + v1 u + a u^2 / 2
    c1 = (p1, v1, 0.5 * a_peak, 0.0)
    p2 = p1 + v1 * Tc + 0.5 * a_peak * Tc * Tc
    v2 = v1 + a_peak * Tc
    # piece 2: jerk -j from a_peak             p = p2 + v2 u + a u^2 / 2 - j u^3 / 6
    c2 = (p2, v2, 0.5 * a_peak, -j / 6.0)
    p3 = p2 + v2 * Tj + 0.5 * a_peak * Tj * Tj - j * Tj**3 / 6.0
    v3 = v2 + a_peak * Tj - 0.5 * j * Tj * Tj  # = a_peak (Ta - Tj): the peak velocity
    if Tv > 0.0:
        v3 = vmax  # reached: the constant-velocity piece runs exactly at the limit
        # Tv from the integrated distance, so that p_half(T/2) = D/2 (continuity at the mirror).
        Tv = max((D - 2.0 * p3) / v3, 0.0)
    # piece 3: constant velocity               p = p3 + v3 u
    c3 = (p3, v3, 0.0, 0.0)
    t1 = Tj
    t2 = Tj + Tc
    t3 = 2.0 * Tj + Tc
    T = 2.0 * t3 + Tv
    return MoveProfile(
        shape=shape,
        case=case,
        distance_counts=D,
        velocity_limit_counts_per_s=vmax,
        accel_limit_counts_per_s2=amax,
        jerk_limit_counts_per_s3=jlimit,
        peak_velocity_counts_per_s=v3,
        peak_accel_counts_per_s2=a_peak,
        jerk_counts_per_s3=j,
        t_jerk_s=Tj,
        t_accel_s=t3,
        t_const_s=Tv,
        duration_s=T,
        half_s=0.5 * T,
        bounds_s=(t1, t2, t3),
        starts_s=(0.0, t1, t2, t3),
        coeffs=(c0, c1, c2, c3),
    )
