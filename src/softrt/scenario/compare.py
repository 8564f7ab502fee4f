"""``softrt compare``: the seed's experiments side by side, each under its own loads.

For each round, for each scenario (A B C D A B C D …, so slow drift hits every scenario alike):
start the scenario's loads on their CPUs → let them settle → run the measurement → stop the
loads in ``finally`` → store the run with what the loads achieved (rteval's arm-then-release).

Ctrl-C (any number of them) stops the scenario that is running; it is stored like every
finished one, and the comparison ends with what it has, marked interrupted.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field

from ..analysis import RunStats
from ..cpus import CpuSet
from ..errors import ConfigError, SoftRTError
from ..load import LoadFailed, LoadGroup, check_placement, make_load
from ..platform import get_platform
from ..session import interrupts
from ..session.config import RunConfig, validate
from ..session.run import Progress, RunResult, run
from ..store.rundir import check_free, load_run_stats, space_needed, update_summary
from .model import Scenario
from .require import Requirement

#: Verdict rule: a loaded scenario "held" when its worst period stays within this factor of the
#: unloaded tuned run's and it missed no more than twice as many updates.
HELD_MAX_FACTOR = 1.5


@dataclass(frozen=True)
class Planned:
    """A validated scenario: its run configuration and where each of its loads goes."""

    scenario: Scenario
    config: RunConfig
    load_cpus: tuple[tuple[str, CpuSet], ...]


@dataclass
class ScenarioRun:
    """One scenario in one round."""

    scenario: Scenario
    round: int
    result: RunResult
    loads: list[dict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@dataclass
class CompareResult:
    """Every run, the pooled figures per scenario, the verdict and the requirement checks."""

    runs: list[ScenarioRun]
    pooled: dict[str, dict]
    verdict: list[str]
    checks: list[dict]
    interrupted: bool = False  # Ctrl-C: the runs so far, not every planned one

    @property
    def passed(self) -> bool:
        """True when every requirement held on every tuned scenario (and nothing was cut short)."""
        return not self.interrupted and all(c["passed"] for c in self.checks)

    def to_dict(self) -> dict:
        """JSON-ready form (``softrt compare --json``)."""
        return {
            "schema": "softrt.compare/1",
            "scenarios": list(self.pooled),
            "pooled": self.pooled,
            "rounds": [{"scenario": r.scenario.name, "round": r.round, "run_id": r.result.summary["run_id"],
                        "path": str(r.result.path), "status": r.result.summary["status"],
                        "period_max_us": r.result.summary["period_us"]["max"],
                        "missed_updates": r.result.summary["misses"]["missed_updates"],
                        "loads": r.loads, "notes": r.notes} for r in self.runs],
            "verdict": self.verdict,
            "requirements": self.checks,
            "interrupted": self.interrupted,
            "passed": self.passed,
        }


def plan(scenarios: list[Scenario], base: RunConfig, backend: str = "auto") -> list[Planned]:
    """Validate every scenario's configuration and load placement before anything starts."""
    if not scenarios:
        raise ConfigError("no scenarios to compare")
    names = [s.name for s in scenarios]
    if len(set(names)) != len(names):
        raise ConfigError(f"scenario {sorted(n for n in names if names.count(n) > 1)[0]!r} is listed twice")
    plat = get_platform()
    online, allowed = plat.online_cpus(), plat.allowed_cpus()
    # Loads are placed relative to the RT CPU that the tuned scenarios use, untuned ones included,
    # so every scenario sees the same loads in the same places.
    rt_cpu = CpuSet([validate(dataclasses.replace(base, profile="rt"), online, allowed).cpu])
    planned = []
    for scenario in scenarios:
        config = validate(dataclasses.replace(base, profile=scenario.profile, wait=scenario.wait, device=scenario.device,
                                              scenario=scenario.name,
                                              trace=base.trace if scenario.trace is None else scenario.trace,
                                              samples=base.samples if scenario.samples is None else scenario.samples,
                                              ecat_drives=scenario.ecat_drives or base.ecat_drives,
                                              duration_ns=scenario.duration_ns or base.duration_ns), online, allowed)
        placed = tuple((spec.name, spec.resolve_cpus(rt_cpu, online & allowed)) for spec in scenario.loads)
        for name, cpus in placed:
            if not len(cpus):
                raise ConfigError(f"scenario {scenario.name}: load {name!r} has no CPU to run on",
                                  hint="a housekeeping CPU is needed besides the RT CPU")
        try:
            check_placement([make_load(name, cpus, backend) for name, cpus in placed], rt_cpu,
                            allow_rt=scenario.loads_on_rt_cpus)
        except ConfigError as err:
            raise ConfigError(f"scenario {scenario.name}: {err.msg}", hint=err.hint) from None
        planned.append(Planned(scenario, config, placed))
    return planned


def compare(planned: list[Planned], repeat: int = 1, backend: str = "auto",
            requirements: list[Requirement] = (), settle_s: float = 1.0,
            on_event: Callable[[str], None] | None = None,
            on_run: Callable[[ScenarioRun], None] | None = None,
            on_progress: Callable[[Progress], None] | None = None) -> CompareResult:
    """Run every planned scenario *repeat* times, alternating; return the comparison.

    *on_run* gets each scenario run as soon as it is stored (the command line adds it to the
    history then, so an interrupted comparison keeps every finished scenario); *on_progress* is
    passed to every run (:func:`softrt.session.run.run`: a live view, a metrics exporter).
    """
    if repeat < 1:
        raise ConfigError(f"--repeat must be at least 1, got {repeat}")
    # Refuse up front a comparison whose runs cannot all fit (each run checks its own too).
    for out_dir in {item.config.out_dir for item in planned}:
        check_free(out_dir, repeat * sum(space_needed(item.config.duration_ns // item.config.period_ns,
                                                      item.config.samples, item.config.period_ns)
                                         for item in planned if item.config.out_dir == out_dir))
    say = on_event or (lambda msg: None)
    runs: list[ScenarioRun] = []
    with interrupts.deferred():
        for rnd in range(1, repeat + 1):
            for item in planned:
                if interrupts.requested():
                    break
                say(f"round {rnd}/{repeat}: {item.scenario.name}")
                runs.append(_run_one(item, rnd, backend, settle_s, on_progress))
                if on_run is not None:
                    on_run(runs[-1])
        interrupted = bool(interrupts.requested())
    done = [item for item in planned if any(r.scenario is item.scenario for r in runs)]
    pooled = {item.scenario.name: _pool(item, [r for r in runs if r.scenario is item.scenario]) for item in done}
    checks = [_check(req, name, figures) for name, figures in pooled.items() if figures["tuned"] for req in requirements]
    return CompareResult(runs=runs, pooled=pooled, verdict=verdict(pooled), checks=checks, interrupted=interrupted)


def _run_one(item: Planned, rnd: int, backend: str, settle_s: float, on_progress=None) -> ScenarioRun:
    timeout_s = item.config.duration_ns / 1e9 + 120.0  # the loads' own safety net, past the measurement
    loads = [make_load(name, cpus, backend, timeout_s=timeout_s) for name, cpus in item.load_cpus]
    notes: list[str] = []
    with LoadGroup(loads, settle_s=settle_s if loads else 0.0) as group:
        result = run(item.config, on_progress=on_progress)
        try:
            group.check_alive()
        except LoadFailed as err:
            notes.append(str(err))
    load_results = [r.to_dict() for r in group.results]
    summary = update_summary(result.path, loads=load_results, notes=notes, compare_round=rnd)
    return ScenarioRun(item.scenario, rnd, RunResult(summary, result.path, result.recovered), load_results, notes)


def _pool(item: Planned, runs: list[ScenarioRun]) -> dict:
    scenario, config = item.scenario, item.config
    # Each run's stored histograms (stats.json), merged: no samples are re-read, and no period
    # spans two runs. A run recorded before stats.json existed is streamed from its samples.
    pooled = RunStats(config.period_ns)
    for r in runs:
        try:
            pooled.merge(load_run_stats(r.result.path, config.period_ns))
        except (SoftRTError, ValueError) as err:
            r.notes.append(str(err))
    figures = pooled.summary()
    _authoritative_misses(figures, runs)
    motions = [m for m in (r.result.summary.get("motion") for r in runs) if m and "not_computed" not in m]
    figures.update({
        "scenario": scenario.name,
        "description": scenario.description,
        "tuned": scenario.tuned,
        "rounds": len(runs),
        "modes": sorted({r.result.summary["mode"] for r in runs}),
        "partial": [r.round for r in runs if r.result.summary["status"] != "complete"],
        "motion": {
            "max_deviation_counts": max((m["max_deviation_counts"] for m in motions), default=None),
            "max_velocity_step_counts_per_s": max((m["max_velocity_step_counts_per_s"] for m in motions), default=None),
        },
        "loads": _merge_loads([r.loads for r in runs]),
        "run_ids": [r.result.summary["run_id"] for r in runs],
    })
    return figures


def _authoritative_misses(figures: dict, runs: list[ScenarioRun]) -> None:
    """Pool the runs' own miss counts (the board's, see session.run) when the records hold fewer.

    ``--require misses==0`` must judge every missed update, also those in records the ring dropped.
    """
    counted = sum(int(r.result.summary["misses"]["missed_updates"]) for r in runs)
    misses = figures["misses"]
    if counted > misses["missed_updates"]:
        misses["missed_updates_in_records"] = misses["missed_updates"]
        misses["missed_updates"] = counted
        misses["note"] = "; ".join(r.result.summary["misses"].get("note") or "" for r in runs).strip("; ") or None


def _merge_loads(per_run: list[list[dict]]) -> list[dict]:
    """Average what each load achieved over the rounds (or keep why it was skipped)."""
    merged: dict[str, dict] = {}
    for loads in per_run:
        for load in loads:
            entry = merged.setdefault(load["name"], {"name": load["name"], "backend": load.get("backend"),
                                                     "skipped_reason": load.get("skipped_reason"), "achieved": {}, "n": 0})
            entry["n"] += 1
            for k, v in (load.get("achieved") or {}).items():
                entry["achieved"][k] = entry["achieved"].get(k, 0.0) + float(v)
    for entry in merged.values():
        n = entry.pop("n")
        entry["achieved"] = {k: v / n for k, v in entry["achieved"].items()}
    return list(merged.values())


def _check(req: Requirement, name: str, figures: dict) -> dict:
    passed, value = req.check(figures)
    return {"scenario": name, "requirement": req.text, "measured": value, "passed": passed}


def verdict(pooled: dict[str, dict]) -> list[str]:
    """Plain sentences in the seed's terms: what tuning did, and whether it held under load."""
    lines = []
    untuned = next((f for f in pooled.values() if not f["tuned"]), None)
    tuned = next((f for f in pooled.values() if f["tuned"] and not f["loads"]), None)
    if untuned and tuned and untuned["period_us"]["max"] is not None and tuned["period_us"]["max"] is not None:
        u, t = untuned["period_us"]["max"], tuned["period_us"]["max"]
        if t < u:
            lines.append(f"Tuning cut the worst period from {u:,.1f} µs to {t:,.1f} µs.")
        else:
            lines.append(f"Tuning did not lower the worst period ({u:,.1f} µs untuned, {t:,.1f} µs tuned).")
    for name, f in pooled.items():
        if not (f["tuned"] and f["loads"]) or f["period_us"]["max"] is None:
            continue
        worst, missed = f["period_us"]["max"], f["misses"]["missed_updates"]
        if tuned is None or tuned["period_us"]["max"] is None:
            lines.append(f"Under load ({name}): worst period {worst:,.1f} µs, {missed} missed updates.")
            continue
        held = worst <= HELD_MAX_FACTOR * tuned["period_us"]["max"] and missed <= 2 * tuned["misses"]["missed_updates"]
        lines.append(f"Under load ({name}) it {'held' if held else 'did not hold'}: worst period {worst:,.1f} µs "
                     f"vs {tuned['period_us']['max']:,.1f} µs unloaded, {missed} vs "
                     f"{tuned['misses']['missed_updates']} missed updates.")
    return lines
