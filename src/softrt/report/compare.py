"""Side by side: the report's runs as columns of one table, with their verdicts (report layer).

The runs of one ``softrt compare`` (:func:`is_one_compare`) become one column per scenario, its rounds pooled by merging their streaming passes
(:meth:`softrt.analysis.RunStats.pooled`, as ``softrt compare`` pools them). Any other set of runs
becomes one column per run. A column's verdict is the summary's ``verdict`` block when the runs
have one (the worst round's, when several); older runs have none, and the cell then states the
figures that decide it: the worst period and the missed updates.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..analysis import RunStats
from ..schema.summary import Metrics
from .load import RunView


@dataclass
class Column:
    """One column: a scenario (its rounds) or one run."""

    name: str
    runs: list[int]  # indexes into the report's runs (their colours)
    views: list[RunView] = field(repr=False, default_factory=list)
    metrics: Metrics = field(default_factory=Metrics)
    verdict_ok: bool | None = None  # None: no verdict stored (the figures are stated)
    verdict: str = "–"

    @property
    def first(self) -> RunView:
        return self.views[0]


def is_one_compare(runs: list[RunView]) -> bool:
    """True for the runs of one ``softrt compare``: two or more scenarios, no (scenario, round)
    twice, and one comparison's id on every run (``compare_id``; runs stored before it existed:
    a compare round on every run)."""
    rounds = [(r.summary.scenario, r.summary.compare_round) for r in runs]
    ids = {getattr(r.summary, "compare_id", None) for r in runs}
    same = len(ids) == 1 and None not in ids if ids != {None} else all(rnd is not None for _, rnd in rounds)
    return same and len({s for s, _ in rounds}) >= 2 and len(set(rounds)) == len(rounds)


def columns(runs: list[RunView]) -> list[Column]:
    """The table's columns, in the order the runs came (a scenario where it first appears)."""
    by_scenario = is_one_compare(runs)
    out: dict[str, Column] = {}
    for i, r in enumerate(runs):
        key = (r.summary.scenario or r.run_id) if by_scenario else r.run_id
        col = out.setdefault(key, Column(name=key if by_scenario else r.label, runs=[]))
        col.runs.append(i)
        col.views.append(r)
    for col in out.values():
        col.metrics = _pooled(col.views)
        col.verdict_ok, col.verdict = _verdict(col)
    return list(out.values())


def _pooled(views: list[RunView]) -> Metrics:
    if len(views) == 1 or any(v.stats is None for v in views):
        return views[0].summary.metrics
    pooled = RunStats.pooled([v.stats for v in views], views[0].period_ns or 0)
    return Metrics.from_dict(pooled.summary(), "the pooled figures")


def _verdict(col: Column) -> tuple[bool | None, str]:
    """(passed, text) of the column: the stored verdicts' (the worst round first), else the figures."""
    stored = [v for v in (verdict_of(r.summary) for r in col.views) if v is not None]
    if stored:
        failed = [v for v in stored if v[0] is False]
        ok, text = (failed or stored)[0]
        rounds = f" ({len(failed)} of {len(stored)} rounds failed)" if len(stored) > 1 and failed else ""
        return ok, text + rounds
    m = col.metrics
    if m.period_us.max is None:
        return None, "no period measured"
    missed = m.misses.missed_updates if m.misses is not None else None
    return None, (f"worst period {m.period_us.max:,.1f} µs, "
                  + (f"{missed:,} missed updates" if missed is not None else "missed updates unknown"))


def verdict_of(summary) -> tuple[bool | None, str] | None:
    """(passed, one line) from the summary's ``verdict`` block, None when it has none (an older run)."""
    block = getattr(summary, "verdict", None)
    if block is None:
        extra = getattr(summary, "extra", None) or {}
        block = extra.get("verdict") if isinstance(extra, dict) else None
    if block is None:
        return None
    get = block.get if isinstance(block, dict) else (lambda k, b=block: getattr(b, k, None))
    ok = get("meets")
    text = "meets " if ok else "fails " if ok is False else "not judged: "
    return ok, text + str(get("requirement") or "its requirement")
