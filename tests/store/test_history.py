"""The run history: store, list, filter, get; bad databases and bad run directories."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from softrt.errors import ConfigError
from softrt.store.dialect import SQLITE
from softrt.store.history import (
    DB_SCHEMA_VERSION,
    History,
    data_dir,
    default_db_path,
    find_run_dirs,
    parse_when,
    resolve_run,
)


def test_data_dir_precedence(monkeypatch, tmp_path):
    monkeypatch.delenv("SOFTRT_HOME", raising=False)
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert data_dir() == tmp_path / ".local" / "share" / "softrt"
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert data_dir() == tmp_path / "xdg" / "softrt"
    monkeypatch.setenv("SOFTRT_HOME", str(tmp_path / "home"))
    assert default_db_path() == tmp_path / "home" / "history.sqlite"
    assert History().path == tmp_path / "home" / "history.sqlite"


def test_round_trip_keeps_identity_metrics_tuning_and_paths(history_db, three_runs):
    history = History()
    run = three_runs[2]
    run_id = history.add_run(run)
    summary = json.loads((run / "summary.json").read_text())
    assert run_id == summary["run_id"]
    got = history.get(run_id)
    assert got.host == "pc-b" and got.scenario == "tuned" and got.source == "softrt"
    assert got.started_at == summary["started_at"] and got.mode == "real-time" and got.status == "complete"
    assert got.cycles == 2_000 and got.period_ns == 250_000
    assert got.period_max_us == summary["period_us"]["max"]
    assert got.period_p99_99_us == summary["period_us"]["p99_99"]
    assert got.latency_max_us == summary["latency_us"]["max"]
    assert got.missed_updates == summary["misses"]["missed_updates"] == 3
    assert got.summary.tuning.to_dict() == summary["tuning"] and got.summary.config.to_dict() == summary["config"]
    assert got.summary.to_dict() == summary

    assert got.path == run.resolve() and got.samples_path == run.resolve() / "samples.parquet"
    assert history.engine == "pg" or Path(history_db).is_file()


def test_add_is_idempotent_and_refreshes(history_db, three_runs):
    history = History()
    first = history.add_run(three_runs[0])
    assert history.add_run(three_runs[0]) == first
    assert len(history) == 1
    # The run directory is the source of truth: a changed summary shows up after re-adding.
    path = three_runs[0] / "summary.json"
    summary = json.loads(path.read_text())
    summary["scenario"] = "renamed"
    path.write_text(json.dumps(summary))
    history.add_run(three_runs[0])
    assert len(history) == 1 and history.get(first).scenario == "renamed"


def test_list_filters(history_db, three_runs):
    history = History()
    assert history.add_runs([three_runs[0].parent]) == [
        json.loads((r / "summary.json").read_text())["run_id"] for r in sorted(three_runs)
    ]
    hosts = [r.host for r in history.list_runs()]
    assert hosts == ["pc-a", "pc-a", "pc-b"]  # oldest first
    assert [r.scenario for r in history.list_runs(host="pc-a")] == ["tuned", "untuned"]
    assert [r.host for r in history.list_runs(scenario="tuned")] == ["pc-a", "pc-b"]
    assert [r.scenario for r in history.list_runs(since="2026-11-29")] == ["untuned", "tuned"]
    # A bare date in --until includes the whole day (the 23:30 run).
    assert [r.scenario for r in history.list_runs(until="2026-11-29")] == ["tuned", "untuned"]
    assert [r.scenario for r in history.list_runs(until="2026-11-29T12:00")] == ["tuned"]
    assert [r.host for r in history.list_runs(since="2026-11-29", until="2026-11-29")] == ["pc-a"]
    assert [r.host for r in history.list_runs(limit=1)] == ["pc-b"]  # the newest
    assert history.list_runs(host="nobody") == []
    assert history.list_runs(source="cyclictest") == []


def test_get_by_prefix_unknown_and_ambiguous(history_db, three_runs):
    history = History()
    ids = history.add_runs(three_runs)
    assert history.get(ids[1][:20]).run_id == ids[1]
    with pytest.raises(ConfigError, match="unknown run id 'nope'"):
        history.get("nope")
    with pytest.raises(ConfigError, match="matches several runs"):
        history.get("2026")
    assert history.remove(ids[0]) == ids[0]
    assert len(history) == 2
    with pytest.raises(ConfigError, match="unknown run id"):
        history.get(ids[0])


def test_reading_a_missing_database_creates_nothing(tmp_path):
    history = History(tmp_path / "none" / "h.sqlite")
    assert history.list_runs() == [] and len(history) == 0
    assert not (tmp_path / "none").exists()
    with pytest.raises(ConfigError, match="unknown run id"):
        history.get("x")


@pytest.mark.parametrize("made", ["empty file", "tables, no version"])
def test_a_database_whose_writer_was_killed_while_making_it_reads_as_empty(tmp_path, three_runs, made):
    """A softrt killed while it first made the database (a run's first checkpoint) leaves the file
    without its tables, or without its layout version: no runs yet, and the next writer completes it
    (every history command refused it: "no such table: runs")."""
    db = tmp_path / "h.sqlite"
    with sqlite3.connect(db) as conn:
        if made == "tables, no version":
            conn.executescript(";\n".join(SQLITE.create_runs()))
    conn.close()
    history = History(db)
    assert history.list_runs() == [] and len(history) == 0 and history.short_ids() == {}
    with pytest.raises(ConfigError, match="unknown run id"):
        history.get("2026")
    run_id = history.add_run(three_runs[0])
    assert [r.run_id for r in history.list_runs()] == [run_id]


def test_newer_database_is_refused_and_left_alone(tmp_path, three_runs):
    db = tmp_path / "h.sqlite"
    History(db).add_run(three_runs[0])
    with sqlite3.connect(db) as conn:
        conn.execute(f"PRAGMA user_version = {DB_SCHEMA_VERSION + 1}")
    before = db.read_bytes()
    for call in (lambda h: h.list_runs(), lambda h: h.add_run(three_runs[1]), lambda h: h.get("2026")):
        with pytest.raises(ConfigError, match="newer softrt"):
            call(History(db))
    assert db.read_bytes() == before


def test_corrupt_database_is_one_clear_error(tmp_path, three_runs):
    db = tmp_path / "h.sqlite"
    db.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(ConfigError, match="unusable"):
        History(db).list_runs()
    with pytest.raises(ConfigError, match="unusable"):
        History(db).add_run(three_runs[0])


def test_unwritable_database_location(tmp_path, three_runs):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(ConfigError, match=r"cannot create the history database.s directory"):
        History(blocker / "sub" / "h.sqlite").add_run(three_runs[0])


def test_bad_run_directories(tmp_path, history_db, three_runs):
    history = History()
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ConfigError, match="no run directory in"):
        history.add_runs([empty])
    with pytest.raises(ConfigError, match="no such run directory"):
        find_run_dirs(tmp_path / "missing")
    unfinished = tmp_path / "unfinished"
    shutil.copytree(three_runs[0], unfinished)
    (unfinished / "summary.json").unlink()
    with pytest.raises(ConfigError, match=r"has no summary.json"):
        history.add_run(unfinished)
    corrupt = tmp_path / "corrupt"
    shutil.copytree(three_runs[0], corrupt)
    (corrupt / "summary.json").write_text("{not json")
    with pytest.raises(ConfigError, match="corrupt"):
        history.add_run(corrupt)
    newer = tmp_path / "newer"
    shutil.copytree(three_runs[0], newer)
    summary = json.loads((newer / "summary.json").read_text())
    summary["schema"] = "softrt.summary/2"
    (newer / "summary.json").write_text(json.dumps(summary))
    with pytest.raises(ConfigError, match="newer softrt"):
        history.add_run(newer)
    assert len(history) == 0


def test_resolve_run_accepts_directories_and_ids(history_db, three_runs):
    run_id = History().add_run(three_runs[1])
    assert resolve_run(str(three_runs[1])) == three_runs[1]
    assert resolve_run(run_id) == Path(three_runs[1]).resolve()
    with pytest.raises(ConfigError, match="not a run directory"):
        resolve_run(str(three_runs[1].parent / "nothing-here"))


@pytest.mark.parametrize("text", ["yesterday", "2026-13-01", "30/11/2026"])
def test_bad_dates_are_config_errors(text):
    with pytest.raises(ConfigError, match="cannot read the date"):
        parse_when(text)


def test_short_ids_are_the_unique_prefixes_get_takes(tmp_path, history_db):
    """Runs of one second on two hosts, two runs of one second on one host, an id that is
    another's prefix: each short id resolves to its run alone, and none is shorter than the start time."""
    from datetime import datetime, timezone

    from ..synthetic import write_synthetic_run

    t = datetime(2026, 11, 30, 7, 15, 2, tzinfo=timezone.utc)
    runs = [
        write_synthetic_run(tmp_path / "r", cycles=100, host=h, seed=seed, started_at=t, run_id=run_id)
        for h, seed, run_id in (
            ("pc-a", 1, None),
            ("pc-b", 2, None),
            ("pc-b", 3, None),
            ("pc-b", 4, "20261130-071502-pc-b"),
            ("pc", 5, "20261129-000000-pc-0001"),
        )
    ]
    history = History()
    ids = history.add_runs(runs)
    short = history.short_ids()
    assert set(short) == set(ids)
    assert short["20261129-000000-pc-0001"] == "20261129-000000"
    assert short["20261130-071502-pc-b"] == "20261130-071502-pc-b"  # whole: an exact id wins over a prefix
    for run_id, prefix in short.items():
        assert run_id.startswith(prefix) and len(prefix) >= 15
        assert history.get(prefix).run_id == run_id
        if len(prefix) < len(run_id) and len(prefix) > 15:
            with pytest.raises(ConfigError, match="several runs"):
                history.get(prefix[:-1])  # one character less is ambiguous


def test_runs_started_in_one_second_are_listed_in_the_order_they_entered(history_db, tmp_path):
    from datetime import datetime, timezone

    from ..synthetic import write_synthetic_run

    t = datetime(2026, 12, 2, 4, 44, 27, tzinfo=timezone.utc)
    runs = [write_synthetic_run(tmp_path / "runs", cycles=1_000, started_at=t, seed=seed) for seed in (1, 2)]
    # The run whose id sorts last enters first: an order by run id would list them the other way.
    first, second = sorted(runs, key=lambda d: json.loads((d / "summary.json").read_text())["run_id"], reverse=True)
    h = History()
    ids = [h.add_run(first), h.add_run(second)]
    assert [r.run_id for r in h.list_runs()] == ids and h.get("last").run_id == ids[1]
    h.add_run(first)  # a later checkpoint of the first refreshes its row, and keeps its place
    assert [r.run_id for r in h.list_runs()] == ids and h.get("last~1").run_id == ids[0]


def test_a_history_row_holds_the_runs_tables_columns_in_order():
    from dataclasses import fields

    from softrt.store.dialect import COLUMNS
    from softrt.store.record import HistoryRow

    assert sorted(f.name for f in fields(HistoryRow)) == sorted(COLUMNS)  # values() gives them in COLUMNS order
