"""Read one run directory into what the report draws (report layer; reads files, no plotting).

A softrt run's ``samples.parquet`` is streamed batch by batch (14.4 M cycles would be 0.9 GB as
one record array) through the run's one streaming pass (:class:`softrt.analysis.RunStats`, the
definition the summary uses: no period across records the ring dropped); each batch also updates
the drawn period, latency and processing-time histograms, the min/max-downsampled period series
and the worst miss; only the board cycle of each write is kept whole, for the motion trace. An imported cyclictest/oslat run has a latency histogram only
(``histogram.json``, see :mod:`softrt.store.importers`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa

from ..analysis import RunStats
from ..analysis.hdr import Hdr, bucket_bounds
from ..errors import ConfigError, SoftRTError
from ..ipc.layout import RECORD_DTYPE
from ..schema.summary import RunSummary
from ..schema.text import printable
from ..store.history import HISTOGRAM, load_run_summary
from ..store.importers import check_histograms
from ..store.late import AGGREGATES, read_aggregates
from ..store.rundir import MAX_SAMPLE_ROWS, SAMPLES, iter_samples, load_run_stats, open_samples
from ..store.validate import load_json
from .check import RunCheck, read_check
from .data import MAX_BINS, MIN_WIDTH_NS, Hist, MinMaxDownsampler, Series, StreamHist, hist_from_buckets, merge
from .longrun import downsample_note, read_windows, scan_envelope
from .motion_view import MotionReference, late_motion, worst_motion

BATCH_ROWS = 1 << 18  # 2 MB per int64 column: small next to the histograms
#: The most cycles the report streams one by one: an hour at 250 µs (14.4 M, the longest run that
#: keeps every cycle by default) and a little more. It keeps the board cycle of every write for the
#: motion plot, about BYTES_PER_ROW in all at the peak (measured: 195 MB for 4 M cycles); beyond it
#: the report draws a min/max envelope read by row group and the histograms of stats.json (longrun).
ROW_BUDGET = 1 << 24
BYTES_PER_ROW = 50
SERIES_BUCKETS = 2000  # about one per pixel column of a 10-inch figure at 200 dpi

TOOL_MEANING = {
    "softrt": "latency = permit detected − board edge (the busy-polling loop's detection delay)",
    "cyclictest": "latency = timer wake-up − programmed wake-up time (cyclictest; sleep-based, no work, "
    "missed periods are skipped, not counted)",
    "oslat": "latency = gap between two consecutive counter reads of a busy loop (oslat: time stolen from "
    "the spinning thread)",
    "watch": "latency = back in user space − the wake-up the thread asked for (softrt watch, from the kernel's "
    "trace; process = its run time until it blocked again, missed updates = expiries it skipped)",
}


@dataclass
class RunView:
    """One run, ready to plot: summary plus whichever of the series exist."""

    path: Path
    summary: RunSummary
    period: Hist | None = None
    latency: Hist | None = None
    process: Hist | None = None
    series: Series | None = None
    motion: object | None = None  # softrt.motion.MotionTrace
    motion_reference: MotionReference | None = None
    motion_note: str | None = None
    check: RunCheck | None = None
    stats: RunStats | None = None  # the streaming pass over the samples (the summary's definitions)
    notes: list[str] = field(default_factory=list)
    t0_ns: int | None = None  # the first cycle's detect_ns: time 0 of the period-over-time plot

    @property
    def run_id(self) -> str:
        return self.summary.run_id

    @property
    def source(self) -> str:
        return self.summary.origin

    @property
    def meaning(self) -> str:
        """What its latency measures (TOOL_MEANING): the tool's, or a watched thread's."""
        return TOOL_MEANING.get("watch" if self.summary.watch is not None else self.source, "")

    @property
    def label(self) -> str:
        """Legend text: the run id, plus the scenario or tool when it says more."""
        scenario = self.summary.scenario
        return f"{self.run_id} ({scenario})" if scenario and scenario not in self.run_id else self.run_id

    @property
    def period_ns(self) -> int | None:
        return self.summary.period_ns

    @property
    def has_motion(self) -> bool:
        """A motion test whose impact the summary holds (or says why it was not computed)."""
        return bool(self.summary.config.motion) and self.summary.motion is not None


def load_run(path: Path | str) -> RunView:
    """Read the run directory *path*; raise ConfigError/SoftRTError when it cannot be read."""
    path = Path(path)
    summary = load_run_summary(path)
    view = RunView(path=path, summary=summary, check=read_check(path, summary))
    if view.source == "softrt":
        _load_samples(view)
    else:
        _load_histogram(view)
    return view


def _load_histogram(view: RunView) -> None:
    file = view.path / HISTOGRAM
    try:
        doc = load_json(file, "histogram")  # bounded (store.validate)
        threads = doc["threads"]
        check_histograms(threads, file)  # a span the tools never write is refused before it is allocated
        hists = [
            hist_from_buckets(
                np.asarray(t["lower_ns"], np.int64),
                np.asarray(t["counts"], np.int64),
                int(t["width_ns"]),
                over_count=int(t["overflow"]),
                over_from_ns=int(t["overflow_from_ns"]),
                min_ns=float(t["min_ns"]),
                max_ns=float(t["max_ns"]),
            )
            for t in threads
        ]
    except (ConfigError, OSError, ValueError, KeyError, TypeError, OverflowError) as err:
        raise ConfigError(f"run {view.run_id}: cannot read its histogram {printable(file)}: {printable(err)}") from None
    if not hists:
        raise SoftRTError(f"run {view.run_id}: {file} holds no thread")
    merged = merge(hists)
    tool = view.source
    if len(hists) > 1:
        cpus = ", ".join(str(t.get("cpu")) for t in threads)
        view.notes.append(f"{tool}: {len(hists)} threads (CPUs {cpus}) combined in one latency histogram")
    if merged.counts.size:
        view.latency = merged
    else:  # only min/mean/max are known: nothing to draw
        view.notes.append(f"{tool}: no latency histogram (run without -h, or every sample beyond its range)")
    view.notes.append(
        f"{tool} result: no per-cycle samples, so the period, processing time, time series and "
        "motion plots do not apply"
    )
    view.motion_note = f"does not apply ({tool} drives no axis)"


def _load_samples(view: RunView) -> None:
    if (view.path / AGGREGATES).is_file():
        try:
            _load_late(view)
        except SoftRTError as err:
            if not _never_closed(view):
                raise
            _load_checkpoint(view, err.msg)
        return
    file = view.path / SAMPLES
    if not file.is_file():
        raise SoftRTError(
            f"run {view.run_id}: samples file {file} is missing",
            hint="copy the whole run directory, samples.parquet included",
        )
    try:
        n = open_samples(view.path).metadata.num_rows  # the footer checked first (store.validate)
    except ConfigError as err:
        if _never_closed(view):
            _load_checkpoint(view, err.msg)
            return
        if "rows, more than softrt reads" not in err.msg:
            _load_damaged(view, err.msg)
            return
        n = MAX_SAMPLE_ROWS + 1
    if n > MAX_SAMPLE_ROWS:
        _load_stats_only(
            view,
            f"samples.parquet holds {n:,} cycles, more than the report reads "
            f"({MAX_SAMPLE_ROWS:,}), so the figures and histograms are those of the run's stats.json",
            f"samples.parquet holds {n:,} cycles, more than the report reads ({MAX_SAMPLE_ROWS:,})",
            "a run this long is reported from its stats.json; record long runs with --samples late",
        )
        return
    try:
        _stream_long(view, n) if n > ROW_BUDGET else _stream(view, n)
    except SoftRTError as err:  # a page past the footer is damaged: what was drawn so far is dropped
        if n > ROW_BUDGET and view.stats is None:
            raise  # a long run's stats.json is unreadable: its own message
        view.notes.clear()
        _load_damaged(view, err.msg)


def _load_damaged(view: RunView, why: str) -> None:
    """A finished run whose ``samples.parquet`` cannot be read (*why*): the figures and histograms
    of its ``stats.json``, written beside it, and a note saying so first (issue 32: such a run was
    refused although its summary and stats were intact)."""
    _load_stats_only(
        view,
        f"samples.parquet is damaged ({why}), so the figures and histograms are those of the run's stats.json",
        f"{why}; and stats.json",
        "copy the run directory again (samples.parquet and stats.json) from where it was recorded",
    )


def _never_closed(view: RunView) -> bool:
    """The run's files were never closed: its supervisor was killed (the summary is a checkpoint,
    docs/run-format.md "Checkpoints") or it said so itself (``samples_error``); a Parquet file is
    readable only once its footer is written."""
    return view.summary.running or view.summary.samples_error is not None


def _load_checkpoint(view: RunView, why: str) -> None:
    """A run whose samples were never closed: the figures and histograms of its last checkpoint
    (``stats.json``), no time series and no motion plot."""
    _load_stats_only(
        view,
        f"{why}: the run was stopped before it closed its files, so the figures and histograms "
        "are those of its last checkpoint",
        f"{why}; and its last checkpoint",
        "the run was killed before its first checkpoint: nothing of it can be read",
    )
    view.motion_note = "not available: the samples were never closed"


def _load_stats_only(view: RunView, note: str, failed: str, hint: str) -> None:
    """The figures and histograms of ``stats.json`` alone, with *note* (why) first among the notes."""
    try:
        view.stats = stats = load_run_stats(view.path, view.period_ns or 0, samples_pass=False)
    except SoftRTError as err:
        raise SoftRTError(f"run {view.run_id}: {failed}: {err.msg}", hint=hint) from None
    _hists_from_stats(view, stats)
    view.notes.insert(
        0,
        f"{note} ({stats.counters['cycles']:,} cycles, stats.json); the time series and the "
        "motion plot are not available",
    )
    view.motion_note = "not available: the report read stats.json only"


def _stream(view: RunView, n: int) -> None:
    want_motion = view.has_motion
    stats = RunStats(view.period_ns or 0)
    h_period, h_latency, h_process = StreamHist(), StreamHist(), StreamHist()
    ds = MinMaxDownsampler(max(n - 1, 0), SERIES_BUCKETS)
    windows: list[np.ndarray] = []
    t0: int | None = None
    worst = (0, -1, 0)  # (missed, record index, board cycle the write landed in)
    seen = 0
    for rec in iter_samples(view.path, BATCH_ROWS):
        if rec.size == 0:
            continue
        detect, missed = rec["detect_ns"], rec["missed"]
        first = t0 is None
        if first:
            t0 = int(detect[0])
        stats.add(rec)
        h_latency.add(detect - rec["edge_ns"])
        h_process.add(rec["done_ns"] - detect)
        # The periods the summary counts (none across a seq gap), each drawn at the permit that ends it.
        period, ends = stats.chunk_periods()
        marked = missed[ends] > 0
        if first and marked.size and missed[0] > 0:
            marked[0] = True  # the first record's miss is drawn on the first period (there is none before it)
        h_period.add(period)
        ds.add(period, detect[ends] - t0, marked)
        window = rec["cycle"] + missed
        i = int(np.argmax(missed))
        if missed[i] > worst[0]:
            worst = (int(missed[i]), seen + i, int(window[i]))
        if want_motion:
            windows.append(window)
        seen += int(rec.size)
    view.stats = stats
    cycles = view.summary.metrics.cycles
    if cycles is not None and cycles != seen:
        view.notes.append(f"samples.parquet holds {seen:,} cycles, the summary {cycles:,}: the plots show the samples")
    if seen == 0:
        view.notes.append("no cycles were recorded: nothing to plot")
        view.motion_note = "no cycles recorded"
        return
    view.t0_ns = t0
    view.period = h_period.result() if stats.hist["period"].n else None
    view.latency = h_latency.result()
    view.process = h_process.result()
    view.series = ds.result() if stats.hist["period"].n else None
    if want_motion:
        whole = np.concatenate(windows)
        view.motion, view.motion_reference, view.motion_note = worst_motion(
            view.summary, lambda first, last: (whole, 0, 0), worst
        )
    else:
        view.motion_note = "no motion test in this run (a user step function, or --axes 0)"


def _stream_long(view: RunView, n: int) -> None:
    """A run past ROW_BUDGET (softrt.report.longrun): the figures, histograms and percentiles from
    the exact counts of stats.json, the period over time as a min/max envelope read by row group,
    and the motion around the worst miss from the row groups that hold it."""
    try:
        view.stats = stats = load_run_stats(view.path, view.period_ns or 0, samples_pass=False)
    except SoftRTError as err:
        raise SoftRTError(
            f"run {view.run_id}: samples.parquet holds {n:,} cycles, more than the report keeps one "
            f"by one ({ROW_BUDGET:,}), and its stats.json cannot be read: {err.msg}",
            hint="copy the whole run directory, stats.json included",
        ) from None
    _hists_from_stats(view, stats)
    env = scan_envelope(view.path, n, SERIES_BUCKETS, windows=view.has_motion)
    view.series, view.t0_ns = env.series, env.t0_ns
    view.notes.insert(0, downsample_note(n, env, ROW_BUDGET))
    if not env.rows:
        view.motion_note = "no cycles recorded"
    elif not view.has_motion:
        view.motion_note = "no motion test in this run (a user step function, or --axes 0)"
    else:

        def windows(first: int, last: int) -> tuple[np.ndarray, int, int]:
            row, window = read_windows(view.path, env, first, last)
            return window, int(window[0]) - env.group_windows[0], row

        view.motion, view.motion_reference, view.motion_note = worst_motion(view.summary, windows, env.worst)


def _load_late(view: RunView) -> None:
    """A ``--samples late`` run (softrt.store.late): histograms from ``stats.json``, the period over
    time from ``aggregates.parquet``, the motion around the worst miss from the late cycles kept
    with their context. Nothing is read per cycle but the late cycles."""
    period_ns = view.period_ns or 0
    try:
        view.stats = stats = load_run_stats(view.path, period_ns)
        cols, meta = read_aggregates(view.path)
    except (OSError, pa.ArrowException, ValueError, KeyError) as err:
        raise SoftRTError(
            f"run {view.run_id}: cannot read {AGGREGATES}: {err}", hint="the file is corrupt or truncated"
        ) from None
    except SoftRTError as err:
        raise SoftRTError(f"run {view.run_id}: {err.msg}", hint=err.hint) from None
    _hists_from_stats(view, stats)
    view.series = series_from_aggregates(cols)
    view.t0_ns = meta.get("t0_ns")
    records = [r for r in iter_samples(view.path, BATCH_ROWS) if r.size]
    kept = np.concatenate(records) if records else np.zeros(0, dtype=RECORD_DTYPE)
    late = int(cols["late"].sum()) if cols["late"].size else 0
    view.notes.append(
        f"samples kept: late cycles only (--samples late): the {late:,} late cycles of "
        f"{int(cols['records'].sum()):,} with their context, {kept.size:,} records in all; the "
        "histograms come from stats.json and the period over time from per-second aggregates"
    )
    if not view.has_motion:
        view.motion_note = "no motion test in this run (a user step function, or --axes 0)"
        return
    view.motion, view.motion_reference, view.motion_note = late_motion(view.summary, kept, meta)


def _hists_from_stats(view: RunView, stats: RunStats) -> None:
    """The period, latency and processing-time histograms of stats.json (exact HDR counts)."""
    h = stats.hist
    view.period = hist_from_hdr(h["period"]) if h["period"].n else None
    view.latency = hist_from_hdr(h["latency"]) if h["latency"].n else None
    view.process = hist_from_hdr(h["process"]) if h["process"].n else None


def hist_from_hdr(hdr: Hdr) -> Hist:
    """The report's equal-width histogram from a stored HDR histogram (stats.json): each bucket's
    count lands in the class of its lower bound, in power-of-ten classes from 100 ns (as
    StreamHist), so the error is the HDR bucket's (≤ 0.1 %) or one class."""
    keys, counts = hdr.buckets()
    lower, _ = bucket_bounds(keys)
    neg = lower < 0
    width = MIN_WIDTH_NS
    while max(int(hdr.max), 0) // width >= MAX_BINS:
        width *= 10
    out = hist_from_buckets(lower[~neg], counts[~neg], width, min_ns=float(hdr.min), max_ns=float(hdr.max))
    out.under_count = int(counts[neg].sum())
    return out


def series_from_aggregates(cols: dict[str, np.ndarray], buckets: int = SERIES_BUCKETS) -> Series | None:
    """The period-over-time series of a late run: per slice of seconds (at most *buckets*), the
    min and max period, the mean, and the cycles with a missed update."""
    has = cols["periods"] > 0
    if not has.any():
        return None
    sec = cols["second"][has]
    lo, hi = cols["period_min_ns"][has], cols["period_max_ns"][has]
    n = cols["periods"][has]
    total = n * cols["period_mean_ns"][has]
    marks = cols["missed_cycles"][has]
    k = min(buckets, sec.size)
    starts = np.flatnonzero(np.diff(np.arange(sec.size) * k // sec.size, prepend=-1))
    counts = np.add.reduceat(n, starts)
    return Series(
        t_s=sec[starts].astype(np.float64),
        lo=np.minimum.reduceat(lo, starts),
        hi=np.maximum.reduceat(hi, starts),
        mean=np.add.reduceat(total, starts) / counts,
        marks=np.add.reduceat(marks, starts),
        n=int(n.sum()),
        downsampled=True,
    )
