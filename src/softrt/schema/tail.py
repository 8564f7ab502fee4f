"""The tail model of one per-cycle series as typed documents (schema layer; issue 33).

What :func:`softrt.analysis.tail.fit_tail` finds: peaks over a threshold, declustered into
independent clusters, a generalized Pareto distribution (GPD) fitted to the cluster peaks, the
rate of late cycles and the return levels it implies, each with its 95 % interval, the tests of
the fit, and the no-model Poisson bound that needs no fit. Method and sources:
:mod:`softrt.analysis.tail`.

A figure without its interval is never set: when the fit is ``refused`` (too few clusters, a
failed test), every fitted figure is None and only the no-model bound ``late_rate_bound_per_h``
speaks.
"""

from __future__ import annotations

from dataclasses import field
from typing import Any

from .doc import Doc, many

HOURS_PER_YEAR = 8766.0  # 365.25 days
#: The return periods every tail reports: once an hour, a day, a week, a year.
RETURN_EVERY_H = (1.0, 24.0, 168.0, HOURS_PER_YEAR)


def _whole() -> Any:
    """A whole number that cannot be negative, 0 by default."""
    return field(default=0, metadata={"min": 0})


class Interval(Doc):
    """An estimate with its 95 % confidence interval (all None when there is no estimate)."""

    estimate: float | None = None
    low: float | None = None
    high: float | None = None


class ReturnLevel(Doc):
    """The value a cycle exceeds once every ``every_h`` hours on average, with its 95 % interval."""

    every_h: float = 0.0
    level_us: float | None = None
    low_us: float | None = None
    high_us: float | None = None


class TailTest(Doc):
    """One check of the fit or of its assumptions: its p-value and whether it passed (None: not run)."""

    name: str = ""
    p_value: float | None = None
    ok: bool | None = None


class Tail(Doc):
    """The tail of one per-cycle series: the no-model bound, the fit, its answers and its checks."""

    series: str = "period_us"
    deadline_us: float = 0.0  # a cycle is late beyond it
    hours: float = 0.0  # observed time
    cycles: int = _whole()
    late: int = _whole()  # cycles beyond the deadline
    late_rate_bound_per_h: float = 0.0  # no-model 95 % upper Poisson bound
    threshold_us: float | None = None
    threshold_rule: str | None = None
    gap_ms: float | None = None
    exceedances: int | None = field(default=None, metadata={"min": 0})
    clusters: int | None = field(default=None, metadata={"min": 0})
    extremal_index: float | None = None
    xi: Interval | None = None
    sigma_us: Interval | None = None
    late_rate_per_h: Interval | None = None  # fitted
    return_levels: list[ReturnLevel] = many()
    target_per_h: float = 1.0 / HOURS_PER_YEAR
    run_h_needed: float | None = None
    heavy: bool = False
    tests: list[TailTest] = many()
    refused: str | None = None
    caveat: str | None = None

    @property
    def fitted(self) -> bool:
        """Whether the fitted figures may be shown (a fit was made and not refused)."""
        return self.refused is None and self.xi is not None
