"""Rendering of run summaries for the terminal (CLI layer).

Everything a command shows on a terminal passes :func:`emit` (or :func:`clean`, for a plain line):
a run directory copied from another PC may be named ``x ESC ]0;PWNED ESC \\ ESC [31m``, and a summary,
a host name or an error message may carry the same. Every control character (C0, DEL and C1, so
the ESC, BEL or 0x9b that start and end CSI, OSC and DCS sequences: ECMA-48 §5) becomes a visible
``?`` (:func:`softrt.schema.text.printable`), line breaks kept; rich's own styles and cursor
movements are added after, so they still work.
"""

from __future__ import annotations

from collections import Counter

from rich.console import Console, ConsoleOptions, Group, RenderableType
from rich.measure import Measurement
from rich.segment import Segment
from rich.table import Table
from rich.text import Text

from ..analysis.tail_text import tail_lines
from ..analysis.verdict import verdict_lines, verdict_of
from ..schema.summary import Board, LoadRun, Misses, RunSummary, Verdict
from ..schema.tail import Tail
from ..schema.text import printable
from ..units import format_duration_s, format_ns
from ..units import format_number as num
from .render_why import why_late


def _us(value: float | None, digits: int = 1) -> str:
    return num(value, digits)


def _signed(value: float | None) -> str:
    return "-" if value is None else num(value, 1, sign=True)


def clean(text: object) -> str:
    """*text* as a terminal may show it: control characters made a visible ``?``, line breaks kept."""
    text = str(text)
    return text if text.isprintable() else "\n".join(printable(line) for line in text.split("\n"))


def one_line(text: object) -> str:
    """*text* as one terminal line: control characters a visible ``?``, line breaks and tabs spaces
    (an error message, a warning: click.echo's lines)."""
    return printable(text)


class _Cleaned:
    """A rich renderable (a table, a group) whose every character of text is :func:`clean`'s: its
    segments are cleaned as rendered, rich's control segments (cursor, live view) left alone."""

    def __init__(self, renderable: RenderableType) -> None:
        self.renderable = renderable

    def __rich_console__(self, console: Console, options: ConsoleOptions):
        for seg in console.render(self.renderable, options):
            yield seg if seg.control or seg.text.isprintable() else Segment(clean(seg.text), seg.style)

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        return Measurement.get(console, options, self.renderable)


def cleaned(
    thing: object, con: Console | None = None, *, markup: bool | None = None, highlight: bool | None = None
) -> object:
    """*thing* (a str, possibly rich markup, a Text, any renderable) with nothing a terminal acts on.

    A Text keeps its styles: each control character becomes one ``?``, so every span still fits.
    """
    if isinstance(thing, str):
        thing = (con or Console()).render_str(thing, markup=markup, highlight=highlight)
    if isinstance(thing, Text):
        if clean(thing.plain) == thing.plain:
            return thing
        out = thing.copy()
        out.plain = clean(thing.plain)
        return out
    if isinstance(thing, (Segment, _Cleaned)) or (
        not hasattr(thing, "__rich_console__") and not hasattr(thing, "__rich__")
    ):
        return thing
    return _Cleaned(thing)


def emit(con: Console, *objects: object, markup: bool | None = None, highlight: bool | None = None, **kwargs) -> None:
    """``con.print(*objects, **kwargs)`` of what :func:`cleaned` makes of each: how every command
    puts text on a terminal."""
    con.print(*(cleaned(o, con, markup=markup, highlight=highlight) for o in objects), **kwargs)


def verdict_text(
    verdict: Verdict | None, *, state: str = "complete", prefix: str = "", tail: Tail | None = None
) -> Text | None:
    """The verdict (softrt.analysis.verdict) in words: MEETS in green, FAILS in red; None without one."""
    if verdict is None:
        return None
    lines = verdict_lines(verdict, state=state, tail=tail)
    style = {True: "bold green", False: "bold red"}.get(verdict.meets, "bold yellow")
    out = Text(prefix + lines[0], style=style)
    for line in lines[1:]:
        out.append("\n" + line)
    return out


def seed_table(summary: RunSummary) -> Table:
    """The seed's table: period and processing time, mean/max/min (µs)."""
    table = Table(title="Cycle (µs)", title_justify="left", show_edge=False)
    for col in ("", "mean", "max", "min"):
        table.add_column(col, justify="right" if col else "left")
    for label, s in (
        ("Timer int. period", summary.metrics.period_us),
        ("Timer int. process", summary.metrics.process_us),
    ):
        table.add_row(label, _us(s.mean), _us(s.max), _us(s.min))
    return table


def percentile_table(
    summary: RunSummary,
    process: str = "process",
    caption: str = "worst: the longest period, latency and process time; the shortest slack "
    "(negative: the work overran the next edge)",
) -> Table:
    """Percentiles of period, latency, processing time and slack (µs), and each one's worst cycle.

    A long period, latency or processing time is bad, so their tail is the upper one (p99, p99.9,
    p99.99, max); slack (the time left between the end of the work and the next edge, the seed's
    margin) is bad when short, so its tail is the lower one (p1, p0.1, p0.01, min), negative when
    the work overran the edge. A summary written before softrt kept slack's low tail shows "-".
    *process* and *caption* name the work time otherwise (``softrt watch``: a thread's run time).
    """
    table = Table(
        title="Distribution (µs)", title_justify="left", show_edge=False, caption=caption, caption_justify="left"
    )
    table.add_column("")
    for col in ("p50", "p99", "p99.9", "p99.99"):
        table.add_column(col, justify="right")
    table.add_column("worst", justify="right", style="bold")
    m = summary.metrics
    for label, s in (("period", m.period_us), ("latency", m.latency_us), (process, m.process_us)):
        table.add_row(label, *(_us(x) for x in (s.p50, s.p99, s.p99_9, s.p99_99, s.max)))
    table.add_section()
    table.add_row("", "p50", "p1", "p0.1", "p0.01", "min", style="bold")
    s = m.slack_us
    low = (s.p1, s.p0_1, s.p0_01) if s.low_tail else (None, None, None)
    table.add_row(
        "slack", *(Text(_us(x), style="red" if x is not None and x < 0 else "") for x in (s.p50, *low, s.min))
    )
    return table


def misses_text(summary: RunSummary) -> Text:
    """One paragraph on misses and what they did to the motor."""
    metrics = summary.metrics
    m = metrics.misses or Misses()
    period_us = (summary.period_ns or 0) / 1e3
    lines = [
        f"Missed updates: {_n(m.missed_updates)} (in {_n(m.cycles_with_miss)} cycles; longest run "
        f"{_n(m.longest_miss_run)}); overruns (work ended after the next edge): {_n(m.overruns)}",
    ]
    if m.note:
        lines.append(f"  ({m.note})")
    motion = summary.motion
    if motion is not None and not motion.computed:
        lines.append(f"Motion impact: not computed: {motion.not_computed}")
    elif motion is not None:
        lines.append(
            f"Motion impact (axis 0): worst single burst of misses put the axis "
            f"{_us(motion.max_run_deviation_counts)} counts off its path; all misses together "
            f"{_us(motion.max_deviation_counts)} counts (the motion ends {motion.final_lag_cycles} cycles late); "
            f"max velocity step {_us(motion.max_velocity_step_counts_per_s, 0)} counts/s "
            f"(the profile's own: {_us(motion.commanded_max_velocity_step_counts_per_s, 0)})"
        )
    if metrics.rtt_us is not None:
        rtt = metrics.rtt_us
        lines.append(
            f"EtherCAT frames: round trip p50 {_us(rtt.p50)} µs, p99.9 {_us(rtt.p99_9)} µs, "
            f"max {_us(rtt.max)} µs; cycles with a device error (wrong working counter, lost frame, "
            f"drive not enabled): {m.device_errors}" + _frame_fates(summary.board)
        )
    lines.extend(drives_lines(summary.board))
    overflows = summary.ring.overflows if summary.ring is not None else None
    line = (
        f"Cycles: {_n(metrics.cycles)} at {period_us:g} µs; records missing: {_n(metrics.records_missing or 0)}; "
        f"ring overflows: {_n(overflows or 0)}"
    )
    if summary.records_unwritten:
        line += f"; not written (disk): {summary.records_unwritten:,}"
    lines.append(line)
    if summary.samples_error:
        lines.append(f"Samples: {summary.samples_error}")
    elif summary.config.samples == "late":
        lines.append("Samples kept: late cycles with context, per-second aggregates (--samples late)")
    return Text("\n".join(lines))


def _n(count: int | None) -> str:
    return "-" if count is None else f"{count:,}"


def _frame_fates(board: Board | None) -> str:
    """What came back that was not a cycle's own reply in time (ethercat.cyclic), if anything."""
    frames = board.frames if board is not None else None
    if frames is None:
        return ""
    parts = []
    if frames.late:
        worst = frames.late_rtt_us.max if frames.late_rtt_us is not None else None
        parts.append(
            f"{frames.late:,} replies late" + (f" (up to {_us(worst / 1e3)} ms)" if worst else "") + ", not taken"
        )
    bad = frames.bad or {}
    if bad:
        parts.append(
            f"{sum(bad.values()):,} changed ("
            + ", ".join(f"{k} {v:,}" for k, v in sorted(bad.items()))
            + "), not taken"
        )
    if frames.duplicates:
        parts.append(f"{frames.duplicates:,} duplicates")
    return "; " + "; ".join(parts) if parts else ""


def drives_lines(board: Board | None) -> list[str]:
    """EtherCAT drives as the run's last valid frame confirmed them, and when (issue 11)."""
    out = []
    drives = (board.drives if board is not None else None) or []
    per_slave = Counter(d.slave for d in drives)  # the axes of a multi-axis drive share its name
    for d in drives:
        if d.confirmed_cycle is None:
            continue
        when = (
            f"cycle {d.confirmed_cycle:,} ({num(d.confirmed_at_s, 3, grouping=False)} s)"
            if d.confirmed_cycle >= 0 and d.confirmed_at_s is not None
            else "never (no valid frame in the run)"
        )
        axis = f", axis {d.axis or 0}" if per_slave[d.slave] > 1 else ""
        out.append(
            f"Drive '{d.name}' (slave {d.slave}{axis}): {d.state} (statusword 0x{d.statusword or 0:04X}, "
            f"error code 0x{d.error_code or 0:04X}), last confirmed at {when}"
        )
    return out


def ethercat_text(board: Board | None) -> Text | None:
    """The EtherCAT slaves of the run: identity, PDOs, axes and errors; what bring-up recovered
    from and the drives' emergencies (None: not an EtherCAT run, or one stored before these)."""
    if board is None or not board.slaves:
        return None
    axes = {(d.slave, d.axis or 0): d for d in board.drives or [] if d.slave is not None}
    out = Text("EtherCAT slaves")
    for s in board.slaves:
        named = f" ({s.device_name})" if s.device_name and s.device_name != s.name else ""
        out.append(
            f"\n  slave {s.position} '{s.name}'{named}: vendor 0x{s.vendor_id or 0:08X}, product "
            f"0x{s.product_code or 0:08X}, revision 0x{s.revision or 0:08X}, serial {s.serial}; PDOs {s.pdo}"
        )
        if s.error_register is not None:
            out.append(f"; error register 0x{s.error_register:02X}", style="red" if s.error_register else "")
        codes = s.error_codes
        for (slave, axis), d in sorted(axes.items()):
            if slave != s.position:
                continue
            code = d.error_code or (codes[axis] if axis < len(codes) and codes[axis] else 0)
            fault = (d.statusword or 0) & 0x4F == 0x08  # CiA 402-2 Table 30: fault
            out.append(
                f"\n    axis {axis}: statusword 0x{d.statusword or 0:04X}{' (fault)' if fault else ''}, "
                f"error code 0x{code:04X}",
                style="red" if fault or code else "",
            )
    for warning in board.warnings or []:
        out.append(f"\n  warning: {warning}", style="yellow")
    for e in board.emergencies or []:
        out.append(
            f"\n  emergency from slave {e.slave}: error code 0x{e.error_code or 0:04X}, error register "
            f"0x{e.error_register or 0:02X} (data {e.data})",
            style="red",
        )
    return out


def dc_text(board: Board | None) -> Text | None:
    """ "Distributed clocks": the host's phase against SYNC0, the lock, each slave's 0x092C (EtherCAT runs)."""
    dc = board.distributed_clocks if board is not None else None
    if dc is None:
        return None
    if dc.absent is not None or dc.reference is None or dc.sync0 is None:
        return Text(f"Distributed clocks: none ({dc.absent})" if dc.absent else "Distributed clocks: none")
    ref, sync0 = dc.reference, dc.sync0
    lines = [
        f"Distributed clocks (reference clock: slave {ref.slave} '{ref.name}'; SYNC0 every "
        f"{(sync0.cycle_ns or 0) / 1e3:,g} µs" + ("" if sync0.active else ", not active") + ")"
    ]
    ph = dc.phase
    target = "SYNC0" if not dc.target_shift_us else f"SYNC0 {num(dc.target_shift_us, 1, sign=True)} µs"
    if ph is not None:
        lines.append(
            f"  frame at the reference vs {target}: mean {_signed(ph.mean_us)} µs, p1 {_signed(ph.p1_us)}, "
            f"p99 {_signed(ph.p99_us)}; |error| mean {_us(ph.abs_mean_us)}, p99 {_us(ph.abs_p99_us)}, "
            f"max {_us(ph.abs_max_us)} µs"
        )
    else:
        lines.append("  phase: no frame came back with the DC time")
    if dc.dc_vs_host_ppm is not None:
        lines.append(
            f"  DC time runs {num(dc.dc_vs_host_ppm, 1, sign=True)} ppm against the host clock"
            + (" (unlocked, the frame walks through the drives' cycle at this rate)" if dc.lock is None else "")
        )
    lock = dc.lock
    if lock is not None:
        ppm = "-" if lock.correction_ppm is None else num(lock.correction_ppm, 1, sign=True)
        lines.append(
            f"  phase lock (--dc-lock): host cycle corrected {ppm} ppm (later half), at most "
            f"{lock.max_step_us or 0:,g} µs a cycle; |error| first tenth of the run "
            f"{_us(lock.first_tenth_abs_mean_us)} µs, last tenth {_us(lock.last_tenth_abs_mean_us)} µs"
        )
    for sl in dc.slaves or []:
        d = sl.abs_diff_ns
        what = (
            f"|0x092C| mean {num(d.mean / 1e3, 3)} µs, p99 {num(d.p99 / 1e3, 3)}, max {num(d.max / 1e3, 3)}"
            if d is not None and None not in (d.mean, d.p99, d.max)
            else "0x092C never answered"
        )
        lines.append(
            f"  slave {sl.slave} '{sl.name}': {what} ({sl.samples or 0:,} samples, every "
            f"{dc.sample_every} cycles; {sl.unanswered or 0:,} unanswered)"
        )
    return Text("\n".join(lines))


def mode_text(summary: RunSummary) -> Text:
    """The run's label and what was (not) applied."""
    mode = summary.mode or "untuned"
    style = {"real-time": "bold green", "not real-time": "bold red", "untuned": "bold yellow"}[mode]
    out = Text()
    out.append(f"Mode: {mode}", style=style)
    running = summary.running  # a checkpoint (docs/run-format.md)
    if running:
        out.append(f"  [RUNNING: the figures of the first {format_duration_s(summary.elapsed_s)}]", style="bold yellow")
    elif summary.state != "complete":  # partial (Ctrl-C, worker crash) or failed (bus, drives)
        out.append(f"  [{summary.state.upper()}: {summary.partial_reason}]", style="bold red")
    tuning = summary.tuning
    for item in tuning.applied:
        out.append(f"\n  applied: {item.what} ({item.detail})")
    for change in tuning.system_changes:
        state = (
            "in effect while the run goes; restored when it ends, or by the next softrt command"
            if running
            else "restored"
            if change.restored
            else f"NOT RESTORED: {change.note}"
        )
        out.append(f"\n  system change: {change.path} {change.before} -> {change.during} ({state})")
    for item in tuning.not_applied:
        out.append(f"\n  not applied: {item.what}: {item.why}", style="red")
    if (fair := tuning.fair_server) is not None:
        out.append(f"\n  {fair_server_line(fair)}", style="yellow" if fair.in_force else "")
    check = summary.check
    if check is not None:
        out.append(f"\nsoftrt check before the run: {check.verdict}", style="green" if check.ready else "yellow")
    for change in tuning.recovered_from_earlier_runs:
        if change.restored:
            out.append(f"\n  restored after an earlier run: {change.path} = {change.before}", style="yellow")
        else:
            out.append(f"\n  NOT restored after an earlier run: {change.path}: {change.note}", style="red")
    return out


def fair_server_line(fair) -> str:
    """``fair server: in force on CPU 1 (50 ms of every 1000 ms for SCHED_OTHER tasks there)`` (Linux 6.12+)."""
    if not fair.in_force:
        return f"fair server: off on CPU {fair.cpu} (runtime 0)"
    if fair.runtime_ns is not None:
        share = f"{fair.runtime_ns / 1e6:g} ms of every {(fair.period_ns or 1e9) / 1e6:g} ms"
    else:
        share = f"runtime unreadable: {fair.unreadable}; the default is 50 ms of every 1000 ms"
    return (
        f"fair server: in force on CPU {fair.cpu} ({share} for SCHED_OTHER tasks there, ahead of the loop; "
        "softrt check: kernel.fair_server)"
    )


def loads_text(loads: list[LoadRun], prefix: str = "") -> Text:
    """What every load achieved, FAILED when it achieved nothing, or why it was skipped, each followed by
    its problems (a reader sees whether the load was real, and if not, why)."""
    out = Text()
    for load in loads:
        out.append(f"{prefix}{load.describe()}\n", style="bold red" if load.failed else "")
        for problem in load.problems or []:
            out.append(f"{prefix}  {load.name} problem: {problem}\n", style="red")
    return out


def render_summary(summary: RunSummary, path: str | None = None, notice: Text | None = None) -> Group:
    """Everything ``softrt run`` prints after a run: the verdict first (then *notice*, e.g. whether a
    checkpoint's run still goes)."""
    percentiles = percentile_table(summary)
    parts = [seed_table(summary), Text(""), percentiles, Text(""), misses_text(summary), mode_text(summary)]
    if (dc := dc_text(summary.board)) is not None:
        parts[5:5] = [dc]
    if (slaves := ethercat_text(summary.board)) is not None:
        parts[-1:-1] = [slaves]
    if (why := why_late(summary)) is not None:
        parts[1:1] = [Text(""), why]
    if (tail := tail_text(summary)) is not None:  # the tail model, before the distribution it extends
        at = parts.index(percentiles)
        parts[at:at] = [tail, Text("")]
    if summary.loads:  # softrt compare's runs: the loads beside the loop
        parts += [Text("Loads:", style="bold"), loads_text(summary.loads, "  ")]
    if path:
        parts.append(Text(f"Run stored in {path}", style="dim"))
    return Group(*verdict_head(summary, notice), *parts)


def tail_text(summary: RunSummary) -> Text | None:
    """The tail block (analysis.tail_text's account), None for a run stored without one."""
    if summary.tail is None:
        return None
    v = summary.verdict
    lines = tail_lines(summary.tail, v.culprit.source if v is not None and v.culprit is not None else None)
    out = Text(lines[0], style="bold")
    for line in lines[1:]:
        out.append("\n" + line, style="dim" if line.lstrip().startswith("rule:") else "")
    return out


def verdict_head(summary: RunSummary, notice: Text | None = None) -> list:
    """What a run's tables open with: its verdict, then *notice*, then a blank line (none without either)."""
    verdict = verdict_text(verdict_of(summary), state=summary.state, tail=summary.tail)
    head = [t for t in (verdict, notice) if t is not None]
    return [*head, Text("")] if head else []


def progress_line(p) -> str:
    """The plain progress line (stderr not a terminal): time, cycles, period p99/max, misses, late cycles."""
    line = f"{num(p.elapsed_s, 0)} of {num(p.duration_s, 0)} s  {p.cycles:,} cycles"
    stats, config = p.stats, p.config
    if stats is None or config is None or not stats.hist["period"].n:
        return f"{line}  max period {format_ns(p.max_period_us * 1e3)}  missed updates {p.missed_updates:,}"
    period = stats.hist["period"]
    return (
        f"{line}  period p99 {format_ns(period.percentiles((99.0,))[0])} max {format_ns(period.max)}  "
        f"missed updates {stats.counters['missed_updates']:,}  late cycles {stats.counters['late_cycles']:,}"
    )


def console(stderr: bool = False) -> Console:
    """A console for output (stdout) or progress (stderr): laid out for a terminal or a pipe (cli.output)."""
    from .output import make_console

    return make_console(stderr)
