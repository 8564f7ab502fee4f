"""Hypothesis fuzz of the history's reader (issue 32.7): a database copied from another PC or edited with
the sqlite3 shell holds any SQLite value in any column (text where cycles are counted, a blob for a host,
1e308 µs, a stored summary that is no JSON); ``list_runs``, ``get``, ``short_ids`` and a record's summary
give runs whose figures are numbers of the column's type and range and whose text is printable, or one
softrt error line. The same for run directory names and run references (``softrt show REF``)."""

from __future__ import annotations

import shutil
import sqlite3
import tempfile
from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from softrt.errors import ConfigError, SoftRTError
from softrt.schema.summary import MAX_US
from softrt.schema.text import printable
from softrt.store.history import _COLUMNS, LAST, History, resolve_run

from ..fuzz import JSON_VALUES, fuzz, reads
from ..synthetic import write_synthetic_run

ROWS = fuzz(40)
NAMES = fuzz(15)  # each example makes a run directory and adds it

SQL_VALUES = (
    st.none()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats()
    | st.text(max_size=16)
    | st.binary(max_size=8)
    | st.sampled_from(["\x1b]0;pwn\x07", "../../etc", "\x00", "[red]x[/red]", "", "1e308", "last"])
    | JSON_VALUES.map(lambda v: __import__("json").dumps(v))
)
#: A stored summary_json: not JSON, nested too deep, NaN, or a summary with a mistyped or huge figure.
SUMMARIES = st.sampled_from(
    [
        "{",
        "[" * 50_000 + "]" * 50_000,
        '{"schema": "softrt.summary/1", "run_id": "x", "period_us": {"max": NaN}}',
        '{"schema": "softrt.summary/1", "run_id": "x", "period_us": {"max": 1e308}}',
        '{"cycles": "many"}',
        "null",
    ]
)


@pytest.fixture(scope="module")
def good_db(tmp_path_factory):
    """A history of two runs (the second's id a prefix of nothing), copied for each example."""
    base = tmp_path_factory.mktemp("history")
    db = base / "history.sqlite"
    history = History(db)
    for seed in (1, 2):
        history.add_run(write_synthetic_run(base / "runs", cycles=300, seed=seed, host=f"pc-{seed}"))
    return db


def _check(history: History) -> None:
    """Read the history every way the commands do; what is returned is typed, bounded and printable."""
    runs = reads(history.list_runs)
    if isinstance(runs, SoftRTError):
        return
    reads(history.short_ids)
    for r in runs:
        for figure in (r.period_max_us, r.period_p99_99_us, r.latency_max_us, r.process_max_us):
            assert figure is None or (isinstance(figure, (int, float)) and -MAX_US <= figure <= MAX_US)
        for n in (r.cycles, r.period_ns, r.missed_updates):
            assert n is None or (isinstance(n, int) and n >= 0)
        for text in (r.run_id, r.host, r.scenario, r.status, r.mode, r.source, r.started_at, r.added_at):
            assert text is None or (isinstance(text, str) and printable(text) == text)
        got = reads(lambda r=r: history.get(r.run_id))
        # (a run id of "last" or "last~N" names the newest runs: such a run is shown by its directory)
        assert isinstance(got, SoftRTError) or got.run_id == r.run_id or LAST.fullmatch(r.run_id)
        reads(lambda r=r: r.summary)
        reads(lambda r=r: r.entry().to_dict())  # softrt history --json


@ROWS
@given(
    changes=st.lists(st.tuples(st.sampled_from(_COLUMNS), SQL_VALUES), min_size=1, max_size=3),
    summary=st.none() | SUMMARIES,
    which=st.sampled_from(["first", "every"]),
)
@example(changes=[("period_max_us", 1e308)], summary=None, which="every")  # listed as one 400-digit number
@example(changes=[("cycles", "many")], summary=None, which="first")  # a TypeError traceback
@example(changes=[("host", b"\x1b[31m")], summary=None, which="first")  # bytes in --json: a TypeError
@example(changes=[("run_id", "last")], summary=None, which="first")  # found by the deep profile
def test_fuzz_history_rows(good_db, changes, summary, which):
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "history.sqlite"
        shutil.copyfile(good_db, db)
        db.chmod(0o600)
        conn = sqlite3.connect(db)
        where = "" if which == "every" else " WHERE rowid = (SELECT MIN(rowid) FROM runs)"
        try:
            for column, value in changes:
                conn.execute(f"UPDATE OR IGNORE runs SET {column} = ?{where}", (value,))
            if summary is not None:
                conn.execute(f"UPDATE runs SET summary_json = ?{where}", (summary,))
            conn.commit()
        except sqlite3.IntegrityError:  # NOT NULL columns: SQLite refuses the hostile row itself
            pass
        finally:
            conn.close()
        _check(History(db))


def test_a_history_row_of_the_wrong_type_or_range_is_one_line(good_db, tmp_path):
    """Issue 32: text in ``cycles`` was a TypeError traceback in ``history``; 1e308 µs one 400-digit number."""
    for column, value, says in (
        ("cycles", "many", "column cycles is not a whole number"),
        ("period_max_us", 1e308, "column period_max_us is out of range"),
        ("host", b"\x1b[31m", "column host is not text"),
        ("missed_updates", -3, "column missed_updates is negative"),
        ("path", "/x" * 3000, "column path is too long to be a path"),  # deep profile
        ("path", "a" * 300, "column path is too long to be a path"),
        ("run_id", "../../x", "a row's run_id is not a run id"),
    ):
        db = tmp_path / f"{column}.sqlite"
        shutil.copyfile(good_db, db)
        with sqlite3.connect(db) as conn:
            conn.execute(f"UPDATE runs SET {column} = ? WHERE rowid = 1", (value,))
        with pytest.raises(ConfigError, match=says) as info:
            History(db).list_runs()
        assert "\n" not in str(info.value) and "history add" in info.value.hint


NAME_TEXT = st.text(st.characters(blacklist_characters="/\x00", blacklist_categories=("Cs",)), min_size=1, max_size=24)


@NAMES
@given(
    name=NAME_TEXT
    | st.sampled_from(["x\x1b]0;PWNED\x1b\\\x1b[31m", "..", ".", "-rf", "last", "last~1", "a\nb", "\x9b31m", "é" * 60]),
    ref=NAME_TEXT
    | st.sampled_from(
        ["", " ", "last~999999999", "last~-1", "../x", "/dev/zero", "a\x00b", "a" * 300, "a/" * 2100, "\ud800"]
    ),
)
def test_fuzz_run_directory_names_and_references(name, ref):
    """Any run directory name is added and read back (the history keeps its path as given, the listing
    shows it printable), and any reference resolves or is one line."""
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        try:
            run = write_synthetic_run(tmp / "runs", cycles=50)
            target = run if name in (".", "..") else run.with_name(name)
            run.rename(target)
        except OSError:  # a name this file system refuses (too long in bytes)
            return
        history = History(tmp / "history.sqlite")
        added = reads(lambda: history.add_run(target))
        assert not isinstance(added, SoftRTError), added
        (record,) = history.list_runs()
        assert record.path == target.resolve()  # kept as it is: it must name the directory
        reads(lambda: resolve_run(ref, tmp / "history.sqlite"))
        reads(lambda: resolve_run(str(target), tmp / "history.sqlite"))
