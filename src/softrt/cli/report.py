"""``softrt report``: one self-contained HTML file for one or more runs (CLI layer)."""

from __future__ import annotations

from pathlib import Path

import click

from ..errors import ConfigError
from ..platform.outfile import is_stdout
from .fleet import filter_options, warn_unreadable
from .history import DB_OPTION
from .options import file_option
from .render import console, emit


def warn_left_out(err, broken: list[tuple[str, str]], what: str = "") -> None:
    """One warning line on *err* for each run a report left out (*broken*: its reference and why;
    *what*: what it was left out of, e.g. " of the report")."""
    for ref, message in broken:
        emit(
            err,
            f"softrt: warning: left out{what} {ref}: {message}",
            style="yellow",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )


@click.command(
    "report",
    epilog="""\b
Examples:
  softrt report last -o report.html
  softrt report last~3 last~2 last~1 last     the four runs of a softrt compare, overlaid
  softrt report softrt-runs/ --png plots/     every run in a directory
  softrt report --fleet lab.html --since 2026-03-01    every rig's trend, provenance changes marked""",
)
@click.argument("runs", nargs=-1)
@file_option(
    "-o",
    "--output",
    "output",
    default=Path("report.html"),
    allow_dash=True,
    help="The HTML file to write (- or /dev/stdout: standard output).",
)
@click.option(
    "--png",
    "png_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Also write every plot as a PNG into this directory.",
)
@file_option(
    "--fleet",
    "fleet_html",
    metavar="FILE.html",
    help="Write the lab's fleet page instead: each rig's trend with every provenance "
    "change marked (the filters of softrt fleet apply).",
)
@filter_options
@DB_OPTION
def command(runs, output, png_dir, fleet_html, rig, scenario, kernel, since, until, db):
    """Write an HTML report of RUNS (run ids from softrt history, last, last~N, run directories, or
    directories of runs).

    Several runs are overlaid in the same plots. The file needs nothing else to open: no network,
    no scripts. A run that cannot be read is left out with a note (exit status 1).
    """
    if fleet_html is not None:
        return _fleet(runs, fleet_html, db, rig=rig, scenario=scenario, kernel=kernel, since=since, until=until)
    if not runs:
        raise click.UsageError(
            "Missing argument 'RUNS...': give the runs to report (run ids, last, run directories), or --fleet FILE.html"
        )
    from ..report import build_report  # matplotlib: imported only when a report is made

    result = build_report(runs, output, png_dir, db=db)
    err = console(stderr=True)
    warn_left_out(err, result.broken)
    # The report on standard output (-o -): the line that says so goes to stderr, not into the HTML.
    done = err if is_stdout(output) else console()
    emit(
        done,
        f"Report of {len(result.runs)} run(s) written to {result.path}"
        + (f"; {len(result.pngs)} PNG(s) in {png_dir}" if png_dir is not None else ""),
        markup=False,
        highlight=False,
        soft_wrap=True,
    )
    return 1 if result.broken else 0


def _fleet(runs, fleet_html: Path, db, **filters) -> int:
    from ..platform.outfile import check_target
    from ..report.fleet import build_fleet_report
    from ..store.fleet import load_runs
    from ..store.history import History

    if runs:
        raise click.UsageError(
            "--fleet reports the history's rigs: give no RUNS (filter with --rig, --scenario, "
            "--kernel, --since, --until)"
        )
    check_target(fleet_html, "the fleet report", "choose another file with --fleet")  # before reading
    unreadable: list = []
    fleet = load_runs(History(db), unreadable=unreadable, **filters)
    warn_unreadable(unreadable)
    if not fleet:
        raise ConfigError("no run in the history matches", hint="see softrt fleet; loosen the filters")
    path = build_fleet_report(fleet, fleet_html)
    emit(
        console(),
        f"Fleet report of {len({r.rig for r in fleet})} rig(s), {len(fleet)} run(s) written to {path}",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )
    return 0
