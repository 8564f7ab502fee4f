"""``softrt history`` and ``softrt show``: list, filter, add from another PC, show; bad input."""

from __future__ import annotations

import json
import sqlite3
from datetime import datetime, timezone

import pytest

from ..synthetic import write_synthetic_run


@pytest.fixture
def lab(tmp_path):
    """Run directories as copied from two PCs."""
    out = []
    for host, day, seed in (("pc-a", 28, 1), ("pc-b", 29, 2), ("pc-b", 30, 3)):
        out.append(
            write_synthetic_run(
                tmp_path / "lab" / host,
                cycles=2_000,
                host=host,
                seed=seed,
                scenario="tuned" if seed != 2 else "untuned",
                misses=[(100, seed)],
                started_at=datetime(2026, 11, day, 8, 0, tzinfo=timezone.utc),
            )
        )
    return out


def test_empty_history(run_cli, home):
    code, out, err = run_cli("history")
    assert code == 0 and out == "" and "No runs" in err
    code, out, _ = run_cli("history", "--json")
    assert code == 0 and json.loads(out) == []


def test_add_list_filter_show(run_cli, home, lab, tmp_path):
    code, out, err = run_cli("history", "add", str(tmp_path / "lab" / "pc-a"), str(tmp_path / "lab" / "pc-b"))
    assert code == 0 and out.count("stored ") == 3 and "3 run(s)" in err
    ids = [json.loads((p / "summary.json").read_text())["run_id"] for p in lab]
    code, out, _ = run_cli("history")
    short = [i[:15] for i in ids]  # listed by their unique prefix (here the start time)
    assert code == 0 and all(s in out for s in short) and "untuned" in out
    assert out.index(short[0]) < out.index(short[1]) < out.index(short[2])  # oldest first
    code, out, _ = run_cli("history", "--host", "pc-b", "--json")
    assert [r["run_id"] for r in json.loads(out)] == ids[1:]
    code, out, _ = run_cli("history", "--scenario", "tuned", "--since", "2026-11-29", "--json")
    assert [r["run_id"] for r in json.loads(out)] == ids[2:]
    code, out, _ = run_cli("history", "--until", "2026-11-29", "--json")
    rows = json.loads(out)
    assert [r["run_id"] for r in rows] == ids[:2]
    assert rows[0]["missed_updates"] == 1 and rows[0]["tuning"]["applied"] and rows[0]["path"] == str(lab[0].resolve())
    # show: by unique prefix, the same tables as softrt run
    code, out, _ = run_cli("show", ids[1][:-2])
    assert code == 0 and "Timer int. period" in out and "Distribution" in out and str(lab[1].resolve()) in out
    code, out, _ = run_cli("show", str(lab[2]), "--json")
    assert json.loads(out)["run_id"] == ids[2]
    # Adding again changes nothing; forget drops one row.
    run_cli("history", "add", str(lab[0]))
    code, out, _ = run_cli("history", "--json")
    assert len(json.loads(out)) == 3
    code, out, _ = run_cli("history", "forget", ids[0])
    assert code == 0 and ids[0] in out
    code, out, _ = run_cli("history", "--json")
    assert [r["run_id"] for r in json.loads(out)] == ids[1:]
    assert lab[0].is_dir()


def test_last_and_last_n_name_the_newest_runs(run_cli, home, lab, tmp_path):
    code, _, err = run_cli("show", "last")  # an empty history: one line, exit 2
    assert code == 2 and err.startswith("softrt: error: last: the history") and "no runs yet" in err
    assert err.count("\n") == 1
    assert run_cli("history", "add", str(tmp_path / "lab" / "pc-a"), str(tmp_path / "lab" / "pc-b"))[0] == 0
    ids = [json.loads((p / "summary.json").read_text())["run_id"] for p in lab]  # started on days 28, 29, 30
    for ref, want in (("last", ids[2]), ("last~0", ids[2]), ("last~1", ids[1]), ("last~2", ids[0])):
        code, out, _ = run_cli("show", ref, "--json")
        assert code == 0 and json.loads(out)["run_id"] == want, ref
    code, _, err = run_cli("show", "last~3")
    assert code == 2 and "only 3 run(s)" in err and "last~2 is the oldest" in err
    from softrt.report import resolve_runs  # softrt report takes them the same way

    assert [p.resolve() for p in resolve_runs(["last~1", "last"])] == [lab[1].resolve(), lab[2].resolve()]


def test_every_command_has_an_example_in_its_help(run_cli):
    import click

    from softrt.cli import _COMMAND_MODULES, cli

    ctx = click.Context(cli)  # the group imports its commands on first use: list them as --help does
    names = cli.list_commands(ctx)
    assert len(names) == len(_COMMAND_MODULES)
    history = cli.get_command(ctx, "history")
    commands = [[name] for name in names] + [["history", sub] for sub in history.list_commands(ctx)]
    for args in commands:
        code, out, _ = run_cli(*args, "--help")
        assert code == 0 and "Example" in out, args


def test_db_option_overrides_the_default(run_cli, home, lab, tmp_path):
    db = tmp_path / "other.sqlite"
    code, _, _ = run_cli("history", "add", str(lab[0]), "--db", str(db))
    assert code == 0 and db.is_file() and not (home / "history.sqlite").exists()
    code, out, _ = run_cli("history", "--db", str(db), "--json")
    assert len(json.loads(out)) == 1
    code, out, _ = run_cli("show", json.loads(out)[0]["run_id"], "--db", str(db))
    assert code == 0 and "Timer int. period" in out


def _one_line_exit_2(code, out, err, needle):
    lines = err.strip().splitlines()
    assert code == 2 and out == "" and len(lines) == 1, (code, out, err)
    assert lines[0].startswith("softrt: error:") and needle in lines[0] and "Traceback" not in err


@pytest.mark.parametrize(
    "args,needle",
    [
        (["show", "nope"], "unknown run id 'nope'"),
        (["show", "/no/such/run"], "not a run directory"),
        (["history", "--since", "last week"], "cannot read the date"),
        (["history", "add", "/no/such/dir"], "no such run directory"),
        (["history", "forget", "nope"], "unknown run id"),
    ],
)
def test_bad_input(run_cli, home, args, needle):
    _one_line_exit_2(*run_cli(*args), needle)


def test_newer_or_corrupt_database(run_cli, home, lab, tmp_path):
    db = tmp_path / "h.sqlite"
    run_cli("history", "add", str(lab[0]), "--db", str(db))
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA user_version = 7")
    _one_line_exit_2(*run_cli("history", "--db", str(db)), "newer softrt")
    db.write_bytes(b"garbage" * 1000)
    _one_line_exit_2(*run_cli("history", "--db", str(db)), "unusable")


def test_corrupt_summary_is_shown_as_one_line(run_cli, home, lab):
    (lab[0] / "summary.json").write_text("{")
    _one_line_exit_2(*run_cli("show", str(lab[0])), "corrupt")


def test_history_at_80_columns_shows_every_column(run_cli, home, lab, tmp_path, monkeypatch):
    run_cli("history", "add", str(tmp_path / "lab" / "pc-a"), str(tmp_path / "lab" / "pc-b"))
    monkeypatch.setenv("COLUMNS", "80")
    code, out, _ = run_cli("history")
    assert code == 0
    assert all(len(line) <= 80 for line in out.splitlines())
    for header in ("run", "host", "scenario", "mode", "cycles", "missed"):
        assert header in out
    assert "pc-a" in out and "pc-b" in out and "untuned" in out and "500.0" in out


def test_show_prints_why_cycles_were_late(run_cli, home, tmp_path):
    """The attribution a run stored (made by the real Attributor on a synthetic trace), and the one
    line for a run without tracing."""
    traced = write_synthetic_run(
        tmp_path / "t", cycles=20_000, misses=[(2_600, 3), (9_000, 1), (15_000, 12)], why_late=True
    )
    why = json.loads((traced / "summary.json").read_text())["why_late"]
    assert why["culprits"][0]["name"] == "no guest activity on CPU 1"  # the 12-miss stall had no event
    code, out, _ = run_cli("show", str(traced))
    assert code == 0 and "Why cycles were late" in out
    assert out.index("Timer int. period") < out.index("Why cycles were late") < out.index("Distribution")
    assert "stress-ng-cpu (pid 5151, FIFO/RR 99)" in out and "eth0 (IRQ 24)" in out
    assert "cycle 15,000:" in out and "steal rose" in out and "unexplained" in out
    untraced = write_synthetic_run(tmp_path / "u", cycles=2_000, why_late="off (--no-trace)")
    code, out, _ = run_cli("show", str(untraced))
    assert code == 0 and "Why cycles were late: tracing off (--no-trace)" in out
    plain = write_synthetic_run(tmp_path / "p", cycles=2_000)  # a run from before tracing existed
    code, out, _ = run_cli("show", str(plain))
    assert code == 0 and "Why cycles were late" not in out


def test_the_runs_of_one_compare_are_grouped(run_cli, home, tmp_path, monkeypatch):
    from softrt.store.rundir import update_summary

    monkeypatch.setenv("COLUMNS", "80")
    dirs = [
        write_synthetic_run(
            tmp_path / "runs",
            cycles=500,
            host="pc",
            seed=i,
            scenario=name,
            started_at=datetime(2026, 11, 30, 8, i, tzinfo=timezone.utc),
        )
        for i, name in enumerate(["alone", "untuned", "tuned", "tuned+load", "later"])
    ]
    first = json.loads((dirs[1] / "summary.json").read_text())["run_id"]
    for d in dirs[1:4]:  # as softrt compare stores its scenario runs
        update_summary(d, compare_round=1, compare_id=first)
    assert run_cli("history", "add", str(tmp_path / "runs"))[0] == 0
    code, out, _ = run_cli("history", "--json")
    assert [r["compare_id"] for r in json.loads(out)] == [None, first, first, first, None]
    code, out, _ = run_cli("history")
    lines = out.splitlines()
    blank = [i for i, line in enumerate(lines) if not line.strip()]
    at = {
        name: next(i for i, line in enumerate(lines) if f" {name} " in line)
        for name in ("alone", "untuned", "tuned+load", "later")
    }
    # a blank line before the compare's first run and one after its last, none elsewhere among the runs
    assert [b for b in blank if at["alone"] < b < at["later"]] == [at["untuned"] - 1, at["tuned+load"] + 1], out
    assert "blank lines group a compare" in out and all(len(line) <= 80 for line in lines)
