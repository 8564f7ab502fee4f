"""Run history: every run's summary in one SQLite database (store layer, standard library only).

One row per run directory (a ``softrt run``, a ``softrt compare`` scenario, an imported
cyclictest/oslat result, or a run directory copied from another machine). The row keeps the
run's identity (id, time, host, scenario, source), its configuration, the headline metrics, the
tunings applied and where its samples are; the run directory stays the source of truth, so
``add_run`` can be repeated at any time (it refreshes the row).

The database lives in ``<data dir>/history.sqlite``: ``$SOFTRT_HOME``, else
``$XDG_DATA_HOME/softrt``, else ``~/.local/share/softrt`` (XDG Base Directory Specification);
every command takes ``--db PATH`` to use another file. Its layout version is SQLite's
``PRAGMA user_version``; a database written by a newer softrt is refused, never altered.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cached_property
from datetime import date, datetime, timedelta, timezone
from pathlib import Path

from ..errors import ConfigError
from ..platform import data_dir
from ..platform.owned import check_own_file, secure_dir
from .rundir import SAMPLES, SUMMARY, read_summary
from ..schema.summary import RunSummary

#: Layout version of the database (PRAGMA user_version). A new version needs a migration step in
#: History._check_version (which today only creates the version-1 tables).
DB_SCHEMA_VERSION = 1
DB_NAME = "history.sqlite"
#: Run ids are listed by their shortest unique prefix, at least this long: "20261130-071502", the
#: start time of a softrt run id (``YYYYMMDD-HHMMSS-host-xxxx``).
SHORT_ID_MIN = 15
HISTOGRAM = "histogram.json"  # imported runs (softrt.store.importers) keep their histogram here
#: ``last`` is the newest run (by start time), ``last~N`` the one N runs before it (as git's HEAD~N).
LAST = re.compile(r"last(?:~(\d{1,9}))?")

_CREATE = """
CREATE TABLE IF NOT EXISTS runs (
    run_id           TEXT PRIMARY KEY,
    started_at       TEXT,
    started_epoch_s  REAL,
    finished_at      TEXT,
    host             TEXT,
    scenario         TEXT,
    source           TEXT NOT NULL,
    status           TEXT,
    mode             TEXT,
    period_ns        INTEGER,
    cycles           INTEGER,
    period_max_us    REAL,
    period_p99_99_us REAL,
    latency_max_us   REAL,
    process_max_us   REAL,
    missed_updates   INTEGER,
    config_json      TEXT NOT NULL,
    tuning_json      TEXT NOT NULL,
    summary_json     TEXT NOT NULL,
    path             TEXT NOT NULL,
    samples_path     TEXT,
    added_at         TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS runs_host ON runs (host);
CREATE INDEX IF NOT EXISTS runs_scenario ON runs (scenario);
CREATE INDEX IF NOT EXISTS runs_started ON runs (started_epoch_s);
"""

#: A column of no table: read from the stored summary, so the database layout stays version 1.
_COMPARE_ID = "CASE WHEN json_valid(summary_json) THEN json_extract(summary_json, '$.compare_id') END"
#: The tail model's late rate (issue 33), likewise read from the stored summary (no migration): the
#: 95 % upper bound a gate holds (the fitted one, else the no-model bound), and the fitted estimate.
_LATE_RATE = ("CASE WHEN json_valid(summary_json) THEN coalesce(json_extract(summary_json, "
              "'$.tail.late_rate_per_h.high'), json_extract(summary_json, '$.tail.late_rate_bound_per_h')) END, "
              "CASE WHEN json_valid(summary_json) THEN json_extract(summary_json, '$.tail.late_rate_per_h.estimate') END")
_COLUMNS = ("run_id", "started_at", "started_epoch_s", "finished_at", "host", "scenario", "source", "status",
            "mode", "period_ns", "cycles", "period_max_us", "period_p99_99_us", "latency_max_us",
            "process_max_us", "missed_updates", "config_json", "tuning_json", "summary_json", "path",
            "samples_path", "added_at")


def default_db_path() -> Path:
    """Return the default history database path, ``<data dir>/history.sqlite``."""
    return data_dir() / DB_NAME


@dataclass(frozen=True)
class RunRecord:
    """One run as the history knows it."""

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
    path: Path
    samples_path: Path | None
    added_at: str
    compare_id: str | None = None  # the runs of one softrt compare share it (schema.summary.RunSummary)
    late_rate_high_per_h: float | None = None  # the tail block's 95 % upper bound (None: no tail block)
    late_rate_per_h: float | None = None  # its fitted estimate (None: no fit)

    @cached_property
    def summary(self) -> RunSummary:
        """The run's summary as the history stored it (checked like a summary.json)."""
        return _stored_summary(self.summary_json, self.run_id)

    def to_dict(self) -> dict:
        """The listing fields, JSON-ready (the full summary is ``softrt show RUN --json``)."""
        return {
            "run_id": self.run_id, "started_at": self.started_at, "finished_at": self.finished_at,
            "host": self.host, "scenario": self.scenario, "source": self.source, "status": self.status,
            "mode": self.mode, "period_ns": self.period_ns, "cycles": self.cycles,
            "period_max_us": self.period_max_us, "period_p99_99_us": self.period_p99_99_us,
            "latency_max_us": self.latency_max_us, "process_max_us": self.process_max_us,
            "missed_updates": self.missed_updates, "tuning": self.summary.tuning.to_dict(),
            "path": str(self.path), "samples_path": None if self.samples_path is None else str(self.samples_path),
            "added_at": self.added_at, "compare_id": self.compare_id,
            "late_rate_high_per_h": self.late_rate_high_per_h, "late_rate_per_h": self.late_rate_per_h,
        }


def load_run_summary(run_dir: Path) -> RunSummary:
    """Return a run directory's summary.json; ConfigError when it is missing, corrupt or too new."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise ConfigError(f"no run directory at {run_dir}", hint="give a run directory or a run id from softrt history")
    if not (run_dir / SUMMARY).is_file():
        raise ConfigError(f"{run_dir} has no {SUMMARY}",
                          hint="a run that failed to start, or not a softrt run directory")
    try:
        summary = read_summary(run_dir)
    except ConfigError:
        raise
    except Exception as err:  # SoftRTError from read_summary: a corrupt file is bad input here
        raise ConfigError(str(err), hint="the run's summary.json is corrupt") from None
    if not summary.run_id:
        raise ConfigError(f"{run_dir / SUMMARY} has no run_id", hint="the run's summary.json is corrupt")
    return summary


def find_run_dirs(path: Path) -> list[Path]:
    """Return *path* if it is a run directory, else the run directories directly inside it.

    A directory of runs is what ``softrt run --out-dir``/``softrt compare`` leave, and what a lab
    copies from another PC.
    """
    path = Path(path)
    if (path / SUMMARY).is_file():
        return [path]
    if path.is_dir():
        runs = sorted(p for p in path.iterdir() if (p / SUMMARY).is_file())
        if runs:
            return runs
        raise ConfigError(f"no run directory in {path} (no {SUMMARY} in it or its sub-directories)",
                          hint="a run that failed to start has no summary.json")
    raise ConfigError(f"no such run directory: {path}", hint="give a run directory or a run id from softrt history")


def parse_when(value: str | date | datetime | None, *, end: bool = False) -> datetime | None:
    """Return *value* as an aware UTC datetime (naive times are UTC, like the run ids' summaries).

    A bare date is its start; with *end* it is the start of the next day, so ``--until 2026-11-30``
    includes the whole of that day.
    """
    if value is None:
        return None
    if isinstance(value, datetime):
        when = value
    elif isinstance(value, date):
        when = datetime(value.year, value.month, value.day) + (timedelta(days=1) if end else timedelta())
    else:
        text = str(value).strip()
        try:
            if _is_date(text):
                return parse_when(date.fromisoformat(text), end=end)
            when = datetime.fromisoformat(text.replace("Z", "+00:00"))
            # Year 1 or 9999 with an offset leaves datetime's range in UTC (OverflowError).
            return when.replace(tzinfo=timezone.utc) if when.tzinfo is None else when.astimezone(timezone.utc)
        except (ValueError, OverflowError):
            raise ConfigError(f"cannot read the date {text!r}",
                              hint="use YYYY-MM-DD or an ISO 8601 time such as 2026-11-30T07:15") from None
    return when.replace(tzinfo=timezone.utc) if when.tzinfo is None else when.astimezone(timezone.utc)


def _is_date(value: object) -> bool:
    """True for a bare date (a ``date`` or ``YYYY-MM-DD``), as opposed to a time."""
    if isinstance(value, datetime):
        return False
    return isinstance(value, date) or (isinstance(value, str) and len(value.strip()) == 10)


def _epoch(iso: str | None) -> float | None:
    if not iso:
        return None
    try:
        return parse_when(iso).timestamp()  # type: ignore[union-attr]
    except (ConfigError, OverflowError, ValueError):
        return None


class History:
    """The run history database (created on first write)."""

    def __init__(self, path: Path | str | None = None, timeout_s: float = 30.0) -> None:
        self.path = Path(path) if path is not None else default_db_path()
        # How long a writer waits for another softrt that holds the database (sqlite3's is 5 s);
        # a running supervisor's checkpoint waits less (session.run.CHECKPOINT_DB_TIMEOUT_S).
        self.timeout_s = timeout_s

    # -- connection ---------------------------------------------------------------------------
    @contextmanager
    def _connect(self, *, write: bool) -> Iterator[sqlite3.Connection | None]:
        """Yield a connection (None when reading a database that does not exist yet, or has no tables yet).

        The database's directory and the way to it must be this user's (platform.owned, as the
        state directory), and the database a regular file of this user's: SQLite opens it and its
        journal by name, so nothing on the way may be another user's to swap for a link.
        """
        if not os.path.lexists(self.path) and not write:
            yield None
            return
        secure_dir(self.path.parent, "the history database's directory")
        check_own_file(self.path, "the history database")
        try:
            conn = sqlite3.connect(self.path, timeout=self.timeout_s)
        except sqlite3.Error as err:
            raise ConfigError(f"cannot open the history database {self.path}: {err}",
                              hint="set SOFTRT_HOME or use --db PATH") from None
        try:
            if self._check_version(conn, write=write) == 0 and not write:
                yield None  # made by a softrt killed before it gave it its tables: no runs yet
            else:
                with conn:
                    yield conn
        except sqlite3.DatabaseError as err:
            raise ConfigError(f"history database {self.path} is unusable: {err}",
                              hint="move it away (runs stay in their directories; re-add them with "
                                   "softrt history add) or use --db PATH") from None
        finally:
            conn.close()

    def _check_version(self, conn: sqlite3.Connection, *, write: bool) -> int:
        """Return the database's layout version (0: never given its tables); a writer gives them."""
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version > DB_SCHEMA_VERSION:
            raise ConfigError(f"history database {self.path} was written by a newer softrt (layout {version}; "
                              f"this softrt reads up to {DB_SCHEMA_VERSION})",
                              hint="upgrade softrt, or use another database with --db / SOFTRT_HOME")
        if version < DB_SCHEMA_VERSION and write:
            with conn:
                conn.executescript(_CREATE)
                conn.execute(f"PRAGMA user_version = {DB_SCHEMA_VERSION}")
        return version

    # -- writing ------------------------------------------------------------------------------
    def add_run(self, run_dir: Path | str) -> str:
        """Store (or refresh) the run in *run_dir*; return its run id.

        Idempotent: adding the same run again replaces its row with what the directory holds now.
        Raises ConfigError when *run_dir* is not a finished run directory.
        """
        run_dir = Path(run_dir).resolve()
        summary = load_run_summary(run_dir)
        row = self._row(run_dir, summary)
        with self._connect(write=True) as conn:
            assert conn is not None
            # An upsert, not INSERT OR REPLACE: the row keeps its rowid, the order runs entered the
            # history (a run enters at its first checkpoint), which orders runs started in one second.
            conn.execute(f"INSERT INTO runs ({', '.join(_COLUMNS)}) VALUES ({', '.join('?' for _ in _COLUMNS)}) "
                         "ON CONFLICT(run_id) DO UPDATE SET "
                         + ", ".join(f"{c} = excluded.{c}" for c in _COLUMNS if c != "run_id"),
                         [row[c] for c in _COLUMNS])
        return row["run_id"]

    def add_runs(self, paths: Iterable[Path | str]) -> list[str]:
        """Add every run directory in *paths* (each a run or a directory of runs); return the ids."""
        return [self.add_run(d) for p in paths for d in find_run_dirs(Path(p))]

    def remove(self, run_id_or_prefix: str) -> str:
        """Forget one run (its directory is left alone); return its id."""
        record = self.get(run_id_or_prefix)
        with self._connect(write=True) as conn:
            assert conn is not None
            conn.execute("DELETE FROM runs WHERE run_id = ?", (record.run_id,))
        return record.run_id

    @staticmethod
    def _row(run_dir: Path, summary: RunSummary) -> dict:
        samples = run_dir / SAMPLES
        if not samples.exists() and (run_dir / HISTOGRAM).exists():
            samples = run_dir / HISTOGRAM  # imported runs have a histogram, not per-cycle samples
        m = summary.metrics
        return {
            "run_id": summary.run_id,
            "started_at": summary.started_at,
            "started_epoch_s": _epoch(summary.started_at),
            "finished_at": summary.finished_at,
            "host": summary.hostname,
            "scenario": summary.scenario,
            "source": summary.origin,
            "status": summary.status,
            "mode": summary.mode,
            "period_ns": summary.config.period_ns,
            "cycles": m.cycles,
            "period_max_us": m.period_us.max,
            "period_p99_99_us": m.period_us.p99_99,
            "latency_max_us": m.latency_us.max,
            "process_max_us": m.process_us.max,
            "missed_updates": m.misses.missed_updates if m.misses is not None else None,
            "config_json": json.dumps(summary.config.to_dict()),
            "tuning_json": json.dumps(summary.tuning.to_dict()),
            "summary_json": json.dumps(summary.to_dict()),
            "path": str(run_dir),
            "samples_path": str(samples) if samples.exists() else None,
            "added_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        }

    # -- reading ------------------------------------------------------------------------------
    def list_runs(self, host: str | None = None, scenario: str | None = None,
                  since: str | date | datetime | None = None, until: str | date | datetime | None = None,
                  source: str | None = None, limit: int | None = None) -> list[RunRecord]:
        """Return the runs matching every filter given, oldest first (the newest *limit* if set).

        *since*/*until* bound the start time (UTC; a bare date in *until* includes that day).
        """
        where, args = [], []
        for column, value in (("host", host), ("scenario", scenario), ("source", source)):
            if value is not None:
                where.append(f"{column} = ?")
                args.append(value)
        lo, hi = parse_when(since), parse_when(until, end=True)
        if lo is not None:
            where.append("started_epoch_s >= ?")
            args.append(lo.timestamp())
        if hi is not None:
            # A time bound is inclusive; a bare date became the next day's start, which is not.
            where.append("started_epoch_s < ?" if _is_date(until) else "started_epoch_s <= ?")
            args.append(hi.timestamp())
        sql = f"SELECT {', '.join(_COLUMNS)}, {_COMPARE_ID}, {_LATE_RATE} FROM runs"
        if where:
            sql += " WHERE " + " AND ".join(where)
        # Start times are to the second (summary.json), and a comparison starts its next run right
        # after the last: within one second, the order the runs entered the history (the run ids'
        # random tails are no order; in CI they listed a comparison's two runs the wrong way round).
        sql += " ORDER BY started_epoch_s DESC, rowid DESC"
        if limit is not None:
            sql += " LIMIT ?"
            args.append(int(limit))
        with self._connect(write=False) as conn:
            if conn is None:
                return []
            rows = conn.execute(sql, args).fetchall()
        return [self._record(r) for r in reversed(rows)]

    def get(self, run_id_or_prefix: str) -> RunRecord:
        """Return the run whose id is (or uniquely starts with) *run_id_or_prefix*, or ``last``/``last~N``.

        Raises ConfigError for an unknown id and for a prefix that matches several runs.
        """
        key = str(run_id_or_prefix).strip()
        if not key:
            raise ConfigError("empty run id", hint="see softrt history for the run ids")
        if (last := LAST.fullmatch(key)) is not None:
            return self._newest(int(last.group(1) or 0), key)
        with self._connect(write=False) as conn:
            rows = [] if conn is None else conn.execute(
                f"SELECT {', '.join(_COLUMNS)}, {_COMPARE_ID}, {_LATE_RATE} FROM runs WHERE run_id = ? OR substr(run_id, 1, ?) = ? "
                "ORDER BY run_id LIMIT 6", (key, len(key), key)).fetchall()
        exact = [r for r in rows if r[0] == key]
        if exact:
            return self._record(exact[0])
        if not rows:
            raise ConfigError(f"unknown run id {key!r} in {self.path}",
                              hint="see softrt history; add run directories with softrt history add DIR")
        if len(rows) > 1:
            shown = ", ".join(r[0] for r in rows[:5])
            raise ConfigError(f"run id prefix {key!r} matches several runs ({shown}{', …' if len(rows) > 5 else ''})",
                              hint="give more of the run id")
        return self._record(rows[0])

    def _newest(self, back: int, key: str) -> RunRecord:
        """The run *back* runs before the newest one (``last~back``)."""
        runs = self.list_runs(limit=back + 1)
        if not runs:
            raise ConfigError(f"{key}: the history {self.path} holds no runs yet",
                              hint="softrt run stores one; softrt history add DIR adds run directories")
        if len(runs) <= back:
            raise ConfigError(f"{key}: the history holds only {len(runs)} run(s)",
                              hint=f"last~{len(runs) - 1} is the oldest; see softrt history")
        return runs[0]  # the newest back+1, oldest first

    def short_ids(self, min_len: int = SHORT_ID_MIN) -> dict[str, str]:
        """Every run id's shortest prefix (at least *min_len* characters, the start time of a
        softrt run id) that :meth:`get` resolves to that run alone, as ``softrt show`` takes it."""
        with self._connect(write=False) as conn:
            ids = [] if conn is None else [r[0] for r in conn.execute("SELECT run_id FROM runs ORDER BY run_id")]
        out = {}
        for k, run_id in enumerate(ids):
            # Sorted, only the neighbours can share a longer prefix; one character past the longest
            # shared one is unique (get() takes an exact id before a prefix, so a whole id always is).
            shared = max((_common(run_id, ids[j]) for j in (k - 1, k + 1) if 0 <= j < len(ids)), default=0)
            out[run_id] = run_id[:max(min_len, shared + 1)]
        return out

    def __len__(self) -> int:
        with self._connect(write=False) as conn:
            return 0 if conn is None else int(conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0])

    @staticmethod
    def _record(row: tuple) -> RunRecord:
        r = dict(zip(_COLUMNS, row))
        compare_id = row[len(_COLUMNS)] if len(row) > len(_COLUMNS) else None
        high, estimate = (_float(x) for x in (tuple(row[len(_COLUMNS) + 1:len(_COLUMNS) + 3]) + (None, None))[:2])
        return RunRecord(
            run_id=r["run_id"], started_at=r["started_at"], finished_at=r["finished_at"], host=r["host"],
            scenario=r["scenario"], source=r["source"], status=r["status"], mode=r["mode"],
            period_ns=r["period_ns"], cycles=r["cycles"], period_max_us=r["period_max_us"],
            period_p99_99_us=r["period_p99_99_us"], latency_max_us=r["latency_max_us"],
            process_max_us=r["process_max_us"], missed_updates=r["missed_updates"],
            summary_json=r["summary_json"], path=Path(r["path"]),
            samples_path=Path(r["samples_path"]) if r["samples_path"] else None, added_at=r["added_at"],
            compare_id=compare_id if isinstance(compare_id, str) else None,
            late_rate_high_per_h=high, late_rate_per_h=estimate,
        )


def _float(x: object) -> float | None:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else None


def _stored_summary(text: str, run_id: str) -> RunSummary:
    """The summary the history holds for a run (a database copied from elsewhere is checked too)."""
    try:
        doc = json.loads(text)
    except ValueError:
        raise ConfigError(f"the history's summary of {run_id} is not JSON",
                          hint=f"refresh it: softrt history add RUN_DIR (or remove {run_id})") from None
    return RunSummary.from_dict(doc, f"the history's summary of {run_id}")


def _common(a: str, b: str) -> int:
    """Length of the common prefix of *a* and *b*."""
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def resolve_run(ref: str | Path, db: Path | str | None = None) -> Path:
    """Return the run directory *ref* names: an existing run directory, or a run id (prefix) in the history."""
    path = Path(ref)
    if (path / SUMMARY).is_file():
        return path
    if path.exists() or os.sep in str(ref):
        raise ConfigError(f"{ref} is not a run directory (no {SUMMARY})",
                          hint="a run that failed to start, or not a softrt run directory")
    return History(db).get(str(ref)).path
