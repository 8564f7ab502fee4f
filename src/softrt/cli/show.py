"""``softrt show RUN``: one stored run's tables, as ``softrt run`` printed them (CLI layer)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click
from rich.console import Group
from rich.table import Table
from rich.text import Text

from ..store.history import load_run_summary, resolve_run
from .history import DB_OPTION
from .render import console, render_summary


def _us(value: float | None) -> str:
    return "-" if value is None else f"{value:,.1f}"


def render_imported(summary: dict, path: str) -> Group:
    """An imported cyclictest/oslat result: latency distribution per thread and overall."""
    cols = ("min", "mean", "p50", "p99", "p99_9", "p99_99", "max")
    table = Table(title=f"{summary['source']} latency (µs)", title_justify="left", show_edge=False)
    table.add_column("")
    for c in cols:
        table.add_column(c.replace("_", "."), justify="right")
    for t in summary.get("threads") or []:
        table.add_row(f"thread {t['thread']} (CPU {t['cpu']})", _us(t["min_us"]), _us(t["mean_us"]),
                      "", "", "", "", _us(t["max_us"]))
    lat = summary["latency_us"]
    table.add_row("all", *(_us(lat[c]) for c in cols), style="bold")
    cfg = summary.get("config") or {}
    lines = [f"Samples: {summary['cycles']:,}; command: {cfg.get('cmdline', '?')}"]
    lines += [f"Note: {n}" for n in summary.get("notes") or []]
    lines += [f"  applied: {a['what']} ({a['detail']})" for a in (summary.get("tuning") or {}).get("applied", [])]
    return Group(table, Text(""), Text("\n".join(lines)), Text(f"Run stored in {path}", style="dim"))


@click.command("show")
@click.argument("run")
@DB_OPTION
@click.option("--json", "as_json", is_flag=True, help="Print the run's summary.json.")
def command(run, db, as_json):
    """Print one run's tables: RUN is a run id (or a unique prefix) from softrt history, or a run directory."""
    path = resolve_run(run, db)
    summary = load_run_summary(Path(path))
    if as_json:
        sys.stdout.write(json.dumps(summary, indent=2) + "\n")
    elif (summary.get("source") or "softrt") == "softrt":
        console().print(render_summary(summary, str(path)))
    else:
        console().print(render_imported(summary, str(path)))
    return 0
