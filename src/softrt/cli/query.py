"""``softrt query SQL``: DuckDB over the lab's index and archive, read-only and offline (CLI layer; store.query)."""

from __future__ import annotations

import csv
import json
import sys

import click
from rich import box
from rich.table import Table
from rich.text import Text

from ..schema.text import printable
from ..store.history import History
from .history import ARCHIVE_OPTION, DB_OPTION
from .render import console, emit


def _cell(value: object) -> object:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)  # dates, decimals, lists: as DuckDB prints them


@click.command(
    "query",
    epilog="""\b
Views: runs (the index: run_id, started_at, host, scenario, period_max_us, period_p99_99_us,
       missed_updates, summary_json…, and rig, rig_label, kernel, cpu_model, microcode,
       bios_version, preemption, cmdline, late_cycles, meets), samples (with --archive:
       every run's samples.parquet, with rig, date, run_id)
Examples:
  softrt query "SELECT rig_label, max(period_p99_99_us) FROM runs WHERE kernel = '6.18.9-rt' GROUP BY 1"
  softrt query --archive /mnt/lab/softrt "SELECT rig, count(*) AS cycles FROM samples GROUP BY rig"
""",
)
@click.argument("sql")
@DB_OPTION
@ARCHIVE_OPTION
@click.option("--json", "as_json", is_flag=True, help="Print the rows as a JSON list of objects.")
@click.option("--csv", "as_csv", is_flag=True, help="Print the rows as CSV.")
@click.option(
    "--max-rows",
    type=click.IntRange(min=1),
    default=10000,
    show_default=True,
    help="Print at most this many rows (a note says when more matched).",
)
def command(sql, db, archive, as_json, as_csv, max_rows):
    """Run SQL with DuckDB over the history (opened read-only) and the archive's Parquet files.

    DuckDB's extensions come from their Python packages; softrt never lets DuckDB download anything.
    """
    import os

    from ..store.query import connect, run

    archive = archive if archive is not None else os.environ.get("SOFTRT_ARCHIVE") or None
    history = History(db)
    con = connect(history, archive)
    try:
        columns, rows, more = run(con, sql, max_rows, history.url)
    finally:
        con.close()
    if as_json:
        sys.stdout.write(json.dumps([dict(zip(columns, map(_cell, r))) for r in rows], indent=2) + "\n")
    elif as_csv:
        writer = csv.writer(sys.stdout)
        writer.writerow(columns)
        writer.writerows([[_cell(v) for v in r] for r in rows])
    else:
        table = Table(box=box.SIMPLE_HEAD, show_edge=False)
        for name in columns:
            table.add_column(Text(printable(name)), overflow="fold")
        for r in rows:
            table.add_row(*(Text("NULL" if v is None else printable(_cell(v))) for v in r))
        emit(console(), table)
    if more:
        emit(
            console(stderr=True),
            Text(f"softrt: more than {max_rows} rows matched; the first {max_rows} are shown (--max-rows, or a LIMIT)"),
            soft_wrap=True,
        )
    return 0
