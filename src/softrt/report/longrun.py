"""A run past the report's row budget: its pictures read by row group, in bounded memory (report layer).

A day at 250 µs is 345.6 M cycles; the report's per-cycle pass (:func:`softrt.report.load._stream`)
keeps the board cycle of every write and takes minutes at that size. Past ``ROW_BUDGET`` the report
reads ``samples.parquet`` row group by row group (pyarrow ``ParquetFile.iter_batches``, only the
columns the picture needs) and keeps, per slice of the run, the minimum and maximum period: the
min/max envelope of M4 (Jugel et al., "M4: A Visualization-Oriented Time Series Data Aggregation",
VLDB 2014), which draws every spike a plot of all the raw periods would show. What it keeps is the
same whatever the run's length: ``SERIES_BUCKETS`` slices, one batch of records and one entry per
batch. Histograms and percentiles are never taken from this pass: they are the exact counts of the
run's ``stats.json`` (the streaming pass of the run itself, :class:`softrt.analysis.RunStats`).

The motion around the worst miss needs only its window of writes: a second read of the few row
groups that hold it, made absolute the way a ``--samples late`` run's is.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa

from ..errors import SoftRTError
from ..schema.text import printable
from ..store.rundir import SAMPLES, open_samples
from .data import MinMaxDownsampler, Series

#: Rows per batch of the envelope pass: 8 MB per int64 column, 64 row groups of the writer's 16,384.
SCAN_BATCH_ROWS = 1 << 20


@dataclass
class Envelope:
    """What one pass over a long run's samples keeps: the period envelope and where the worst miss is."""

    series: Series | None
    t0_ns: int | None
    rows: int = 0
    batches: int = 0
    periods: int = 0
    worst: tuple[int, int, int] = (0, -1, 0)  # (missed, row index, board cycle its write landed in)
    group_start: np.ndarray = field(default_factory=lambda: np.zeros(1, np.int64))  # first row of each row group
    group_windows: list[int] = field(default_factory=list)  # board cycle each row group's first write landed in
    file: object = field(default=None, repr=False)  # the open ParquetFile (its footer parsed once)


def _batches(group_rows: np.ndarray, batch_rows: int) -> list[tuple[int, int]]:
    """Consecutive row groups [g0, g1) of about *batch_rows* rows each (at least one group)."""
    out, g0, rows = [], 0, 0
    for g, n in enumerate(group_rows.tolist()):
        rows += n
        if rows >= batch_rows:
            out.append((g0, g + 1))
            g0, rows = g + 1, 0
    if g0 < group_rows.size:
        out.append((g0, int(group_rows.size)))
    return out


def _read(pf, run_path: Path, groups: list[int], columns: list[str]):
    try:
        return pf.read_row_groups(groups, columns=columns)
    except (OSError, pa.ArrowException, ValueError, TypeError) as err:
        raise SoftRTError(
            f"cannot read samples {Path(run_path) / SAMPLES}: {printable(err)[:200]}",
            hint="the file is corrupt or truncated",
        ) from None


def scan_envelope(
    run_path: Path, total_rows: int, buckets: int, *, windows: bool = False, batch_rows: int | None = None
) -> Envelope:
    """One pass over *run_path*'s samples, a few row groups at a time (``read_row_groups``: the
    memory of one batch, whatever the run's length; ``iter_batches`` over the whole file was
    measured holding 430 MB of decoded pages by the end of a 24 h run): the min/max/mean period of
    *buckets* equal slices of the periods (no period across records the ring dropped: the summary's
    definition, softrt.analysis.cycles), the slices with missed updates, and the worst miss.
    *windows* also reads the ``cycle`` column, for the motion plot (:func:`read_windows`)."""
    columns = ["seq", "detect_ns", "missed"] + (["cycle"] if windows else [])
    pf = open_samples(run_path)
    md = pf.metadata
    group_rows = np.array([md.row_group(g).num_rows for g in range(md.num_row_groups)], np.int64)
    ds = MinMaxDownsampler(max(total_rows - 1, 0), buckets)
    out = Envelope(None, None, group_start=np.concatenate([[0], np.cumsum(group_rows)]), file=pf)
    prev_seq: int | None = None  # the last record of the batch before (a period may span the two)
    prev_detect = 0
    for g0, g1 in _batches(group_rows, batch_rows or SCAN_BATCH_ROWS):
        batch = _read(pf, run_path, list(range(g0, g1)), columns)
        n = batch.num_rows
        if n == 0:
            continue
        seq, detect, missed = (batch.column(c).to_numpy() for c in columns[:3])
        first = out.t0_ns is None
        t0 = out.t0_ns = int(detect[0]) if out.t0_ns is None else out.t0_ns
        # Periods end at records 1..n-1 of the batch, and at record 0 when it follows the last batch's.
        ends = np.flatnonzero(np.diff(seq) == 1) + 1
        period = detect[ends] - detect[ends - 1]
        if prev_seq is not None and int(seq[0]) == prev_seq + 1:
            ends = np.concatenate([[0], ends])
            period = np.concatenate([[int(detect[0]) - prev_detect], period])
        marked = missed[ends] > 0
        if first and marked.size and missed[0] > 0:
            marked[0] = True  # the first record's miss is drawn on the first period (as load._stream)
        ds.add(period, detect[ends] - t0, marked)
        out.periods += int(period.size)
        i = int(np.argmax(missed))
        if windows:
            window = batch.column("cycle").to_numpy() + missed
            out.group_windows.extend(window[out.group_start[g0:g1] - out.rows].tolist())
        if missed[i] > out.worst[0]:
            out.worst = (int(missed[i]), out.rows + i, int(window[i]) if windows else 0)
        prev_seq, prev_detect = int(seq[-1]), int(detect[-1])
        out.rows += n
        out.batches += 1
    out.series = ds.result() if out.periods else None
    return out


def read_windows(run_path: Path, env: Envelope, first_cycle: int, last_cycle: int) -> tuple[int, np.ndarray]:
    """The board cycle each write landed in (``cycle + missed``), for the writes from the last one
    landing at or before *first_cycle* to the first one landing after *last_cycle*; returns (row
    of the first, windows). Only the row groups that hold them are read."""
    starts = np.asarray(env.group_windows, np.int64)
    g0 = max(int(np.searchsorted(starts, first_cycle, side="right")) - 1, 0)
    g1 = min(int(np.searchsorted(starts, last_cycle, side="right")) + 1, starts.size)
    table = _read(env.file, run_path, list(range(g0, g1)), ["cycle", "missed"])
    return int(env.group_start[g0]), table.column("cycle").to_numpy() + table.column("missed").to_numpy()


def downsample_note(rows: int, env: Envelope, budget: int) -> str:
    """What the report says about a run past the budget: how it was read and by how much it is reduced."""
    slices = env.series.t_s.size if env.series is not None else 0
    per = env.periods / max(slices, 1)
    return (
        f"samples.parquet holds {rows:,} cycles, more than the report keeps one by one ({budget:,}): the period "
        f"over time was read by row group ({env.batches:,} batches) and is drawn downsampled, as the minimum and "
        f"maximum of {slices:,} slices of about {per:,.0f} periods each (every spike is drawn, ×{per:,.0f} "
        "fewer points); the figures, histograms and percentiles are the exact counts of the run's stats.json"
    )


def absolute_trace(rel, traj, cmd: np.ndarray, dlv: np.ndarray, period_ns: int):
    """*rel* (a MotionTrace of a stretch of the run) with the run's sample numbers and positions."""
    import dataclasses

    axis = rel.axis
    p_cmd = traj.positions(np.maximum(np.concatenate([cmd[:1] - 1, cmd]), 0), axis)
    p_dlv = traj.positions(np.maximum(np.concatenate([dlv[:1] - 1, dlv]), 0), axis)
    v_cmd, v_dlv = np.diff(p_cmd) / (period_ns / 1e9), np.diff(p_dlv) / (period_ns / 1e9)
    if cmd[0] <= 0:
        v_cmd[0] = np.nan
    if dlv[0] <= 0:
        v_dlv[0] = np.nan
    return dataclasses.replace(
        rel,
        commanded_sample=cmd,
        delivered_sample=dlv,
        commanded_position_counts=p_cmd[1:],
        delivered_position_counts=p_dlv[1:],
        commanded_velocity_counts_per_s=v_cmd,
        delivered_velocity_counts_per_s=v_dlv,
    )


__all__ = ["SCAN_BATCH_ROWS", "Envelope", "absolute_trace", "downsample_note", "read_windows", "scan_envelope"]
