"""softrt's one definition of a late cycle, chunk by chunk (analysis layer; pure).

Used by the attribution (:mod:`.attribution`: which cycles to explain) and by the ``--samples late``
store (:mod:`softrt.store.late`: which cycles to keep), so both agree on every cycle.

Late cycle
    period (``detect[i] - detect[i-1]``, consecutive ``seq`` only: a period never spans records
    the ring dropped) over nominal + threshold, latency (``detect - edge``) over the threshold,
    or ``missed > 0``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np


@dataclass(slots=True)
class Late:
    """A late cycle waiting for its events."""

    seq: int
    cycle: int
    edge_ns: int
    detect_ns: int
    start_ns: int
    work_until_ns: int
    end_ns: int
    period_ns: int | None
    missed: int
    reasons: tuple[str, ...]


class LateFlags(NamedTuple):
    """Which records of a chunk are late, and why (boolean arrays, one entry per record)."""

    period_ns: np.ndarray  # detect - the previous record's detect (meaningful where ``consecutive``)
    consecutive: np.ndarray  # the previous record is the one before in seq (no record dropped between)
    by_period: np.ndarray
    by_latency: np.ndarray
    by_missed: np.ndarray

    @property
    def any(self) -> np.ndarray:
        return self.by_period | self.by_latency | self.by_missed


def late_flags(recs: np.ndarray, prev_seq: int | None, prev_detect_ns: int | None, period_ns: int,
               threshold_ns: int) -> LateFlags:
    """softrt's one definition of a late cycle, for one chunk of records: its period (permit to permit,
    never across a ``seq`` gap) over nominal + *threshold_ns*, its latency (``detect - edge``) over
    *threshold_ns*, or a missed update. *prev_seq*/*prev_detect_ns* are the last record of the chunk
    before (None for the first chunk), so a period spans chunk boundaries. Used by the attribution
    and by the ``--samples late`` store (softrt.store.late)."""
    seq, detect = recs["seq"], recs["detect_ns"]
    p_seq = np.empty_like(seq)
    p_detect = np.empty_like(detect)
    p_seq[1:], p_detect[1:] = seq[:-1], detect[:-1]
    if prev_seq is None:
        p_seq[:1], p_detect[:1] = seq[:1] - 2, 0
    else:
        p_seq[:1], p_detect[:1] = prev_seq, prev_detect_ns
    consecutive = seq - p_seq == 1
    period = detect - p_detect
    return LateFlags(period, consecutive, consecutive & (period > period_ns + threshold_ns),
                     detect - recs["edge_ns"] > threshold_ns, recs["missed"] > 0)


def late_cycles(recs: np.ndarray, prev: tuple | None, period_ns: int, threshold_ns: int) -> list[Late]:
    """The late cycles of one chunk of records; *prev* is the last record of the chunk before
    (``(seq, detect_ns, done_ns)``) so a period and an overrun can span chunk boundaries."""
    if recs.size == 0:
        return []
    seq, detect, done, edge = recs["seq"], recs["detect_ns"], recs["done_ns"], recs["edge_ns"]
    flags = late_flags(recs, None if prev is None else prev[0], None if prev is None else prev[1],
                       period_ns, threshold_ns)
    p_detect = np.empty_like(detect)
    p_done = np.empty_like(done)
    p_detect[1:], p_done[1:] = detect[:-1], done[:-1]
    if prev is None:
        p_detect[0], p_done[0] = 0, 0
    else:
        _, p_detect[0], p_done[0] = prev
    consecutive, period = flags.consecutive, flags.period_ns
    late_period, late_latency, late_missed = flags.by_period, flags.by_latency, flags.by_missed
    out = []
    for i in np.flatnonzero(late_period | late_latency | late_missed):
        overran = bool(consecutive[i]) and int(p_done[i]) > int(edge[i])
        reasons = tuple(r for r, m in (("period", late_period), ("latency", late_latency), ("missed", late_missed))
                        if m[i])
        # A missed update is the write landing late: when it came well after the permit was seen,
        # the window runs to the write (the worker's own time in between is its work).
        end = max(int(detect[i]), int(recs["write_ns"][i])) if late_missed[i] else int(detect[i])
        out.append(Late(int(seq[i]), int(recs["cycle"][i]), int(edge[i]), int(detect[i]),
                        int(p_detect[i]) if overran else int(edge[i]), int(p_done[i]) if overran else int(edge[i]),
                        end, int(period[i]) if consecutive[i] else None, int(recs["missed"][i]), reasons))
    return out
