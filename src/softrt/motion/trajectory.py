"""Trajectory: the seed's step (3), "compute the next target position", once per cycle.

Sample n is the target for time n * period. The axes repeat 0 → D → 0 → … for ever: each half
cycle is one move (planned once, :mod:`.profile`) followed by a dwell at the end position, and
lasts a whole number of samples H = ceil((T + dwell) / period), so every move starts exactly on a
sample (the dwell is stretched by less than one period). The backward move is D minus the
forward move. Multi-axis is a coordinated linear move: axis a gets k_a times the lead axis's
position (:func:`.config.axis_scales`).

:meth:`Trajectory.next_target` is on the real-time path, budgeted at well under 1 µs for one
axis in CPython 3.11 (a global or attribute lookup costs ~20-40 ns): plain float arithmetic on
constants precomputed at construction, evaluated from the move's polynomial pieces in every call
(no lookup tables), state kept as a float phase counter so ``k * period`` needs no int→float
conversion, and for several axes one in-place ``np.multiply`` into a preallocated buffer.
:meth:`Trajectory.positions` is the vectorised twin for analysis: the same comparisons in the
same order and the same Horner evaluation (:func:`.profile.half_position`), so it returns the same
floats bit for bit (IEEE 754 makes each +, -, * exact-rounded in both CPython and numpy, and
adding an exact 0.0 coefficient changes nothing).
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import ConfigError
from .config import MotionConfig
from .profile import MoveProfile, half_position_tables, half_tables

#: Samples evaluated per block in :meth:`Trajectory.positions`: small enough that numpy's
#: temporaries stay in cache and on the heap (2 MB ones cost a fresh mmap and page faults each).
_BLOCK = 1 << 13


class Trajectory:
    """The per-cycle target generator of the seed's motion test (see the module docstring)."""

    __slots__ = (
        "_b1",
        "_b2",
        "_b3",
        "_back",
        "_buf",
        "_c1",
        "_c2",
        "_c3",
        "_distance",
        "_half_f",
        "_j6",
        "_k",
        "_mul",
        "_p0",
        "_period_s",
        "_s1",
        "_s2",
        "_s3",
        "_scale",
        "_t_half",
        "_t_move",
        "_tables",
        "axes",
        "config",
        "half_cycle_samples",
        "period_ns",
        "profile",
        "sample_index",
    )

    def __init__(self, config: MotionConfig | None, period_ns: int) -> None:
        if config is None:
            config = MotionConfig()
        if not isinstance(config, MotionConfig):
            raise ConfigError(
                f"a trajectory needs a MotionConfig, got {type(config).__name__}",
                hint="build one with softrt.motion.MotionConfig(...)",
            )
        if isinstance(period_ns, bool) or not isinstance(period_ns, (int, np.integer)) or period_ns <= 0:
            raise ConfigError(
                f"cycle period must be a positive whole number of ns, got {period_ns!r}", hint="e.g. 250000 for 250 µs"
            )
        self.config = config
        self.profile: MoveProfile = config.plan()
        self.period_ns = int(period_ns)
        self.axes = config.axes
        self._period_s = self.period_ns / 1e9
        prof = self.profile
        self._t_move = prof.duration_s
        self._t_half = prof.half_s
        self._distance = prof.distance_counts
        half = max(1, math.ceil((prof.duration_s + config.dwell_s) / self._period_s))
        self.half_cycle_samples = half
        self._half_f = float(half)
        self._b1, self._b2, self._b3 = prof.bounds_s
        _, self._s1, self._s2, self._s3 = prof.starts_s
        self._j6 = prof.coeffs[0][3]  # piece 0 starts at rest: p = u*(u*(u*j/6))
        self._c1 = prof.coeffs[1][:3]  # constant acceleration: cubic term is 0
        self._c2 = prof.coeffs[2]
        self._c3 = prof.coeffs[3][:2]  # constant velocity: only c0 + u*c1
        if self.axes > 1:
            self._scale = config.scales()
            self._buf = np.zeros(self.axes, dtype=np.float64)
        else:
            self._scale = None
            self._buf = None
        self._mul = np.multiply
        # A preallocated 0-d array for the scalar position: numpy would otherwise convert the
        # Python float into a new array object on every call (about half the 64-axis cost).
        self._p0 = np.zeros(())
        self._tables = half_tables(prof)
        self.sample_index = 0
        self._k = 0.0
        self._back = False

    @property
    def cycle_samples(self) -> int:
        """Samples in one full back-and-forth cycle (two moves and two dwells)."""
        return 2 * self.half_cycle_samples

    @property
    def scales(self) -> np.ndarray:
        """A copy of the per-axis scale factors (axis 0, the lead axis, is 1.0)."""
        return self.config.scales()

    def reset(self, sample_index: int = 0) -> None:
        """Restart so that the next :meth:`next_target` returns sample *sample_index*."""
        if isinstance(sample_index, bool) or not isinstance(sample_index, (int, np.integer)) or sample_index < 0:
            raise ConfigError(
                f"sample index must be a whole number >= 0, got {sample_index!r}",
                hint="sample 0 is the start of the first move",
            )
        m = int(sample_index) % (2 * self.half_cycle_samples)
        self._back = m >= self.half_cycle_samples
        self._k = float(m - self.half_cycle_samples if self._back else m)
        self.sample_index = int(sample_index)

    # -- the real-time path -------------------------------------------------------------------
    def next_target(self, seq: int = 0):
        """Return the target of sample ``sample_index`` and advance to the next sample.

        One axis: a float. Several axes: the same preallocated float64 array every call
        (overwritten by the next call, so the caller copies it, as the board's latch does).
        *seq* is ignored: it lets the loop call this directly as its ``step(seq)``.
        """
        k = self._k
        t = k * self._period_s
        T = self._t_move
        if t < T:
            second = t >= self._t_half
            tt = T - t if second else t  # the second half mirrors the first: p = D - p_half(T - t)
            if tt < self._b1:
                p = tt * (tt * (tt * self._j6))
            elif tt < self._b2:
                u = tt - self._s1
                c0, c1, c2 = self._c1
                p = c0 + u * (c1 + u * c2)
            elif tt < self._b3:
                u = tt - self._s2
                c0, c1, c2, c3 = self._c2
                p = c0 + u * (c1 + u * (c2 + u * c3))
            else:
                c0, c1 = self._c3
                p = c0 + (tt - self._s3) * c1
            if second:
                p = self._distance - p
        else:  # dwell at the end of the move
            p = self._distance
        if self._back:
            p = self._distance - p
        k += 1.0
        if k == self._half_f:
            k = 0.0
            self._back = not self._back
        self._k = k
        self.sample_index += 1
        buf = self._buf
        if buf is None:
            return p
        p0 = self._p0
        p0[()] = p
        self._mul(self._scale, p0, buf)  # in place: no new array
        return buf

    # -- vectorised twin (analysis) ----------------------------------------------------------
    def positions(self, sample_indices: np.ndarray, axis: int = 0) -> np.ndarray:
        """Targets of *axis* at *sample_indices*, equal to what :meth:`next_target` returns."""
        if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)) or not 0 <= axis < self.axes:
            raise ConfigError(f"axis {axis!r} does not exist", hint=f"use 0 to {self.axes - 1}")
        n = np.asarray(sample_indices)
        if n.dtype.kind not in "iu":
            raise ConfigError(
                f"sample indices must be integers, got dtype {n.dtype}", hint="pass an int64 array of sample numbers"
            )
        if n.size and int(n.min()) < 0:
            raise ConfigError("sample indices must be >= 0", hint="sample 0 is the start of the first move")
        flat = n.reshape(-1).astype(np.int64, copy=False)
        out = np.empty(flat.shape, dtype=np.float64)
        scale = None if self.axes == 1 else float(self.config.scales()[axis])
        for lo in range(0, flat.size, _BLOCK):
            out[lo : lo + _BLOCK] = self._block(flat[lo : lo + _BLOCK], scale)
        return out.reshape(n.shape)

    def _block(self, n: np.ndarray, scale: float | None) -> np.ndarray:
        half = self.half_cycle_samples
        D = self._distance
        T = self._t_move
        m = n % (2 * half)
        back = m >= half
        k = np.where(back, m - half, m).astype(np.float64)
        t = k * self._period_s
        second = t >= self._t_half
        tt = np.where(second, T - t, t)
        p = half_position_tables(self._tables, tt)
        p = np.where(second, D - p, p)
        p = np.where(t < T, p, D)
        p = np.where(back, D - p, p)
        if scale is not None:
            p = scale * p
        return p
