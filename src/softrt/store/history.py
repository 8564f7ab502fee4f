"""Run history: every run's summary in one database, SQLite or PostgreSQL (store layer).

One row per run directory (a ``softrt run``, a ``softrt compare`` scenario, an imported
cyclictest/oslat result, or a run directory copied from another machine). The row keeps the
run's identity (id, time, host, scenario, source), its configuration, the headline metrics, the
tunings applied and where its samples are; the run directory stays the source of truth, so
``add_run`` can be repeated at any time (it refreshes the row).

The database lives in ``<data dir>/history.sqlite``: ``$SOFTRT_HOME``, else
``$XDG_DATA_HOME/softrt``, else ``~/.local/share/softrt`` (XDG Base Directory Specification);
every command takes ``--db PATH`` (or ``SOFTRT_DB``) to use another file, or a lab's PostgreSQL
server, ``--db postgresql://user@host/dbname`` (store.dbtarget). The two engines
(store.engine_sqlite, store.engine_pg) hold the same tables (store.dialect) and answer alike; the
layout is versioned, and a database written by a newer softrt is refused, never altered.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable
from datetime import date, datetime, timedelta, timezone
from pathlib import Path

from ..errors import ConfigError
from ..platform import data_dir  # noqa: F401  (re-exported: tests and callers import it from here)
from ..schema.summary import RunSummary
from .dbtarget import DB_NAME, default_db_path, local_db_path, resolve  # noqa: F401  (re-exported)
from .dialect import COLUMNS as _COLUMNS
from .dialect import DB_SCHEMA_VERSION, upsert_sql
from .record import HistoryRow, RunRecord, record_of_row
from .rundir import SAMPLES, SUMMARY, find_run_dirs, read_summary  # noqa: F401  (find_run_dirs re-exported)
from .validate import check_path

#: Run ids are listed by their shortest unique prefix, at least this long: "20261130-071502", the
#: start time of a softrt run id (``YYYYMMDD-HHMMSS-host-xxxx``).
SHORT_ID_MIN = 15
HISTOGRAM = "histogram.json"  # imported runs (softrt.store.importers) keep their histogram here
#: ``last`` is the newest run (by start time), ``last~N`` the one N runs before it (as git's HEAD~N).
LAST = re.compile(r"last(?:~(\d{1,9}))?")


def load_run_summary(run_dir: Path) -> RunSummary:
    """Return a run directory's summary.json; ConfigError when it is missing, corrupt or too new."""
    run_dir = Path(run_dir)
    check_path(run_dir, "run directory")
    if not run_dir.is_dir():
        raise ConfigError(f"no run directory at {run_dir}", hint="give a run directory or a run id from softrt history")
    if not (run_dir / SUMMARY).is_file():
        raise ConfigError(
            f"{run_dir} has no {SUMMARY}", hint="a run that failed to start, or not a softrt run directory"
        )
    try:
        summary = read_summary(run_dir)
    except ConfigError:
        raise
    except Exception as err:  # noqa: BLE001 - SoftRTError from read_summary: a corrupt file is bad input here
        raise ConfigError(str(err), hint="the run's summary.json is corrupt") from None
    if not summary.run_id:
        raise ConfigError(f"{run_dir / SUMMARY} has no run_id", hint="the run's summary.json is corrupt")
    return summary


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
            raise ConfigError(
                f"cannot read the date {text!r}", hint="use YYYY-MM-DD or an ISO 8601 time such as 2026-11-30T07:15"
            ) from None
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
    """The run history database (created on first write): a SQLite file or a PostgreSQL server.

    *path* is a file path, a ``postgresql://`` URL, or None for ``$SOFTRT_DB`` or else the
    default file (store.dbtarget). ``path`` is then the file, or the URL with its password
    redacted (what messages show); ``engine`` is ``"sqlite"`` or ``"pg"``.
    """

    def __init__(self, path: Path | str | None = None, timeout_s: float = 30.0) -> None:
        target = resolve(path)
        # How long a writer waits for another softrt that holds the database (sqlite3's is 5 s), or
        # for a server to answer; a running supervisor's checkpoint waits less
        # (session.run.CHECKPOINT_DB_TIMEOUT_S).
        self.timeout_s = timeout_s
        if isinstance(target, Path):
            from .engine_sqlite import SqliteEngine

            self._engine = SqliteEngine(target, timeout_s)
            self.path: Path | str = target
        else:
            from .engine_pg import PgEngine

            self._engine = PgEngine(target, timeout_s)
            self.path = self._engine.where
        self.engine = self._engine.dialect.name
        self._q = self._engine.dialect.q

    @property
    def url(self) -> str | None:
        """The PostgreSQL URL as given, password included: for a driver (DuckDB's scanner), never to print."""
        return getattr(self._engine, "_url", None)

    def init(self) -> int:
        """Make (or upgrade) the database's tables now, as the first write would; return the layout version.

        A lab runs it once as the role that owns the database, so the rigs' roles need no right to
        create anything (README, "A lab of many machines").
        """
        self._engine.run(lambda conn: None, write=True)
        return DB_SCHEMA_VERSION

    def check_url(self) -> None:
        """Refuse a malformed PostgreSQL URL now (ConfigError), without connecting; a file passes."""
        check = getattr(self._engine, "check_url", None)
        if check is not None:
            check()

    def running_rows(self) -> list[tuple[str, str]]:
        """``(run_id, path)`` of every run the history lists as running (store.upkeep.catch_up)."""
        sql = "SELECT run_id, path FROM runs WHERE status = 'running'"
        return self._engine.run(lambda conn: conn.execute(sql).fetchall(), write=False, empty=[])

    def states(self) -> dict[str, tuple[str | None, str]]:
        """Every stored run's ``(status, path)`` by run id: what store.lab.push compares against."""
        rows = self._engine.run(
            lambda conn: conn.execute("SELECT run_id, status, path FROM runs").fetchall(), write=False, empty=[]
        )
        return {r[0]: (r[1], r[2]) for r in rows}

    def _select(self) -> str:
        """The columns of a RunRecord (and the compare id and late rates, where SQL can read them safely)."""
        extra = self._engine.dialect.summary_sql
        return f"SELECT {', '.join(_COLUMNS)}{', ' + extra if extra else ''} FROM runs"

    # -- writing ------------------------------------------------------------------------------
    def add_run(self, run_dir: Path | str) -> str:
        """Store (or refresh) the run in *run_dir*; return its run id.

        Idempotent: adding the same run again replaces its row with what the directory holds now.
        Raises ConfigError when *run_dir* is not a finished run directory.
        """
        return self._store(self._prepare(run_dir))

    def _prepare(self, run_dir: Path | str) -> HistoryRow:
        """The row of the run in *run_dir* (ConfigError: not a run directory, a corrupt summary)."""
        run_dir = Path(run_dir).resolve()
        return self.row_of(run_dir, load_run_summary(run_dir))

    def _store(self, row: HistoryRow) -> str:
        """Store (or refresh) one run's row (:meth:`_prepare`'s); return its run id."""
        return self.add_row(row)

    def add_row(self, row: HistoryRow) -> str:
        """Store (or refresh) one run's row as :meth:`row_of` made it; return its run id."""
        # An upsert, not INSERT OR REPLACE: the row keeps its rowid (seq in PostgreSQL), the order
        # runs entered the history (a run enters at its first checkpoint), which orders runs started
        # in one second.
        sql = upsert_sql(self._engine.dialect)
        self._engine.run(lambda conn: conn.execute(sql, list(row.values())), write=True)
        return row.run_id

    def add_runs(self, paths: Iterable[Path | str]) -> list[str]:
        """Add every run directory in *paths* (each a run or a directory of runs); return the ids.

        Raises ConfigError for a path that holds no run, before anything is added, and then for
        the first run that could not be added (after adding every good one: :func:`.upkeep.add_each`)."""
        from .upkeep import add_each

        ids, bad = add_each(self, paths)
        if bad:
            path, why = bad[0]
            raise ConfigError(f"{path}: {why}", hint="the run's summary.json is missing or corrupt")
        return ids

    def catch_up(self) -> list[str]:
        """Refresh the rows of runs whose final history update failed (:func:`.upkeep.catch_up`)."""
        from .upkeep import catch_up

        return catch_up(self)

    def remove(self, run_id_or_prefix: str) -> str:
        """Forget one run (its directory is left alone); return its id.

        A run still going is refused: its next checkpoint would put it back."""
        record = self.get(run_id_or_prefix)
        from .upkeep import refuse_running

        refuse_running(record)
        self._engine.run(
            lambda conn: conn.execute(self._q("DELETE FROM runs WHERE run_id = ?"), (record.run_id,)), write=True
        )
        return record.run_id

    @staticmethod
    def row_of(run_dir: Path, summary: RunSummary) -> HistoryRow:
        """The history's row of the run in *run_dir* (its ``path`` is *run_dir*)."""
        samples = run_dir / SAMPLES
        if not samples.exists() and (run_dir / HISTOGRAM).exists():
            samples = run_dir / HISTOGRAM  # imported runs have a histogram, not per-cycle samples
        m = summary.metrics
        return HistoryRow(
            run_id=summary.run_id,
            started_at=summary.started_at,
            started_epoch_s=_epoch(summary.started_at),
            finished_at=summary.finished_at,
            host=summary.hostname,
            scenario=summary.scenario,
            source=summary.origin,
            status=summary.status,
            mode=summary.mode,
            period_ns=summary.config.period_ns,
            cycles=m.cycles,
            period_max_us=m.period_us.max,
            period_p99_99_us=m.period_us.p99_99,
            latency_max_us=m.latency_us.max,
            process_max_us=m.process_us.max,
            missed_updates=m.misses.missed_updates if m.misses is not None else None,
            config_json=json.dumps(summary.config.to_dict()),
            tuning_json=json.dumps(summary.tuning.to_dict()),
            summary_json=json.dumps(summary.to_dict()),
            path=str(run_dir),
            samples_path=str(samples) if samples.exists() else None,
            added_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        )

    # -- reading ------------------------------------------------------------------------------
    def list_runs(
        self,
        host: str | None = None,
        scenario: str | None = None,
        since: str | date | datetime | None = None,
        until: str | date | datetime | None = None,
        source: str | None = None,
        limit: int | None = None,
    ) -> list[RunRecord]:
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
        sql = self._select()
        if where:
            sql += " WHERE " + " AND ".join(where)
        # Start times are to the second (summary.json), and a comparison starts its next run right
        # after the last: within one second, the order the runs entered the history (the run ids'
        # random tails are no order; in CI they listed a comparison's two runs the wrong way round).
        # NULLS LAST: SQLite's order for DESC, which PostgreSQL spells out (it sorts NULL as largest).
        sql += f" ORDER BY started_epoch_s DESC NULLS LAST, {self._engine.dialect.entry_order} DESC"
        self.catch_up()
        if limit is not None:
            sql += " LIMIT ?"
            args.append(int(limit))
        rows = self._engine.run(lambda conn: conn.execute(self._q(sql), args).fetchall(), write=False, empty=[])
        return [record_of_row(r) for r in reversed(rows)]

    def get(self, run_id_or_prefix: str) -> RunRecord:
        """Return the run whose id is (or uniquely starts with) *run_id_or_prefix*, or ``last``/``last~N``.

        Raises ConfigError for an unknown id and for a prefix that matches several runs.
        """
        key = str(run_id_or_prefix).strip()
        if not key:
            raise ConfigError("empty run id", hint="see softrt history for the run ids")
        if (last := LAST.fullmatch(key)) is not None:
            return self._newest(int(last.group(1) or 0), key)
        self.catch_up()
        sql = self._q(
            f"{self._select()} WHERE run_id = ? OR substr(run_id, 1, CAST(? AS INTEGER)) = ? ORDER BY run_id LIMIT 6"
        )
        rows = self._engine.run(lambda conn: conn.execute(sql, (key, len(key), key)).fetchall(), write=False, empty=[])
        exact = [r for r in rows if r[0] == key]
        if exact:
            return record_of_row(exact[0])
        if not rows:
            raise ConfigError(
                f"unknown run id {key!r} in {self.path}",
                hint="see softrt history; add run directories with softrt history add DIR",
            )
        if len(rows) > 1:
            shown = ", ".join(r[0] for r in rows[:5])
            raise ConfigError(
                f"run id prefix {key!r} matches several runs ({shown}{', …' if len(rows) > 5 else ''})",
                hint="give more of the run id",
            )
        return record_of_row(rows[0])

    def _newest(self, back: int, key: str) -> RunRecord:
        """The run *back* runs before the newest one (``last~back``)."""
        runs = self.list_runs(limit=back + 1)
        if not runs:
            raise ConfigError(
                f"{key}: the history {self.path} holds no runs yet",
                hint="softrt run stores one; softrt history add DIR adds run directories",
            )
        if len(runs) <= back:
            raise ConfigError(
                f"{key}: the history holds only {len(runs)} run(s)",
                hint=f"last~{len(runs) - 1} is the oldest; see softrt history",
            )
        return runs[0]  # the newest back+1, oldest first

    def short_ids(self, min_len: int = SHORT_ID_MIN) -> dict[str, str]:
        """Every run id's shortest prefix (at least *min_len* characters, the start time of a
        softrt run id) that :meth:`get` resolves to that run alone, as ``softrt show`` takes it."""
        ids = self._engine.run(
            lambda conn: [r[0] for r in conn.execute("SELECT run_id FROM runs")], write=False, empty=[]
        )
        ids.sort()  # byte order, whatever the server's collation
        out = {}
        for k, run_id in enumerate(ids):
            # Sorted, only the neighbours can share a longer prefix; one character past the longest
            # shared one is unique (get() takes an exact id before a prefix, so a whole id always is).
            shared = max((_common(run_id, ids[j]) for j in (k - 1, k + 1) if 0 <= j < len(ids)), default=0)
            out[run_id] = run_id[: max(min_len, shared + 1)]
        return out

    def __len__(self) -> int:
        return int(
            self._engine.run(lambda conn: conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0], write=False, empty=0)
        )


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
    check_path(path, "run")
    if (path / SUMMARY).is_file():
        return path
    if path.exists() or os.sep in str(ref):
        raise ConfigError(
            f"{ref} is not a run directory (no {SUMMARY})",
            hint="a run that failed to start, or not a softrt run directory",
        )
    return History(db).get(str(ref)).path
