"""Regressions found for the user: a provenance change followed by worse figures (store layer).

For each rig and scenario, the runs in time order fall into stretches of one provenance (the
fields a change of which may explain a change of timing: kernel, its build, preemption model,
command line, microcode, BIOS, tuning, NIC; schema.provenance.CAUSES). Where one stretch follows
another, the later stretch's median of each judged figure (worst period, p99.99, late rate) is
compared with the noise of every earlier run with the earlier stretch's provenance
(analysis.regress: beyond when it exceeds their median by more than their range). A worse figure
makes an entry: the last good run, the first bad run and what changed between them. The median
of the later stretch, not its first run alone, so one unlucky run does not make a regression
(nor hide one). Across rigs, each kernel that followed a change is ranked by how many rigs got
worse with it (OSADL's question: did this kernel make any board worse).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from itertools import groupby

from ..analysis.regress import HEADLINE, HOW, JUDGED, Noise
from ..schema.provenance import CAUSES
from .fleet import FleetRun, baseline, changed, figure_noise


def stretches(runs: list[FleetRun]) -> list[list[FleetRun]]:
    """The runs (one rig and scenario, in order) cut where the provenance changes."""
    return [list(group) for _, group in groupby(runs, key=lambda r: r.causes())]


def _median(runs: list[FleetRun], key: str) -> float | None:
    have = [v for r in runs if (v := r.figures.of(key)) is not None]
    return statistics.median(have) if have else None


@dataclass(frozen=True)
class JudgedFigure:
    """One judged figure of the stretch after a change: its median against the noise before it."""

    name: str
    unit: str
    after: float | None
    noise: Noise
    judged: str


@dataclass(frozen=True)
class RunAt:
    """A run named by its id and start (the last good and the first bad run of a regression)."""

    run_id: str
    started_at: str | None

    @classmethod
    def of(cls, run: FleetRun) -> RunAt:
        return cls(run.run_id, run.started_at)


@dataclass(frozen=True)
class BeforeAfter:
    """A provenance field's value before a change and after it."""

    before: object
    after: object


@dataclass(frozen=True)
class Regression:
    """A provenance change on one rig and scenario followed by a figure worse beyond the noise."""

    rig: str
    label: str
    scenario: str
    last_good: RunAt
    first_bad: RunAt
    runs_after: int
    change: dict[str, BeforeAfter]  # provenance field -> its values
    worse: list[str]  # the keys of the figures judged worse
    figures: dict[str, JudgedFigure]  # figure key (analysis.regress.JUDGED) -> its judgement


@dataclass(frozen=True)
class KernelRank:
    """A kernel that followed a change: on how many rigs it was tested, and on which it made things worse."""

    kernel: str | None
    rigs_worse: int
    rigs_tested: int
    rigs: list[str]


@dataclass(frozen=True)
class Regressions:
    """What ``softrt fleet --regressions`` finds: the regressions, the kernels ranked, the changes not judged."""

    regressions: list[Regression]
    kernels: list[KernelRank]
    changes_with_unknown_noise: int
    how: str = HOW


def _judge(group: list[FleetRun], good: list[FleetRun], bad: list[FleetRun]) -> dict[str, JudgedFigure]:
    """Each judged figure of the *bad* stretch against the noise before it, by its key."""
    noises = figure_noise(baseline(group, good[-1], before=bad[0]))
    names = {key: (name, unit) for key, name, unit in HEADLINE}
    out = {}
    for key in JUDGED:
        value = _median(bad, key)
        out[key] = JudgedFigure(names[key][0], names[key][1], value, noises[key], noises[key].judge(value))
    return out


def find(runs: list[FleetRun]) -> Regressions:
    """The regressions in *runs* (any rigs and scenarios, oldest first) and the kernels ranked."""
    groups: dict[tuple, list[FleetRun]] = {}
    for run in runs:
        groups.setdefault((run.rig, run.scenario), []).append(run)
    entries, undecided = [], 0
    kernels: dict[str | None, tuple[set[str], set[str]]] = {}  # kernel -> (rigs worse, rigs tested)
    for (rig, scenario), group in sorted(groups.items()):
        parts = stretches(group)
        for good, bad in zip(parts, parts[1:]):
            judged = _judge(group, good, bad)
            known = [f for f in judged.values() if f.noise.known and f.after is not None]
            worse = [k for k, f in judged.items() if f.judged == "worse"]
            change = changed(good[-1], bad[0], CAUSES)
            kernel = change.get("kernel")
            if kernel is not None and known:
                rigs_worse, rigs_tested = kernels.setdefault(kernel[1], (set(), set()))
                rigs_tested.add(rig)
                if worse:
                    rigs_worse.add(rig)
            if not known:
                undecided += 1
            if not worse:
                continue
            entries.append(
                Regression(
                    rig,
                    bad[0].label,
                    scenario,
                    RunAt.of(good[-1]),
                    RunAt.of(bad[0]),
                    len(bad),
                    {k: BeforeAfter(a, b) for k, (a, b) in change.items()},
                    worse,
                    judged,
                )
            )
    ranked = sorted(
        (KernelRank(k, len(worse), len(tested), sorted(worse)) for k, (worse, tested) in kernels.items()),
        key=lambda k: (-k.rigs_worse, -k.rigs_tested, k.kernel),
    )
    return Regressions(entries, ranked, undecided)
