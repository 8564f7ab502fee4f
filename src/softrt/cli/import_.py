"""``softrt import FILE``: store a cyclictest or oslat ``--json`` result as a run (CLI layer)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from ..store.history import History, load_run_summary
from ..store.importers import SOURCES, default_import_dir, import_file
from .history import DB_OPTION
from .render import console, emit


def _fmt(value, spec: str) -> str:
    """Format *value* with *spec*; "-" for None (e.g. no latency from a run of 0 cycles)."""
    return "-" if value is None else format(value, spec)


@click.command("import")
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--format",
    "source",
    type=click.Choice(["auto", *SOURCES]),
    default="auto",
    show_default=True,
    help="The tool that wrote FILE (auto: read it from the file).",
)
@click.option("--scenario", default=None, help="Scenario name to store [default: the tool's name].")
@click.option(
    "--out-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Where the run directories go [default: $SOFTRT_HOME/imported or ~/.local/share/softrt/imported].",
)
@DB_OPTION
@click.option("--json", "as_json", is_flag=True, help="Print the imported runs' summaries as a JSON list.")
def command(files, source, scenario, out_dir, db, as_json):
    """Store cyclictest/oslat --json results as runs, to report them next to softrt's own.

    \b
    Example:
      cyclictest -m -p 90 -i 250 -h 400 -D 10m --json=ct.json && softrt import ct.json
    """
    history = History(db)
    out = console()
    summaries = []
    for file in files:
        path = import_file(
            file,
            out_dir if out_dir is not None else default_import_dir(),
            scenario=scenario,
            source=None if source == "auto" else source,
        )
        run_id = history.add_run(path)
        summary = load_run_summary(path)
        summaries.append(summary.to_dict())
        if not as_json:
            emit(
                out,
                f"imported {file} ({summary.origin}, {_fmt(summary.metrics.cycles, ',')} samples, "
                f"latency max {_fmt(summary.metrics.latency_us.max, ',.1f')} µs) as run {run_id} in {path}",
                markup=False,
                highlight=False,
                soft_wrap=True,
            )
    if as_json:
        click.echo(json.dumps(summaries, indent=2))
    return 0
