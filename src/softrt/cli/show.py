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
from ..store.running import run_state
from .history import DB_OPTION
from .render import console, render_summary


def _us(value: float | None) -> str:
    return f"{value:,.1f}" if isinstance(value, (int, float)) and not isinstance(value, bool) else "-"


def render_imported(summary: dict, path: str) -> Group:
    """An imported cyclictest/oslat result: latency distribution per thread and overall."""
    cols = ("min", "mean", "p50", "p99", "p99_9", "p99_99", "max")
    # Everything from the file is a Text (never rich markup); strings are printable (store.validate).
    table = Table(title=Text(f"{summary['source']} latency (µs)"), title_justify="left", show_edge=False)
    table.add_column("")
    for c in cols:
        table.add_column(c.replace("_", "."), justify="right")
    for t in summary.get("threads") or []:
        table.add_row(Text(f"thread {t.get('thread')} (CPU {t.get('cpu')})"), _us(t.get("min_us")),
                      _us(t.get("mean_us")), "", "", "", "", _us(t.get("max_us")))
    lat = summary.get("latency_us") or {}
    table.add_row("all", *(_us(lat.get(c)) for c in cols), style="bold")
    cfg = summary.get("config") or {}
    cycles = summary.get("cycles")
    lines = [f"Samples: {'-' if cycles is None else format(cycles, ',')}; command: {cfg.get('cmdline', '?')}"]
    lines += [f"Note: {n}" for n in summary.get("notes") or []]
    lines += [f"  applied: {a.get('what')} ({a.get('detail')})"
              for a in (summary.get("tuning") or {}).get("applied") or []]
    return Group(table, Text(""), Text("\n".join(lines)), Text(f"Run stored in {path}", style="dim"))


@click.command("show")
@click.argument("run")
@DB_OPTION
@click.option("--json", "as_json", is_flag=True, help="Print the run's summary.json.")
def command(run, db, as_json):
    """Print one run's tables: RUN is a run id (or a unique prefix) from softrt history, or a run directory.

    A run in progress shows its last checkpoint (written every minute), and whether it still goes.
    """
    path = resolve_run(run, db)
    summary = load_run_summary(Path(path))
    if as_json:
        sys.stdout.write(json.dumps(summary, indent=2) + "\n")
    elif (summary.get("source") or "softrt") == "softrt":
        if summary.get("status") == "running":  # a checkpoint: say whether the run still goes
            state = run_state(summary)
            console().print(Text(state.sentence(), style="bold yellow" if state.running else "bold red"))
        console().print(render_summary(summary, str(path)))
    else:
        console().print(render_imported(summary, str(path)))
    return 0
