"""What ``softrt tail SOURCE`` fits: a stored run, a cyclictest ``-v`` file, an rt-tests histogram,
or a CSV/Parquet column, read into the tail model (store layer; issue 33).

* A run (id, ``last``, a directory): its kept top of the series (``tail.npz``,
  store.tailkeep), else one pass over ``samples.parquet``; a ``watch`` run's series is the wake-up
  latency (late beyond the late threshold), a loop's the period (late beyond nominal + the
  threshold: softrt.analysis.cycles' rule). An imported cyclictest/oslat run: its histogram.
* cyclictest ``-v`` (rt-tests src/cyclictest/cyclictest.c, ``print_stat`` with verbose): one line
  ``THREAD: INDEX: LATENCY`` per cycle, in µs (ns with ``-N``). The cycle's time is INDEX times the
  interval the user gives (cyclictest's own "Interval:" header line did not match ``-i`` on this
  project's machine: evt-recipe.md). INDEX counts cyclictest's cycles, not its timer's expiries: a
  stall longer than the interval drops the expiries it spanned (40 s on this VM gave 127,045 lines,
  not 160,000), so the time is a lower bound and the rates an upper one (the Tail's caveat says so).
* cyclictest/oslat ``--json`` (store.importers' parser): a histogram has no time order, so no
  declustering (the Tail's caveat says so).
* A CSV or Parquet column (``--column``): one value per cycle, in µs, at the given interval.
"""

from __future__ import annotations

import csv
import io
import json
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..analysis.stream import RunStats
from ..analysis.tail import fit_tail, fit_tail_histogram
from ..analysis.tail_keep import TailKeeper, fit_kept
from ..errors import ConfigError, SoftRTError
from ..schema.config import DEFAULT_THRESHOLD_NS
from ..schema.tail import HOURS_PER_YEAR, Tail
from ..schema.text import printable
from .history import HISTOGRAM, load_run_summary, resolve_run
from .importers import SOURCES, _threads, detect_source
from .rundir import SAMPLES, iter_samples
from .tailkeep import read_tail_keep
from .validate import parse_json, read_bounded

MAX_TEXT_BYTES = 4 << 30  # a 24 h cyclictest -v file is about 6 GB: read it in pieces, never whole
CYCLICTEST_CAVEAT = (
    "times are cycle index × --interval-us: cyclictest drops the expiries a stall spans, so the "
    "run lasted longer than that and the rates are upper bounds"
)
_LINE = re.compile(rb"^\s*(\d+):\s*(\d+):\s*(\d+)\s*$", re.M)


@dataclass(frozen=True)
class Fitted:
    """A tail and what it was fitted to (µs and s; None for a histogram): the plot's points."""

    tail: Tail
    values_us: np.ndarray | None = None
    times_s: np.ndarray | None = None


@dataclass(frozen=True)
class TailOptions:
    """The user's knobs (``softrt tail``'s options)."""

    deadline_us: float | None = None
    threshold_us: float | None = None
    gap_s: float = 0.010
    target_per_h: float = 1 / HOURS_PER_YEAR
    interval_us: float = 250.0
    column: str | None = None
    thread: int | None = None


def load_tail(source: str, opts: TailOptions, db: str | None = None) -> Fitted:
    """The tail of *source* (the module docstring says what it may be); ConfigError for bad input."""
    path = Path(source)
    if not path.is_file():
        return _run_tail(resolve_run(source, db), opts)
    suffix = path.suffix.lower()
    if suffix in (".csv", ".parquet"):
        return _column_tail(path, opts)
    head = path.open("rb").read(1)
    if head == b"{":
        return _histogram_tail(path, opts)
    return _cyclictest_tail(path, opts)


def _deadline(opts: TailOptions, default_us: float | None, what: str) -> float:
    if opts.deadline_us is not None:
        return opts.deadline_us
    if default_us is None:
        raise ConfigError(f"{what}: no deadline is known", hint="give one with --deadline-us")
    return default_us


def _latency_deadline(opts: TailOptions) -> float:
    """A wake-up later than the cycle plus softrt's late threshold breaks the period bound of
    softrt's late rule (analysis.cycles): 270 µs at 250 µs, the recipe's requirement R."""
    return opts.interval_us + DEFAULT_THRESHOLD_NS / 1e3


def _fit(values_us: np.ndarray, times_s: np.ndarray, opts: TailOptions, deadline_us: float, series: str) -> Fitted:
    return Fitted(
        fit_tail(
            values_us,
            times_s,
            deadline_us=deadline_us,
            series=series,
            threshold_us=opts.threshold_us,
            gap_s=opts.gap_s,
            target_per_h=opts.target_per_h,
            hours=values_us.size * opts.interval_us / 3.6e9,
        ),
        values_us,
        times_s,
    )


def _cyclictest_tail(path: Path, opts: TailOptions) -> Fitted:
    """cyclictest -v: every thread's lines, or only --thread's; read in pieces (bounded memory)."""
    threads, latencies = [], []
    with path.open("rb") as f:
        rest = b""
        while chunk := f.read(1 << 24):
            data = rest + chunk
            cut = data.rfind(b"\n") + 1
            data, rest = data[:cut], data[cut:]
            rows = np.array(_LINE.findall(data), dtype=np.int64).reshape(-1, 3)
            threads.append(rows[:, 0])
            latencies.append(rows[:, 2])
        rows = np.array(_LINE.findall(rest), dtype=np.int64).reshape(-1, 3)
        threads.append(rows[:, 0])
        latencies.append(rows[:, 2])
    thread, lat = np.concatenate(threads), np.concatenate(latencies)
    if not lat.size:
        raise ConfigError(
            f"{printable(path)} holds no cyclictest -v line ('THREAD: INDEX: LATENCY')",
            hint="record one with cyclictest -v, or give a --json result, a .csv or a .parquet file",
        )
    which = int(thread[0]) if opts.thread is None else opts.thread
    lat = lat[thread == which]
    if not lat.size:
        raise ConfigError(
            f"{printable(path)} has no cycle of thread {which}",
            hint=f"threads in the file: {', '.join(map(str, np.unique(thread)[:10]))}",
        )
    times = np.arange(lat.size) * opts.interval_us / 1e6
    fitted = _fit(lat.astype(float), times, opts, _deadline(opts, _latency_deadline(opts), ""), "latency_us")
    if fitted.tail.caveat is None and int(lat.max()) > opts.interval_us:
        fitted = Fitted(fitted.tail.replace(caveat=CYCLICTEST_CAVEAT), fitted.values_us, fitted.times_s)
    return fitted


def _column_tail(path: Path, opts: TailOptions) -> Fitted:
    if not opts.column:
        raise ConfigError(f"{printable(path)} is a table: which column?", hint="name it with --column NAME")
    try:
        if path.suffix.lower() == ".parquet":
            import pyarrow.parquet as pq

            values = pq.read_table(path, columns=[opts.column]).column(0).to_numpy(zero_copy_only=False)
        else:
            text = read_bounded(path, "CSV file", max_bytes=MAX_TEXT_BYTES).decode("utf-8", "replace")
            rows = csv.DictReader(io.StringIO(text))
            if opts.column not in (rows.fieldnames or []):
                raise KeyError(opts.column)
            values = np.array([r[opts.column] for r in rows], dtype=float)
    except (KeyError, ValueError, OSError) as err:
        raise ConfigError(
            f"{printable(path)}: cannot read column {opts.column!r} ({printable(err)[:100]})",
            hint="name a numeric column of per-cycle values in µs with --column",
        ) from None
    except Exception as err:  # noqa: BLE001 - pyarrow's own errors (ArrowInvalid ...): one line, no traceback
        raise ConfigError(
            f"{printable(path)}: not a readable Parquet file ({printable(err)[:100]})",
            hint="give a Parquet or CSV file",
        ) from None
    values = np.asarray(values, dtype=float)
    times = np.arange(values.size) * opts.interval_us / 1e6
    return _fit(values, times, opts, _deadline(opts, None, f"column {opts.column}"), opts.column)


def _histogram_tail(path: Path, opts: TailOptions, doc: dict | None = None) -> Fitted:
    """An rt-tests --json result: every thread's histogram pooled (one bucket width)."""
    if doc is None:
        doc = parse_json(read_bounded(path, "result", hint="give a cyclictest/oslat --json file"), path)
    if not isinstance(doc, dict):
        raise ConfigError(f"{printable(path)} is not a cyclictest/oslat result", hint="give a --json result")
    tool = detect_source(doc)
    threads = _threads(doc, tool, path)
    hours = sum(_thread_hours(t, tool, opts) for t in threads)
    return _pooled_histogram(threads, hours, opts, str(path))


def _thread_hours(t: dict, tool: str, opts: TailOptions) -> float:
    if tool == "oslat" and t.get("duration_s"):
        return float(t["duration_s"]) / 3600
    return t["samples"] * opts.interval_us / 3.6e9


def _pooled_histogram(threads: list[dict], hours: float, opts: TailOptions, what: str) -> Fitted:
    width = min(int(t["width_ns"]) for t in threads)
    counts: dict[int, int] = {}
    beyond, beyond_max_ns = 0, None  # past the histogram: counted, only their maximum known
    for t in threads:
        for lo, n in zip(t["lower_ns"], t["counts"]):
            counts[int(lo)] = counts.get(int(lo), 0) + int(n)
        if t["overflow"]:
            beyond += int(t["overflow"])
            beyond_max_ns = max(beyond_max_ns or 0, int(t["max_ns"]))
    if not counts:
        raise ConfigError(f"{printable(what)} has no histogram", hint="record one with cyclictest -h N --json=FILE")
    lows = sorted(counts)
    edges, cnt = [lows[0]], []
    for lo in lows:
        if lo < edges[-1]:  # inside the bucket before (threads of different widths): counted there
            cnt[-1] += counts[lo]
            continue
        if lo > edges[-1]:  # a gap between buckets is an empty bucket
            edges.append(lo)
            cnt.append(0)
        edges.append(lo + width)
        cnt.append(counts[lo])
    return Fitted(
        fit_tail_histogram(
            np.array(edges) / 1e3,
            np.array(cnt),
            hours=hours,
            deadline_us=_deadline(opts, _latency_deadline(opts), ""),
            series="latency_us",
            threshold_us=opts.threshold_us,
            target_per_h=opts.target_per_h,
            beyond=beyond,
            beyond_max_us=None if beyond_max_ns is None else beyond_max_ns / 1e3,
        )
    )


def _run_tail(path: Path, opts: TailOptions) -> Fitted:
    summary = load_run_summary(path)
    if summary.origin in SOURCES:
        file = path / HISTOGRAM
        doc = parse_json(read_bounded(file, "histogram"), file)
        threads = doc.get("threads") if isinstance(doc, dict) else None
        if not threads:
            raise ConfigError(f"{printable(file)} holds no histogram", hint="import the tool's --json result again")
        # As the tool's own file is read (oslat's measured duration, else samples at the interval): an
        # imported oslat run of 2 s is 2 s, not its 98 M samples at --interval.
        hours = sum(_thread_hours(t, summary.origin or "", opts) for t in threads)
        return _pooled_histogram(threads, hours, opts, str(file))
    period_ns = summary.config.period_ns
    if not period_ns:
        raise ConfigError(f"{printable(path)}: the run has no period", hint="give a run softrt recorded")
    threshold_ns = summary.config.late_threshold_ns or DEFAULT_THRESHOLD_NS
    series = "latency" if summary.scenario == "watch" else "period"
    try:
        keep = read_tail_keep(path)
    except SoftRTError as err:  # a corrupt tail.npz: the samples hold the same cycles, if kept
        if not (path / SAMPLES).is_file():
            raise
        keep, _ = None, err
    if keep is None:
        keep = _keep_from_samples(path, period_ns, threshold_ns)
    k = keep[series]
    if opts.deadline_us is not None:  # another deadline: count the late cycles again
        values, times = k.arrays()
        k = TailKeeper.restore(
            values,
            times,
            threshold=k.threshold,
            seen=k.seen,
            raised=k.raised,
            deadline=opts.deadline_us * 1e3,
            first=k.first,
            last=k.last,
            late=int(np.count_nonzero(values > opts.deadline_us * 1e3)),
        )
    tail = fit_kept(
        k,
        hours=k.hours(period_ns),
        series=f"{series}_us",
        gap_s=opts.gap_s,
        target_per_h=opts.target_per_h,
        threshold_us=opts.threshold_us,
    )
    return Fitted(tail, *kept_points(k))


def kept_points(k: TailKeeper) -> tuple[np.ndarray, np.ndarray]:
    """What a keeper held as µs and seconds from its first value (the return-level plot's points)."""
    values, times = k.arrays()
    start = k.first if k.first is not None else (times[0] if times.size else 0)
    return values / 1e3, (times - start) / 1e9  # seconds since the run's start


def run_tail_points(path: Path, scenario: str | None) -> tuple[np.ndarray, np.ndarray] | None:
    """The kept values of the series a run's tail block models (None: no tail.npz)."""
    keep = read_tail_keep(path)
    if keep is None:
        return None
    return kept_points(keep["latency" if scenario == "watch" else "period"])


def _keep_from_samples(path: Path, period_ns: int, threshold_ns: int) -> dict[str, TailKeeper]:
    if not (path / SAMPLES).is_file():
        raise ConfigError(
            f"{printable(path)} keeps neither tail.npz nor {SAMPLES}",
            hint="a run recorded before softrt kept its tail: run it again",
        )
    stats = RunStats(period_ns, threshold_ns)
    for batch in iter_samples(path):
        stats.add(batch)
    return stats.keep


def describe(tail: Tail) -> str:
    """The tail as JSON text (``softrt tail --json``)."""
    return json.dumps(tail.to_dict(), indent=2) + "\n"
