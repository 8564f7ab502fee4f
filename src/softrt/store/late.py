"""What a ``--samples late`` run keeps (store layer): the late cycles with their context, and
per-second aggregates for the time series (docs/run-format.md, "Files of a late run").

A 24 h run at 250 µs is 345 M cycles, about 1.5 GB of samples even at 4.4 bytes a record; almost
all of them say "on time". Such a run keeps instead

* every late cycle — softrt's one rule (:mod:`softrt.analysis.cycles`; in a run, the very flags
  the drainer computed for the statistics and the attribution) — with :data:`CONTEXT_RECORDS` records either side (:class:`LateSelector`; windows that overlap are
  merged, and the context is carried across drained chunks), in ``samples.parquet`` as usual;
* ``aggregates.parquet``: one row per second of the run (:class:`SecondAggregator`): records,
  min/max/mean period and latency, missed updates and late cycles;
* the period/latency/processing-time histograms, which every run stores in ``stats.json``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ..analysis.cycles import CycleStream, CycleView, LateRule
from ..units import NS_PER_S
from .validate import open_parquet

AGGREGATES = "aggregates.parquet"
CONTEXT_RECORDS = 50  # 12.5 ms either side at 250 µs: a miss run, what led to it and the recovery
MODES = ("all", "late")
AUTO_LATE_AFTER_NS = 3600 * NS_PER_S  # runs longer than this keep late cycles only unless --samples all

#: The most per-second rows read back (a year of seconds; 24 h is 86,400).
MAX_AGGREGATE_ROWS = 1 << 25
AGGREGATE_FIELDS = (
    "second",
    "records",
    "periods",
    "period_min_ns",
    "period_max_ns",
    "period_mean_ns",
    "latency_min_ns",
    "latency_max_ns",
    "latency_mean_ns",
    "missed",
    "missed_cycles",
    "late",
)
_AGG_SCHEMA = pa.schema([(name, pa.float64() if name.endswith("mean_ns") else pa.int64()) for name in AGGREGATE_FIELDS])
AGG_ROW_GROUP = 3600  # one hour of seconds per row group
_I64_MAX = np.iinfo(np.int64).max
_I64_MIN = np.iinfo(np.int64).min
_WRITER_OPTIONS = {"compression": "zstd"}


class LateSelector:
    """Streams records; returns, chunk by chunk, the late ones with *context* records either side.

    Takes records or their cycle views (the drainer's). State carried between chunks: the last
    record (a period spans chunks, :class:`~softrt.analysis.cycles.CycleStream`), up to *context* records not kept yet (the leading context of a late cycle in the next chunk),
    and how many records of the next chunk are still the trailing context of a late one.
    The records returned, over all chunks, are exactly those within *context* positions of a
    late record in the whole stream, in order, each once.
    """

    def __init__(self, period_ns: int, threshold_ns: int, context: int = CONTEXT_RECORDS) -> None:
        self.cycles = CycleStream(LateRule(int(period_ns), int(threshold_ns)))
        self.context = int(context)
        self._tail: np.ndarray | None = None  # the last records not kept (at most *context*)
        self._forward = 0  # records of the next chunk still inside a late record's trailing context
        self.late = 0  # late records seen

    def add(self, chunk: np.ndarray | CycleView) -> np.ndarray:
        """The records to keep from this chunk and the carried tail (in order; may be empty)."""
        view = self.cycles.view(chunk)
        records = view.records
        if records.size == 0:
            return records[:0]
        tail = self._tail if self._tail is not None else records[:0]
        both = np.concatenate([tail, records]) if tail.size else records
        n, lead, c = both.size, tail.size, self.context
        late_at = np.flatnonzero(view.late) + lead
        self.late += int(late_at.size)
        # Mark [j - c, j + c] around every late j, and the carried trailing context, by a difference array.
        delta = np.zeros(n + 1, dtype=np.int64)
        np.add.at(delta, np.maximum(late_at - c, 0), 1)
        np.add.at(delta, np.minimum(late_at + c + 1, n), -1)
        if self._forward:
            delta[lead] += 1
            delta[min(lead + self._forward, n)] -= 1
        keep = np.cumsum(delta[:n]) > 0
        ends = [lead + self._forward - n]
        if late_at.size:
            ends.append(int(late_at[-1]) + c + 1 - n)
        self._forward = max(max(ends), 0)
        kept = np.flatnonzero(keep)
        first_free = int(kept[-1]) + 1 if kept.size else 0
        self._tail = both[max(first_free, n - c) :].copy() if c else None
        return both[keep]


class SecondAggregator:
    """Streams records into one row per second of the run (seconds since the first record's permit,
    ``detect_ns``), written to ``aggregates.parquet`` an hour at a time.

    A period is counted in the second of the permit that ends it, and only between consecutive
    ``seq`` (the cycle view's); seconds without a record have no row. Takes records or their cycle
    views (the drainer's).
    """

    def __init__(self, path: Path, period_ns: int, threshold_ns: int) -> None:
        self.path = Path(path)
        self.cycles = CycleStream(LateRule(int(period_ns), int(threshold_ns)))
        self.t0_ns: int | None = None
        self.first: tuple[int, int] | None = None  # the first record's seq and board cycle of its write
        self._open: dict[str, int] | None = None  # the last second: more of it may come in the next chunk
        self._rows: list[dict[str, int]] = []  # a row: column -> value
        self._writer: pq.ParquetWriter | None = None
        self.seconds = 0  # rows written

    def add(self, chunk: np.ndarray | CycleView) -> None:
        view = self.cycles.view(chunk)
        records = view.records
        if records.size == 0:
            return
        detect = records["detect_ns"]
        if self.t0_ns is None:
            self.t0_ns = int(detect[0])
            self.first = (int(records["seq"][0]), int(records["cycle"][0] + records["missed"][0]))
        sec = (detect - self.t0_ns) // NS_PER_S
        starts = np.concatenate([[0], np.flatnonzero(np.diff(sec)) + 1])
        cons = view.consecutive
        latency = detect - records["edge_ns"]
        period = view.period_ns
        rows = {
            "second": sec[starts],
            "records": np.diff(np.append(starts, records.size)),
            "periods": np.add.reduceat(cons.astype(np.int64), starts),
            "period_min_ns": np.minimum.reduceat(np.where(cons, period, _I64_MAX), starts),
            "period_max_ns": np.maximum.reduceat(np.where(cons, period, _I64_MIN), starts),
            "period_sum": np.add.reduceat(np.where(cons, period, 0), starts),
            "latency_min_ns": np.minimum.reduceat(latency, starts),
            "latency_max_ns": np.maximum.reduceat(latency, starts),
            "latency_sum": np.add.reduceat(latency, starts),
            "missed": np.add.reduceat(records["missed"], starts),
            "missed_cycles": np.add.reduceat((records["missed"] > 0).astype(np.int64), starts),
            "late": np.add.reduceat(view.late.astype(np.int64), starts),
        }
        for k in range(starts.size):
            row = {name: int(col[k]) for name, col in rows.items()}
            if self._open is not None and self._open["second"] == row["second"]:
                row = _combine(self._open, row)
            elif self._open is not None:
                self._emit(self._open)
            self._open = row

    def _emit(self, row: dict[str, int]) -> None:
        self._rows.append(row)
        if len(self._rows) >= AGG_ROW_GROUP:
            self.flush()

    def flush(self) -> None:
        if not self._rows:
            return
        rows, self._rows = self._rows, []
        periods = np.array([r["periods"] for r in rows], dtype=np.int64)
        none = periods == 0
        cols = {}
        for name in AGGREGATE_FIELDS:
            if name == "period_mean_ns":
                values = np.array([r["period_sum"] for r in rows], dtype=np.float64) / np.maximum(periods, 1)
            elif name == "latency_mean_ns":
                values = np.array([r["latency_sum"] / r["records"] for r in rows], dtype=np.float64)
            else:
                values = np.array([r[name] for r in rows], dtype=np.int64)
            mask = none if name.startswith("period_") else None  # a second without a period: null
            cols[name] = pa.array(values, mask=mask, type=_AGG_SCHEMA.field(name).type)
        if self._writer is None:
            rule = self.cycles.rule
            schema = aggregates_schema(self.t0_ns, rule.period_ns, rule.threshold_ns, *self.first)
            self._writer = pq.ParquetWriter(self.path, schema, **_WRITER_OPTIONS)
        self._writer.write_table(pa.table(cols, schema=self._writer.schema), row_group_size=AGG_ROW_GROUP)
        self.seconds += len(rows)

    def close(self) -> None:
        """Write the last second and close the file (a run without records gets an empty file)."""
        if self._open is not None:
            self._rows.append(self._open)
            self._open = None
        self.flush()
        if self._writer is None:
            self._writer = pq.ParquetWriter(self.path, _AGG_SCHEMA, **_WRITER_OPTIONS)
        self._writer.close()


def aggregates_schema(t0_ns: int, period_ns: int, threshold_ns: int, first_seq: int, first_window: int) -> pa.Schema:
    """The Arrow schema of ``aggregates.parquet`` with its metadata: ``t0_ns`` (second 0: the first
    record's permit), the run's period and late threshold, and the first record's ``seq`` and
    board cycle of its write (``first_window``: where the motion schedule's sample 0 landed)."""
    meta = {
        "t0_ns": t0_ns,
        "period_ns": period_ns,
        "late_threshold_ns": threshold_ns,
        "first_seq": first_seq,
        "first_window": first_window,
    }
    return _AGG_SCHEMA.with_metadata({k.encode(): str(int(v)).encode() for k, v in meta.items()})


def _combine(a: dict[str, int], b: dict[str, int]) -> dict[str, int]:
    """One second's row (column -> value) from the two parts of it that two chunks held."""
    out = {"second": a["second"]}
    for name in ("records", "periods", "period_sum", "latency_sum", "missed", "missed_cycles", "late"):
        out[name] = a[name] + b[name]
    for name in ("period_min_ns", "latency_min_ns"):
        out[name] = min(a[name], b[name])
    for name in ("period_max_ns", "latency_max_ns"):
        out[name] = max(a[name], b[name])
    return out


def read_aggregates(run_path: Path) -> tuple[dict[str, np.ndarray], dict[str, int]]:
    """A late run's per-second aggregates (column name → array; period columns NaN where a second
    had no period) and the file's metadata (``t0_ns``, ``period_ns``, ``late_threshold_ns``)."""
    # One row a second: a year fits; bounded and checked before anything is decoded (store.validate).
    pf = open_parquet(
        Path(run_path) / AGGREGATES, "per-second aggregates", MAX_AGGREGATE_ROWS, AGGREGATE_FIELDS, floats=True
    )
    table = pf.read()
    meta = {k.decode(): int(v) for k, v in (pf.schema_arrow.metadata or {}).items()}
    cols = {}
    for name in AGGREGATE_FIELDS:
        col = table.column(name)
        cols[name] = (
            col.to_numpy(zero_copy_only=False).astype(np.float64)
            if col.null_count
            else col.to_numpy(zero_copy_only=False)
        )
    return cols, meta


def resolve_mode(samples: str | None, duration_ns: int) -> str:
    """``all`` or ``late``: *samples* as given, or by default ``late`` for runs longer than 1 h."""
    if samples is None:
        return "late" if duration_ns > AUTO_LATE_AFTER_NS else "all"
    return samples
