"""The lab's view across rigs: one row per rig, the difference of two runs, the regressions (store layer).

Built on :class:`softrt.store.history.History` (SQLite or PostgreSQL alike): every run's summary
as the history holds it, read as a typed :class:`~softrt.schema.summary.RunSummary` (a row written
by another rig is checked like a file). A run's rig is its provenance's ``rig_id``
(schema.provenance); runs written before softrt recorded one are grouped by host name. What
changed between runs is :class:`softrt.schema.rigfacts.RigFacts`; whether a figure
changed beyond the rig's own noise is :mod:`softrt.analysis.regress` (its ``HOW`` says how).

OSADL's QA farm keeps each board's kernel beside its latency data "so any regression can be
related to a possible kernel upgrade" (osadl.org, "QA Farm Realtime"): here every provenance field is.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path

from ..analysis.regress import HEADLINE, HOW, Noise, noise, trend
from ..errors import ConfigError
from ..schema.provenance import CAUSES, FIELDS
from ..schema.rigfacts import RigFacts, rig_facts
from ..schema.summary import RunSummary
from ..schema.text import printable
from .history import History, RunRecord, load_run_summary, parse_when
from .rundir import SUMMARY

TREND_RUNS = 5
NS_PER_H = 3.6e12


@dataclass(frozen=True)
class FleetRun:
    """One run as the fleet commands see it."""

    run_id: str
    started_at: str | None
    scenario: str
    summary: RunSummary = field(repr=False)
    prov: RigFacts = field(repr=False)
    figures: Figures = field(repr=False)

    @property
    def rig(self) -> str:
        """The rig's key: its id, else ``host:<name>`` for a run that predates provenance."""
        return self.prov.rig_id or f"host:{self.prov.hostname or '?'}"

    @property
    def label(self) -> str:
        return self.prov.rig_label or self.prov.hostname or self.rig

    def causes(self) -> tuple:
        """The provenance whose change may explain a change of timing (schema.provenance.CAUSES)."""
        return tuple(self.prov.of(name) for name in CAUSES)


def fleet_run(run_id: str, started_at: str | None, summary: RunSummary) -> FleetRun:
    return FleetRun(
        run_id,
        started_at,
        printable(summary.scenario or "run"),
        summary,
        rig_facts(summary),
        figures(summary),
    )


@dataclass(frozen=True)
class LateRate:
    """The late rate per hour from a run's tail model: the fitted estimate with its 95 % interval
    (None where no model was fitted) and the 95 % upper bound without a model."""

    estimate: float | None = None
    low: float | None = None
    high: float | None = None
    bound: float | None = None


def late_rate(summary: RunSummary) -> LateRate | None:
    """The late rate per hour from the summary's tail model (schema.tail), where the run has one."""
    tail = summary.tail
    if tail is None:
        return None
    rate = tail.late_rate_per_h
    out = LateRate(
        *((rate.estimate, rate.low, rate.high) if rate is not None else (None, None, None)),
        bound=tail.late_rate_bound_per_h,
    )
    values = (out.estimate, out.low, out.high, out.bound)
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values if v is not None):
        return None  # a row from another rig with something else there
    return out if any(v is not None for v in values) else None


@dataclass(frozen=True)
class Figures:
    """The headline figures of a run (analysis.regress.HEADLINE names them), None where not measured."""

    period_max_us: float | None
    period_p99_99_us: float | None
    late_cycles: int | None
    missed_updates: int | None
    late_rate_per_h: float | None

    def of(self, key: str) -> float | None:
        """The figure HEADLINE names *key* (its keys are these fields' names)."""
        return getattr(self, key)


def figures(summary: RunSummary) -> Figures:
    """The headline figures of a run (analysis.regress.HEADLINE), None where not measured."""
    m = summary.metrics
    rate = late_rate(summary)
    per_h = rate.estimate if rate else None
    hours = (m.cycles * summary.config.period_ns / NS_PER_H) if m.cycles and summary.config.period_ns else None
    if per_h is None and m.late_cycles is not None and hours:
        per_h = m.late_cycles / hours  # no tail model: the rate the run saw
    return Figures(
        period_max_us=m.period_us.max,
        period_p99_99_us=m.period_us.p99_99,
        late_cycles=m.late_cycles,
        missed_updates=m.misses.missed_updates if m.misses is not None else None,
        late_rate_per_h=per_h,
    )


def load_runs(
    history: History,
    *,
    rig: str | None = None,
    scenario: str | None = None,
    kernel: str | None = None,
    since=None,
    until=None,
    unreadable: list | None = None,
) -> list[FleetRun]:
    """The history's finished runs matching every filter, oldest first (*rig*: an id, a label or a host name).

    A row whose stored summary cannot be read (another rig's, corrupt or of a newer softrt) is left
    out, and ``(run id, why)`` appended to *unreadable*: one bad row does not hide the lab.
    """
    out = []
    for record in history.list_runs(scenario=scenario, since=since, until=until):
        if record.status == "running":
            continue  # a run still going has no final figures
        try:
            run = fleet_run(record.run_id, record.started_at, record.summary)
        except ConfigError as err:
            if unreadable is not None:
                unreadable.append((printable(record.run_id), str(err)))
            continue
        if rig is not None and rig not in (run.rig, run.prov.rig_id, run.prov.rig_label, run.prov.hostname):
            continue
        if kernel is not None and run.prov.kernel != kernel:
            continue
        out.append(run)
    return out


def by_rig(runs: list[FleetRun]) -> dict[str, list[FleetRun]]:
    out: dict[str, list[FleetRun]] = {}
    for run in runs:
        out.setdefault(run.rig, []).append(run)
    return out


@dataclass(frozen=True)
class FleetRow:
    """One rig in ``softrt fleet`` (its fields are the keys of ``--json``, in order)."""

    rig: str
    label: str
    cpu: str | None
    kernel: str | None
    runs: int
    last_run: str
    last_started_at: str | None
    scenario: str
    verdict: str | None  # "pass", "fail" or None (no verdict)
    late_rate_per_h: LateRate | None
    worst_period_us: float | None
    trend: str
    trend_worst_period_us: list[float | None]


def fleet_rows(runs: list[FleetRun], trend_runs: int = TREND_RUNS) -> list[FleetRow]:
    """One row per rig: its label, CPU, kernel, last run, verdict, late rate (or worst cycle) and trend."""
    rows = []
    for rig, mine in sorted(by_rig(runs).items(), key=lambda kv: kv[1][-1].label):
        last = mine[-1]
        verdict = last.summary.verdict
        recent = [r.figures.period_max_us for r in mine[-trend_runs:]]
        rows.append(
            FleetRow(
                rig=rig,
                label=last.label,
                cpu=last.prov.cpu_model,
                kernel=last.prov.kernel,
                runs=len(mine),
                last_run=last.run_id,
                last_started_at=last.started_at,
                scenario=last.scenario,
                verdict=None if verdict is None or verdict.meets is None else ("pass" if verdict.meets else "fail"),
                late_rate_per_h=late_rate(last.summary),
                worst_period_us=last.figures.period_max_us,
                trend=trend(recent),
                trend_worst_period_us=recent,
            )
        )
    return rows


def baseline(runs: list[FleetRun], like: FleetRun, before: FleetRun | None = None) -> list[FleetRun]:
    """*like*'s rig and scenario's runs with *like*'s provenance, started before *before* (not itself)."""
    out = []
    for run in runs:
        if before is not None and run.run_id == before.run_id:
            break
        if run.rig == like.rig and run.scenario == like.scenario and run.causes() == like.causes():
            out.append(run)
    return out


def figure_noise(base: list[FleetRun]) -> dict[str, Noise]:
    return {key: noise([r.figures.of(key) for r in base]) for key, _, _ in HEADLINE}


def changed(a: FleetRun, b: FleetRun, names: tuple[str, ...] = FIELDS) -> dict[str, tuple[str | None, str | None]]:
    """The provenance fields (of *names*) that differ between *a* and *b*: name -> (a's, b's)."""
    return {n: (a.prov.of(n), b.prov.of(n)) for n in names if a.prov.of(n) != b.prov.of(n)}


def _flat(doc: object, prefix: str = "") -> dict[str, object]:
    """*doc*'s leaves by their dotted path (a list as its JSON text)."""
    if isinstance(doc, dict):
        out: dict[str, object] = {}
        for k, v in doc.items():
            out.update(_flat(v, f"{prefix}{k}."))
        return out
    return {prefix.rstrip("."): json.dumps(doc) if isinstance(doc, list) else doc}


#: Configuration keys that differ between any two runs and say nothing about the machine.
_CONFIG_SKIP = {"out_dir"}


def config_changes(a: FleetRun, b: FleetRun) -> dict[str, tuple[object, object]]:
    """The configuration keys (dotted) whose values differ between *a* and *b*: key -> (a's, b's)."""
    fa, fb = _flat(a.summary.config.to_dict()), _flat(b.summary.config.to_dict())
    return {
        k: (fa.get(k), fb.get(k)) for k in sorted(set(fa) | set(fb)) if k not in _CONFIG_SKIP and fa.get(k) != fb.get(k)
    }


@dataclass(frozen=True)
class RunIdent:
    """Which run: its id, start, rig and scenario (the head of a diff)."""

    run_id: str
    started_at: str | None
    rig: str
    label: str
    scenario: str

    @classmethod
    def of(cls, run: FleetRun) -> RunIdent:
        return cls(run.run_id, run.started_at, run.rig, run.label, run.scenario)


@dataclass(frozen=True)
class AB:
    """A value of run A and of run B."""

    a: object
    b: object


@dataclass(frozen=True)
class HeadlineChange:
    """One headline figure of runs A and B, its change and how it compares with the noise."""

    figure: str  # its key in analysis.regress.HEADLINE
    name: str
    unit: str
    a: float | None
    b: float | None
    change: float | None
    noise: Noise
    judged: str


@dataclass(frozen=True)
class RunDiff:
    """What differs between two runs (``softrt diff``): provenance and configuration as name -> (A's, B's)."""

    a: RunIdent
    b: RunIdent
    same_rig: bool
    same_scenario: bool
    provenance: dict[str, AB]  # field name -> its values
    config: dict[str, AB]  # dotted configuration key -> its values
    headline: list[HeadlineChange]
    noise_runs: list[str]
    noise_how: str


def diff(a: FleetRun, b: FleetRun, runs: list[FleetRun]) -> RunDiff:
    """Every provenance and configuration difference of *a* and *b*, and each headline figure's
    change judged against the noise of *a*'s rig and scenario with *a*'s provenance: its runs up to
    the later of the two (*a* included, *b* not), in *runs* (oldest first)."""
    ids = [r.run_id for r in runs]
    last = max((ids.index(r.run_id) for r in (a, b) if r.run_id in ids), default=len(runs) - 1)
    base = [r for r in baseline(runs[: last + 1], a) if r.run_id != b.run_id]
    noises = figure_noise(base)
    headline = []
    for key, name, unit in HEADLINE:
        va, vb = a.figures.of(key), b.figures.of(key)
        change = None if va is None or vb is None else vb - va
        headline.append(HeadlineChange(key, name, unit, va, vb, change, noises[key], noises[key].judge(vb)))
    return RunDiff(
        a=RunIdent.of(a),
        b=RunIdent.of(b),
        same_rig=a.rig == b.rig,
        same_scenario=a.scenario == b.scenario,
        provenance={k: AB(va, vb) for k, (va, vb) in changed(a, b).items()},
        config={k: AB(va, vb) for k, (va, vb) in config_changes(a, b).items()},
        headline=headline,
        noise_runs=[r.run_id for r in base],
        noise_how=HOW + f"; here: {len(base)} run(s) of rig {a.label}, scenario {a.scenario}",
    )


def jsonable(value: object) -> object:
    """*value* as JSON: a typed value of the fleet commands (a frozen dataclass) as the object of its
    fields by name, in their order; a document by its own ``to_dict``; containers item
    by item. The commands' ``--json`` is written from it (the keys are the fields' names)."""
    if hasattr(value, "to_dict"):
        return value.to_dict()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    return value


def resolve(ref: str, history: History) -> tuple[str | None, FleetRun]:
    """A run given as a run directory or a run id (prefix, ``last``, ``last~N``) in *history*."""
    path = Path(ref)
    if (path / SUMMARY).is_file():
        summary = load_run_summary(path)
        return None, fleet_run(summary.run_id, summary.started_at, summary)
    if path.exists():
        raise ConfigError(
            f"{ref} is not a run directory (no {SUMMARY})", hint="give a run directory or a run id from softrt history"
        )
    record: RunRecord = history.get(ref)
    return record.run_id, fleet_run(record.run_id, record.started_at, record.summary)


def in_order(runs: list[FleetRun], extra: list[FleetRun]) -> list[FleetRun]:
    """*runs* with the runs of *extra* that are not in it, by start time (for a run given as a directory)."""
    known = {r.run_id for r in runs}
    merged = runs + [r for r in extra if r.run_id not in known]
    return sorted(merged, key=lambda r: _epoch(r.started_at))


def _epoch(when: str | None) -> float:
    try:
        return parse_when(when).timestamp() if when else 0.0  # type: ignore[union-attr]
    except (ConfigError, OverflowError, ValueError):
        return 0.0
