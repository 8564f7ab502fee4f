"""A run's streaming-pass state as ``stats.json`` holds it (schema layer; docs/run-format.md).

:class:`softrt.analysis.stream.RunStats` writes its state with the run (its ``document()``) so that
reports, pooled comparisons and a resumed checkpoint merge it instead of re-reading the samples,
and rebuilds itself from it (``RunStats.of_document``). These documents check each value's type
and sign as any document does (:mod:`.doc`); what only the histogram knows (its buckets add up to
its count, its keys lie in its layout) is checked by :meth:`softrt.analysis.hdr.Hdr.of_document`.

Files written before softrt counted late cycles lack ``late_threshold_ns``, ``counters.late_cycles``
and ``carry.done_ns``: they read as the default threshold, an unknown count and 0.
"""

from __future__ import annotations

from dataclasses import field
from typing import Any

from .config import DEFAULT_THRESHOLD_NS
from .doc import Doc, count, opt


def _whole() -> Any:
    """A whole number that cannot be negative and that every file holds."""
    return field(metadata={"min": 0})


class HistogramLayout(Doc):
    """The log-linear layout every histogram of the file uses (softrt.analysis.hdr)."""

    format: str
    sub_bucket_bits: int
    relative_error: float


class Histogram(Doc):
    """One series' histogram: its exact moments and its non-empty buckets (keys increasing)."""

    n: int = _whole()
    sum_ns: int
    m2_ns2: float  # the sum of squared deviations from the mean (Chan et al.)
    min_ns: int | None  # None: no value yet
    max_ns: int | None
    keys: list[int]
    counts: list[int]


class SeriesHistograms(Doc):
    """The five series' histograms (softrt.analysis.stream.SERIES), in nanoseconds."""

    period: Histogram
    process: Histogram
    latency: Histogram
    slack: Histogram
    rtt: Histogram


class StatsCounters(Doc):
    """The pass's counts; ``late_cycles`` is None when unknown (a file from before softrt counted them)."""

    cycles: int = _whole()
    records_expected: int = _whole()
    missed_updates: int = _whole()
    cycles_with_miss: int = _whole()
    longest_miss_run: int = _whole()
    overruns: int = _whole()
    device_errors: int = _whole()
    late_cycles: int | None = count()


class WorstPeriod(Doc):
    """The longest period: its length, the record that ended it, its permit and the run's first permit."""

    period_ns: int | None  # None: no period yet
    seq: int | None
    detect_ns: int | None
    first_detect_ns: int | None


class CarriedRecord(Doc):
    """The last record seen, so that a resumed pass measures the period across the cut."""

    seq: int | None  # None: no record yet
    detect_ns: int | None
    done_ns: int | None = opt()  # absent from files written before the late rule


class StatsState(Doc):
    """``stats.json``: the whole state of one run's streaming pass (or of several runs, pooled)."""

    format: str
    histogram: HistogramLayout
    period_ns: int = _whole()
    late_threshold_ns: int = DEFAULT_THRESHOLD_NS
    counters: StatsCounters
    rtt_seen: bool
    worst_period: WorstPeriod
    carry: CarriedRecord | None = None
    series_ns: SeriesHistograms
