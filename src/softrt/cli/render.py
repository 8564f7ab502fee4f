"""Rendering of run summaries for the terminal (CLI layer)."""

from __future__ import annotations

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from ..metrics import above, snap_ns
from ..units import format_duration_s, format_ns


def _us(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def seed_table(summary: dict) -> Table:
    """The seed's table: period and processing time, mean/max/min (µs)."""
    table = Table(title="Cycle (µs)", title_justify="left", show_edge=False)
    for col in ("", "mean", "max", "min"):
        table.add_column(col, justify="right" if col else "left")
    for label, key in (("Timer int. period", "period_us"), ("Timer int. process", "process_us")):
        s = summary[key]
        table.add_row(label, _us(s["mean"]), _us(s["max"]), _us(s["min"]))
    return table


def percentile_table(summary: dict) -> Table:
    """Percentiles of period, latency, processing time and slack (µs), and each one's worst cycle.

    A long period, latency or processing time is bad, so their tail is the maximum; slack (the time
    left between the end of the work and the next edge, the seed's margin) is bad when short, so
    its tail is its minimum, negative when the work overran the edge. "worst" shows each tail.
    """
    table = Table(title="Distribution (µs)", title_justify="left", show_edge=False,
                  caption="worst: the longest period, latency and process time; the shortest slack "
                          "(negative: the work overran the next edge)", caption_justify="left")
    cols = ("p50", "p99", "p99_9", "p99_99")
    table.add_column("")
    for col in cols:
        table.add_column(col.replace("_", "."), justify="right")
    table.add_column("worst", justify="right", style="bold")
    for label, key, worst in (("period", "period_us", "max"), ("latency", "latency_us", "max"),
                              ("process", "process_us", "max"), ("slack", "slack_us", "min")):
        s = summary[key]
        tail = s.get(worst)
        cell = Text(_us(tail), style="red" if worst == "min" and tail is not None and tail < 0 else "")
        table.add_row(f"{label} ({worst})" if worst == "min" else label, *(_us(s.get(c)) for c in cols), cell)
    return table


def misses_text(summary: dict) -> Text:
    """One paragraph on misses and what they did to the motor."""
    m = summary["misses"]
    period_us = summary["config"]["period_ns"] / 1e3
    lines = [
        f"Missed updates: {m['missed_updates']:,} (in {m['cycles_with_miss']:,} cycles; longest run "
        f"{m['longest_miss_run']:,}); overruns (work ended after the next edge): {m['overruns']:,}",
    ]
    if m.get("note"):
        lines.append(f"  ({m['note']})")
    motion = summary.get("motion")
    if motion and "not_computed" in motion:
        lines.append(f"Motion impact: not computed: {motion['not_computed']}")
    elif motion:
        lines.append(
            f"Motion impact (axis 0): worst single burst of misses put the axis "
            f"{motion['max_run_deviation_counts']:,.1f} counts off its path; all misses together "
            f"{motion['max_deviation_counts']:,.1f} counts (the motion ends {motion['final_lag_cycles']} cycles late); "
            f"max velocity step {motion['max_velocity_step_counts_per_s']:,.0f} counts/s "
            f"(the profile's own: {motion['commanded_max_velocity_step_counts_per_s']:,.0f})"
        )
    if "rtt_us" in summary:
        rtt = summary["rtt_us"]
        lines.append(f"EtherCAT frames: round trip p50 {_us(rtt['p50'])} µs, p99.9 {_us(rtt['p99_9'])} µs, "
                     f"max {_us(rtt['max'])} µs; cycles with a device error (wrong working counter, lost frame, "
                     f"drive not enabled): {summary['misses']['device_errors']}")
    ring = summary.get("ring", {})
    line = (f"Cycles: {summary['cycles']:,} at {period_us:g} µs; records missing: {summary.get('records_missing', 0):,}; "
            f"ring overflows: {ring.get('overflows', 0):,}")
    if summary.get("records_unwritten"):
        line += f"; not written (disk): {summary['records_unwritten']:,}"
    lines.append(line)
    if summary.get("samples_error"):
        lines.append(f"Samples: {summary['samples_error']}")
    elif (summary.get("config") or {}).get("samples") == "late":
        lines.append("Samples kept: late cycles with context, per-second aggregates (--samples late)")
    return Text("\n".join(lines))


def ethercat_text(summary: dict) -> Text | None:
    """The EtherCAT slaves of the run: identity, PDOs, axes and errors; what bring-up recovered
    from and the drives' emergencies (None: not an EtherCAT run, or one stored before these)."""
    board = summary.get("board") or {}
    if not board.get("slaves"):
        return None
    axes = {(d.get("slave"), d.get("axis")): d for d in board.get("drives", [])}
    out = Text("EtherCAT slaves")
    for s in board["slaves"]:
        named = f" ({s['device_name']})" if s.get("device_name") and s["device_name"] != s["name"] else ""
        out.append(f"\n  slave {s['position']} '{s['name']}'{named}: vendor 0x{s['vendor_id']:08X}, product "
                   f"0x{s['product_code']:08X}, revision 0x{s['revision']:08X}, serial {s['serial']}; PDOs {s['pdo']}")
        if s.get("error_register") is not None:
            out.append(f"; error register 0x{s['error_register']:02X}", style="red" if s["error_register"] else "")
        codes = s.get("error_codes") or []
        for (slave, axis), d in sorted(axes.items()):
            if slave != s["position"]:
                continue
            code = d["error_code"] or (codes[axis] if axis < len(codes) and codes[axis] else 0)
            fault = d["statusword"] & 0x4F == 0x08  # CiA 402-2 Table 30: fault
            out.append(f"\n    axis {axis}: statusword 0x{d['statusword']:04X}{' (fault)' if fault else ''}, "
                       f"error code 0x{code:04X}", style="red" if fault or code else "")
    for warning in board.get("warnings", []):
        out.append(f"\n  warning: {warning}", style="yellow")
    for e in board.get("emergencies", []):
        out.append(f"\n  emergency from slave {e['slave']}: error code 0x{e['error_code']:04X}, error register "
                   f"0x{e['error_register']:02X} (data {e['data']})", style="red")
    return out


def mode_text(summary: dict) -> Text:
    """The run's label and what was (not) applied."""
    mode = summary["mode"]
    style = {"real-time": "bold green", "not real-time": "bold red", "untuned": "bold yellow"}[mode]
    out = Text()
    out.append(f"Mode: {mode}", style=style)
    running = summary["status"] == "running"  # a checkpoint (docs/run-format.md)
    if running:
        out.append(f"  [RUNNING: the figures of the first {format_duration_s(summary.get('elapsed_s'))}]",
                   style="bold yellow")
    elif summary["status"] != "complete":
        out.append(f"  [PARTIAL: {summary['partial_reason']}]", style="bold red")
    tuning = summary["tuning"]
    for item in tuning["applied"]:
        out.append(f"\n  applied: {item['what']} ({item['detail']})")
    for change in tuning["system_changes"]:
        state = ("in effect while the run goes; restored when it ends, or by the next softrt command" if running
                 else "restored" if change["restored"] else f"NOT RESTORED: {change.get('note')}")
        out.append(f"\n  system change: {change['path']} {change['before']} -> {change['during']} ({state})")
    for item in tuning["not_applied"]:
        out.append(f"\n  not applied: {item['what']}: {item['why']}", style="red")
    check = summary.get("check")
    if check:
        out.append(f"\nsoftrt check before the run: {check['verdict']}", style="green" if check["ready"] else "yellow")
    for change in tuning.get("recovered_from_earlier_runs", []):
        if change["restored"]:
            out.append(f"\n  restored after an earlier run: {change['path']} = {change['before']}", style="yellow")
        else:
            out.append(f"\n  NOT restored after an earlier run: {change['path']}: {change.get('note')}", style="red")
    return out


def render_summary(summary: dict, path: str | None = None) -> Group:
    """Everything ``softrt run`` prints after a run."""
    parts = [seed_table(summary), Text(""), percentile_table(summary), Text(""), misses_text(summary), mode_text(summary)]
    if (slaves := ethercat_text(summary)) is not None:
        parts[-1:-1] = [slaves]
    if (why := why_late(summary)) is not None:
        parts[1:1] = [Text(""), why]
    if path:
        parts.append(Text(f"Run stored in {path}", style="dim"))
    return Group(*parts)


def why_late(summary: dict, top: int = 8, worst: int = 5) -> Group | None:
    """"Why cycles were late": the top culprits and the worst cycles with their causes (issue 9).

    None for a run without a ``why_late`` block (older runs, imported results).
    """
    why = summary.get("why_late")
    if not why:
        return None
    tracing, trace = why.get("tracing"), why.get("trace") or {}
    if isinstance(tracing, dict):  # runs stored before "trace" was split out of "tracing"
        tracing, trace = tracing.get("status"), tracing
    if tracing != "on":
        return Group(Text(f"Why cycles were late: tracing {tracing}", style="yellow"))
    head = Text("Why cycles were late", style="bold")
    head.append(f"  (trace of CPU {why['rt_cpu']}: {why['late_cycles']:,} late cycles of {why['cycles']:,}, "
                f"threshold {why['threshold_us']:g} µs; {why['explained_us']:,.0f} of {why['window_us']:,.0f} µs "
                "of their windows explained)", style="dim")
    parts: list = [head]
    if trace:
        parts.append(Text(_trace_line(trace, why.get("lost_events", 0)), style="dim"))
    if why.get("lost_events"):
        parts.append(Text(f"  {why['lost_events']:,} trace events were lost: some windows may lack a cause", style="red"))
    if why["culprits"]:
        table = Table(title="Culprits (all late cycles)", title_justify="left", show_edge=False)
        for col in ("kind", "source", "late cycles", "total µs", "worst µs"):
            table.add_column(col, justify="left" if col in ("kind", "source") else "right")
        for c in why["culprits"][:top]:
            ident = {"thread": "pid", "irq": "IRQ", "softirq": "vec"}.get(c["kind"])
            inner = ", ".join(x for x in (f"{ident} {c['id']}" if ident and c["id"] >= 0 else "", c["detail"]) if x)
            name = c["name"] + (f" ({inner})" if inner else "")
            # Text, not markup: a workqueue item's name is "kworker/1:1 [function]"
            table.add_row(c["kind"], Text(name), f"{c['cycles']:,}", f"{c['total_us']:,.1f}", f"{c['worst_us']:,.1f}")
        if len(why["culprits"]) > top:
            table.caption = f"… and {len(why['culprits']) - top} more (softrt show --json)"
        parts.append(table)
    lines = []
    for cyc in why["worst"][:worst]:
        period = "-" if cyc["period_us"] is None else f"{cyc['period_us']:,.1f}"
        lines.append(f"cycle {cyc['seq']:,}: period {period} µs, latency {cyc['latency_us']:,.1f} µs, missed "
                     f"{cyc['missed']}; window {cyc['window']['duration_us']:,.1f} µs from the {cyc['window']['from']} to the "
                     + ("late write" if cyc["window"].get("to", "").startswith("write") else "permit"))
        for c in cyc["causes"][:4]:
            lines.append(f"    {c['duration_us']:>9,.1f} µs {c['share'] * 100:5.1f} %  {c['label']}" + _steal_note(c))
        if len(cyc["causes"]) > 4:
            rest = sum(c["duration_us"] for c in cyc["causes"][4:])
            lines.append(f"    {rest:>9,.1f} µs          {len(cyc['causes']) - 4} more sources")
        lines.append(f"    {cyc['unexplained_us']:>9,.1f} µs {cyc['unexplained_share'] * 100:5.1f} %  unexplained")
    if lines:
        parts.append(Text(f"Worst cycles ({min(worst, len(why['worst']))} of {why['late_cycles']:,}):\n"
                          + "\n".join(lines)))
    if why.get("steal"):
        st = why["steal"]
        parts.append(Text(f"Hypervisor steal on CPU {st['cpu']}: {st['total_ms']:,.1f} ms over {st['over_s']:,.0f} s "
                          "(/proc/stat)", style="dim"))
    return Group(*parts)


def _trace_line(trace: dict, lost: int) -> str:
    """One line on how the trace went: events read and lost, the CPU it cost, events not on this kernel."""
    secs = trace.get("traced_s") or 0
    cpu_s = (trace.get("consumer_cpu_s") or 0) + (trace.get("attribution_cpu_s") or 0)
    share = f" ({100 * cpu_s / secs:.0f} % of a housekeeping CPU)" if secs else ""
    line = (f"  trace: {trace.get('events_read', 0):,} events read, {max(lost, trace.get('lost_events', 0)):,} lost; "
            f"reader and attribution used {cpu_s:,.2f} s CPU over {secs:,.1f} s{share}")
    if trace.get("events_missing"):
        line += f"; not on this kernel: {', '.join(trace['events_missing'])}"
    return line


def _steal_note(cause: dict) -> str:
    st = cause.get("steal")
    if cause["kind"] != "outside" or not st:
        return ""
    return f"; steal rose {st['steal_ms']:,.1f} ms in the {st['over_s']:,.1f} s around it"


def progress_line(p) -> str:
    """The plain progress line (stderr not a terminal): time, cycles, period p99/max, misses, late cycles."""
    line = f"{p.elapsed_s:,.0f} of {p.duration_s:,.0f} s  {p.cycles:,} cycles"
    stats, config = p.stats, p.config
    if stats is None or config is None or not stats.hist["period"].n:
        return f"{line}  max period {format_ns(p.max_period_us * 1e3)}  missed updates {p.missed_updates:,}"
    period = stats.hist["period"]
    late_bound_ns = snap_ns(config.period_ns + config.late_threshold_ns)
    return (f"{line}  period p99 {format_ns(period.percentiles((99.0,))[0])} max {format_ns(period.max)}  "
            f"missed updates {stats.counters['missed_updates']:,}  late cycles {above(period, late_bound_ns):,}")


def console(stderr: bool = False) -> Console:
    """A console for output (stdout) or progress (stderr)."""
    return Console(stderr=stderr, highlight=False)
