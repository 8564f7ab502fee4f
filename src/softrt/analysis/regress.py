"""Run-to-run noise and whether a change of a headline figure exceeds it (analysis layer; the noise is a schema document).

A rig measures the same scenario again and again; its figures scatter from run to run (a VM's
hypervisor, a cache, the timer's phase). A change between two runs means something only where it
is larger than that scatter. softrt takes the scatter from the rig's own history: the runs of the
same rig and scenario with the same provenance (nothing known changed between them), at least
:data:`MIN_RUNS` of them. Their *range* (max - min) is the noise; a figure is beyond it when it
differs from their median by more than the range. The range, not a standard deviation: the
figures (a worst cycle, a count of late cycles) are heavy-tailed, and a few runs give no
distribution to fit; the range of n runs is what the next run stays within with probability
(n-1)/(n+1) when nothing changed (order statistics: a new draw falls outside the extremes of n
exchangeable draws with probability 2/(n+1)), and beyond the median by a whole range less often.
With fewer runs the noise is unknown, and said so.
"""

from __future__ import annotations

import statistics

from ..schema.doc import Doc, key

#: The headline figures: (key, name, unit). Lower is better for every one.
HEADLINE = (
    ("period_max_us", "worst period", "µs"),
    ("period_p99_99_us", "p99.99 period", "µs"),
    ("late_cycles", "late cycles", ""),
    ("missed_updates", "missed updates", ""),
    ("late_rate_per_h", "late rate", "/h"),
)
#: The figures a regression is judged on (counts depend on a run's length; their rate does not).
JUDGED = ("period_max_us", "period_p99_99_us", "late_rate_per_h")
MIN_RUNS = 3
HOW = (
    "noise = the range (max - min) of the figure over the rig's earlier runs of the same scenario with "
    f"the same provenance (at least {MIN_RUNS}); a change beyond it differs from their median by more than "
    "that range"
)


class Noise(Doc):
    """The scatter of one figure over ``n`` baseline runs (median and range None when unknown), as the
    fleet commands' ``--json`` writes it (``runs``, ``median``, ``range``, ``known``)."""

    n: int = key("runs", 0, min=0)
    median: float | None = None
    spread: float | None = key("range")
    known: bool = False  # at least MIN_RUNS runs: a change can be judged against it

    def judge(self, value: float | None) -> str:
        """ "worse", "better", "within noise", or why it cannot be said."""
        if value is None:
            return "not measured"
        if not self.known or self.median is None or self.spread is None:
            return f"noise unknown ({self.n} run{'s' if self.n != 1 else ''})"
        delta = value - self.median
        if abs(delta) <= self.spread:
            return "within noise"
        return "worse" if delta > 0 else "better"


def noise(values: list[float | None]) -> Noise:
    """The noise of a figure over the baseline runs' *values* (None: not measured, left out)."""
    have = [float(v) for v in values if v is not None]
    if len(have) < MIN_RUNS:
        return Noise(n=len(have))
    return Noise(n=len(have), median=statistics.median(have), spread=max(have) - min(have), known=True)


def trend(values: list[float | None]) -> str:
    """An arrow for the last value against the median of the ones before: ↑ worse, ↓ better, → the same
    (within a tenth of that median), ? when there is nothing to compare."""
    have = [float(v) for v in values if v is not None]
    if len(have) < 2:
        return "?"
    before = statistics.median(have[:-1])
    if abs(have[-1] - before) <= 0.1 * abs(before):
        return "→"
    return "↑" if have[-1] > before else "↓"
