"""``softrt history``: list the stored runs; ``history add`` stores run directories (CLI layer)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click
from rich import box
from rich.table import Table
from rich.text import Text

from ..store.history import History, RunRecord
from ..store.validate import printable
from .render import console

DB_OPTION = click.option(
    "--db", type=click.Path(dir_okay=False, path_type=Path), default=None,
    help="History database [default: $SOFTRT_HOME/history.sqlite, else ~/.local/share/softrt/history.sqlite].")


def _f(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def remember(run_paths) -> None:
    """Add finished runs to the history; a history problem never costs the user the run."""
    from ..errors import SoftRTError

    try:
        history = History()
        for path in run_paths:
            history.add_run(path)
    except SoftRTError as err:
        console(stderr=True).print(f"softrt: warning: run not added to the history: {err}")


_TEXT_MIN_WIDTH = 8


def history_table(runs: list[RunRecord]) -> Table:
    """One row per run: identity, then the seed's headline figures (the start time is in --json)."""
    rows = []
    for r in runs:
        scenario = r.scenario or "-"
        if r.source != "softrt" and r.source != scenario:
            scenario += f" [{r.source}]"
        mode = (r.mode or "-") + ("" if r.status in (None, "complete") else f" ({r.status})")
        rows.append((r.run_id, r.host or "-", scenario, mode, "-" if r.cycles is None else f"{r.cycles:,}",
                     _f(r.period_max_us), _f(r.period_p99_99_us), _f(r.latency_max_us),
                     "-" if r.missed_updates is None else f"{r.missed_updates:,}"))
    table = Table(title="Runs, oldest first (µs)", title_justify="left", box=box.SIMPLE_HEAD,
                  pad_edge=False, collapse_padding=True)
    # The numbers are never cut. On a narrow terminal the id (the handle for show/report) wraps
    # first, whole: host, scenario and mode keep at least _TEXT_MIN_WIDTH characters (then wrap).
    for k, col in enumerate(("run", "host", "scenario", "mode", "cycles", "period\nmax", "period\np99.99",
                             "latency\nmax", "missed")):
        widest = max((len(row[k]) for row in rows), default=1)
        if k == 0:
            table.add_column(col, overflow="fold")
        elif k in (1, 2, 3):
            table.add_column(col, overflow="fold", min_width=min(max(widest, len(col)), _TEXT_MIN_WIDTH))
        else:
            table.add_column(col, no_wrap=True, min_width=widest, justify="right")
    for row in rows:
        # Text cells: a host or scenario read from a file is shown as it is, never as rich markup
        # (a nodename "[/x]" would be a markup error), and without control characters.
        table.add_row(*(Text(printable(cell)) for cell in row))
    return table


@click.group("history", invoke_without_command=True)
@DB_OPTION
@click.option("--host", default=None, help="Only runs on this host.")
@click.option("--scenario", default=None, help="Only this scenario (imported results: the tool's name).")
@click.option("--source", type=click.Choice(["softrt", "cyclictest", "oslat"]), default=None,
              help="Only runs measured by softrt, or imported from this tool.")
@click.option("--since", default=None, help="Only runs started at or after this date/time (UTC), e.g. 2026-11-01.")
@click.option("--until", default=None, help="Only runs started up to this date (inclusive) or time (UTC).")
@click.option("--limit", type=click.IntRange(min=1), default=None, help="Only the newest N runs.")
@click.option("--json", "as_json", is_flag=True, help="Print the runs as a JSON list.")
@click.pass_context
def command(ctx, db, host, scenario, source, since, until, limit, as_json):
    """List the stored runs, oldest first (softrt run, compare and import store theirs).

    \b
    softrt history add DIR...   store run directories, e.g. copied from another PC
    softrt history forget RUN   drop a run from the history (its directory stays)
    """
    ctx.obj = {"db": db}
    if ctx.invoked_subcommand is not None:
        return None
    history = History(db)
    runs = history.list_runs(host=host, scenario=scenario, source=source, since=since, until=until, limit=limit)
    if as_json:
        sys.stdout.write(json.dumps([r.to_dict() for r in runs], indent=2) + "\n")
    elif runs:
        console().print(history_table(runs))
    else:
        console(stderr=True).print(f"No runs in {history.path} match. Runs are stored by softrt run, compare and "
                                   "import, or with softrt history add DIR.", soft_wrap=True)
    return 0


@command.command("add")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@DB_OPTION
@click.pass_context
def add(ctx, paths, db):
    """Store run directories (a run, or a directory of runs such as softrt-runs/ from another PC)."""
    history = History(db or (ctx.obj or {}).get("db"))
    ids = history.add_runs(paths)
    out = console()
    for run_id in ids:
        out.print(Text(f"stored {printable(run_id)}"), soft_wrap=True)
    console(stderr=True).print(Text(f"{len(ids)} run(s) in {printable(history.path)}", style="dim"), soft_wrap=True)
    return 0


@command.command("forget")
@click.argument("run")
@DB_OPTION
@click.pass_context
def forget(ctx, run, db):
    """Drop RUN (an id or a unique prefix) from the history; its run directory is left alone."""
    run_id = History(db or (ctx.obj or {}).get("db")).remove(run)
    console().print(Text(f"forgot {printable(run_id)}"), soft_wrap=True)
    return 0
