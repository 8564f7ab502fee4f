"""``softrt compare``: the seed's three experiments (and its caveat) side by side (CLI layer)."""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Callable
from pathlib import Path

import click
from rich.table import Table
from rich.text import Text

from ..analysis.require import parse_requirements
from ..platform.outfile import check_target
from ..report.rows import TIMING_ROWS
from ..scenario import BUILTIN_NAMES, load_scenario
from ..scenario.compare import compare, overall, plan
from ..schema.compare import Pooled
from ..schema.config import RunConfig
from ..schema.summary import Metrics, Misses
from ..session import interrupts
from ..units import format_number as num
from .history import remember
from .live import Watch
from .options import (
    duration_option,
    file_option,
    kept_run_options,
    out_dir_option,
    require_option,
    rt_cpu_options,
    time_option,
)
from .output import unless_gone
from .render import console, emit, loads_text, verdict_text


def _f(value, digits=1):
    return num(value, digits)


def _count(value: int | None) -> str:
    return "-" if value is None else f"{value:,}"


def _timing(figure: Callable[[Metrics], float | None], digits: int) -> Callable[[Pooled], str]:
    return lambda f: _f(figure(f.metrics), digits)


def compare_table(pooled: dict[str, Pooled]) -> Table:
    """Side-by-side figures, one column per scenario, in the seed's terms first."""
    table = Table(title="softrt compare (µs unless noted)", title_justify="left", show_edge=False)
    table.add_column("")
    for name in pooled:
        table.add_column(name, justify="right")
    no_misses = Misses()
    rows = [
        *((label, _timing(figure, digits)) for label, figure, digits in TIMING_ROWS),
        ("latency p99.9", lambda f: _f(f.metrics.latency_us.p99_9)),
        ("missed updates", lambda f: _count((f.metrics.misses or no_misses).missed_updates)),
        ("longest miss run", lambda f: _count((f.metrics.misses or no_misses).longest_miss_run)),
        ("max deviation (counts)", lambda f: _f(f.motion.max_deviation_counts)),
        ("max velocity step (counts/s)", lambda f: _f(f.motion.max_velocity_step_counts_per_s, 0)),
        ("cycles", lambda f: _cycles(f.metrics)),
        ("mode", lambda f: ", ".join(f.modes) + (f" (partial rounds {f.partial})" if f.partial else "")),
    ]
    for label, get in rows:
        table.add_row(label, *(get(f) for f in pooled.values()))
    return table


def _cycles(m) -> str:
    """The cycles the figures come from; "2,560 of 8,000" when the ring dropped records."""
    if m.records_missing and m.records_expected:
        return f"{_count(m.cycles)} of {m.records_expected:,}"
    return _count(m.cycles)


def dropped_text(pooled: dict[str, Pooled]) -> Text | None:
    """A note for each scenario whose figures lack records the ring dropped."""
    lines = [
        f"{name}: {f.metrics.cycles or 0:,} of {f.metrics.records_expected:,} cycles shown: "
        f"{f.metrics.records_missing:,} records were dropped by the ring (its misses are the board's count)"
        for name, f in pooled.items()
        if f.metrics.records_missing and f.metrics.records_expected
    ]
    return Text("\n".join(lines), style="yellow") if lines else None


def verdicts_text(pooled: dict[str, Pooled]) -> Text:
    """The verdict of each scenario (its pooled rounds), then the overall one: what compare prints first."""
    out = Text()
    for name, f in pooled.items():
        if (text := verdict_text(f.verdict, prefix=f"{name}: ", tail=f.tail)) is not None:
            out.append_text(text)
            out.append("\n")
    if (line := overall(pooled)) is not None:
        out.append(line, style="bold")
    return out


def pooled_loads_text(pooled: dict[str, Pooled]) -> Text:
    """What every load achieved over the rounds (so a reader sees the load was real), FAILED when it
    achieved nothing, or why it was skipped; each with its problems."""
    out = Text()
    for name, f in pooled.items():
        out.append_text(loads_text(f.loads, f"{name}: "))
    return out


@click.command(
    "compare",
    epilog="""\b
Examples:
  softrt compare                              untuned, tuned, tuned+load, tuned+load-on-rt-cpus
  softrt compare tuned tuned+load --duration 30s --repeat 3 --require 'period.max<=300us,misses==0'""",
)
@click.argument("scenarios", nargs=-1)
@duration_option("Measurement time per scenario and round (a scenario file may set its own).")
@click.option(
    "--repeat",
    type=int,
    default=1,
    show_default=True,
    help="Rounds; scenarios alternate A B C D A B C D … to cancel drift.",
)
@require_option(
    "What every scenario's verdict judges, e.g. 'period.max<=300us,misses==0'; a gate for tuned "
    "scenarios (exit 1 when one misses it) [default verdict: 0 missed updates and no period over "
    "nominal + --late-threshold].",
)
@time_option("--period", "250us", unit="us")
@rt_cpu_options
@click.option("--load-backend", type=click.Choice(["auto", "stress-ng", "builtin"]), default="auto", show_default=True)
@time_option("--settle", "1s", "Time the loads run before the measurement starts.", unit="s")
@out_dir_option()
@kept_run_options
@click.option("--json", "as_json", is_flag=True, help="Print the comparison as JSON.")
@file_option(
    "--report",
    "report_html",
    allow_dash=True,
    metavar="FILE.html",
    help="Also write the HTML report of the comparison: the scenarios side by side "
    "with their verdicts, every plot (docs/report.md).",
)
def command(
    scenarios,
    duration_ns,
    repeat,
    require,
    period_ns,
    cpu,
    priority,
    load_backend,
    settle_ns,
    out_dir,
    kept,
    watch,
    as_json,
    report_html,
):
    """Run scenarios side by side [default: untuned tuned tuned+load tuned+load-on-rt-cpus].

    A SCENARIO is a built-in name or the path of a TOML file (see docs/scenarios.md).
    """
    requirements = parse_requirements(require) if require is not None else []
    if report_html is not None:
        check_target(report_html, "the report", "choose another file with --report")  # before anything runs
    chosen = [load_scenario(s) for s in (scenarios or BUILTIN_NAMES)]
    base = RunConfig(
        period_ns=period_ns,
        duration_ns=duration_ns,
        cpu=cpu,
        priority=priority,
        out_dir=out_dir,
        require=require,
        **dataclasses.asdict(kept),
    )
    planned = plan(chosen, base, load_backend)
    # Ctrl-C, SIGTERM or SIGHUP (any number of them) stops the running scenario; every scenario that
    # finished is already in the history, and the comparison so far is printed before the command exits 1.
    status = 1  # a terminal gone (SIGHUP) before the comparison ended: its runs so far are stored
    with interrupts.deferred(then_ignore=True):
        err = console(stderr=True)
        with unless_gone():  # a closed terminal stops the printing, never the storing
            with Watch(err, watch, title="softrt compare") as live:  # one metrics endpoint, labels per scenario
                result = compare(
                    planned,
                    repeat=repeat,
                    backend=load_backend,
                    requirements=requirements,
                    settle_s=settle_ns / 1e9,
                    on_event=lambda msg: live.say(f"softrt compare: {msg}"),
                    on_run=lambda r: (remember([r.result.path]), live.finished(r.result.summary)),
                    on_progress=live.on_progress,
                )
            late = not result.interrupted and interrupts.requested()  # a signal after every scenario had run
            status = interrupts.exit_status() if late else 0 if result.passed else 1
            if as_json:
                sys.stdout.write(json.dumps(result.doc().to_dict(), indent=2) + "\n")
            else:
                _print(result, repeat, out_dir)
            if result.interrupted:
                emit(
                    err,
                    f"softrt compare: {interrupts.reason()} after {len(result.runs)} of "
                    f"{repeat * len(planned)} scenario runs; the runs so far are stored",
                )
            elif late:
                emit(err, f"softrt compare: {interrupts.reason()} after every scenario had run; they are stored")
            if report_html is not None and result.runs:
                _write_report(result, report_html, err)
    return status


def _print(result, repeat: int, out_dir: Path) -> None:
    out = console()
    emit(out, verdicts_text(result.pooled), end="\n\n")
    emit(out, compare_table(result.pooled))
    if (dropped := dropped_text(result.pooled)) is not None:
        emit(out, dropped)
    if repeat > 1:
        emit(out, _rounds_table(result))
    emit(out, pooled_loads_text(result.pooled))
    for line in result.verdict:
        emit(out, line, style="bold")
    for check in result.checks:
        line = Text("pass", style="green") if check.passed else Text("FAIL", style="red")
        line.append(f" {check.scenario}: {check.requirement} (measured {_f(check.measured, 2)})")  # never markup
        emit(out, line)
    emit(
        out, Text(f"Runs stored in {out_dir}: " + ", ".join(r.result.summary.run_id for r in result.runs), style="dim")
    )


def _write_report(result, path: Path, err) -> None:
    """``--report``: the HTML report of every scenario run, with the comparison's verdict lines."""
    from ..report import build_report  # matplotlib: imported only when a report is made
    from .report import warn_left_out

    report = build_report([r.result.path for r in result.runs], path, comparison=result.verdict, option="--report")
    warn_left_out(err, report.broken, " of the report")
    emit(
        err,
        f"softrt compare: report of {len(report.runs)} run(s) written to {report.path}",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )


def _rounds_table(result) -> Table:
    table = Table(title="Worst period per round (µs)", title_justify="left", show_edge=False)
    table.add_column("round")
    names = list(result.pooled)
    for name in names:
        table.add_column(name, justify="right")
    rounds = sorted({r.round for r in result.runs})
    for rnd in rounds:
        cells = {r.scenario.name: _f(r.result.summary.metrics.period_us.max) for r in result.runs if r.round == rnd}
        table.add_row(str(rnd), *(cells.get(n, "-") for n in names))
    return table
