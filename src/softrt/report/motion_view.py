"""The commanded vs delivered motion around a run's worst miss, for the report (report layer).

Split from :mod:`.load`: the motion test's trace (softrt.motion.motion_trace) rebuilt from the
run's stored cycles, and the reference it is drawn against. Each function returns the trace, the
reference and a note; when the motion cannot be shown, no trace and the note says why.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..errors import ConfigError
from ..schema.summary import RunSummary
from .longrun import absolute_trace

if TYPE_CHECKING:
    from ..motion import MotionTrace

MOTION_HALF_WIDTH_CYCLES = 50  # 12.5 ms either side at 250 µs: a miss run and the recovery around it


@dataclass
class MotionReference:
    """What this window of the run should have delivered: the schedule delayed by the cycles
    lost before it (``lag_cycles``), so the plot shows what the worst miss did by itself and not
    the slip of every earlier miss (the distinction motion_impact's max_run_deviation_counts makes)."""

    lag_cycles: int
    position_counts: np.ndarray
    velocity_counts_per_s: np.ndarray


def late_motion(
    summary: RunSummary, kept: np.ndarray, meta: dict[str, int]
) -> tuple[MotionTrace | None, MotionReference | None, str]:
    """The motion around the worst miss, from the stretch of kept records around it (every miss is
    a late cycle, kept with its context); sample numbers are made absolute with the first record
    of the run (aggregates.parquet's metadata)."""
    from ..motion import MotionConfig, Trajectory, motion_trace

    missed = kept["missed"]
    if not kept.size or not (missed > 0).any():
        return None, None, "no missed updates: the delivered motion is the commanded motion"
    config = summary.config
    impact = summary.motion_impact
    window = kept["cycle"] + missed
    i = int(np.argmax(missed))
    if impact is not None and (impact.max_run_deviation_counts or 0) > 0 and impact.worst_run_cycle is not None:
        center = impact.worst_run_cycle
        what = (
            f"around board cycle {center:,}: the largest position error one run of missed updates caused "
            f"({impact.max_run_deviation_counts:,.1f} counts)"
        )
    else:
        center = int(window[i]) - int(missed[i]) + int(missed[i]) // 2
        what = (
            f"around the longest run of missed updates ({int(missed[i])} cycles, write {int(kept['seq'][i]):,}); "
            "the axis stood still or moved slowly then, so the delivered motion barely differs"
        )
    # The stretch of consecutive kept records (no seq gap) that holds the centre cycle.
    breaks = np.flatnonzero(np.diff(kept["seq"]) != 1) + 1
    starts, ends = np.concatenate([[0], breaks]), np.concatenate([breaks, [kept.size]])
    first_w, last_w = window[starts], window[ends - 1]
    inside = np.flatnonzero((first_w <= center) & (center <= last_w))
    if not inside.size:
        return None, None, f"board cycle {center:,} is outside the late cycles kept (--samples late)"
    a, b = int(starts[inside[0]]), int(ends[inside[0]])
    half = min(max(MOTION_HALF_WIDTH_CYCLES, 3 * int(missed[a:b].max())), 5000)
    try:
        cfg = MotionConfig.from_mapping(config.motion or {})
        period_ns = int(config.period_ns or 0)
        traj = Trajectory(cfg, period_ns)
        rel = motion_trace(window[a:b], cfg, center_cycle=center, half_width_cycles=half, period_ns=period_ns)
        cmd = rel.commanded_sample + int(window[a]) - int(meta["first_window"])
        dlv = rel.delivered_sample + int(kept["seq"][a]) - int(meta["first_seq"])
        trace = absolute_trace(rel, traj, cmd, dlv, period_ns)
        lag = int(cmd[0] - dlv[0])
        samples = np.concatenate([cmd[:1] - 1, cmd]) - lag
        positions = traj.positions(np.maximum(samples, 0))
    except (ConfigError, KeyError, TypeError, ValueError) as err:
        return None, None, f"cannot rebuild the motion: {err}"
    velocity = np.diff(positions) / (period_ns / 1e9)
    if samples[0] < 0:
        velocity[0] = np.nan
    reference = MotionReference(lag, positions[1:], velocity)
    note = (
        what
        + (
            f"; {lag:,} cycles had been lost before this window, so the reference is the schedule delayed by them"
            if lag
            else ""
        )
        + " (from the late cycles kept with their context: --samples late)"
    )
    return trace, reference, note


def worst_motion(
    summary: RunSummary, windows, worst: tuple[int, int, int]
) -> tuple[MotionTrace | None, MotionReference | None, str]:
    """The commanded vs delivered motion around the worst miss (softrt.motion.motion_trace).

    *windows(first, last)* gives the board cycles the writes landed in, from one landing at or
    before board cycle *first* to one landing after *last*, with the commanded and delivered
    sample numbers of its first write (0, 0: the run's first write)."""
    from ..motion import MotionConfig, Trajectory, motion_trace

    config = summary.config
    impact = summary.motion_impact
    missed, index, landed = worst
    if impact is not None and (impact.max_run_deviation_counts or 0) > 0 and impact.worst_run_cycle is not None:
        center = impact.worst_run_cycle
        what = (
            f"around board cycle {center:,}: the largest position error one run of missed updates caused "
            f"({impact.max_run_deviation_counts:,.1f} counts)"
        )
    elif missed > 0:
        center = landed - missed + missed // 2
        what = (
            f"around the longest run of missed updates ({missed} cycles, write {index:,}); the axis stood "
            "still or moved slowly then, so the delivered motion barely differs"
        )
    else:
        return None, None, "no missed updates: the delivered motion is the commanded motion"
    half = min(max(MOTION_HALF_WIDTH_CYCLES, 3 * missed), 5000)
    window, cmd0, row0 = windows(center - half - 2, center + half + 1)
    # Writes after the plotted window do not change it: pass a prefix (saves diffing 14 M entries).
    end = int(np.searchsorted(window, center + half + 1, side="right")) + 1
    try:
        cfg = MotionConfig.from_mapping(config.motion or {})
        period_ns = int(config.period_ns or 0)
        trace = motion_trace(window[:end], cfg, center_cycle=center, half_width_cycles=half, period_ns=period_ns)
        if cmd0 or row0:  # a stretch of a long run: its samples made the run's (as a late run's)
            trace = absolute_trace(
                trace,
                Trajectory(cfg, period_ns),
                trace.commanded_sample + cmd0,
                trace.delivered_sample + row0,
                period_ns,
            )
        lag = int(trace.commanded_sample[0] - trace.delivered_sample[0])  # cycles lost before the window
        samples = np.concatenate([trace.commanded_sample[:1] - 1, trace.commanded_sample]) - lag
        positions = Trajectory(cfg, period_ns).positions(np.maximum(samples, 0))
    except (ConfigError, KeyError, TypeError, ValueError) as err:
        return None, None, f"cannot rebuild the motion: {err}"
    velocity = np.diff(positions) / (period_ns / 1e9)
    if samples[0] < 0:
        velocity[0] = np.nan  # no cycle before the first one
    reference = MotionReference(lag, positions[1:], velocity)
    note = what + (
        f"; {lag:,} cycles had been lost before this window, so the reference is the schedule delayed by them"
        if lag
        else ""
    )
    return trace, reference, note
