"""Click parameter types shared by the commands (CLI layer)."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

import click

from ..cpus import CpuSet
from ..errors import ConfigError
from ..platform import RUNS_DIR_SHOWN, default_runs_dir
from ..schema.config import DEFAULT_THRESHOLD_TEXT, TRACE_MODES
from ..units import format_time_ns, parse_time_ns

#: ``--priority`` (run and compare): what it sets on each OS, as the run's "applied" lines state it
#: (Windows: platform.windows.realtime_level, tests/cli/test_options.py checks the figures).
PRIORITY_HELP = (
    "Real-time priority 1-99. Linux: SCHED_FIFO at this priority. Windows: a base priority in "
    "REALTIME_PRIORITY_CLASS, 16 + (N-1)×15/98 rounded: 1-4 → 16 (THREAD_PRIORITY_IDLE), 50 → 24, "
    "80 → 28, 96-99 → 31 (THREAD_PRIORITY_TIME_CRITICAL); the run's 'applied: thread_priority' "
    "line says which."
)


class TimeNs(click.ParamType):
    """A time such as ``250us`` or ``10s``, converted to integer nanoseconds (at most *max_ns*, if given)."""

    name = "time"

    def __init__(self, default_unit: str, max_ns: int | None = None) -> None:
        self.default_unit, self.max_ns = default_unit, max_ns

    def convert(self, value, param, ctx):
        if isinstance(value, int):
            return value
        what = param.opts[0] if param else "time"
        try:
            ns = parse_time_ns(value, default_unit=self.default_unit, what=what)
        except ConfigError as err:
            self.fail(str(err), param, ctx)
        if self.max_ns is not None and ns > self.max_ns:
            self.fail(f"{what} {value!r} is out of range (at most {format_time_ns(self.max_ns)})", param, ctx)
        return ns


class SignedTimeNs(TimeNs):
    """A time that may be negative (``-50us``), in integer nanoseconds."""

    def convert(self, value, param, ctx):
        if isinstance(value, str) and value.strip().startswith("-"):
            return -super().convert(value.strip()[1:], param, ctx)
        return super().convert(value, param, ctx)


class CpuList(click.ParamType):
    """A kernel cpulist such as ``1`` or ``2-3,6``."""

    name = "cpulist"

    def convert(self, value, param, ctx):
        if isinstance(value, CpuSet):
            return value
        try:
            return CpuSet.parse(value)
        except ConfigError as err:
            self.fail(str(err), param, ctx)


def time_option(
    flag: str,
    default: str | None,
    help: str | None = None,
    *,
    unit: str,
    dest: str | None = None,
    max_ns: int | None = None,
    signed: bool = False,
):
    """A time option such as ``--period 250us``: parsed to integer ns (a bare number is *unit*) into the
    parameter *dest* [default: the flag's name + ``_ns``, as the units-in-names rule wants]; its
    default is shown in ``--help`` when it has one."""
    name = dest or flag.lstrip("-").replace("-", "_") + "_ns"
    kind = SignedTimeNs(unit, max_ns) if signed else TimeNs(unit, max_ns)
    return click.option(flag, name, type=kind, default=default, show_default=default is not None, help=help)


def duration_option(help: str):
    """``--duration`` (a bare number is seconds; 10 s by default), with the command's own *help*."""
    return time_option("--duration", "10s", help, unit="s")


def max_duration_option(help: str):
    """``--max-duration``: the safety bound on ``--duration`` (7 days by default), with *help*."""
    return time_option("--max-duration", "7d", help, unit="s")


def require_option(help: str):
    """``--require``: what the verdict judges (analysis.require's syntax), with the command's *help*."""
    return click.option("--require", "require", default=None, help=help)


def file_option(
    *decls: str, help: str, default: Path | None = None, metavar: str | None = None, allow_dash: bool = False
):
    """An option naming a file to write (not a directory; *allow_dash*: ``-`` is standard output)."""
    return click.option(
        *decls,
        type=click.Path(dir_okay=False, allow_dash=allow_dash, path_type=Path),
        default=default,
        show_default=default is not None,
        metavar=metavar,
        help=help,
    )


def rt_cpus_option(example: str):
    """``--rt-cpus`` (check and tune): the real-time CPU list, *example* shown as the first sample."""
    return click.option(
        "--rt-cpus",
        type=CpuList(),
        default=None,
        help=f"Real-time CPU(s), e.g. {example} or 2-3 [default: the CPU softrt run uses, the highest online "
        "one (P-core on a hybrid CPU)].",
    )


def out_dir_option(each: str = ""):
    """``--out-dir``: where run directories are written (*each*: how many, e.g. " (one per thread)")."""
    return click.option(
        "--out-dir",
        type=click.Path(file_okay=False, path_type=Path),
        default=default_runs_dir,
        help=f"Where run directories are written{each} [default: {RUNS_DIR_SHOWN}].",
    )


def root_option(help: str):
    """``--root``: read /proc and /sys under this directory (a captured tree), with *help*."""
    return click.option(
        "--root", default="/", show_default=True, type=click.Path(exists=True, file_okay=False), help=help
    )


def rt_cpu_options(f):
    """``--cpu`` and ``--priority``: where and at what priority the loop runs (run and compare)."""
    f = click.option("--priority", type=int, default=80, show_default=True, help=PRIORITY_HELP)(f)
    return click.option(
        "--cpu",
        type=int,
        default=None,
        help="RT CPU [default: the highest-numbered online CPU (P-core on a hybrid CPU)].",
    )(f)


def dc_options(f):
    """``--dc-lock``, ``--dc-shift`` (EtherCAT with distributed clocks; docs/ethercat.md)."""
    f = time_option(
        "--dc-shift",
        "0us",
        "With --dc-lock: where the frame meets the drives' cycle, after SYNC0 (negative: before; bare number: µs).",
        unit="us",
        signed=True,
    )(f)
    f = click.option(
        "--dc-lock",
        is_flag=True,
        help="EtherCAT: phase-lock the host's cycle to the drives' SYNC0 (distributed clocks).",
    )(f)
    return f


def trace_options(f):
    """``--trace/--no-trace``, ``--trace-mode``, ``--late-threshold``, ``--keep-late`` (run and compare;
    docs/trace.md)."""
    f = click.option(
        "--keep-late",
        type=int,
        default=100,
        show_default=True,
        help="Late cycles kept in the summary with their causes (the worst ones).",
    )(f)
    f = time_option(
        "--late-threshold",
        DEFAULT_THRESHOLD_TEXT,
        "A cycle is late when its period exceeds the nominal one by more (bare number: µs).",
        unit="us",
    )(f)
    f = click.option(
        "--trace-mode",
        type=click.Choice(list(TRACE_MODES)),
        default="auto",
        show_default=True,
        help="What the trace records: full; lean (no timer interrupt or wake-up: a sleeping loop's wake-up "
        "pays ~0.6 µs instead of ~1.9 µs, and the timer, the exit from idle and the switch are one cause); "
        "auto: lean for --wait sleep, else full.",
    )(f)
    f = click.option(
        "--trace/--no-trace",
        default=True,
        show_default=True,
        help="Trace the RT CPU (tracefs) and explain every late cycle.",
    )(f)
    return f


def samples_option(f):
    """``--samples all|late`` (run and compare; docs/run-format.md, "Files of a late run")."""
    return click.option(
        "--samples",
        type=click.Choice(["all", "late"]),
        default=None,
        help="Keep every cycle (all) or the late cycles with their context and per-second "
        "aggregates (late) [default: late for runs longer than 1 h, else all].",
    )(f)


@dataclass(frozen=True)
class WatchOptions:
    """What to show and serve while a run goes (cli/live.py)."""

    quiet: bool = False
    metrics_port: int | None = None
    metrics_addr: str = "127.0.0.1"
    metrics_linger_ns: int = 0  # the command line's default is 30 s (watch_options)


def watch_options(f):
    """``--quiet``, ``--metrics-port``, ``--metrics-addr``, ``--metrics-linger`` (run and compare;
    docs/metrics.md), passed to the command as one ``watch`` argument (a :class:`WatchOptions`)."""

    @functools.wraps(f)
    def command(*args, quiet, metrics_port, metrics_addr, metrics_linger_ns, **kwargs):
        return f(*args, watch=WatchOptions(quiet, metrics_port, metrics_addr, metrics_linger_ns), **kwargs)

    command = time_option(
        "--metrics-linger",
        "30s",
        "With --metrics-port: keep serving the final figures and state this long after the command is "
        "done, so a scraper records them (0: close at once; Ctrl-C ends it).",
        unit="s",
    )(command)
    command = click.option(
        "--metrics-addr",
        default="127.0.0.1",
        show_default=True,
        help="Address the metrics endpoint listens on (0.0.0.0: every interface).",
    )(command)
    command = click.option(
        "--metrics-port",
        type=click.IntRange(0, 65535),
        default=None,
        help="Serve Prometheus metrics on this port while it runs (0: any free port; docs/metrics.md).",
    )(command)
    return click.option("--quiet", "-q", is_flag=True, help="No live view or progress lines.")(command)


@dataclass(frozen=True)
class KeptRun:
    """How a run is traced and what it keeps (run and compare): :class:`~softrt.schema.config.RunConfig`'s
    fields of the same names, so ``RunConfig(..., **dataclasses.asdict(kept))``."""

    trace: bool
    trace_mode: str
    late_threshold_ns: int
    keep_late: int
    samples: str | None


def _kept(f):
    """Pass the tracing and samples options to the command as one ``kept`` argument (a :class:`KeptRun`)."""

    @functools.wraps(f)
    def command(*args, trace, trace_mode, late_threshold_ns, keep_late, samples, **kwargs):
        return f(*args, kept=KeptRun(trace, trace_mode, late_threshold_ns, keep_late, samples), **kwargs)

    return command


def kept_run_options(f):
    """The options of the commands that run the loop and keep its runs (run and compare), in this
    order: tracing (:func:`trace_options`) and the samples kept (one ``kept`` argument), the live view
    and metrics (:func:`watch_options`, one ``watch`` argument) and the lab's database
    (cli.history.lab_options)."""
    # Imported here: cli.history brings rich, which ecat-sim (it imports this module) must start without.
    from .history import lab_options

    return trace_options(samples_option(_kept(watch_options(lab_options(f)))))
