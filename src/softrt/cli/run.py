"""``softrt run``: the seed's 250 µs motion test on this machine (CLI layer)."""

from __future__ import annotations

import dataclasses
import json
import sys

import click

from ..analysis.verdict import verdict_lines, verdict_of
from ..motion.config import MAX_AXES
from ..schema.config import RunConfig
from ..schema.summary import RunSummary
from ..session import interrupts
from ..session.config import disk_estimate
from ..session.run import run
from ..units import NS_PER_S
from ..units import format_number as num
from .history import remember
from .live import Watch
from .options import (
    dc_options,
    duration_option,
    kept_run_options,
    max_duration_option,
    out_dir_option,
    require_option,
    rt_cpu_options,
    time_option,
)
from .output import unless_gone
from .render import console, emit, render_summary

LONG_RUN_NS = 600 * NS_PER_S  # runs from 10 min on print what they keep and their disk use first


@click.command(
    "run",
    epilog="""\b
Examples:
  softrt run                                  10 s of the seed's 250 µs loop on the last CPU
  softrt run --duration 72h --max-duration 72h --samples late
  softrt run --wait sleep --period 1ms --json > summary.json
  softrt run --device ethercat:eth1 --axes 2  CiA 402 drives through SOEM""",
)
@time_option("--period", "250us", "Board cycle (a bare number is µs, like cyclictest -i).", unit="us")
@duration_option("How long to run (a bare number is seconds).")
@max_duration_option("Safety bound on --duration (72 h runs are normal; raise it for longer ones).")
@rt_cpu_options
@click.option(
    "--profile",
    type=click.Choice(["rt", "none"]),
    default="rt",
    show_default=True,
    help="rt: pin, real-time priority, memory locked (Linux: SCHED_FIFO, mlockall, cpu_dma_latency; "
    "Windows: REALTIME_PRIORITY_CLASS, TIME_CRITICAL, a locked working set, 1 ms timer); "
    "none: the seed's 'not tuned'.",
)
@click.option(
    "--wait",
    type=click.Choice(["spin", "sleep", "hybrid"]),
    default="spin",
    show_default=True,
    help="spin: poll the permit bit (the seed); sleep: clock_nanosleep (Windows: a high-resolution "
    "waitable timer) to the edge; hybrid: both.",
)
@time_option("--margin", "50us", "hybrid: wake this long before the edge, then spin.", unit="us")
@click.option(
    "--device",
    default="virtual",
    show_default=True,
    help="virtual (an ideal board), or ethercat:IFACE (CiA 402 drives via SOEM; needs softrt[ethercat]).",
)
@time_option(
    "--bus-timeout", "10ms", "EtherCAT: fail the run when no valid frame came back for this long (bus lost).", unit="ms"
)
@click.option(
    "--axes",
    type=int,
    default=1,
    show_default=True,
    help=f"Number of axes (1-{MAX_AXES}; EtherCAT: axes of all drives together, in bus order).",
)
@click.option(
    "--ecat-drives",
    "ecat_drives",
    default=None,
    metavar="FILE.toml",
    help="EtherCAT: a drive description (TOML) saying which PDOs to assign by SDO in PRE-OP "
    "[default: the CiA 402 CSP PDOs].",
)
@click.option(
    "--motion",
    "shape",
    type=click.Choice(["scurve", "trapezoid"]),
    default="scurve",
    show_default=True,
    help="Point-to-point profile shape.",
)
@click.option("--distance", type=float, default=None, help="Move distance, counts.")
@click.option("--velocity", type=float, default=None, help="Max velocity, counts/s.")
@click.option("--accel", type=float, default=None, help="Max acceleration, counts/s².")
@click.option("--jerk", type=float, default=None, help="Max jerk, counts/s³ (S-curve).")
@out_dir_option()
@click.option(
    "--check",
    "take_check",
    is_flag=True,
    help="Take a `softrt check` of the RT CPU first and store its verdict with the run.",
)
@require_option(
    "What the verdict judges, e.g. 'period.max<=300us,misses==0'; exit 1 when the run misses it "
    "[default: 0 missed updates and no period over nominal + --late-threshold].",
)
@dc_options
@kept_run_options
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON (progress goes to stderr).")
def command(
    period_ns,
    duration_ns,
    max_duration_ns,
    cpu,
    priority,
    profile,
    wait,
    margin_ns,
    device,
    bus_timeout_ns,
    axes,
    ecat_drives,
    shape,
    distance,
    velocity,
    accel,
    jerk,
    out_dir,
    take_check,
    require,
    dc_lock,
    dc_shift_ns,
    kept,
    watch,
    as_json,
):
    """Run the seed's cyclic motion test and measure every cycle."""
    from ..motion import MotionConfig

    limits = {
        k: v
        for k, v in (
            ("distance_counts", distance),
            ("velocity_counts_per_s", velocity),
            ("accel_counts_per_s2", accel),
            ("jerk_counts_per_s3", jerk),
        )
        if v is not None
    }
    motion = MotionConfig(axes=axes, shape=shape, **limits) if axes >= 1 else None
    config = RunConfig(
        period_ns=period_ns,
        duration_ns=duration_ns,
        cpu=cpu,
        priority=priority,
        profile=profile,
        wait=wait,
        margin_ns=margin_ns,
        device=device,
        bus_timeout_ns=bus_timeout_ns,
        axes=axes,
        motion=motion,
        out_dir=out_dir,
        max_duration_ns=max_duration_ns,
        check=take_check,
        require=require,
        dc_lock=dc_lock,
        dc_shift_ns=dc_shift_ns,
        ecat_drives=ecat_drives,
        **dataclasses.asdict(kept),
    )
    return _run_and_show(config, watch=watch, as_json=as_json, require=require)


def progress_line_final(summary: RunSummary, verdict: bool = False) -> str:
    """One line for a non-terminal stderr (CI logs): that the run ended, how, and where it is stored.

    The verdict is standard output's first line, so it is not repeated here, unless standard output
    holds ``--json`` (*verdict*): then this line carries it, in the words and units the tables use."""
    why = f" ({summary.partial_reason})" if summary.status != "complete" and summary.partial_reason else ""
    line = f"softrt run: {summary.status}{why}, {summary.metrics.cycles or 0:,} cycles, {summary.mode}"
    if verdict and (judged := verdict_of(summary)) is not None:
        line += f"; {verdict_lines(judged, state=summary.state)[0]}"
    return line


def _run_and_show(config: RunConfig, *, watch, as_json: bool, require: str | None) -> int:
    """Run *config*, store and print it, add it to the history; the command's exit status (1: the run
    stopped early or, with --require, missed the verdict)."""
    # From here on Ctrl-C, SIGTERM or SIGHUP (any number of them) stops the run, which is then
    # stored, printed and added to the history before the command exits 1.
    with interrupts.deferred(then_ignore=True):
        err = console(stderr=True)
        if config.duration_ns >= LONG_RUN_NS:  # before a long run: what it keeps and the disk it takes
            kept, need = disk_estimate(config)
            emit(err, f"softrt: keeping {kept} samples (--samples); estimated disk use ~{num(need / 1e6, 0)} MB")
        with unless_gone():  # a closed terminal (SIGHUP) stops the printing, never the storing
            with Watch(err, watch) as live:  # binds the metrics port first: taken → exit 2, nothing started
                result = run(config, on_progress=live.on_progress)
                live.finished(result.summary)
            remember([result.path])
            if as_json:
                sys.stdout.write(json.dumps(result.summary.to_dict(), indent=2) + "\n")
            else:
                emit(console(), render_summary(result.summary, str(result.path)))
            if live.mode == "plain":  # after the tables: in a log of both streams the verdict comes first
                emit(err, progress_line_final(result.summary, verdict=as_json), markup=False, soft_wrap=True)
            if result.summary.status == "complete" and interrupts.requested():
                emit(err, f"softrt: {interrupts.reason()} after the run had finished; the run is complete and stored")
        if result.summary.status == "complete" and interrupts.requested():
            return interrupts.exit_status()
        if result.summary.status != "complete":
            return 1
        # With --require the exit status follows the verdict (as softrt compare's gate does).
        verdict = result.summary.verdict
        return 1 if require is not None and (verdict is None or not verdict.meets) else 0
