"""One streaming pass over a run's records: every summary metric, chunk by chunk (analysis layer; pure numpy).

:class:`RunStats` consumes RECORD_DTYPE chunks (:mod:`softrt.ipc.layout`) in the order the worker
wrote them, as the supervisor drains the ring or a reader streams ``samples.parquet`` row group by
row group, or their cycle views (:mod:`softrt.analysis.cycles`: the periods and late cycles of a
chunk, computed once by the drainer for every consumer). The views carry the last record across
chunks, so a period spans a chunk boundary but never a ``seq`` gap (records the ring dropped).
It holds no record: its state is a few counters and five log-linear histograms (:mod:`softrt.analysis.hdr`; percentiles within
2^-10 ≈ 0.098 % of numpy's, exact below 1,024 ns; count, min, max, mean exact; std by Chan et al.).

The metrics, in the seed's terms (docs/run-format.md):

* period  — permit detected to the next permit detected (consecutive ``seq`` only);
* process — permit detected to next target computed (``done_ns - detect_ns``);
* latency — permit detected minus the board edge that raised it;
* slack   — the next board edge minus the end of the cycle's work (negative: an overrun; its tail
  is its minimum, so the summary gives its low percentiles: p50, p1, p0.1, p0.01);
* late cycles — counted by softrt's one rule (:class:`softrt.analysis.cycles.LateRule`);
* rtt     — a frame's round trip (EtherCAT), over the records that carry one.

:meth:`RunStats.merge` pools runs (no period spans two runs); :meth:`RunStats.document` /
:meth:`RunStats.of_document` store the state with the run (``stats.json``, schema.runstats) so reports and
pooled comparisons merge it instead of re-reading samples; :meth:`RunStats.snapshot` is the live
progress (constant cost).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, TypedDict

import numpy as np

from ..ipc.layout import FLAG_DEVICE_ERROR, RECORD_DTYPE
from ..schema.config import DEFAULT_THRESHOLD_NS
from ..schema.runstats import CarriedRecord, HistogramLayout, SeriesHistograms, StatsCounters, StatsState, WorstPeriod
from ..schema.summary import Metrics, Misses
from .cycles import Carry, CycleStream, CycleView, LateRule
from .hdr import FORMAT as HDR_FORMAT
from .hdr import RELATIVE_ERROR, SUB_BITS, Hdr
from .tail_keep import TailKeeper

PERCENTILES = (50.0, 99.0, 99.9, 99.99)
#: Slack is bad when short: its tail is the low one (negative: an overrun).
LOW_PERCENTILES = (50.0, 1.0, 0.1, 0.01)
SERIES = ("period", "process", "latency", "slack", "rtt")
FORMAT = "softrt.runstats/1"


class Counters(TypedDict):
    """The pass's counts as it adds them (stored as schema.runstats.StatsCounters, in this order).
    ``late_cycles`` is None when unknown (a stats.json written before softrt counted them)."""

    cycles: int
    records_expected: int
    missed_updates: int
    cycles_with_miss: int
    longest_miss_run: int
    overruns: int
    device_errors: int
    late_cycles: int | None


#: The counts pooled runs add (the longest miss run is the longer one; late cycles may be unknown).
_SUMMED: Final = ("cycles", "records_expected", "missed_updates", "cycles_with_miss", "overruns", "device_errors")


@dataclass(frozen=True)
class Snapshot:
    """The live progress figures (µs; None before there is a period)."""

    cycles: int
    missed_updates: int
    late_cycles: int | None  # by softrt's one rule (softrt.analysis.cycles)
    max_period_us: float | None
    p99_period_us: float | None
    worst_seq: int | None  # the record that ended the longest period
    worst_at_s: float | None  # its permit, seconds after the run's first permit


class RunStats:
    """Accumulates the summary of one run (or of several, merged) from record chunks."""

    def __init__(self, period_ns: int, threshold_ns: int = DEFAULT_THRESHOLD_NS) -> None:
        self.period_ns = int(period_ns)
        self.cycles = CycleStream(LateRule(self.period_ns, int(threshold_ns)))
        self.hist = {name: Hdr() for name in SERIES}
        # late_cycles is None when unknown (a stats.json written before softrt counted them)
        self.counters = Counters(
            cycles=0,
            records_expected=0,
            missed_updates=0,
            cycles_with_miss=0,
            longest_miss_run=0,
            overruns=0,
            device_errors=0,
            late_cycles=0,
        )
        self.rtt_seen = False  # any record with a non-zero round trip (a device with frames)
        self.first_detect_ns: int | None = None
        self.worst_period_ns: int | None = None
        self.worst_seq: int | None = None
        self.worst_detect_ns: int | None = None
        self._chunk: CycleView = self.cycles.view(np.zeros(0, RECORD_DTYPE))
        # The tail model's raw material (analysis.tail_keep): the top of the period and latency
        # series with their permit times (ns); None once runs are pooled (their clocks differ).
        self.keep: dict[str, TailKeeper] | None = {
            "period": TailKeeper(self.period_ns, self.rule.bound_ns),
            "latency": TailKeeper(0, self.rule.threshold_ns),
        }

    @property
    def rule(self) -> LateRule:
        return self.cycles.rule

    # -- feeding ---------------------------------------------------------------------------------
    def add(self, chunk: np.ndarray | CycleView) -> RunStats:
        """Consume the next chunk of this run: records (RECORD_DTYPE, in write order) or their cycle
        view (softrt.analysis.cycles, the drainer's); return self."""
        view = self.cycles.view(chunk)
        self._chunk = view
        n = view.size
        if n == 0:
            return self
        records = view.records
        seq, detect = records["seq"], records["detect_ns"]
        edge, done = records["edge_ns"], records["done_ns"]
        c = self.counters
        if self.first_detect_ns is None:
            self.first_detect_ns = int(detect[0])
        # Records the worker numbered since the last one seen (a dropped record is still expected).
        c["records_expected"] += int(seq[-1]) - (int(seq[0]) - 1 if view.prev is None else view.prev.seq)
        c["cycles"] += n
        if c["late_cycles"] is not None:
            c["late_cycles"] += view.late_count

        period = view.periods()
        h = self.hist
        h["period"].add(period)
        h["process"].add(done - detect)
        latency = detect - edge
        h["latency"].add(latency)
        if self.keep is not None:
            self.keep["period"].add(period, detect if view.linked else detect[view.period_ends()])
            self.keep["latency"].add(latency, detect)
        slack = edge + (self.period_ns - done)
        h["slack"].add(slack)
        top = h["period"].max
        if period.size and (self.worst_period_ns is None or (top is not None and top > self.worst_period_ns)):
            self._note_worst(view)

        missed = records["missed"]
        miss_max = int(missed.max())
        if miss_max > 0:
            c["missed_updates"] += int(missed.sum())
            c["cycles_with_miss"] += int(np.count_nonzero(missed > 0))
            c["longest_miss_run"] = max(c["longest_miss_run"], miss_max)
        if (slack_min := h["slack"].min) is not None and slack_min < 0:
            c["overruns"] += int(np.count_nonzero(slack < 0))
        flags = records["flags"]
        if flags.any():
            c["device_errors"] += int(np.count_nonzero(flags & FLAG_DEVICE_ERROR))
        rtt = records["rtt_ns"]
        if rtt.any():
            self.rtt_seen = True
            h["rtt"].add(rtt[rtt > 0])
        return self

    def _note_worst(self, view: CycleView) -> None:
        period = view.periods()
        i = int(np.argmax(period))
        end = int(view.period_ends()[i])
        self.worst_period_ns = int(period[i])
        self.worst_seq = int(view.records["seq"][end])
        self.worst_detect_ns = int(view.records["detect_ns"][end])

    def chunk_periods(self) -> tuple[np.ndarray, np.ndarray]:
        """The periods (ns) of the chunk last added, and the index in that chunk of the record that
        ends each one (for callers that also draw the series, e.g. the report)."""
        return self._chunk.periods(), self._chunk.period_ends()

    def end_run(self) -> RunStats:
        """Forget the carried record: the next chunk starts a new run (no period spans the two)."""
        self.cycles.end_run()
        return self

    def merge(self, other: RunStats) -> RunStats:
        """Pool *other* (another run) into this one, in place; return self. Both must use one period.

        The merged state carries no record: no period spans the two runs.
        """
        if other.period_ns != self.period_ns:
            raise ValueError(f"cannot pool runs of different periods ({self.period_ns} and {other.period_ns} ns)")
        if other.rule != self.rule:
            raise ValueError(
                f"cannot pool runs of different late thresholds ({self.rule.threshold_ns} and "
                f"{other.rule.threshold_ns} ns)"
            )
        for name in SERIES:
            self.hist[name].merge(other.hist[name])
        mine, theirs = self.counters, other.counters
        for key in _SUMMED:
            mine[key] += theirs[key]
        mine["longest_miss_run"] = max(mine["longest_miss_run"], theirs["longest_miss_run"])
        late, other_late = mine["late_cycles"], theirs["late_cycles"]
        mine["late_cycles"] = None if late is None or other_late is None else late + other_late
        self.rtt_seen = self.rtt_seen or other.rtt_seen
        self.keep = None  # a pooled tail would mix the runs' clocks
        if other.worst_period_ns is not None and (
            self.worst_period_ns is None or other.worst_period_ns > self.worst_period_ns
        ):
            self.worst_period_ns, self.worst_seq = other.worst_period_ns, other.worst_seq
            self.worst_detect_ns = other.worst_detect_ns
            self.first_detect_ns = other.first_detect_ns
        elif self.first_detect_ns is None:
            self.first_detect_ns = other.first_detect_ns
        return self.end_run()

    @classmethod
    def pooled(cls, runs: list[RunStats], period_ns: int, threshold_ns: int | None = None) -> RunStats:
        """A new accumulator holding every run of *runs* (by their own late rule unless *threshold_ns*)."""
        if threshold_ns is None:
            threshold_ns = runs[0].rule.threshold_ns if runs else DEFAULT_THRESHOLD_NS
        out = cls(period_ns, threshold_ns)
        for r in runs:
            out.merge(r)
        return out

    # -- results ---------------------------------------------------------------------------------
    def summary(self) -> Metrics:
        """The numeric part of summary.json (schema.summary.Metrics; the meaning of
        :func:`softrt.analysis.summarize`). Slack's statistics hold its low percentiles only, and
        ``rtt_us`` is there when a record carried a round trip."""
        c, h = self.counters, self.hist
        misses = Misses.build(
            missed_updates=c["missed_updates"],
            cycles_with_miss=c["cycles_with_miss"],
            longest_miss_run=c["longest_miss_run"],
            overruns=c["overruns"],
            device_errors=c["device_errors"],
        )
        rtt = dict(rtt_us=h["rtt"].stats_us(PERCENTILES)) if self.rtt_seen else {}
        return Metrics.build(
            cycles=c["cycles"],
            records_expected=c["records_expected"],
            records_missing=c["records_expected"] - c["cycles"],
            late_cycles=c["late_cycles"],
            period_us=h["period"].stats_us(PERCENTILES),
            process_us=h["process"].stats_us(PERCENTILES),
            latency_us=h["latency"].stats_us(PERCENTILES),
            slack_us=h["slack"].stats_us(LOW_PERCENTILES),
            misses=misses,
            **rtt,
        )

    def snapshot(self) -> Snapshot:
        """Live figures; costs one pass over the period histogram's buckets (a few thousand)."""
        p = self.hist["period"]
        at = None
        if self.worst_detect_ns is not None and self.first_detect_ns is not None:
            at = (self.worst_detect_ns - self.first_detect_ns) / 1e9
        return Snapshot(
            cycles=self.counters["cycles"],
            missed_updates=self.counters["missed_updates"],
            late_cycles=self.counters["late_cycles"],
            max_period_us=None if p.max is None else p.max / 1e3,
            p99_period_us=None if (p99 := p.percentiles((99.0,))[0]) is None else p99 / 1e3,
            worst_seq=self.worst_seq,
            worst_at_s=at,
        )

    # -- storage ---------------------------------------------------------------------------------
    def document(self) -> StatsState:
        """The state as ``stats.json`` holds it (docs/run-format.md): counters, worst period, sparse histograms."""
        h = self.hist
        return StatsState(
            format=FORMAT,
            histogram=HistogramLayout(format=HDR_FORMAT, sub_bucket_bits=SUB_BITS, relative_error=RELATIVE_ERROR),
            period_ns=self.period_ns,
            late_threshold_ns=self.rule.threshold_ns,
            counters=StatsCounters(**self.counters),
            rtt_seen=self.rtt_seen,
            worst_period=WorstPeriod(
                period_ns=self.worst_period_ns,
                seq=self.worst_seq,
                detect_ns=self.worst_detect_ns,
                first_detect_ns=self.first_detect_ns,
            ),
            carry=None if (prev := self.cycles.prev) is None else CarriedRecord(**prev._asdict()),
            series_ns=SeriesHistograms(
                period=h["period"].document(),
                process=h["process"].document(),
                latency=h["latency"].document(),
                slack=h["slack"].document(),
                rtt=h["rtt"].document(),
            ),
        )

    @classmethod
    def of_document(cls, doc: StatsState) -> RunStats:
        """Rebuild the state :meth:`document` gave; ValueError when this softrt cannot continue it
        (another format or histogram layout, inconsistent buckets)."""
        if doc.format != FORMAT:
            raise ValueError(f"not a softrt run statistics document (format {doc.format[:40]!r})")
        if doc.histogram.sub_bucket_bits != SUB_BITS:
            raise ValueError(
                f"histogram with {doc.histogram.sub_bucket_bits} sub-bucket bits (this softrt reads {SUB_BITS})"
            )
        out = cls(doc.period_ns, doc.late_threshold_ns)
        c = doc.counters
        out.counters = Counters(
            cycles=c.cycles,
            records_expected=c.records_expected,
            missed_updates=c.missed_updates,
            cycles_with_miss=c.cycles_with_miss,
            longest_miss_run=c.longest_miss_run,
            overruns=c.overruns,
            device_errors=c.device_errors,
            late_cycles=c.late_cycles,
        )
        out.rtt_seen = doc.rtt_seen
        worst = doc.worst_period
        out.worst_period_ns, out.worst_seq = worst.period_ns, worst.seq
        out.worst_detect_ns, out.first_detect_ns = worst.detect_ns, worst.first_detect_ns
        out.cycles.prev = _carry(doc.carry)
        out.keep = None  # stats.json holds no kept values (store.tailkeep reads tail.npz)
        for name in SERIES:
            out.hist[name] = Hdr.of_document(getattr(doc.series_ns, name))
        return out


def _carry(doc: CarriedRecord | None) -> Carry | None:
    """The carried record (files before the late rule lack its ``done_ns``: 0 then)."""
    if doc is None or doc.seq is None:
        return None
    if doc.detect_ns is None:
        raise ValueError("the carried record has a seq but no detect_ns")
    return Carry(doc.seq, doc.detect_ns, doc.done_ns or 0)


def summarize(
    records: np.ndarray | list[np.ndarray], period_ns: int, threshold_ns: int = DEFAULT_THRESHOLD_NS
) -> Metrics:
    """Return the statistics of a run's records (the numeric part of summary.json).

    A list pools several runs (``softrt compare --repeat``): each run is its own stream, so no
    period spans two runs.
    """
    runs = records if isinstance(records, list) else [records]
    return RunStats.pooled([RunStats(period_ns, threshold_ns).add(r) for r in runs], period_ns, threshold_ns).summary()
