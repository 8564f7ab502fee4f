"""``softrt fleet``, ``softrt diff``, ``softrt query`` and ``softrt report --fleet`` on a lab's history.

Labels and host names come from other rigs: untrusted, so they are shown as plain text and escaped
in HTML; ``softrt query`` opens the index read-only and never lets DuckDB reach for the network.
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from softrt.store.history import History

from ..fleetdata import store, summary

HOSTILE = "[bold red]evil[/]\x1b[2J<script>alert(1)</script>$x$'"


@pytest.fixture
def lab(history_db, tmp_path, home):
    runs = [summary(n, worst_us=300 + n) for n in range(3)]
    runs += [summary(n, kernel="6.18.9-rt", worst_us=900 + n) for n in (3, 4)]
    runs[-1] = summary(
        4,
        kernel="6.18.9-rt",
        worst_us=904,
        tail={  # a fitted tail model: the rate with its interval
            "late_rate_per_h": {"estimate": 1.5, "low": 0.5, "high": 400.0},
            "late_rate_bound_per_h": 6.0,
        },
    )
    runs += [summary(n, rig="dddd000000000004", label=HOSTILE, host="evil<host>", hours=0.5) for n in range(2)]
    store(History(history_db), runs, tmp_path)
    return runs


def test_fleet_text_and_json(run_cli, lab):
    code, out, err = run_cli("fleet")
    assert code == 0, err
    assert "rig-1" in out and "6.18.9-rt" in out and "↑" in out and "1.5/h [0.5, 400]" in out
    # A label is text, never markup or a terminal escape (the table folds it over lines).
    assert "[bold" in out and "evil[/]" in out and "alert(1)" in out and "\x1b" not in out
    code, out, _ = run_cli("fleet", "--json", "--kernel", "6.18.9-rt")
    rows = json.loads(out)
    assert code == 0 and [r["label"] for r in rows] == ["rig-1"] and rows[0]["runs"] == 2


def test_regressions_exit_1_and_name_the_kernel(run_cli, lab):
    code, out, _ = run_cli("fleet", "--regressions")
    assert code == 1
    assert "kernel: 6.18.4-rt → 6.18.9-rt" in out and "6.18.9-rt: 1 of 1" in out
    code, out, _ = run_cli("fleet", "--regressions", "--json", "--rig", "dddd000000000004")
    assert code == 0 and json.loads(out)["regressions"] == []


def test_diff(run_cli, lab):
    code, out, err = run_cli("diff", lab[2].run_id, lab[3].run_id)
    assert code == 0, err
    assert "kernel: 6.18.4-rt → 6.18.9-rt" in out and "worst period: 302 µs → 903 µs, +601 µs: worse" in out
    assert "noise range 2 µs over 3 runs" in out and "p99.99 period: 280.0 µs → 280.0 µs, +0 µs: within noise" in out
    code, out, _ = run_cli("diff", lab[0].run_id, lab[5].run_id, "--json")
    d = json.loads(out)
    assert code == 0 and not d["same_rig"] and d["provenance"]["rig_label"]["b"].startswith("[bold red]")
    assert d["headline"][0]["judged"] == "noise unknown (1 run)"  # A alone has A's provenance before B


def test_report_fleet_escapes_every_label(run_cli, lab, tmp_path):
    out_html = tmp_path / "fleet.html"
    code, out, err = run_cli("report", "--fleet", str(out_html))
    assert code == 0 and "2 rig(s), 7 run(s)" in out, err
    html = out_html.read_text()
    assert "<script>" not in html and "&lt;script&gt;" in html and "evil&lt;host&gt;" not in html
    assert html.count("data:image/svg+xml;base64,") == 2
    assert "kernel: 6.18.4-rt → 6.18.9-rt" in html


def test_query_reads_the_index_read_only_and_offline(run_cli, lab, history_db):
    code, out, err = run_cli(
        "query",
        "SELECT rig_label, count(*) AS n, max(period_max_us) AS worst FROM runs WHERE kernel = '6.18.9-rt' GROUP BY 1",
        "--json",
    )
    assert code == 0, err
    assert json.loads(out) == [{"rig_label": "rig-1", "n": 2, "worst": 904.0}]
    code, out, _ = run_cli(
        "query",
        "SELECT current_setting('autoinstall_known_extensions') AS i, "
        "current_setting('autoload_known_extensions') AS l, schema_name FROM duckdb_tables() "
        "WHERE database_name = 'idx' AND table_name = 'runs'",
        "--json",
    )
    (row,) = json.loads(out)  # schema: main (SQLite), or the PostgreSQL schema of the URL's search_path
    assert code == 0 and (row["i"], row["l"]) == (False, False)
    code, _, err = run_cli("query", f"DELETE FROM idx.{row['schema_name']}.runs")
    assert code == 2 and err.count("\n") == 1 and "read-only" in err.lower()
    code, _, err = run_cli("query", "SET autoinstall_known_extensions = true")
    assert code == 2 and "locked" in err
    assert len(History(history_db)) == 7


def test_query_over_the_archive(run_cli, lab, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    for rig, run_id, rows in (("dddd000000000004", "r1", 3), ("000123", "r2", 2)):
        d = tmp_path / "archive" / f"rig={rig}" / "date=2026-03-01" / run_id
        d.mkdir(parents=True)
        pq.write_table(
            pa.table({"seq": list(range(rows)), "edge_ns": [i * 250_000 for i in range(rows)]}), d / "samples.parquet"
        )
    code, out, err = run_cli(
        "query",
        "--archive",
        str(tmp_path / "archive"),
        "--json",
        "SELECT rig, run_id, count(*) AS n, typeof(rig) AS t FROM samples GROUP BY ALL ORDER BY n",
    )
    assert code == 0, err
    assert json.loads(out) == [
        {"rig": "000123", "run_id": "r2", "n": 2, "t": "VARCHAR"},
        {"rig": "dddd000000000004", "run_id": "r1", "n": 3, "t": "VARCHAR"},
    ]


@pytest.mark.parametrize(
    "args,needle",
    [
        (["fleet", "--since", "yesterday"], "cannot read the date"),
        (["diff", "nope", "last"], "unknown run id 'nope'"),
        (["query", "SELEC 1"], "query failed"),
        (["query", "SELECT 1", "--archive", "/no/such/archive"], "no archive directory"),
        (["report", "--fleet", "x.html", "last"], "give no RUNS"),
    ],
)
def test_bad_input(run_cli, lab, args, needle):
    code, out, err = run_cli(*args)
    assert code == 2 and needle in err and err.count("\n") == 1 and "Traceback" not in err


def test_query_without_a_history(run_cli, home, tmp_path):
    code, _, err = run_cli("query", "SELECT 1", "--db", str(tmp_path / "none.sqlite"))
    assert code == 2 and "no history database" in err


def test_query_never_shows_a_password(run_cli, history_db):
    """A wrong password in the URL (PostgreSQL): one line, exit 2, the password nowhere."""
    if not history_db.startswith("postgresql://"):
        pytest.skip("a PostgreSQL history only")
    url = history_db.replace("://softrt_ci@", "://softrt_ci:Wr0ng-s3cret@", 1)
    code, out, err = run_cli("query", "SELECT 1", "--db", url)
    assert code == 2 and err.count("\n") == 1 and "Wr0ng-s3cret" not in out + err, err


def test_a_row_that_cannot_be_read_is_left_out_with_a_warning(run_cli, lab, history_db, tmp_path):
    """Another rig's row whose summary is corrupt: the fleet shows the others and names it in one line."""
    bad = summary(9, rig="eeee000000000005", label="broken", host="pc5")
    row = History.row_of(tmp_path / bad.run_id, bad)
    History(history_db).add_row(replace(row, summary_json='{"schema": "softrt.summary/1", "run_id": 5}'))
    code, out, err = run_cli("fleet", "--json")
    assert code == 0 and "broken" not in out and len(json.loads(out)) == 2
    assert err.count("\n") == 1 and "1 run(s) left out" in err and bad.run_id in err


def test_diff_takes_run_directories_of_older_softrt(run_cli, lab, tmp_path):
    """A run folder (not in the history, written before provenance existed) against a stored run."""
    from ..synthetic import write_synthetic_run

    folder = write_synthetic_run(tmp_path / "copied", cycles=1_000, host="old-pc")
    code, out, err = run_cli("diff", str(folder), lab[0].run_id)
    assert code == 0, err
    assert "hostname: old-pc → pc1" in out and "rig_id: — → aaaa000000000001" in out and "noise unknown (1 run)" in out
