"""softrt's one rule for a late cycle, and each chunk's cycle view, computed once (analysis layer; pure numpy).

Late cycle (:class:`LateRule`)
    its period (``detect[i] - detect[i-1]``, consecutive ``seq`` only: a period never spans records
    the ring dropped) over ``bound_ns`` = nominal + threshold, its latency (``detect - edge``) over
    the threshold, or a missed update (``missed > 0``). The threshold is ``--late-threshold``
    (20 µs by default), like the late bound of rtla timerlat's ``-T`` or cyclictest's ``-b``, but
    counted, not a stop.

Cycle view (:class:`CycleView`)
    one chunk of records with, per record, the period that ends at it, whether it has one (its
    predecessor in ``seq`` is the record before), and the late flags. :class:`CycleStream` makes
    the views of one stream of chunks, carrying the last record across them, so a period spans a
    chunk boundary but never a ``seq`` gap.

The supervisor's drainer (softrt.session.run) makes one view per drained chunk and hands that same
view to every consumer: the streaming statistics (:class:`softrt.analysis.stream.RunStats`: the late
cycles of the summary, the live view and Prometheus), the trace attribution (the windows to explain,
:meth:`CycleView.late_cycles`) and the ``--samples late`` store (which records to keep, per-second
aggregates), so they agree on every cycle. Each consumer also takes plain records (a samples file
read back, a test): :meth:`CycleStream.view` then computes the view by the same rule.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from ..schema.config import DEFAULT_THRESHOLD_NS  # --late-threshold's default (its home: schema.config)


@dataclass(frozen=True)
class LateRule:
    """A cycle of a loop of *period_ns* is late when its period exceeds ``bound_ns``, its latency
    *threshold_ns*, or it missed an update."""

    period_ns: int
    threshold_ns: int = DEFAULT_THRESHOLD_NS

    @property
    def bound_ns(self) -> int:
        """The longest period that is not late: nominal + threshold."""
        return self.period_ns + self.threshold_ns


class Carry(NamedTuple):
    """The last record of a chunk, carried into the next one's view."""

    seq: int
    detect_ns: int
    done_ns: int


@dataclass(slots=True)
class Late:
    """A late cycle with its interference window (softrt.analysis.attribution explains it)."""

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


@dataclass(frozen=True)
class CycleView:
    """One chunk of records (RECORD_DTYPE, in write order) seen by a :class:`LateRule`.

    Arrays have one entry per record; ``period_ns[i]`` is meaningful where ``consecutive[i]``.
    """

    records: np.ndarray
    prev: Carry | None  # the record before records[0] in the stream (None: the stream's first)
    period_ns: np.ndarray
    consecutive: np.ndarray
    by_period: np.ndarray
    by_latency: np.ndarray
    by_missed: np.ndarray
    late: np.ndarray = field(repr=False)  # any of the three
    linked: bool = False  # every record is consecutive (the common case: no record dropped)

    @property
    def size(self) -> int:
        return int(self.records.size)

    @property
    def late_count(self) -> int:
        return int(np.count_nonzero(self.late))

    @property
    def last(self) -> Carry | None:
        """What the next chunk's view carries in (the prev of an empty view)."""
        if not self.size:
            return self.prev
        r = self.records[-1]
        return Carry(int(r["seq"]), int(r["detect_ns"]), int(r["done_ns"]))

    def periods(self) -> np.ndarray:
        """The periods of the chunk (ns), in order: one per consecutive record."""
        return self.period_ns if self.linked else self.period_ns[self.consecutive]

    def period_ends(self) -> np.ndarray:
        """The index, in the chunk, of the record that ends each period of :meth:`periods`."""
        return np.arange(self.size) if self.linked else np.flatnonzero(self.consecutive)

    def late_cycles(self) -> list[Late]:
        """The late cycles of the chunk with their interference windows (softrt.analysis.attribution):
        from the edge, or from the previous permit when the previous record's work ran past the edge
        (an overrun), to the permit seen, or to the write for a missed update written after it."""
        idx = np.flatnonzero(self.late)
        if not idx.size:
            return []
        recs = self.records
        out = []
        for i in idx.tolist():
            r = recs[i]
            edge, detect = int(r["edge_ns"]), int(r["detect_ns"])
            if i:
                p_detect, p_done = int(recs["detect_ns"][i - 1]), int(recs["done_ns"][i - 1])
            elif self.prev is not None:
                p_detect, p_done = self.prev.detect_ns, self.prev.done_ns
            else:
                p_detect = p_done = 0
            overran = bool(self.consecutive[i]) and p_done > edge
            reasons = tuple(
                name
                for name, flags in (
                    ("period", self.by_period),
                    ("latency", self.by_latency),
                    ("missed", self.by_missed),
                )
                if flags[i]
            )
            # A missed update is the write landing late: when it came well after the permit was seen,
            # the window runs to the write (the worker's own time in between is its work).
            end = max(detect, int(r["write_ns"])) if self.by_missed[i] else detect
            out.append(
                Late(
                    int(r["seq"]),
                    int(r["cycle"]),
                    edge,
                    detect,
                    p_detect if overran else edge,
                    p_done if overran else edge,
                    end,
                    int(self.period_ns[i]) if self.consecutive[i] else None,
                    int(r["missed"]),
                    reasons,
                )
            )
        return out


def concat(views: list[CycleView]) -> CycleView:
    """Consecutive views of one stream as one (the collector's batches)."""
    if len(views) == 1:
        return views[0]
    cat = {
        name: np.concatenate([getattr(v, name) for v in views])
        for name in ("period_ns", "consecutive", "by_period", "by_latency", "by_missed", "late")
    }
    return CycleView(
        records=concat_records([v.records for v in views]),
        prev=views[0].prev,
        linked=all(v.linked for v in views),
        **cat,
    )


def concat_records(parts: list[np.ndarray]) -> np.ndarray:
    """Record arrays (one all-int64 structured dtype) end to end. numpy joins structured arrays
    field by field, 15 times slower than their int64 words (1.8 ms against 0.12 ms for a second of
    drained chunks here), so contiguous ones are joined as words."""
    try:
        return np.concatenate([p.view(np.int64) for p in parts]).view(parts[0].dtype)
    except ValueError:  # a strided slice cannot be seen as int64 words
        return np.concatenate(parts)


class CycleStream:
    """Makes the views of one stream of chunks by *rule*, carrying the last record across them."""

    def __init__(self, rule: LateRule) -> None:
        self.rule = rule
        self.prev: Carry | None = None

    def view(self, chunk: np.ndarray | CycleView) -> CycleView:
        """The view of the next chunk: a view made elsewhere (the drainer's) is taken as it is;
        records are seen by the rule, continuing from the last record of the chunk before."""
        view = chunk if isinstance(chunk, CycleView) else cycle_view(chunk, self.prev, self.rule)
        self.prev = view.last
        return view

    def end_run(self) -> None:
        """The next chunk starts a new run: no period spans the two."""
        self.prev = None


def cycle_view(recs: np.ndarray, prev: Carry | None, rule: LateRule) -> CycleView:
    """The view of *recs*, the chunk after the record *prev* (None: the first of the stream)."""
    seq, detect = recs["seq"], recs["detect_ns"]
    n = int(recs.size)
    period = np.empty(n, np.int64)
    if n:
        np.subtract(detect[1:], detect[:-1], out=period[1:])
        period[0] = detect[0] - (prev.detect_ns if prev is not None else 0)
    # seq strictly increases (the worker numbers every record; the ring only drops), so endpoints
    # n - 1 apart (n from the carried record) mean no gap: every record has its period.
    first_linked = prev is not None and n > 0 and int(seq[0]) - prev.seq == 1
    linked = bool(n) and first_linked and int(seq[-1]) - int(seq[0]) == n - 1
    if linked:
        consecutive = np.ones(n, bool)
    else:
        consecutive = np.empty(n, bool)
        if n:
            np.equal(np.diff(seq), 1, out=consecutive[1:])
            consecutive[0] = bool(first_linked)
    by_period = period > rule.bound_ns
    if not linked:
        by_period &= consecutive
    by_latency = detect - recs["edge_ns"] > rule.threshold_ns
    by_missed = recs["missed"] > 0
    return CycleView(
        recs, prev, period, consecutive, by_period, by_latency, by_missed, by_period | by_latency | by_missed, linked
    )
