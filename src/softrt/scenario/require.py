"""``--require 'period.max<=300us,misses==0'``: pass/fail gates on tuned scenarios (pure)."""

from __future__ import annotations

import operator
import re
from dataclasses import dataclass

from ..errors import ConfigError
from ..schema.summary import Metrics
from ..units import parse_time_ns

_OPS = {"<=": operator.le, "<": operator.lt, ">=": operator.ge, ">": operator.gt, "==": operator.eq}
_TIME_SERIES = {"period": "period_us", "latency": "latency_us", "process": "process_us", "slack": "slack_us"}
_STATS = ("mean", "min", "max", "std", "p50", "p99", "p99.9", "p99.99")
_COUNTS = {
    "misses": "missed_updates",
    "missed_updates": "missed_updates",
    "longest_miss_run": "longest_miss_run",
    "overruns": "overruns",
}
_EXPR = re.compile(r"^\s*([a-z_]+(?:\.[a-z0-9_.]+)?)\s*(<=|>=|==|<|>)\s*(\S+)\s*$")


@dataclass(frozen=True)
class Requirement:
    """One comparison: ``metric op value`` (times in µs, counts as numbers)."""

    text: str
    metric: str
    op: str
    value: float

    def measure(self, metrics: Metrics) -> float | None:
        """Return the metric's value in *metrics* (None when the run has no such value)."""
        series, _, stat = self.metric.partition(".")
        if series in _TIME_SERIES:
            return getattr(getattr(metrics, _TIME_SERIES[series]), stat.replace(".", "_"))
        return getattr(metrics.misses, _COUNTS[series]) if metrics.misses is not None else None

    def check(self, metrics: Metrics) -> tuple[bool, float | None]:
        """Return (passed, measured value)."""
        value = self.measure(metrics)
        return (value is not None and _OPS[self.op](value, self.value)), value


def parse_requirements(text: str) -> list[Requirement]:
    """Parse a comma-separated list of requirements; raise ConfigError naming the bad part."""
    out = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        m = _EXPR.match(part)
        if not m:
            raise ConfigError(f"requirement {part!r} is not 'metric<op>value'", hint="e.g. period.max<=300us,misses==0")
        metric, op, raw = m.groups()
        series, _, stat = metric.partition(".")
        if series in _TIME_SERIES:
            if stat not in _STATS:
                raise ConfigError(f"requirement {part!r}: unknown statistic {stat!r}",
                                  hint=f"use {series}.{{{','.join(_STATS)}}}")
            value = parse_time_ns(raw, default_unit="us", what=f"requirement {part!r}") / 1e3
            non_negative = series != "slack"
        elif series in _COUNTS and not stat:
            try:
                value = float(raw)
            except ValueError:
                raise ConfigError(f"requirement {part!r}: {raw!r} is not a number") from None
            non_negative = True
        else:
            known = ", ".join([f"{s}.max" for s in _TIME_SERIES] + list(_COUNTS))
            raise ConfigError(f"requirement {part!r}: unknown metric {metric!r}", hint=f"known: {known}")
        if non_negative and (value < 0 or (value == 0 and op == "<")):
            raise ConfigError(f"requirement {part!r} can never be met ({metric} is never negative)")
        out.append(Requirement(text=part, metric=metric, op=op, value=value))
    if not out:
        raise ConfigError("--require is empty", hint="e.g. period.max<=300us,misses==0")
    return out
