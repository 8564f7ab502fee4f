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
from itertools import groupby

from ..analysis.regress import HEADLINE, HOW, JUDGED
from ..schema.provenance import CAUSES
from .fleet import FleetRun, baseline, changed, figure_noise


def stretches(runs: list[FleetRun]) -> list[list[FleetRun]]:
    """The runs (one rig and scenario, in order) cut where the provenance changes."""
    return [list(group) for _, group in groupby(runs, key=lambda r: r.causes())]


def _median(runs: list[FleetRun], key: str) -> float | None:
    have = [r.figures[key] for r in runs if r.figures[key] is not None]
    return statistics.median(have) if have else None


def _judge(group: list[FleetRun], good: list[FleetRun], bad: list[FleetRun]) -> dict:
    """Each judged figure of the *bad* stretch against the noise before it."""
    noises = figure_noise(baseline(group, good[-1], before=bad[0]))
    names = {key: (name, unit) for key, name, unit in HEADLINE}
    out = {}
    for key in JUDGED:
        value = _median(bad, key)
        out[key] = {
            "name": names[key][0],
            "unit": names[key][1],
            "after": value,
            "noise": noises[key].to_dict(),
            "judged": noises[key].judge(value),
        }
    return out


def find(runs: list[FleetRun]) -> dict:
    """The regressions in *runs* (any rigs and scenarios, oldest first) and the kernels ranked."""
    groups: dict[tuple, list[FleetRun]] = {}
    for run in runs:
        groups.setdefault((run.rig, run.scenario), []).append(run)
    entries, undecided, kernels = [], 0, {}
    for (rig, scenario), group in sorted(groups.items()):
        parts = stretches(group)
        for good, bad in zip(parts, parts[1:]):
            judged = _judge(group, good, bad)
            known = [f for f in judged.values() if f["noise"]["known"] and f["after"] is not None]
            worse = [k for k, f in judged.items() if f["judged"] == "worse"]
            change = changed(good[-1], bad[0], CAUSES)
            kernel = change.get("kernel")
            if kernel is not None and known:
                seen = kernels.setdefault(kernel[1], {"kernel": kernel[1], "rigs_worse": set(), "rigs_tested": set()})
                seen["rigs_tested"].add(rig)
                if worse:
                    seen["rigs_worse"].add(rig)
            if not known:
                undecided += 1
            if not worse:
                continue
            entries.append(
                {
                    "rig": rig,
                    "label": bad[0].label,
                    "scenario": scenario,
                    "last_good": {"run_id": good[-1].run_id, "started_at": good[-1].started_at},
                    "first_bad": {"run_id": bad[0].run_id, "started_at": bad[0].started_at},
                    "runs_after": len(bad),
                    "change": {k: {"before": a, "after": b} for k, (a, b) in change.items()},
                    "worse": worse,
                    "figures": judged,
                }
            )
    ranked = sorted(
        (
            {
                "kernel": k["kernel"],
                "rigs_worse": len(k["rigs_worse"]),
                "rigs_tested": len(k["rigs_tested"]),
                "rigs": sorted(k["rigs_worse"]),
            }
            for k in kernels.values()
        ),
        key=lambda k: (-k["rigs_worse"], -k["rigs_tested"], k["kernel"]),
    )
    return {"regressions": entries, "kernels": ranked, "changes_with_unknown_noise": undecided, "how": HOW}
