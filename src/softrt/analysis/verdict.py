"""Does the machine meet the cycle? The verdict of a run, and its words (analysis layer; pure).

:func:`judge` holds a run's figures (the summary's metrics, after the board's own miss count) to a
requirement (softrt.analysis.require): ``--require``, or by default the seed's, every board cycle
got its update and no period exceeded the late bound (``misses==0,period.max<=<nominal +
threshold>``). On failure it names what to fix first: the attribution's culprits that share one
fix (softrt.analysis.remedy) added up, the fix whose culprits took most of the late time, named
by its biggest culprit.
:func:`verdict_lines` says it in one or two lines, and how much the run proves: N cycles
observed, so an event rarer than about 1 in N cycles is likely unseen (with none seen in N
independent cycles, a rate of 1/N still leaves e^-1 ≈ 37 % chance of seeing none).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from ..schema.config import DEFAULT_THRESHOLD_NS
from ..schema.summary import Metrics, RunSummary, Verdict, VerdictCheck, VerdictCulprit
from ..schema.tail import Tail
from ..schema.why_late import Culprit, WhyLate
from ..units import MAX_FIXED
from ..units import format_number as num
from .remedy import Remedy, remedy_for
from .require import parse_requirements
from .tail_text import rate_clause


def default_requirement(period_ns: int, threshold_ns: int) -> str:
    """The seed's requirement: no missed update, no period over nominal + the late threshold."""
    return f"misses==0,period.max<={(period_ns + threshold_ns) / 1e3:g}us"


def judge(
    metrics: Metrics,
    *,
    period_ns: int,
    threshold_ns: int,
    require: str | None = None,
    why_late: Iterable[WhyLate | None] = (),
    tail: Tail | None = None,
) -> Verdict:
    """The verdict of *metrics* (and of the *tail* model, for a ``late-rate`` gate) against *require*
    (None: the seed's requirement); the main culprit comes from the *why_late* blocks (one run's, or
    every round of a compare scenario)."""
    text = require if require is not None else default_requirement(period_ns, threshold_ns)
    checks = [
        VerdictCheck(requirement=r.text, measured=value, passed=ok)
        for r in parse_requirements(text)
        for ok, value in [r.check(metrics, tail)]
    ]
    misses = metrics.misses
    cycles = metrics.cycles or 0
    meets = all(c.passed for c in checks) if cycles else None
    culprit, why_unknown = (None, None) if meets is not False else main_culprit(why_late)
    return Verdict(
        meets=meets,
        requirement=text,
        default=require is None,
        checks=checks,
        period_us=period_ns / 1e3,
        threshold_us=threshold_ns / 1e3,
        worst_period_us=metrics.period_us.max,
        missed_updates=misses.missed_updates if misses is not None else None,
        longest_miss_run=misses.longest_miss_run if misses is not None else None,
        late_cycles=metrics.late_cycles,
        cycles=cycles,
        culprit=culprit,
        why_unknown=why_unknown,
    )


def verdict_of(summary: RunSummary) -> Verdict | None:
    """The summary's verdict; for a run stored before softrt wrote one, judged now from its figures
    by the seed's requirement (None: an imported result, which measures no control cycle)."""
    if summary.verdict is not None:
        return summary.verdict
    config = summary.config
    if summary.origin != "softrt" or not config.period_ns:
        return None
    threshold_ns = config.late_threshold_ns or DEFAULT_THRESHOLD_NS
    return judge(
        summary.metrics,
        period_ns=config.period_ns,
        threshold_ns=threshold_ns,
        require=config.require,
        why_late=[summary.why_late],
    )


def main_culprit(why_late: Iterable[WhyLate | None]) -> tuple[VerdictCulprit | None, str | None]:
    """What to fix first, over every block given: the culprits that share one fix (analysis.remedy:
    e.g. every task that ran through the fair server, every thread to move) are added up, and the
    fix whose culprits took the most of the late cycles' windows wins; it is named by its biggest
    culprit (by task where the attribution names tasks), with the share of that time its fix
    addresses. Else None and why no culprit is named."""
    totals: dict[tuple[str | None, str, int | None], list[Any]] = {}  # culprit key -> [culprit, its µs]
    window_us = steal_ms = 0.0
    reasons = []
    for why in why_late:
        if why is None:
            reasons.append("the run was not traced")
            continue
        if not why.on:
            reasons.append(f"tracing {why.tracing}")
            continue
        window_us += why.window_us or 0.0
        steal_ms += why.steal.total_ms if why.steal is not None else 0.0
        for c in why.culprits or []:
            entry = totals.setdefault((c.kind, c.name, c.id), [c, 0.0])
            entry[1] += c.total_us or 0.0
    if not totals:
        return None, reasons[0] if reasons else "no late cycle was explained"
    groups: dict[
        object, list[tuple[float, Culprit]]
    ] = {}  # a remedy (or a culprit with none) -> its culprits with their totals
    for c, total in totals.values():
        remedy = remedy_for(c)
        groups.setdefault(remedy if remedy is not None else (c.kind, c.name, c.id), []).append((total, c))
    key, members = max(groups.items(), key=lambda g: sum(t for t, _ in g[1]))
    total_us = sum(t for t, _ in members)
    _, top = max(members, key=lambda m: m[0])
    remedy = key if isinstance(key, Remedy) else None
    fix = None
    if remedy is not None:
        fix = remedy.fix.format(steal=f" (steal {num(steal_ms, 1)} ms)" if steal_ms else "")
    return VerdictCulprit(
        kind=top.kind,
        source=top.source,
        more=len(members) - 1,
        share=round(total_us / window_us, 4) if window_us else None,
        total_us=round(total_us, 3),
        fix=fix,
        checks=list(remedy.checks) if remedy is not None else [],
    ), None


def verdict_lines(v: Verdict, *, state: str = "complete", tail: Tail | None = None) -> list[str]:
    """The verdict in words: the answer with the worst figures, on failure the main culprit and its
    fix, then how much the run proves, and with a *tail* model the rate clause (analysis.tail_text).
    *state*: the run's (a "running" checkpoint meets it "so far"; a partial or failed run says so
    where it says what it observed)."""
    lines = _verdict_lines(v, state)
    if tail is not None and v.meets is not None:
        lines.append("  " + rate_clause(tail, v.culprit.source if v.culprit is not None else None))
    return lines


def _verdict_lines(v: Verdict, state: str) -> list[str]:
    cycle = f"the {v.period_us:g} µs cycle" if v.period_us else "the cycle"
    bound = (v.period_us or 0) + (v.threshold_us or 0)
    required = (
        f" (0 missed updates, every period ≤ {num(bound, 1)} µs)" if v.default else f" (required: {v.requirement})"
    )
    if v.meets is None:
        return [f"NO VERDICT on {cycle}{required}: no cycle was measured"]
    worst = _worst(v)
    if v.meets:
        head = f"MEETS {cycle}{' so far' if state == 'running' else ''}{required}: {worst}"
        return [head, "  " + _proves(v.cycles or 0, state)]
    failed = [c for c in v.checks if not c.passed and not _shown_in_worst(c.requirement)]
    extra = "".join(f"; {c.requirement} not met ({_measured(c)})" for c in failed)
    lines = [f"FAILS {cycle}{required}: {worst}{extra}"]
    c = v.culprit
    if c is not None:
        share = f", {num(c.share * 100, 0, grouping=False)} % of the late time" if c.share is not None else ""
        fix = f"; fix: {c.fix}" if c.fix else ""
        checks = f" [softrt check: {', '.join(c.checks)}]" if c.checks else ""
        more = f" and {c.more} more with the same fix" if c.more else ""
        lines.append(f"  main culprit ({c.kind}): {c.source}{more}{share}{fix}{checks}")
    elif v.why_unknown:
        lines.append(f"  main culprit: not named ({v.why_unknown}); a traced run names it")
    lines.append("  " + _proves(v.cycles or 0, state))
    return lines


def _worst(v: Verdict) -> str:
    parts = []
    if v.worst_period_us is not None:
        over = v.worst_period_us - (v.period_us or 0)
        ratio = (
            f" ({num(v.worst_period_us / v.period_us, 1)}× nominal)"
            if v.period_us and over > 0.5 * v.period_us
            else f" (nominal {num(over, 1, sign=True)} µs)"
        )
        parts.append(f"worst period {num(v.worst_period_us, 1)} µs{ratio}")
    if v.missed_updates is not None:
        runs = f" (longest run {v.longest_miss_run:,})" if v.missed_updates else ""
        parts.append(f"{v.missed_updates:,} missed updates{runs}")
    if v.late_cycles:
        parts.append(f"{v.late_cycles:,} late cycles")
    return ", ".join(parts) or "no figures"


def _shown_in_worst(requirement: str) -> bool:
    """The parts of the requirement whose figure the worst-figures clause already gives."""
    return requirement.replace(" ", "").startswith(("period.max", "misses", "missed_updates", "late_cycles"))


def _proves(cycles: int, state: str) -> str:
    of = f" (a {state} run)" if state in ("partial", "failed") else ""
    return f"{cycles:,} cycles observed{of}, so events rarer than about 1 in {_round2(cycles):,} cycles are unseen"


def _round2(n: int) -> int:
    """*n* to two significant digits (19,950 -> 20,000)."""
    if n < 100:
        return max(n, 1)
    scale: int = 10 ** (len(str(n)) - 2)
    return round(n / scale) * scale


def _measured(c: VerdictCheck) -> str:
    if c.requirement.replace("_", "-").startswith("late-rate"):
        return "no tail model" if c.measured is None else f"≤ {c.measured:.2g} per hour, 95 % upper bound"
    return _fmt(c.measured)


def _fmt(value: float | None) -> str:
    if value is None:
        return "-"
    whole = math.isfinite(value) and abs(value) < MAX_FIXED and value == int(value)
    return f"{int(value):,}" if whole else num(value, 1)
