"""Motion impact: what the axis actually received when host updates missed their cycle (numpy).

Model (the seed's board, :mod:`softrt.board.virtual`): write i carries sample i and lands in board
cycle ``window[i]``; a board cycle in which no write lands repeats the previous target (a *missed
update*). So in board cycle k the axis gets the sample of the last write with ``window[i] <= k``
(the *delivered* sample), while an ideal host would have delivered sample ``k - window[0]`` (the
*commanded* sample). Each miss delays every later sample by one cycle: the delivered motion is the
commanded motion stretched in time, and it lags the wall-clock schedule by the number of misses so
far (``final_lag_cycles`` at the end). The deviation is zero while both are standing still.

The delivered velocity is the per-cycle position difference over the period (what a drive's
velocity feed-forward sees). A miss at speed v makes it drop to 0 for one cycle and come back:
a velocity step of ~v, where the commanded profile never changes by more than about
amax * period per cycle; both are reported side by side.

Work is done in blocks of board cycles (carrying the last delivered sample, position and velocity
across block edges), so 15 M cycles (an hour at 250 µs) stay within a few tens of MB.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import ConfigError
from ..schema.summary import Motion
from .config import MotionConfig
from .trajectory import Trajectory

#: Board cycles per block.
_BLOCK = 1 << 20


@dataclass(frozen=True)
class MotionTrace:
    """Short per-cycle arrays around one board cycle (for a plot); velocity is NaN where the
    previous cycle lies outside the record."""

    axis: int
    center_cycle: int
    board_cycle: np.ndarray
    commanded_sample: np.ndarray
    delivered_sample: np.ndarray
    commanded_position_counts: np.ndarray
    delivered_position_counts: np.ndarray
    commanded_velocity_counts_per_s: np.ndarray
    delivered_velocity_counts_per_s: np.ndarray


def motion_impact(window: np.ndarray, motion: Trajectory | MotionConfig, *, period_ns: int | None = None) -> Motion:
    """Reconstruct the delivered motion from the per-write board cycles *window* and summarise it.

    *motion* is the run's :class:`Trajectory` (its period is used) or its :class:`MotionConfig`
    together with *period_ns*. The same as feeding *window* to :class:`MotionImpactStream`.
    """
    w = _check_window(window, 0)
    if w.size == 0:
        raise ConfigError(
            "the write record is empty or not one-dimensional", hint="pass one board cycle per write, in write order"
        )
    stream = MotionImpactStream(motion, period_ns=period_ns)
    for a in range(0, w.size, _BLOCK):
        stream.add(w[a : a + _BLOCK])
    return stream.result()


class MotionImpactStream:
    """:func:`motion_impact` fed write by write, chunk after chunk (the run's drainer, a reader of
    the samples): the same result, in memory bounded by the chunk and _BLOCK, not by the run.

    Board cycle k is final once a write landed after it (a later write in the same cycle would
    be the one latched), so each chunk settles the board cycles before its last write's; the last
    write (its cycle and index) is carried, with the last position and velocity of both motions.
    """

    def __init__(self, motion: Trajectory | MotionConfig, *, period_ns: int | None = None) -> None:
        self.traj = _trajectory(motion, period_ns)
        self.writes = 0
        self.w0: int | None = None
        self.distinct = 0  # board cycles that received a write, settled ones
        self.longest = 0
        self.done_k = 0  # board cycles [0, done_k) (relative to w0) are settled
        self.pending: tuple[int, int] | None = None  # (relative cycle, write index) of the last write
        self.best_dev, self.best_dev_k = -1.0, 0
        self.best_step, self.best_step_k = 0.0, -1
        self.best_cmd_step = 0.0
        self.run_dev, self.run_k = -1.0, 0
        self.last_delivered = 0
        self._prev: list = [None, None, None, None]  # p_del, p_cmd, v_del, v_cmd of the last settled cycle

    def add(self, window: np.ndarray) -> MotionImpactStream:
        """Feed the board cycles of the next writes (in write order); return self."""
        w = _check_window(window, self.writes, None if self.pending is None else self.pending[0] + self.w0)
        n = int(w.size)
        if n == 0:
            return self
        if self.w0 is None:
            self.w0 = int(w[0])
        rel = w - self.w0
        idx = np.arange(self.writes, self.writes + n, dtype=np.int64)
        if self.pending is not None:
            rel = np.concatenate(([self.pending[0]], rel))
            idx = np.concatenate(([self.pending[1]], idx))
        self.writes += n
        # Of several writes in one board cycle the later is latched: keep the last of each run.
        last = np.ones(rel.size, dtype=bool)
        last[:-1] = rel[1:] != rel[:-1]
        if not last.all():
            rel, idx = rel[last], idx[last]
        self.pending = (int(rel[-1]), int(idx[-1]))
        if rel.size > 1:
            gaps = np.diff(rel)
            self.longest = max(self.longest, int(gaps.max()) - 1)
            self.distinct += rel.size - 1
            self._runs(rel, idx, gaps)
            self._settle(rel[:-1], idx[:-1], int(rel[-1]))
        return self

    def result(self) -> Motion:
        """The impact of every write fed so far (settles the last write's board cycle): summary.json's
        ``motion`` (schema.summary.Motion: counts, counts/s; cycles are board cycles). Its
        ``max_run_deviation_counts`` is the largest error one run of misses causes by itself (the
        held position against the schedule as already delayed by earlier misses), where
        ``max_deviation_counts`` also carries the slip of every earlier miss."""
        if self.pending is None:
            raise ConfigError(
                "the write record is empty or not one-dimensional",
                hint="pass one board cycle per write, in write order",
            )
        k_end, i_end = self.pending
        state = self.__dict__.copy()
        state["_prev"] = list(self._prev)
        try:
            self._settle(np.array([k_end]), np.array([i_end]), k_end + 1)
            traj, n_cycles = self.traj, k_end + 1
            scales = np.abs(traj.scales)
            worst_axis = int(np.argmax(scales))
            w0 = self.w0
            return Motion(
                **{
                    k: _plain(v)
                    for k, v in dict(
                        period_ns=traj.period_ns,
                        axes=traj.axes,
                        writes=self.writes,
                        first_cycle=w0,
                        last_cycle=w0 + k_end,
                        board_cycles=n_cycles,
                        missed_updates=n_cycles - (self.distinct + 1),
                        longest_miss_run_cycles=self.longest,
                        final_lag_cycles=(n_cycles - 1) - self.last_delivered,
                        lead_axis=0,
                        max_deviation_counts=self.best_dev,
                        worst_deviation_cycle=w0 + self.best_dev_k,
                        max_velocity_step_counts_per_s=self.best_step,
                        worst_velocity_step_cycle=w0 + max(self.best_step_k, 0),
                        commanded_max_velocity_step_counts_per_s=self.best_cmd_step,
                        max_run_deviation_counts=max(self.run_dev, 0.0),
                        worst_run_cycle=w0 + self.run_k,
                        worst_axis=worst_axis,
                        worst_axis_max_deviation_counts=float(scales[worst_axis] * self.best_dev),
                    ).items()
                }
            )
        finally:
            self.__dict__.update(state)  # result() does not consume the pending write

    def _settle(self, rel_u: np.ndarray, idx_u: np.ndarray, k_end: int) -> None:
        """Board cycles [done_k, k_end): delivered and commanded positions, their deviations and steps."""
        traj = self.traj
        period_s = traj.period_ns / 1e9
        prev = self._prev
        carry = self.last_delivered if self.done_k else -1
        for k0 in range(self.done_k, k_end, _BLOCK):
            k1 = min(k0 + _BLOCK, k_end)
            ks = np.arange(k0, k1, dtype=np.int64)
            delivered = _delivered(rel_u, idx_u, k0, k1, carry)
            carry = self.last_delivered = int(delivered[-1])
            p_cmd = traj.positions(ks)
            p_del = traj.positions(delivered)
            dev = np.abs(p_del - p_cmd)
            i = int(np.argmax(dev))
            if dev[i] > self.best_dev:
                self.best_dev, self.best_dev_k = float(dev[i]), k0 + i
            # Velocities and their cycle-to-cycle steps, continuing across the block edge.
            v_del, prev[0] = _diff(p_del, prev[0], period_s)
            v_cmd, prev[1] = _diff(p_cmd, prev[1], period_s)
            s_del, prev[2] = _diff(v_del, prev[2], 1.0)
            s_cmd, prev[3] = _diff(v_cmd, prev[3], 1.0)
            if s_del.size:
                a = np.abs(s_del)
                j = int(np.argmax(a))
                if a[j] > self.best_step or self.best_step_k < 0:
                    self.best_step, self.best_step_k = float(a[j]), k1 - s_del.size + j
                self.best_cmd_step = max(self.best_cmd_step, float(np.abs(s_cmd).max()))
        self.done_k = max(self.done_k, k_end)

    def _runs(self, rel_u: np.ndarray, idx_u: np.ndarray, gaps: np.ndarray) -> None:
        if not (gaps > 1).any():
            return
        dev, k = _run_deviation(self.traj, rel_u, idx_u, gaps)
        if dev > self.run_dev:
            self.run_dev, self.run_k = dev, k


def motion_trace(
    window: np.ndarray,
    motion: Trajectory | MotionConfig,
    *,
    center_cycle: int | None = None,
    half_width_cycles: int = 50,
    axis: int = 0,
    period_ns: int | None = None,
) -> MotionTrace:
    """Commanded and delivered position and velocity of *axis* for board cycles
    ``center_cycle ± half_width_cycles`` (clipped to the record); by default around the worst
    deviation found by :func:`motion_impact`."""
    traj = _trajectory(motion, period_ns)
    if (
        isinstance(half_width_cycles, bool)
        or not isinstance(half_width_cycles, (int, np.integer))
        or half_width_cycles < 0
    ):
        raise ConfigError(
            f"half_width_cycles must be a whole number >= 0, got {half_width_cycles!r}",
            hint="e.g. 50 cycles either side",
        )
    w, rel_u, idx_u = _writes(window)
    w0 = int(w[0])
    if center_cycle is None:
        center_cycle = motion_impact(w, traj).worst_deviation_cycle
    if not w0 <= center_cycle <= int(w[-1]):
        raise ConfigError(
            f"board cycle {center_cycle} is outside the record", hint=f"choose a cycle from {w0} to {int(w[-1])}"
        )
    c = int(center_cycle) - w0
    lo = max(c - int(half_width_cycles), 0)
    hi = min(c + int(half_width_cycles) + 1, int(w[-1]) - w0 + 1)
    first = max(lo - 1, 0)  # one cycle more on the left for the velocity
    ks = np.arange(first, hi, dtype=np.int64)
    pos = np.searchsorted(rel_u, ks, side="right") - 1
    delivered = pos.astype(np.int64) if idx_u is None else idx_u[pos]
    p_cmd = traj.positions(ks, axis)
    p_del = traj.positions(delivered, axis)
    period_s = traj.period_ns / 1e9
    v_cmd = np.full(ks.size, np.nan)
    v_del = np.full(ks.size, np.nan)
    v_cmd[1:] = np.diff(p_cmd) / period_s
    v_del[1:] = np.diff(p_del) / period_s
    s = slice(lo - first, None)
    return MotionTrace(
        axis=axis,
        center_cycle=int(center_cycle),
        board_cycle=ks[s] + w0,
        commanded_sample=ks[s],
        delivered_sample=delivered[s],
        commanded_position_counts=p_cmd[s],
        delivered_position_counts=p_del[s],
        commanded_velocity_counts_per_s=v_cmd[s],
        delivered_velocity_counts_per_s=v_del[s],
    )


# -- helpers -----------------------------------------------------------------------------------
def _plain(value: object) -> int | float:
    """A figure as JSON holds it: a whole number stays one (numpy's too), the rest a float."""
    return int(value) if isinstance(value, (int, np.integer)) else float(value)


def _trajectory(motion: Trajectory | MotionConfig, period_ns: int | None) -> Trajectory:
    if isinstance(motion, Trajectory):
        if period_ns is not None and period_ns != motion.period_ns:
            raise ConfigError(
                f"period {period_ns} ns differs from the trajectory's {motion.period_ns} ns",
                hint="pass the trajectory alone, or its config with the run's period",
            )
        return motion
    if isinstance(motion, MotionConfig):
        if period_ns is None:
            raise ConfigError(
                "a MotionConfig needs the cycle period to rebuild the trajectory",
                hint="pass period_ns=... (the run's period)",
            )
        return Trajectory(motion, period_ns)
    raise ConfigError(
        f"motion must be a Trajectory or a MotionConfig, got {type(motion).__name__}", hint="pass the run's Trajectory"
    )


def _writes(window: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Validate *window*; return it, the relative board cycles that received a write, and the
    index of the write latched in each (``None`` when that is simply 0, 1, 2, …: every write in
    its own cycle, the normal case, which saves a 15 M-entry array). If two writes share a cycle
    the later one is latched."""
    w = np.asarray(window)
    if w.ndim != 1 or w.size == 0:
        raise ConfigError(
            "the write record is empty or not one-dimensional", hint="pass one board cycle per write, in write order"
        )
    if w.dtype.kind not in "iu":
        raise ConfigError(f"board cycles must be integers, got dtype {w.dtype}", hint="pass an int64 array")
    w = w.astype(np.int64, copy=False)
    step = np.diff(w)
    if step.size and int(step.min()) <= 0:
        if int(step.min()) < 0:
            i = int(np.argmin(step))
            raise ConfigError(
                f"board cycles go backwards at write {i + 1} ({int(w[i])} then {int(w[i + 1])})",
                hint="writes must be in order: the window of write i+1 is not before that of write i",
            )
        last = np.ones(w.size, dtype=bool)
        last[:-1] = step != 0
        del step
        idx_u = np.flatnonzero(last).astype(np.int64)
        return w, w[last] - w[0], idx_u
    del step
    return w, w - w[0], None


def _check_window(window: np.ndarray, first_write: int, previous: int | None = None) -> np.ndarray:
    """Validate the board cycles of writes *first_write* … (after a write in cycle *previous*)."""
    w = np.asarray(window)
    if w.ndim != 1:
        raise ConfigError(
            "the write record is empty or not one-dimensional", hint="pass one board cycle per write, in write order"
        )
    if w.size and w.dtype.kind not in "iu":
        raise ConfigError(f"board cycles must be integers, got dtype {w.dtype}", hint="pass an int64 array")
    w = w.astype(np.int64, copy=False)
    if w.size and previous is not None and int(w[0]) < previous:
        raise ConfigError(
            f"board cycles go backwards at write {first_write} ({previous} then {int(w[0])})",
            hint="writes must be in order: the window of write i+1 is not before that of write i",
        )
    if w.size > 1:
        step = np.diff(w)
        if int(step.min()) < 0:
            i = int(np.argmin(step))
            raise ConfigError(
                f"board cycles go backwards at write {first_write + i + 1} ({int(w[i])} then {int(w[i + 1])})",
                hint="writes must be in order: the window of write i+1 is not before that of write i",
            )
    return w


def _indices(idx_u: np.ndarray | None, a: int, b: int) -> np.ndarray:
    """Write indices latched in distinct-write entries a … b-1."""
    return np.arange(a, b, dtype=np.int64) if idx_u is None else idx_u[a:b]


def _delivered(rel_u: np.ndarray, idx_u: np.ndarray | None, k0: int, k1: int, carry: int) -> np.ndarray:
    """Delivered sample in relative board cycles [k0, k1): the last write at or before each."""
    out = np.full(k1 - k0, -1, dtype=np.int64)
    a, b = (int(x) for x in np.searchsorted(rel_u, [k0, k1]))
    out[rel_u[a:b] - k0] = _indices(idx_u, a, b)
    np.maximum.accumulate(out, out=out)  # write indices grow with the cycle: a running max fills forward
    if carry >= 0:
        np.maximum(out, carry, out=out)
    return out


def _run_deviation(
    traj: Trajectory, rel_u: np.ndarray, idx_u: np.ndarray | None, gaps: np.ndarray | None = None
) -> tuple[float, int]:
    """Max over runs of missed cycles of |p(d + j) - p(d)|, j = 1 … run length, where d is the
    sample held through the run: what the schedule (delayed by the earlier misses) asked for
    while the board repeated p(d). Returns it and its relative board cycle."""
    runs = np.flatnonzero((np.diff(rel_u) if gaps is None else gaps) > 1)
    if runs.size == 0:
        return 0.0, 0
    held = runs.astype(np.int64) if idx_u is None else idx_u[runs]
    # Targets repeat every cycle_samples, so longer runs add nothing past one full cycle.
    length = np.minimum(rel_u[runs + 1] - rel_u[runs] - 1, traj.cycle_samples)
    best, best_k = -1.0, 0
    ends = np.cumsum(length)
    lo = 0
    while lo < runs.size:  # batches of about _BLOCK missed cycles
        hi = int(np.searchsorted(ends, (ends[lo - 1] if lo else 0) + _BLOCK, side="right"))
        hi = max(hi, lo + 1)
        n = length[lo:hi]
        first = np.repeat(np.cumsum(n) - n, n)
        j = np.arange(int(n.sum()), dtype=np.int64) - first + 1  # 1 … run length, per run
        d = np.repeat(held[lo:hi], n)
        dev = np.abs(traj.positions(d + j) - traj.positions(d))
        i = int(np.argmax(dev))
        if dev[i] > best:
            best, best_k = float(dev[i]), int(np.repeat(rel_u[runs[lo:hi]], n)[i] + j[i])
        lo = hi
    return best, best_k


def _diff(x: np.ndarray, prev: np.ndarray | None, scale_s: float) -> tuple[np.ndarray, np.ndarray]:
    """First difference of *x* (continuing from *prev*, the last value of the previous block) over
    *scale_s*; returns it and the new carry."""
    d = np.diff(x, prepend=prev) if prev is not None else np.diff(x)
    return d / scale_s, x[-1:]
