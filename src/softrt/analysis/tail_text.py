"""The tail model in words: the verdict's clause and the full account (analysis layer; pure; issue 33).

:func:`rate_clause` is what the verdict adds (softrt.analysis.verdict): the no-model bound always,
then the fitted rate with its interval and how much longer to run, or the heavy-tail rule, or why
the fit was refused. :func:`tail_lines` is the account ``softrt tail`` and ``softrt show`` print
(evt-recipe.md, "What the user might read"). A fitted figure is never printed without its
interval: a refused :class:`~softrt.schema.tail.Tail` has none to print.
"""

from __future__ import annotations

import math

from ..schema.tail import HOURS_PER_YEAR, Tail

_EVERY = {1.0: "hour", 24.0: "day", 168.0: "week", HOURS_PER_YEAR: "year"}


def span(hours: float | None) -> str:
    """A length of time in the unit that reads best (45 min, 9.2 h, 3.1 days, 2.4 years)."""
    if hours is None or not math.isfinite(hours):
        return "never"
    if hours < 1 / 60:
        return f"{hours * 3600:.2g} s"
    if hours < 1:
        return f"{hours * 60:.2g} min"
    if hours < 48:
        return f"{hours:.2g} h"
    if hours < 2 * HOURS_PER_YEAR / 12:
        return f"{hours / 24:.2g} days"
    return f"{hours / HOURS_PER_YEAR:,.2g} years"


def per(rate_per_h: float) -> str:
    """A rate per hour as people say it: "1 per year", "0.5 per hour", "3 per day"."""
    for every_h, unit in sorted(_EVERY.items(), reverse=True):
        n = rate_per_h * every_h
        if n >= 0.95 or every_h == 1.0:
            return f"{n:.2g} per {unit}"
    return f"{rate_per_h:.2g} per hour"


def _rate(x: float) -> str:
    return f"{x:,.0f}" if x >= 100 else f"{x:.2g}" if x >= 0.01 else f"{x:.1e}"


def bound_clause(tail: Tail) -> str:
    """The no-model bound: needs no fit, so it is always given."""
    return (
        f"{tail.late:,} cycles > {tail.deadline_us:,.0f} µs in {span(tail.hours)} → ≤ "
        f"{_rate(tail.late_rate_bound_per_h)} late per hour (95 %, no model)"
    )


def rate_clause(tail: Tail, culprit: str | None = None) -> str:
    """The verdict's clause: the fitted answer (or the heavy-tail rule, or the refusal), then the
    no-model bound. *culprit*: the verdict's main culprit, named by the heavy-tail rule."""
    if tail.refused is not None:
        head = f"no tail model ({tail.refused})"
    elif tail.heavy and tail.xi is not None:
        fix = f": {culprit}" if culprit else " (a traced run names it)"
        head = (
            f"heavy tail (ξ ≥ {tail.xi.low:+.2f}): a longer run will not qualify this machine; fix the cause first{fix}"
        )
    elif tail.fitted and (lr := tail.late_rate_per_h) is not None and lr.estimate:
        low_h = 1 / lr.high if lr.high else math.inf
        high_h = 1 / lr.low if lr.low else math.inf
        head = (
            f"at this tail, one late cycle every ~{span(1 / lr.estimate)} "
            f"(95 %: {span(low_h)}–{span(high_h)}); {plan(tail)}"
        )
    elif tail.fitted:
        head = f"at this tail, no late cycle is expected; {plan(tail)}"
    else:
        head = "no tail model"
    return f"{head}; {bound_clause(tail)}"


def plan(tail: Tail) -> str:
    """How much longer to run to show the target, or that no run length will."""
    target = per(tail.target_per_h)
    if tail.run_h_needed is None:
        return f"no run length will show ≤ {target} at this tail: remove the cause"
    if tail.run_h_needed <= 0:
        return f"≤ {target} is shown (95 %)"
    return f"to claim ≤ {target}, run ≥ {span(tail.run_h_needed)} more"


def time_us(x: float) -> str:
    """A duration given in µs, in the unit that reads best."""
    if abs(x) < 10_000:
        return f"{x:,.0f} µs"
    if abs(x) < 10_000_000:
        return f"{x / 1e3:,.1f} ms"
    return f"{x / 1e6:,.3g} s"


def _iv(est: float | None, low: float | None, high: float | None, fmt: str = "{:+.2f}") -> str:
    if est is None or low is None or high is None:
        return "-"
    return f"{fmt.format(est)} [{fmt.format(low)}, {fmt.format(high)}]"


def tail_lines(tail: Tail, culprit: str | None = None) -> list[str]:
    """The full account of *tail*: observed, the fit, its checks, the return levels, the plan."""
    lines = [
        f"Tail of {tail.series}, {span(tail.hours)}, {tail.cycles:,} cycles (deadline {tail.deadline_us:,.1f} µs):",
        "  " + bound_clause(tail),
    ]
    if tail.threshold_us is not None:
        theta = f", extremal index {tail.extremal_index:.2f}" if tail.extremal_index is not None else ""
        gap = f" (gap {tail.gap_ms:g} ms)" if tail.gap_ms else ""
        lines.append(
            f"  threshold u = {tail.threshold_us:,.1f} µs: {tail.exceedances or 0:,} exceedances, "
            f"{tail.clusters or 0:,} clusters{gap}{theta}"
        )
        if tail.threshold_rule:
            lines.append(f"    rule: {tail.threshold_rule}")
    if tail.caveat:
        lines.append(f"  caveat: {tail.caveat}")
    if tail.tests:
        checks = " · ".join(
            f"{t.name} p = {t.p_value:.2g}{'' if t.ok else ' FAILED'}" for t in tail.tests if t.p_value is not None
        )
        if checks:
            lines.append(f"  checks: {checks}")
    xi = tail.xi
    if not tail.fitted or xi is None:  # (a fitted tail has its ξ)
        lines.append(f"  REFUSED: {tail.refused or 'no fit'}")
        return lines
    lines.append(
        f"  GPD ξ = {_iv(xi.estimate, xi.low, xi.high)}, σ = "
        f"{_iv(tail.sigma_us.estimate, tail.sigma_us.low, tail.sigma_us.high, '{:.2f}')} µs"
        if tail.sigma_us is not None
        else f"  GPD ξ = {_iv(xi.estimate, xi.low, xi.high)}"
    )
    lr = tail.late_rate_per_h
    if lr is not None and lr.estimate is not None:
        lines.append(f"  late bursts per hour (fitted): {_iv(lr.estimate, lr.low, lr.high, '{:.3g}')}")
    for r in tail.return_levels:
        if r.level_us is not None and r.low_us is not None:  # high None: past any time (analysis.tail._level)
            every = _EVERY.get(r.every_h, f"{r.every_h:g} h")
            high = time_us(r.high_us) if r.high_us is not None else "unbounded"
            lines.append(
                f"  worst cycle once {'an' if every == 'hour' else 'a'} {every}: {time_us(r.level_us)} "
                f"[{time_us(r.low_us)}, {high}]"
            )
    lines.append("  " + rate_clause(tail, culprit).split("; " + bound_clause(tail))[0])
    return lines
