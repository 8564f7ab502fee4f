"""``softrt fleet``: one row per rig of the lab's history; ``--regressions``: what change broke which rig (CLI layer).

Every label, host name and kernel shown comes from rows other rigs wrote: it is printed as plain
text (rich ``Text``, never markup) after :func:`softrt.schema.text.printable`, so a label cannot
style the terminal or forge a line.
"""

from __future__ import annotations

import json
import sys

import click
from rich import box
from rich.table import Table
from rich.text import Text

from ..schema.text import printable
from ..store.fleet import TREND_RUNS, FleetRow, fleet_rows, jsonable, load_runs
from ..store.history import History
from ..store.regressions import Regressions
from .history import DB_OPTION
from .render import console, emit

FILTERS = (
    click.option("--rig", default=None, help="Only this rig (its id, label or host name)."),
    click.option("--scenario", default=None, help="Only runs of this scenario."),
    click.option("--kernel", default=None, help="Only runs on this kernel release (uname -r)."),
    click.option("--since", default=None, help="Only runs started at or after this date/time (UTC), e.g. 2026-11-01."),
    click.option("--until", default=None, help="Only runs started up to this date (inclusive) or time (UTC)."),
)


def filter_options(f):
    for option in reversed(FILTERS):
        f = option(f)
    return f


def warn_unreadable(unreadable: list) -> None:
    """One line for the rows left out (their stored summaries could not be read)."""
    if unreadable:
        shown = ", ".join(run_id for run_id, _ in unreadable[:3]) + (", …" if len(unreadable) > 3 else "")
        emit(
            console(stderr=True),
            Text(
                f"softrt: warning: {len(unreadable)} run(s) left out, their stored summary "
                f"unreadable ({shown}): {printable(unreadable[0][1])[:200]}",
                style="yellow",
            ),
            soft_wrap=True,
        )


def _us(value: float | None) -> str:
    return "—" if value is None else f"{value:,.1f}"


def _per_h(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def _rate(row: FleetRow) -> str:
    rate = row.late_rate_per_h
    if rate and rate.estimate is not None:
        low, high = rate.low, rate.high
        interval = f" [{_per_h(low)}, {_per_h(high)}]" if low is not None and high is not None else ""
        return f"{_per_h(rate.estimate)}/h{interval}"
    if rate and rate.bound is not None:
        return f"≤ {_per_h(rate.bound)}/h (95 %, no model); worst {_us(row.worst_period_us)} µs"
    return f"worst {_us(row.worst_period_us)} µs"


def fleet_table(rows: list[FleetRow]) -> Table:
    table = Table(box=box.SIMPLE_HEAD, show_edge=False)
    for name in (
        "rig",
        "CPU",
        "kernel",
        "last run",
        "verdict",
        "late rate / worst",
        f"trend (last {TREND_RUNS} worst, µs)",
    ):
        table.add_column(name, overflow="fold")
    for row in rows:
        trend = " ".join(_us(v) for v in row.trend_worst_period_us)
        verdict = row.verdict or "—"
        table.add_row(
            Text(printable(row.label)),
            Text(printable(row.cpu or "—")),
            Text(printable(row.kernel or "—")),
            Text(f"{printable(row.last_run)} ({printable(row.scenario)})"),
            Text(verdict, style="green" if verdict == "pass" else "red" if verdict == "fail" else ""),
            Text(_rate(row)),
            Text(f"{row.trend} {trend}"),
        )
    return table


def regressions_text(found: Regressions) -> list[Text]:
    lines = []
    for e in found.regressions:
        worse = ", ".join(
            f"{f.name} {_us(f.after)}{f.unit and ' ' + f.unit} (before: median "
            f"{_us(f.noise.median)}, range {_us(f.noise.spread)}, {f.noise.n} runs)"
            for k, f in e.figures.items()
            if k in e.worse
        )
        change = "; ".join(f"{k}: {printable(v.before)} → {printable(v.after)}" for k, v in e.change.items())
        lines.append(
            Text(
                f"{printable(e.label)} ({printable(e.rig)}), {printable(e.scenario)}: worse after "
                f"{change or 'no recorded change'}\n  last good {printable(e.last_good.run_id)}, first "
                f"bad {printable(e.first_bad.run_id)} ({e.runs_after} run(s) since): {worse}"
            )
        )
    if found.kernels:
        lines.append(
            Text(
                "Kernels by rigs made worse: "
                + "; ".join(f"{printable(k.kernel)}: {k.rigs_worse} of {k.rigs_tested}" for k in found.kernels)
            )
        )
    return lines


@click.command(
    "fleet",
    epilog="""\b
Examples:
  softrt fleet --db postgresql://lab@lab-db/softrt
  softrt fleet --kernel 6.18.9-rt --since 2026-03-01 --json
  softrt fleet --regressions        exit status 1 when a change made a rig worse
  softrt report --fleet lab.html    the same rigs' trends, each provenance change marked""",
)
@DB_OPTION
@filter_options
@click.option(
    "--regressions",
    is_flag=True,
    help="List each rig and scenario where a provenance change (kernel, BIOS, microcode, cmdline, "
    "tuning, NIC) was followed by figures worse beyond the rig's own noise.",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def command(db, rig, scenario, kernel, since, until, regressions, as_json):
    """One row per rig in the history: its label, CPU, kernel, last run and verdict, the late rate with its
    interval (where the run has a tail model, else the worst cycle), and the trend of its worst periods."""
    unreadable: list = []
    runs = load_runs(
        History(db), rig=rig, scenario=scenario, kernel=kernel, since=since, until=until, unreadable=unreadable
    )
    warn_unreadable(unreadable)
    if regressions:
        from ..store.regressions import find

        found = find(runs)
        if as_json:
            sys.stdout.write(json.dumps(jsonable(found), indent=2) + "\n")
        else:
            lines = regressions_text(found) or [
                Text("No regression: no provenance change was followed by figures worse beyond the rig's noise.")
            ]
            if found.changes_with_unknown_noise:
                lines.append(
                    Text(
                        f"{found.changes_with_unknown_noise} change(s) not judged: fewer than 3 runs "
                        "before them with one provenance (noise unknown).",
                        style="dim",
                    )
                )
            for line in lines:
                emit(console(), line, soft_wrap=True)
        return 1 if found.regressions else 0
    rows = fleet_rows(runs)
    if as_json:
        sys.stdout.write(json.dumps(jsonable(rows), indent=2) + "\n")
    elif rows:
        emit(console(), fleet_table(rows))
    else:
        emit(
            console(stderr=True),
            Text(
                "No runs match in the history. Runs are stored by softrt run, compare and "
                "import, or with softrt history add DIR."
            ),
            soft_wrap=True,
        )
    return 0
