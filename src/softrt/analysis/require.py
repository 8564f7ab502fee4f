"""``--require 'period.max<=300us,misses==0'``: what a run must meet (analysis layer; pure).

One grammar for ``softrt run`` (the verdict, softrt.analysis.verdict) and ``softrt compare`` (a gate
on its tuned scenarios): comma-separated ``metric<op>value`` parts, every one of which must hold.
Times are ``SERIES.STAT`` in µs (any unit: ``0.27ms``); the statistics are those the summary holds:
the high percentiles of period, latency and processing time, the low ones of slack (its bad tail:
a short slack, negative on an overrun). Counts are plain numbers.

``late-rate<=1/year`` (issue 33) gates on the tail model (softrt.analysis.tail): a rate per
``h``/``hour``, ``day``, ``week`` or ``year``, compared with the 95 % upper bound, never the
estimate: the fitted upper bound when the model was not refused, else the no-model Poisson bound.
Only ``<=`` and ``<`` make sense for it.
"""

from __future__ import annotations

import operator
import re
from dataclasses import dataclass

from ..errors import ConfigError
from ..schema.summary import Metrics
from ..schema.tail import HOURS_PER_YEAR, Tail
from ..units import parse_time_ns

_OPS = {"<=": operator.le, "<": operator.lt, ">=": operator.ge, ">": operator.gt, "==": operator.eq}
_TIME_SERIES = {"period": "period_us", "latency": "latency_us", "process": "process_us", "slack": "slack_us"}
_COMMON = ("mean", "min", "max", "std", "p50")
_STATS = {
    series: _COMMON + (("p1", "p0.1", "p0.01") if series == "slack" else ("p99", "p99.9", "p99.99"))
    for series in _TIME_SERIES
}
#: Counts in the summary's ``misses`` block, and the late cycles at its top (softrt.analysis.cycles).
_COUNTS = {
    "misses": "missed_updates",
    "missed_updates": "missed_updates",
    "longest_miss_run": "longest_miss_run",
    "overruns": "overruns",
    "late_cycles": "late_cycles",
}
_EXPR = re.compile(r"^\s*([a-z_-]+(?:\.[a-z0-9_.]+)?)\s*(<=|>=|==|<|>)\s*(\S+)\s*$")
_RATE = re.compile(r"^([0-9]*\.?[0-9]+(?:e-?[0-9]+)?)/(h|hour|day|week|year)$")
_PER_H = {"h": 1.0, "hour": 1.0, "day": 24.0, "week": 168.0, "year": HOURS_PER_YEAR}
RATE_METRICS = ("late-rate", "late_rate")
_EXAMPLE = "e.g. period.max<=300us,misses==0"


@dataclass(frozen=True)
class Requirement:
    """One comparison: ``metric op value`` (times in µs, counts as numbers)."""

    text: str
    metric: str
    op: str
    value: float

    def measure(self, metrics: Metrics, tail: Tail | None = None) -> float | None:
        """Return the metric's value in *metrics* or *tail* (None when the run has no such value)."""
        if self.metric in RATE_METRICS:
            return rate_bound(tail)
        series, _, stat = self.metric.partition(".")
        if series in _TIME_SERIES:
            value: float | None = getattr(getattr(metrics, _TIME_SERIES[series]), stat.replace(".", "_"))
            return value
        if series == "late_cycles":
            return metrics.late_cycles
        return getattr(metrics.misses, _COUNTS[series]) if metrics.misses is not None else None

    def check(self, metrics: Metrics, tail: Tail | None = None) -> tuple[bool, float | None]:
        """Return (passed, measured value); a value the run does not have fails."""
        value = self.measure(metrics, tail)
        return (value is not None and _OPS[self.op](value, self.value)), value


def parse_requirements(text: str) -> list[Requirement]:
    """Parse a comma-separated list of requirements; raise ConfigError naming the bad part."""
    out = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        m = _EXPR.match(part)
        if not m:
            raise ConfigError(f"requirement {part!r} is not 'metric<op>value'", hint=_EXAMPLE)
        metric, op, raw = m.groups()
        series, _, stat = metric.partition(".")
        if metric in RATE_METRICS:
            out.append(Requirement(text=part, metric=metric, op=op, value=_rate_per_h(part, op, raw)))
            continue
        if series in _TIME_SERIES:
            if stat not in _STATS[series]:
                raise ConfigError(
                    f"requirement {part!r}: unknown statistic {stat!r}",
                    hint=f"use {series}.{{{','.join(_STATS[series])}}}",
                )
            value = parse_time_ns(raw, default_unit="us", what=f"requirement {part!r}") / 1e3
            non_negative = series != "slack"
        elif series in _COUNTS and not stat:
            try:
                value = float(raw)
            except ValueError:
                raise ConfigError(f"requirement {part!r}: {raw!r} is not a number", hint=_EXAMPLE) from None
            non_negative = True
        else:
            known = ", ".join([f"{s}.max" for s in _TIME_SERIES] + list(_COUNTS) + ["late-rate"])
            raise ConfigError(f"requirement {part!r}: unknown metric {metric!r}", hint=f"known: {known}")
        if non_negative and (value < 0 or (value == 0 and op == "<")):
            raise ConfigError(f"requirement {part!r} can never be met ({metric} is never negative)", hint=_EXAMPLE)
        out.append(Requirement(text=part, metric=metric, op=op, value=value))
    if not out:
        raise ConfigError("--require is empty", hint=_EXAMPLE)
    return out


def rate_bound(tail: Tail | None) -> float | None:
    """The late rate per hour a gate holds: the fitted 95 % upper bound, else the no-model bound."""
    if tail is None:
        return None
    if tail.fitted and tail.late_rate_per_h is not None and tail.late_rate_per_h.high is not None:
        return tail.late_rate_per_h.high
    return tail.late_rate_bound_per_h if tail.hours > 0 else None


def parse_rate(text: str, what: str = "rate") -> float:
    """A rate such as ``1/year`` or ``0.5/h`` in events per hour; ConfigError when it is not one."""
    m = _RATE.match(text.strip().replace(" ", ""))
    if not m or float(m.group(1)) <= 0:
        raise ConfigError(f"{what} {text!r} is not a positive rate", hint="e.g. 1/year (per h, day, week or year)")
    return float(m.group(1)) / _PER_H[m.group(2)]


def _rate_per_h(part: str, op: str, raw: str) -> float:
    m = _RATE.match(raw)
    if not m:
        raise ConfigError(
            f"requirement {part!r}: {raw!r} is not a rate", hint="e.g. late-rate<=1/year (per h, day, week or year)"
        )
    if op not in ("<=", "<"):
        raise ConfigError(
            f"requirement {part!r}: a late rate can only be bounded from above", hint="e.g. late-rate<=1/year"
        )
    value = float(m.group(1)) / _PER_H[m.group(2)]
    if value <= 0:
        raise ConfigError(
            f"requirement {part!r} can never be met (no run shows a rate of 0)",
            hint="give a positive rate, e.g. late-rate<=1/year",
        )
    return value
