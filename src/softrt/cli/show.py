"""``softrt show RUN``: one stored run's tables, as ``softrt run`` printed them (CLI layer)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click
from rich.console import Group
from rich.table import Table
from rich.text import Text

from ..schema.summary import RunSummary
from ..store.history import load_run_summary, resolve_run
from ..store.running import run_state
from ..units import format_number as num
from .history import DB_OPTION
from .render import console, emit, render_summary
from .watch import render_thread


def _us(value: float | None) -> str:
    return "-" if value is None else num(value, 1)


def render_imported(summary: RunSummary, path: str) -> Group:
    """An imported cyclictest/oslat result: latency distribution per thread and overall."""
    cols = ("min", "mean", "p50", "p99", "p99.9", "p99.99", "max")
    # Everything from the file is a Text (never rich markup); strings are printable (schema.summary).
    table = Table(title=Text(f"{summary.origin} latency (µs)"), title_justify="left", show_edge=False)
    table.add_column("")
    for c in cols:
        table.add_column(c, justify="right")
    for t in summary.threads or []:
        table.add_row(
            Text(f"thread {t.thread} (CPU {t.cpu})"), _us(t.min_us), _us(t.mean_us), "", "", "", "", _us(t.max_us)
        )
    lat = summary.metrics.latency_us
    table.add_row(
        "all", *(_us(x) for x in (lat.min, lat.mean, lat.p50, lat.p99, lat.p99_9, lat.p99_99, lat.max)), style="bold"
    )
    cycles = summary.metrics.cycles
    lines = [f"Samples: {'-' if cycles is None else format(cycles, ',')}; command: {summary.config.cmdline or '?'}"]
    lines += [f"Note: {n}" for n in summary.notes or []]
    lines += [f"  applied: {a.what} ({a.detail})" for a in summary.tuning.applied]
    return Group(table, Text(""), Text("\n".join(lines)), Text(f"Run stored in {path}", style="dim"))


@click.command(
    "show",
    epilog="""\b
Examples:
  softrt show last                            the newest run (last~1: the one before)
  softrt show 20261130-071502 --json          a run id, or its shortest prefix from softrt history
  softrt show softrt-runs/20261130-071502-vm-e760""",
)
@click.argument("run")
@DB_OPTION
@click.option("--json", "as_json", is_flag=True, help="Print the run's summary.json.")
def command(run, db, as_json):
    """Print one run's tables: RUN is a run id (or a unique prefix) from softrt history, last (the
    newest run), last~N (N runs before it), or a run directory.

    A run in progress shows its last checkpoint (written every minute), and whether it still goes.
    """
    path = resolve_run(run, db)
    summary = load_run_summary(Path(path))
    if as_json:
        sys.stdout.write(json.dumps(summary.to_dict(), indent=2) + "\n")
    elif summary.origin == "softrt":
        notice = None
        if summary.running:  # a checkpoint: say whether the run still goes
            state = run_state(summary, run_dir=Path(path))
            notice = Text(state.sentence(), style="bold yellow" if state.running else "bold red")
        if summary.watch is not None:  # a thread softrt watch followed
            emit(console(), render_thread(summary, str(path), notice))
        else:
            emit(console(), render_summary(summary, str(path), notice))
    else:
        emit(console(), render_imported(summary, str(path)))
    return 0
