"""The "Why cycles were late" block of a run's summary, for the terminal (CLI layer).

Split from :mod:`.render` (which re-exports :func:`why_late`): the top culprits of a run's
``why_late`` block (analysis.attribution, issue 9) with their fix (analysis.remedy), its worst
cycles with their causes, and how the trace went. Every line goes out through
:func:`.render.emit`, which makes control characters visible (ECMA-48 §5).
"""

from __future__ import annotations

from collections.abc import Callable

from rich.console import Group
from rich.table import Table
from rich.text import Text

from ..analysis.remedy import remedy_for
from ..schema.summary import RunSummary
from ..schema.why_late import Cause, Culprit, LateCycle, TraceInfo
from ..units import format_number as num


def _us(value: float | None, digits: int = 1) -> str:
    return num(value, digits)


def _n(count: int | None) -> str:
    return "-" if count is None else f"{count:,}"


def why_late(summary: RunSummary, top: int = 8, worst: int = 5, terms: dict[str, str] | None = None) -> Group | None:
    """ "Why cycles were late": the top culprits and the worst cycles with their causes (issue 9).

    None for a run without a ``why_late`` block (older runs, imported results). *terms* renames the
    loop's words in the culprits and the worst cycles (``softrt watch``: the edge is the requested expiry).
    """

    def say(text: str, kind: str = "kernel") -> str:  # softrt's own words only, never a task's name
        for word, term in (terms or {}).items() if kind in ("kernel", "loop") else ():
            text = text.replace(word, term)
        return text

    why = summary.why_late
    if why is None:
        return None
    if not why.on:
        return Group(Text(f"Why cycles were late: tracing {why.tracing}", style="yellow"))
    head = Text("Why cycles were late", style="bold")
    head.append(
        f"  (trace of CPU {why.rt_cpu}: {_n(why.late_cycles)} late cycles of {_n(why.cycles)}, "
        f"threshold {why.threshold_us or 0:g} µs; {num(why.explained_us or 0, 0)} of "
        f"{num(why.window_us or 0, 0)} µs "
        "of their windows explained)",
        style="dim",
    )
    parts: list = [head]
    if why.trace is not None:
        parts.append(Text(_trace_line(why.trace, why.lost_events or 0), style="dim"))
    if why.lost_events:
        parts.append(Text(f"  {why.lost_events:,} trace events were lost: some windows may lack a cause", style="red"))
    culprits = why.culprits or []
    if culprits:
        parts.append(_culprits_table(culprits, top, say))
    worst_cycles = why.worst or []
    lines = _worst_lines(worst_cycles[:worst], say)
    if lines:
        parts.append(
            Text(f"Worst cycles ({min(worst, len(worst_cycles))} of {_n(why.late_cycles)}):\n" + "\n".join(lines))
        )
    if why.steal is not None:
        st = why.steal
        parts.append(
            Text(
                f"Hypervisor steal on CPU {st.cpu}: {num(st.total_ms, 1)} ms over {num(st.over_s, 0)} s (/proc/stat)",
                style="dim",
            )
        )
    return Group(*parts)


def _culprits_table(culprits: list[Culprit], top: int, say: Callable[..., str]) -> Table:
    """The top culprits of all late cycles, each with its fix (analysis.remedy)."""
    table = Table(title="Culprits (all late cycles)", title_justify="left", show_edge=False)
    for col in ("kind", "source", "late cycles", "total µs", "worst µs", "fix (softrt check)"):
        table.add_column(col, justify="right" if col.endswith(("cycles", "µs")) else "left")
    for c in culprits[:top]:
        remedy = remedy_for(c)
        # Text, not markup: a workqueue item's name is "kworker/1:1 [function]"
        table.add_row(
            c.kind,
            Text(say(c.source, c.kind)),
            _n(c.cycles),
            _us(c.total_us),
            _us(c.worst_us),
            remedy.column if remedy is not None else "-",
        )
    if len(culprits) > top:
        table.caption = f"… and {len(culprits) - top} more (softrt show --json)"
    return table


def _worst_lines(worst_cycles: list[LateCycle], say: Callable[..., str]) -> list[str]:
    """The worst cycles' lines: each one's window, its first four causes, the rest and the unexplained."""
    lines = []
    for cyc in worst_cycles:
        window = cyc.window
        lines.append(
            say(
                f"cycle {cyc.seq:,}: period {_us(cyc.period_us)} µs, latency {_us(cyc.latency_us)} µs, "
                f"missed {cyc.missed}; window {num(window.duration_us, 1)} µs from the {window.start} to the "
                + ("late write" if (window.to or "").startswith("write") else "permit")
            )
        )
        for c in cyc.causes[:4]:
            lines.append(
                f"    {num(c.duration_us, 1):>9} µs {_pct(c.share):>5} %  {say(c.label, c.kind)}" + _steal_note(c)
            )
        if len(cyc.causes) > 4:
            rest = sum(c.duration_us for c in cyc.causes[4:])
            lines.append(f"    {num(rest, 1):>9} µs          {len(cyc.causes) - 4} more sources")
        lines.append(f"    {num(cyc.unexplained_us, 1):>9} µs {_pct(cyc.unexplained_share):>5} %  unexplained")
    return lines


def _pct(share: float) -> str:
    return num(share * 100, 1, grouping=False)


def _trace_line(trace: TraceInfo, lost: int) -> str:
    """One line on how the trace went: events read and lost, the CPU it cost, events not on this kernel."""
    secs = trace.traced_s or 0
    cpu_s = (trace.consumer_cpu_s or 0) + (trace.attribution_cpu_s or 0)
    share = f" ({num(100 * cpu_s / secs, 0, grouping=False)} % of a housekeeping CPU)" if secs else ""
    line = (
        f"  trace{' (lean: no timer interrupt or wake-up)' if trace.mode == 'lean' else ''}: "
        f"{trace.events_read or 0:,} events read, {max(lost, trace.lost_events or 0):,} lost; "
        f"reader and attribution used {num(cpu_s, 2)} s CPU over {num(secs, 1)} s{share}"
    )
    if trace.events_missing:
        line += f"; not on this kernel: {', '.join(trace.events_missing)}"
    return line


def _steal_note(cause: Cause) -> str:
    st = cause.steal
    if cause.kind != "outside" or st is None:
        return ""
    return f"; steal rose {num(st.steal_ms or 0, 1)} ms in the {num(st.over_s or 0, 1)} s around it"
