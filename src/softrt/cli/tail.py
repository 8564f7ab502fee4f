"""``softrt tail SOURCE``: how often will a cycle be late, and how long must the machine run to show
it? The tail model of a stored run or of data softrt did not record (CLI layer; issue 33).

The model is softrt.analysis.tail's (peaks over threshold, declustered, GPD by maximum
likelihood, profile-likelihood intervals, checks); what it reads is softrt.store.tailsource's.
A refusal is an answer (exit 0, the reason printed and in ``--json``); bad input is one line, exit 2.
"""

from __future__ import annotations

import sys

import click
from rich.text import Text

from ..analysis.require import parse_rate
from ..analysis.tail_text import tail_lines
from ..store.tailsource import TailOptions, describe, load_tail
from .history import DB_OPTION
from .render import console, emit


@click.command(
    "tail",
    epilog="""\b
Examples:
  softrt tail last                                 the newest run: its periods (a watch: its latency)
  softrt tail 20261130-071502 --target 1/week      how long to run to show at most one late cycle a week
  cyclictest -m -p80 -i250 -a1 -t1 -D10m -q -v > ct.txt
  softrt tail ct.txt --interval-us 250             late beyond 270 µs (--deadline-us to change)
  softrt tail oslat.json --deadline-us 50          a histogram (no time order: no declustering)
  softrt tail cycles.parquet --column period_us --deadline-us 270 --json
  softrt tail last --plot tail.png                 the return-level plot""",
)
@click.argument("source")
@click.option(
    "--deadline-us",
    type=float,
    default=None,
    help="A cycle beyond this is late [default: a run's late rule; for a latency file the interval + 20 µs, "
    "the period bound a late wake-up breaks].",
)
@click.option(
    "--threshold-us",
    type=float,
    default=None,
    help="The model's threshold [default: chosen by the parameter-stability rule].",
)
@click.option(
    "--gap-ms",
    type=float,
    default=10.0,
    show_default=True,
    help="Bursts end after this long without an exceedance (runs declustering).",
)
@click.option(
    "--target",
    default="1/year",
    show_default=True,
    help="The late rate to show, per h, day, week or year: how long to run is counted for it.",
)
@click.option(
    "--interval-us",
    type=float,
    default=250.0,
    show_default=True,
    help="The cycle of a cyclictest -v file, a column or a histogram (cyclictest's -i).",
)
@click.option("--column", default=None, help="The column of a CSV or Parquet file (per-cycle values in µs).")
@click.option("--thread", type=int, default=None, help="The thread of a cyclictest -v file [default: its first].")
@click.option("--json", "as_json", is_flag=True, help="Print the tail block as JSON (the summary's 'tail').")
@click.option("--plot", "plot_file", default=None, help="Write the return-level plot to this file (PNG, SVG).")
@DB_OPTION
def command(source, deadline_us, threshold_us, gap_ms, target, interval_us, column, thread, as_json, plot_file, db):
    """The tail model of SOURCE: a run id, last, a run directory, a cyclictest -v per-cycle file, a
    cyclictest/oslat --json result (histogram) or a CSV/Parquet file with --column.

    Prints the no-model bound (always), the fitted late rate and the worst cycle once an hour, day,
    week and year, each with its 95 % interval, the checks of the fit, and how much longer to run;
    or why the fit was refused (exit 0: a refusal is an answer)."""
    for name, value in (("--interval-us", interval_us), ("--gap-ms", gap_ms)):
        if not value > 0:
            raise click.BadParameter(f"must be positive, got {value:g}", param_hint=name)
    opts = TailOptions(
        deadline_us=deadline_us,
        threshold_us=threshold_us,
        gap_s=gap_ms / 1e3,
        target_per_h=parse_rate(target, "--target"),
        interval_us=interval_us,
        column=column,
        thread=thread,
    )
    fitted = load_tail(source, opts, db)
    tail = fitted.tail
    if plot_file:
        from ..report.tail_plot import write_return_level_plot

        write_return_level_plot(tail, plot_file, fitted.values_us, fitted.times_s)
    if as_json:
        sys.stdout.write(describe(tail))
    else:
        out = console()
        emit(out, Text("\n".join(tail_lines(tail))), soft_wrap=True)
        if plot_file:
            emit(out, Text(f"return-level plot: {plot_file}"), soft_wrap=True)
    return 0
