"""``softrt push`` and ``--db``/``--archive`` on the commands that make runs: faults in one line, the run
kept on the rig, exit 2 for bad input, a password never printed (on every engine, tests/labdb.py)."""

from __future__ import annotations

import os
import sqlite3
from datetime import datetime, timezone

import click
import pytest

from softrt.cli.history import lab_options, remember
from softrt.store.dialect import DB_SCHEMA_VERSION
from softrt.store.history import History

from ..synthetic import write_synthetic_run

SECRET = "pw-SECRET-41"
DOWN = f"postgresql://rig:{SECRET}@127.0.0.1:1/softrt?connect_timeout=3"  # port 1: refused at once


@pytest.fixture
def runs(tmp_path):
    return [
        write_synthetic_run(
            tmp_path / "runs",
            cycles=200,
            seed=k,
            run_id=f"20261201-0600{k:02d}-rig-000{k}",
            started_at=datetime(2026, 12, 1, 6, 0, k, tzinfo=timezone.utc),
        )
        for k in range(2)
    ]


def _one_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert SECRET not in err
    return lines[0]


def test_push_sends_once_and_says_so(run_cli, home, history_db, runs, tmp_path):
    History(home / "history.sqlite").add_runs(runs)
    archive = tmp_path / "archive"
    local = str(home / "history.sqlite")
    code, out, err = run_cli("push", "--db", history_db, "--archive", str(archive), "--from", local)
    assert code == 0 and out.split() == ["sent", runs[0].name, "sent", runs[1].name]
    assert "2 run(s) sent to" in err and "0 already there" in err
    code, out, err = run_cli("push", "--db", history_db, "--archive", str(archive), "--quiet", "--from", local)
    assert code == 0 and out == "" and err == ""
    assert len(list(archive.glob("rig=*/date=2026-12-01/*"))) == 2


def test_push_without_a_lab_or_to_a_server_that_is_down(run_cli, home, runs):
    History(home / "history.sqlite").add_runs(runs)
    code, _out, err = run_cli("push")
    assert code == 2 and "no lab to send to" in _one_line(err) and "--db postgresql://" in err
    code, out, err = run_cli("push", "--db", DOWN)
    line = _one_line(err)
    assert code == 1 and out == "" and "cannot reach the lab history postgresql://rig:***@127.0.0.1:1/softrt" in line
    assert "softrt push sends them when it answers" in line


@pytest.mark.parametrize(
    "url, problem",
    [
        (f"postgresql://rig:{SECRET}@lab:port/softrt", "the port 'port' is no port number"),
        (f"postgresql://rig:{SECRET}@lab/softrt?sslmode=require&bogus=1", 'invalid URI query parameter: "bogus"'),
        (f"mysql://rig:{SECRET}@lab/softrt", "softrt stores its history in SQLite or PostgreSQL"),
    ],
)
def test_a_malformed_url_is_bad_input_in_one_line(run_cli, home, url, problem):
    for args in (("push", "--db", url), ("history", "--db", url), ("show", "last", "--db", url)):
        code, out, err = run_cli(*args)
        assert code == 2 and out == "" and problem in _one_line(err) and "***" in err


def test_a_newer_layout_is_refused_and_left_alone(run_cli, home, history_db, runs):
    History(history_db).add_run(runs[0])
    if history_db.startswith("postgresql"):
        import psycopg

        with psycopg.connect(history_db, autocommit=True) as conn:
            conn.execute("UPDATE softrt_schema SET version = %s", (DB_SCHEMA_VERSION + 1,))
    else:
        with sqlite3.connect(history_db) as conn:
            conn.execute(f"PRAGMA user_version = {DB_SCHEMA_VERSION + 1}")
        conn.close()
    History(home / "history.sqlite").add_runs(runs)
    code, out, err = run_cli("push", "--db", history_db, "--from", str(home / "history.sqlite"))
    assert code == 2 and "newer softrt" in _one_line(err) and "upgrade softrt" in err


@click.command()
@lab_options
@click.argument("run_dir")
def _made_a_run(run_dir):
    """What softrt run does once its run is stored (cli.history.lab_options, remember)."""
    remember([run_dir])
    return 0


def test_a_run_the_lab_cannot_take_stays_on_the_rig(home, runs, tmp_path, capsys):
    assert (
        _made_a_run.main(["--db", DOWN, "--archive", str(tmp_path / "archive"), str(runs[0])], standalone_mode=False)
        == 0
    )
    line = _one_line(capsys.readouterr().err)
    assert line.startswith("softrt: the lab has not got the run yet, kept in this rig's history") and "push" in line
    assert [r.run_id for r in History(home / "history.sqlite").list_runs()] == [runs[0].name]
    assert [p.name for p in (tmp_path / "archive").glob("rig=*/date=*/*")] == [runs[0].name]  # the share took it
    assert os.environ.get("SOFTRT_DB") is None  # a URL is never handed down to child processes
    # Two runs of one command (a compare): the lab that did not answer is not waited for again.
    assert _made_two.main(["--db", DOWN, *map(str, runs)], standalone_mode=False) == 0
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 2 and "cannot reach" in lines[0] and "still unreachable" in lines[1]
    assert len(History(home / "history.sqlite")) == 2


@click.command()
@lab_options
@click.argument("run_dirs", nargs=-1)
def _made_two(run_dirs):
    """What softrt compare does: one remember per scenario run."""
    for run_dir in run_dirs:
        remember([run_dir])
    return 0


def _a_wrong_password_is_bad_input_and_the_run_stays(home, runs, capsys):
    from ..labdb import with_option

    url = with_option(os.environ["SOFTRT_TEST_PG"], f"password={SECRET}")  # the URL's password wins over ~/.pgpass
    assert _made_a_run.main(["--db", url, str(runs[0])], standalone_mode=False) == 2
    line = _one_line(capsys.readouterr().err)
    assert "refused the login" in line and "password=***" in line and "~/.pgpass" in line
    assert [r.run_id for r in History(home / "history.sqlite").list_runs()] == [runs[0].name]


if os.environ.get("SOFTRT_TEST_PG"):  # a server to refuse the login (tests/labdb.py): not listed otherwise
    test_a_wrong_password_is_bad_input_and_the_run_stays = pytest.mark.pg(
        _a_wrong_password_is_bad_input_and_the_run_stays
    )


#: The README's grants for a rig's role ("A lab of many machines"), on the test's schema.
RIG_GRANTS = (
    "GRANT USAGE ON SCHEMA {schema} TO {rig}",
    "ALTER DEFAULT PRIVILEGES IN SCHEMA {schema} GRANT SELECT, INSERT, UPDATE ON TABLES TO {rig}",
)


def _a_rig_role_with_the_readme_grants_stores_and_pushes_but_cannot_delete(run_cli, home, runs, tmp_path):
    import uuid
    from urllib.parse import parse_qs, urlsplit

    import psycopg

    from ..labdb import pg_schema, with_option

    rig, password = f"rig_{uuid.uuid4().hex[:8]}", uuid.uuid4().hex
    with psycopg.connect(os.environ["SOFTRT_TEST_PG"], autocommit=True) as conn:
        conn.execute(f"CREATE ROLE {rig} LOGIN PASSWORD '{password}'")
    try:
        with pg_schema() as owner:  # (dropped first: its grants go with it, then the role can go)
            schema = parse_qs(urlsplit(owner).query)["options"][0].split("=", 1)[1]
            with psycopg.connect(owner, autocommit=True) as conn:
                for grant in RIG_GRANTS:
                    conn.execute(grant.format(schema=schema, rig=rig))
            assert run_cli("history", "init", "--db", owner)[0] == 0  # the owner makes the tables, once
            url = with_option(owner.replace(urlsplit(owner).username + "@", rig + "@", 1), f"password={password}")
            History(home / "history.sqlite").add_runs(runs)
            code, out, err = run_cli("push", "--db", url, "--archive", str(tmp_path / "archive"))
            assert code == 0 and "2 run(s) sent" in err and password not in out + err
            assert run_cli("push", "--db", url)[0] == 0  # an upsert of the same rows: SELECT, INSERT, UPDATE
            code, out, err = run_cli("history", "forget", runs[0].name, "--db", url)
            assert code == 2 and "lacks a privilege" in err and password not in err
            assert len(History(owner)) == 2
    finally:
        with psycopg.connect(os.environ["SOFTRT_TEST_PG"], autocommit=True) as conn:
            conn.execute(f"DROP ROLE {rig}")


if os.environ.get("SOFTRT_TEST_PG"):
    test_a_rig_role_with_the_readme_grants_stores_and_pushes_but_cannot_delete = pytest.mark.pg(
        _a_rig_role_with_the_readme_grants_stores_and_pushes_but_cannot_delete
    )


def _pgservice_and_pgpassfile_pass_through_untouched(run_cli, home, runs, tmp_path, monkeypatch):
    """libpq's own conventions: the URL names nothing but the scheme; pg_service.conf says the rest."""
    from urllib.parse import parse_qs, urlsplit

    from ..labdb import pg_schema

    with pg_schema() as url:
        parts = urlsplit(url)
        options = parse_qs(parts.query)["options"][0]
        (tmp_path / "pg_service.conf").write_text(
            f"[lab]\nhost={parts.hostname}\nport={parts.port}\nuser={parts.username}\ndbname={parts.path[1:]}\n"
            f"options={options}\n"
        )
        monkeypatch.setenv("PGSERVICEFILE", str(tmp_path / "pg_service.conf"))
        monkeypatch.setenv("PGSERVICE", "lab")
        History(home / "history.sqlite").add_runs(runs)
        code, out, err = run_cli("push", "--db", "postgresql://")
        assert code == 0 and "2 run(s) sent to postgresql://," in err
        assert [r.run_id for r in History(url).list_runs()] == [r.name for r in runs]


if os.environ.get("SOFTRT_TEST_PG"):
    test_pgservice_and_pgpassfile_pass_through_untouched = pytest.mark.pg(
        _pgservice_and_pgpassfile_pass_through_untouched
    )
