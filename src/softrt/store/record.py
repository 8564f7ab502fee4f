"""One run as the run history knows it (store layer): the record a listing shows, read from a row of
the history's database (store.dialect.COLUMNS), its full summary read only when asked for."""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from functools import cached_property
from pathlib import Path

from ..schema.history import HistoryEntry, StillRunning
from ..schema.summary import RunSummary
from .dialect import COLUMNS as _COLUMNS
from .running import RunState
from .validate import check_row, parse_json


@dataclass(frozen=True)
class RunColumns:
    """The columns of the runs table (store.dialect.COLUMNS) that a row written and a record read
    share: the run, where it ran and its headline figures."""

    run_id: str
    started_at: str | None
    finished_at: str | None
    host: str | None
    scenario: str | None
    source: str  # "softrt" or the tool it was imported from ("cyclictest", "oslat")
    status: str | None
    mode: str | None
    period_ns: int | None
    cycles: int | None
    period_max_us: float | None
    period_p99_99_us: float | None
    latency_max_us: float | None
    process_max_us: float | None
    missed_updates: int | None
    summary_json: str = field(repr=False)  # the stored summary, read when asked for (a listing needs none)
    added_at: str


@dataclass(frozen=True)
class HistoryRow(RunColumns):
    """One run's row as the history writes it (store.history.History.row_of): every column of the
    runs table (store.dialect.COLUMNS)."""

    started_epoch_s: float | None
    config_json: str
    tuning_json: str
    path: str
    samples_path: str | None

    def values(self) -> tuple:
        """The column values in store.dialect.COLUMNS order (the order of the upsert's parameters)."""
        return tuple(getattr(self, name) for name in _COLUMNS)


@dataclass(frozen=True)
class RunRecord(RunColumns):
    """One run as the history knows it."""

    path: Path
    samples_path: Path | None
    compare_id: str | None = None  # the runs of one softrt compare share it (schema.summary.RunSummary)
    late_rate_high_per_h: float | None = None  # the tail block's 95 % upper bound (None: no tail block)
    late_rate_per_h: float | None = None  # its fitted estimate (None: no fit)

    @cached_property
    def summary(self) -> RunSummary:
        """The run's summary as the history stored it (checked like a summary.json)."""
        return _stored_summary(self.summary_json, self.run_id)

    def entry(self, state: RunState | None = None) -> HistoryEntry:
        """The listing fields (``softrt history --json``; the full summary is ``softrt show RUN --json``);
        with the *state* of a run marked running (store.running), whether it still goes."""
        return HistoryEntry(
            **{name: getattr(self, name) for name in _LISTED},
            tuning=self.summary.tuning,
            path=str(self.path),
            samples_path=None if self.samples_path is None else str(self.samples_path),
            added_at=self.added_at,
            compare_id=self.compare_id,
            late_rate_high_per_h=self.late_rate_high_per_h,
            late_rate_per_h=self.late_rate_per_h,
            running=None
            if state is None
            else StillRunning(alive=state.alive, elapsed_s=state.elapsed_s, checkpoint_age_s=state.checkpoint_age_s),
        )


_SHARED = tuple(f.name for f in fields(RunColumns))
#: The shared columns a listing shows first, as they are: the stored summary is shown as its tuning, and
#: ``added_at`` after the paths (HistoryEntry's order, the order ``softrt history --json`` has written).
_LISTED = tuple(name for name in _SHARED if name not in ("summary_json", "added_at"))


def record_of_row(row: tuple) -> RunRecord:
    """The history's row *row* (its columns in store.dialect.COLUMNS order, then any extras) as a record."""
    r = check_row(RunRecord, dict(zip(_COLUMNS, row)), "the history database")
    # Read from the stored summary in SQL (SQLite) or, without those columns (PostgreSQL), here.
    extra = row[len(_COLUMNS) :]
    compare_id, high, estimate = extra if len(extra) == 3 else _from_summary(r["summary_json"])
    high, estimate = _float(high), _float(estimate)
    return RunRecord(
        **{name: r[name] for name in _SHARED},
        path=Path(r["path"]),
        samples_path=Path(r["samples_path"]) if r["samples_path"] else None,
        compare_id=compare_id if isinstance(compare_id, str) else None,
        late_rate_high_per_h=high,
        late_rate_per_h=estimate,
    )


def _from_summary(summary_json: object) -> tuple[str | None, object, object]:
    """The compare id and the tail's late rates (95 % upper bound, estimate) of a stored summary, read
    in Python (engines without SQL JSON that fails soft; a row written by another rig may hold anything)."""
    if not isinstance(summary_json, str) or ('"compare_id"' not in summary_json and '"tail"' not in summary_json):
        return None, None, None
    try:
        doc = json.loads(summary_json)
        tail = doc.get("tail") if isinstance(doc.get("tail"), dict) else {}
        fitted = tail.get("late_rate_per_h") if isinstance(tail.get("late_rate_per_h"), dict) else {}
    except (ValueError, AttributeError, RecursionError):
        return None, None, None
    compare_id = doc.get("compare_id")
    high = fitted.get("high")
    return (
        compare_id if isinstance(compare_id, str) else None,
        high if high is not None else tail.get("late_rate_bound_per_h"),
        fitted.get("estimate"),
    )


def _float(x: object) -> float | None:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else None


def _stored_summary(text: str, run_id: str) -> RunSummary:
    """The summary the history holds for a run (a database copied from elsewhere is checked too)."""
    where = f"the history's summary of {run_id}"
    # parse_json: bounded depth, no NaN, integers within 64 bits, as a summary.json is read
    return RunSummary.from_dict(parse_json(text, where), where)
