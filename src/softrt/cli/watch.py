"""``softrt watch``: measure and explain the late cycles of any thread, without changing it (CLI layer;
docs/watch.md)."""

from __future__ import annotations

import json
import sys

import click
from rich.console import Group
from rich.table import Table
from rich.text import Text

from ..platform.outfile import check_target
from ..schema.config import DEFAULT_THRESHOLD_TEXT, TRACE_MODES
from ..schema.summary import RunSummary
from ..schema.watch_report import WatchReport, WatchRow
from ..session import interrupts
from ..session.watch import WatchConfig, WatchResult
from ..session.watch import watch as watch_threads
from ..session.watch_targets import Target
from ..units import format_number as num
from .history import lab_options, remember
from .live import Watch
from .options import (
    duration_option,
    file_option,
    max_duration_option,
    out_dir_option,
    samples_option,
    time_option,
    watch_options,
)
from .render import console, emit, percentile_table, tail_text, verdict_head, why_late

#: How a thread waits (schema.watch.WAITS), said plainly.
WAITS = {
    "timer": "sleeps on a timer",
    "polls": "polls: it never blocked during the watch, so it has no requested wake-up to measure against; "
    "what can be measured is who preempted it, below",
    "sleeps": "sleeps without a timer (woken by other threads or by I/O), so it has no requested wake-up to "
    "measure against; what can be measured is who preempted it, below",
    "idle": "did not run during the watch",
}
TIMERS = {
    "hrtimer_wakeup": "clock_nanosleep, nanosleep, or a select/poll/epoll/futex timeout",
    "timerfd_tmrproc": "timerfd",
    "posix_timer_fn": "a POSIX timer",
    "it_real_fn": "setitimer",
}
#: The loop's words in the attribution's lines, for a watched thread (render.why_late).
TERMS = {
    "missed": "skipped",
    "permit": "return to user space",
    "edge": "expiry",
    " worker": " thread",
    "the loop's": "the thread's",
}
CAPTION = (
    "worst: the longest period, latency and run time; the shortest slack (the next expiry minus when it "
    "blocked; negative: still running at its next expiry, an overrun)"
)


def _us(value: float | None) -> str:
    return "-" if value is None else num(value, 1)


def thread_head(summary: RunSummary) -> Text:
    """Which thread, how it waits, and its period."""
    w = summary.watch
    t = w.thread
    ran = ", ".join(str(c) for c in w.cpus) or "-"
    out = Text(
        f"{t.comm} (pid {t.pid}, tid {t.tid}) · {t.policy} {t.priority} · CPUs allowed {t.cpus_allowed}, ran on {ran}",
        style="bold",
    )
    waits = WAITS.get(w.waits or "", w.waits or "?")
    if w.timers:
        waits += " (" + "; ".join(f"{TIMERS.get(k, k)}: {n:,} cycles" for k, n in w.timers.items()) + ")"
    out.append(f"\nIt {waits}.", style="")
    if w.timer_slack_us:
        out.append(
            f"\nIts timers may fire up to {num(w.timer_slack_us, 1)} µs late (its timer slack: SCHED_OTHER's "
            "default is 50 µs, prctl(PR_SET_TIMERSLACK); real-time threads have none): the latency counts "
            "from the wake-up it asked for, so it includes that.",
            style="yellow",
        )
    period = summary.period_ns
    if w.waits == "timer" and period:
        if w.period_expected_us is None:
            out.append(f"\nPeriod: {num(period / 1e3, 1)} µs, its own (the median step of its requested wake-ups)")
        else:
            verdict = "agrees" if w.period_agrees else "DIFFERS"
            out.append(
                f"\nPeriod: expected {num(w.period_expected_us, 1)} µs (--period), observed "
                f"{_us(w.period_observed_us)} µs: {verdict}",
                style="" if w.period_agrees else "bold red",
            )
    return out


def preemptions(summary: RunSummary, top: int = 8) -> Group:
    """Its involuntary preemptions and who held its CPU meanwhile."""
    w = summary.watch
    line = Text(
        f"Preemptions (switched out while runnable): {w.preemptions or 0:,}, {_us(w.preempted_us)} µs in "
        f"all, the longest {_us(w.longest_preemption_us)} µs"
    )
    if not w.preemptors:
        return Group(line)
    table = Table(title="Who held its CPU meanwhile", title_justify="left", show_edge=False)
    for col in ("thread", "preemptions", "total µs", "worst µs"):
        table.add_column(col, justify="left" if col == "thread" else "right")
    for p in w.preemptors[:top]:
        detail = f", {p.detail}" if p.detail else ""
        table.add_row(Text(f"{p.comm} (pid {p.pid}{detail})"), f"{p.times or 0:,}", _us(p.total_us), _us(p.worst_us))
    return Group(line, table)


def cost_line(summary: RunSummary) -> Text | None:
    """What the watch cost: trace events a second, lost, the reader's and the attribution's CPU."""
    why = summary.why_late
    trace = why.trace if why is not None else None
    if trace is None or not trace.traced_s:
        return None
    secs = trace.traced_s
    return Text(
        f"Watch cost: {num((trace.events_read or 0) / secs, 0)} trace events/s, {trace.lost_events or 0:,} "
        f"lost; the reader used {num(100 * (trace.consumer_cpu_s or 0) / secs, 0, grouping=False)} % and the "
        "attribution "
        f"{num(100 * (trace.attribution_cpu_s or 0) / secs, 0, grouping=False)} % of a CPU",
        style="dim",
    )


def render_thread(summary: RunSummary, path: str | None = None, notice: Text | None = None) -> Group:
    """One watched thread: what ``softrt watch`` (and ``softrt show``) prints for its run, its verdict
    first as a run's (then *notice*, e.g. whether a checkpoint's watch still goes)."""
    w = summary.watch
    m = summary.metrics
    parts: list = [*verdict_head(summary, notice), thread_head(summary)]
    if m.cycles:
        misses = m.misses
        parts += [
            Text(""),
            percentile_table(summary, process="run time", caption=CAPTION),
            Text(
                f"Cycles: {m.cycles:,}; overruns (still running at its next expiry): "
                f"{misses.overruns if misses else 0:,}; expiries skipped: "
                f"{misses.missed_updates if misses else 0:,}; sleeps ended before their timer: "
                f"{w.woken_early or 0:,}"
            ),
        ]
        if (why := why_late(summary, terms=TERMS)) is not None:
            parts += [Text(""), why]
        if (tail := tail_text(summary)) is not None:
            parts += [Text(""), tail]
    if (cost := cost_line(summary)) is not None:
        parts.append(cost)
    if w.waits != "timer" or not m.cycles:
        parts += [Text(""), preemptions(summary)]
    status = Text("Watch: ", style="bold")
    if summary.running:
        status.append(f"RUNNING (the figures of the first {num(summary.elapsed_s or 0, 0)} s)", style="bold yellow")
    elif summary.state != "complete":
        status.append(f"{summary.state.upper()}: {summary.partial_reason}", style="bold red")
    else:
        status.append(f"{num(summary.elapsed_s or 0, 1)} s, complete; softrt changed nothing on the thread")
    for item in summary.tuning.applied:
        status.append(f"\n  applied: {item.what} ({item.detail})")
    for change in summary.tuning.system_changes:
        state = "restored" if change.restored else f"NOT RESTORED: {change.note}"
        status.append(f"\n  system change: {change.path} {change.before} -> {change.during} ({state})")
    parts.append(status)
    if path:
        parts.append(Text(f"Run stored in {path}", style="dim"))
    return Group(*parts)


def overview(result: WatchResult) -> Table:
    """A row per thread (several threads watched)."""
    table = Table(title="Threads watched (µs)", title_justify="left", show_edge=False)
    for col in ("thread", "waits", "cycles", "latency p50", "p99", "max", "late"):
        table.add_column(col, justify="left" if col in ("thread", "waits") else "right")
    for summary, _path in result.runs:
        w, m = summary.watch, summary.metrics
        why = summary.why_late
        table.add_row(
            Text(f"{w.thread.comm} {w.thread.tid}"),
            w.waits or "-",
            f"{m.cycles or 0:,}",
            _us(m.latency_us.p50),
            _us(m.latency_us.p99),
            _us(m.latency_us.max),
            f"{why.late_cycles:,}" if why and why.late_cycles is not None else "-",
        )
    return table


def report_of(result: WatchResult) -> WatchReport:
    """``--json``: a row per thread."""
    rows = []
    for summary, path in result.runs:
        m = summary.metrics
        why = summary.why_late
        rows.append(
            WatchRow.build(
                run_id=summary.run_id,
                path=str(path),
                status=summary.status,
                partial_reason=summary.partial_reason,
                thread=summary.watch.thread,
                waits=summary.watch.waits,
                cycles=m.cycles or 0,
                late_cycles=why.late_cycles if why else None,
                overruns=m.misses.overruns if m.misses else None,
                skipped=m.misses.missed_updates if m.misses else None,
                latency_us=m.latency_us,
                period_us=m.period_us,
                runtime_us=m.process_us,
                watch=summary.watch,
                why_late=why,
            )
        )
    return WatchReport.build(threads=rows, duration_s=result.duration_s, ended_early=result.ended_early)


@click.command(
    "watch",
    epilog="""\b
Examples:
  softrt watch --comm cyclictest              10 s of every thread named cyclictest
  softrt watch --pid 4242 --period 1ms        every thread of process 4242, checked against a 1 ms cycle
  softrt watch --tid 4243 --duration 1h --report watch.html
  softrt watch --comm servo --no-explain --json   cycles only (less cost to the thread)""",
)
@click.option("--pid", type=int, default=None, help="Watch every thread of this process.")
@click.option("--tid", type=int, default=None, help="Watch this thread.")
@click.option("--comm", default=None, help="Watch every thread of this name (as ps -L shows it).")
@duration_option("How long to watch (a bare number is seconds).")
@max_duration_option("Safety bound on --duration.")
@time_option(
    "--period",
    None,
    unit="us",
    help="The cycle the thread should keep (bare number: µs): checked against the one observed, and "
    "the late rule's nominal period [default: the thread's own, from its requested wake-ups].",
)
@time_option(
    "--late-threshold",
    DEFAULT_THRESHOLD_TEXT,
    "A cycle is late when its latency exceeds this, or its period the nominal one by more.",
    unit="us",
)
@click.option(
    "--keep-late",
    type=int,
    default=100,
    show_default=True,
    help="Late cycles kept in each summary with their causes (the worst ones).",
)
@click.option(
    "--explain/--no-explain",
    default=True,
    show_default=True,
    help="Trace what ran on the threads' CPUs and explain every late cycle; --no-explain traces only "
    "the threads' own events (about 1 µs of latency to them instead of 6.5 µs on the benchmark VM; "
    "docs/watch.md).",
)
@click.option(
    "--trace-mode",
    type=click.Choice(list(TRACE_MODES)),
    default="auto",
    show_default=True,
    help="What the trace records: full; lean (no timer interrupt or wake-up: about 40 % fewer events, "
    "and the timer, the exit from idle and the switch are one cause); auto: lean (docs/watch.md).",
)
@samples_option
@out_dir_option(" (one per thread)")
@file_option(
    "--report",
    "report",
    allow_dash=True,
    help="Also write an HTML report of the threads' runs to this file.",
)
@watch_options
@lab_options
@click.option("--json", "as_json", is_flag=True, help="Print a row per thread as JSON (progress goes to stderr).")
def command(
    pid,
    tid,
    comm,
    duration_ns,
    max_duration_ns,
    period_ns,
    late_threshold_ns,
    keep_late,
    explain,
    trace_mode,
    samples,
    out_dir,
    report,
    watch,
    as_json,
):
    """Measure the cycles of threads softrt did not write, from the kernel's trace, and explain the late ones.

    Nothing is changed on the threads. Exit status 0 when the watch ran its time, 1 when it ended
    early (a thread exited, Ctrl-C: what was measured is kept), 2 for bad input.
    """
    config = WatchConfig(
        target=Target(pid, tid, comm),
        duration_ns=duration_ns,
        max_duration_ns=max_duration_ns,
        period_ns=period_ns,
        late_threshold_ns=late_threshold_ns,
        keep_late=keep_late,
        samples=samples,
        out_dir=out_dir,
        explain=explain,
        trace_mode=trace_mode,
    )
    if report is not None:
        check_target(report, "the report", "choose another file with --report")  # before anything runs
    with interrupts.deferred(then_ignore=True):
        err = console(stderr=True)
        with Watch(err, watch, title="softrt watch") as live:
            result = watch_threads(config, on_progress=live.on_progress)
            for summary, _path in result.runs:
                live.finished(summary)
        if as_json:
            sys.stdout.write(json.dumps(report_of(result).to_dict(), indent=2) + "\n")
        else:
            out = console()
            if len(result.runs) > 1:
                emit(out, overview(result))
            for summary, path in result.runs:
                emit(out, Text(""))
                emit(out, render_thread(summary, str(path)))
        remember([path for _s, path in result.runs])
        if report is not None:
            from ..report import build_report  # matplotlib: imported only when a report is made

            written = build_report([str(path) for _s, path in result.runs], report, option="--report")
            emit(
                err,
                f"softrt: report of {len(written.runs)} run(s) written to {written.path}",
                markup=False,
                highlight=False,
                soft_wrap=True,
            )
        return 1 if result.ended_early else 0
