"""Side by side: the report's runs as columns of one table, with their verdicts (report layer).

The runs of one ``softrt compare`` (:func:`is_one_compare`) become one column per scenario, its rounds pooled by merging their streaming passes
(:meth:`softrt.analysis.RunStats.pooled`, as ``softrt compare`` pools them). Any other set of runs
becomes one column per run. A column's verdict is the summary's ``verdict`` block when the runs
have one (the worst round's, when several); older runs have none, and the cell then states the
figures that decide it: the worst period and the missed updates. :func:`side_by_side` is the
report's HTML section.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from html import escape

from ..analysis import RunStats
from ..analysis.verdict import main_culprit
from ..schema.summary import Metrics
from ..units import format_number as num
from .load import RunView
from .plots import color
from .rows import TIMING_ROWS


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
    return pooled.summary()


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
    return None, (
        f"worst period {num(m.period_us.max, 1)} µs, "
        + (f"{missed:,} missed updates" if missed is not None else "missed updates unknown")
    )


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


def swatch(i: int) -> str:
    """The colour of run *i* as a small square (the same in every figure and table)."""
    return f'<span class="swatch" style="background:{color(i)}"></span>'


def fmt_us(v: float | None, digits: int = 1) -> str:
    """A figure in a table cell ("1,234.5"; "–" for none)."""
    return "–" if v is None else num(v, digits)


def _count(v: int | None) -> str:
    return "–" if v is None else f"{v:,}"


def _late(c: Column) -> str:
    """Late cycles by softrt's one rule (analysis.cycles), counted whether traced or not; "–" for
    runs stored before softrt counted them."""
    return _count(c.metrics.late_cycles)


def _main_culprit(c: Column) -> str:
    """What to fix first over the column's rounds, as the verdict names it (analysis.verdict)."""
    culprit, _ = main_culprit(v.summary.why_late for v in c.views)
    if culprit is None:
        return "–"
    more = f" and {culprit.more} more with the same fix" if culprit.more else ""
    return f"{escape(str(culprit.kind))}: {escape(culprit.source)}{more} ({num((culprit.total_us or 0) / 1e3, 1)} ms)"


def _loads(c: Column) -> str:
    names = {}
    for v in c.views:
        for load in v.summary.loads or []:
            state = "skipped" if load.skipped_reason else "FAILED" if load.failed else ""
            if names.get(load.name, "") == "":  # a load that failed in any run is marked FAILED
                names[load.name] = state
    return ", ".join(f"{escape(n)}" + (f" ({b})" if b else "") for n, b in names.items()) or "none"


def _deviation(c: Column) -> str:
    values = [
        v.summary.motion_impact.max_deviation_counts
        for v in c.views
        if v.summary.motion_impact is not None and v.summary.motion_impact.max_deviation_counts is not None
    ]
    return fmt_us(max(values)) if values else "–"


def _timing(figure: Callable[[Metrics], float | None], digits: int) -> Callable[[Column], str]:
    return lambda c: fmt_us(figure(c.metrics), digits)


#: Rows of the side-by-side table: label, cell of a column (HTML). Times in µs.
SIDE_ROWS = (
    *((label, _timing(figure, digits)) for label, figure, digits in TIMING_ROWS),
    ("period p99.99", lambda c: fmt_us(c.metrics.period_us.p99_99)),
    ("latency p99.9", lambda c: fmt_us(c.metrics.latency_us.p99_9)),
    ("latency max", lambda c: fmt_us(c.metrics.latency_us.max)),
    ("slack min (negative: overrun)", lambda c: fmt_us(c.metrics.slack_us.min)),
    ("missed updates", lambda c: _count(c.metrics.misses.missed_updates if c.metrics.misses else None)),
    ("longest miss run", lambda c: _count(c.metrics.misses.longest_miss_run if c.metrics.misses else None)),
    ("overruns", lambda c: _count(c.metrics.misses.overruns if c.metrics.misses else None)),
    ("late cycles", _late),
    ("main culprit", _main_culprit),
    ("max deviation (counts)", _deviation),
    ("loads", _loads),
    ("mode", lambda c: escape(", ".join(sorted({v.summary.mode or "–" for v in c.views})))),
    ("rounds", lambda c: f"{len(c.views)}"),
    ("cycles", lambda c: _count(c.metrics.cycles)),
)


TEXT_ROWS = ("main culprit", "loads", "mode")


def side_by_side(runs: list[RunView], comparison: list[str] | None = None) -> str:
    """The report's section: the runs (or a compare's scenarios) as columns, the verdict first, and
    the comparison's verdict lines under it; nothing for a single run."""
    if len(runs) < 2:
        return ""
    cols = columns(runs)
    head = "".join(f"<th>{''.join(swatch(i) for i in c.runs)}{escape(c.name)}</th>" for c in cols)
    verdicts = "".join(
        f'<td class="text { {True: "good", False: "bad"}.get(c.verdict_ok, "") }">{escape(c.verdict)}</td>'
        for c in cols
    )
    rows = [f"<tr><td>verdict</td>{verdicts}</tr>"]
    for label, cell in SIDE_ROWS:
        if label == "rounds" and all(len(c.views) == 1 for c in cols):
            continue
        cls = ' class="text"' if label in TEXT_ROWS else ""
        rows.append(f"<tr><td>{label}</td>" + "".join(f"<td{cls}>{cell(c)}</td>" for c in cols) + "</tr>")
    what = "scenario (its rounds pooled)" if is_one_compare(runs) else "run"
    unjudged = (
        ""
        if any(c.verdict_ok is not None for c in cols)
        else (
            " These runs carry no verdict (recorded before softrt stored one): the verdict row states the worst "
            "period and the missed updates."
        )
    )
    lines = "".join(f"<li>{escape(line)}</li>" for line in comparison or [])
    return (
        f'<h2 id="side-by-side">Side by side</h2><p class="na">One column per {what}; times in µs.{unjudged}</p>'
        f'<table id="side-table"><tr><th></th>{head}</tr>{"".join(rows)}</table>'
        + (f'<ul class="verdict-lines">{lines}</ul>' if lines else "")
    )
