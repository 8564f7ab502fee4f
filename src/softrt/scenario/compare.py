"""``softrt compare``: the seed's experiments side by side, each under its own loads.

For each round, for each scenario (A B C D A B C D …, so slow drift hits every scenario alike):
arm the run's worker → start the scenario's loads on their CPUs → let them settle → release the
loop and measure → stop the loads in ``finally`` → store the run with what the loads achieved
(rteval's arm-then-release). The worker is armed first so that its start (a new interpreter, its
imports, memory locking: about 0.3 s of CPU) does not compete with the loads: under
tuned+load-on-rt-cpus it took seconds there, and no cycle is measured before the release anyway.

Ctrl-C, SIGTERM or SIGHUP (any number of them) stops the scenario that is running; it is stored like every
finished one, and the comparison ends with what it has, marked interrupted.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field

from ..analysis import RunStats
from ..analysis.require import Requirement
from ..analysis.tail_keep import fit_kept, pool
from ..analysis.verdict import judge
from ..cpus import CpuSet
from ..errors import ConfigError, SoftRTError
from ..load import LoadFailed, LoadGroup, check_placement, make_load
from ..platform import get_platform
from ..schema.compare import CompareDoc, CompareRound, Pooled, PooledMotion, RequirementCheck
from ..schema.config import RunConfig
from ..schema.summary import LoadRun, Metrics
from ..schema.tail import Tail
from ..session import interrupts
from ..session.config import validate
from ..session.drain import Progress
from ..session.run import RunResult, run
from ..store.rundir import check_free, load_run_stats, space_needed, update_summary
from ..store.tailkeep import read_tail_keep
from ..units import format_duration_s
from ..units import format_number as num
from .model import Scenario

#: Verdict rule: a loaded scenario that meets the requirement "held" when its worst period stays
#: within this factor of the unloaded tuned run's and it missed no more than twice as many updates.
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
    loads: list[LoadRun] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@dataclass
class CompareResult:
    """Every run, the pooled figures per scenario (each with its verdict), what tuning and load did
    (``verdict``: sentences), and the requirement checks of the tuned scenarios."""

    runs: list[ScenarioRun]
    pooled: dict[str, Pooled]
    verdict: list[str]
    checks: list[RequirementCheck]
    interrupted: bool = False  # a stop signal: the runs so far, not every planned one

    @property
    def passed(self) -> bool:
        """True when every requirement held on every tuned scenario (and nothing was cut short)."""
        return not self.interrupted and all(c.passed for c in self.checks)

    def doc(self) -> CompareDoc:
        """The comparison as ``softrt compare --json`` prints it."""
        return CompareDoc(
            scenarios=list(self.pooled),
            pooled={name: f.to_dict() for name, f in self.pooled.items()},
            rounds=[
                CompareRound(
                    scenario=r.scenario.name,
                    round=r.round,
                    run_id=r.result.summary.run_id,
                    path=str(r.result.path),
                    status=r.result.summary.status,
                    period_max_us=r.result.summary.metrics.period_us.max,
                    missed_updates=_missed(r.result.summary.metrics),
                    loads=r.loads,
                    notes=r.notes,
                )
                for r in self.runs
            ],
            overall=overall(self.pooled),
            verdict=self.verdict,
            requirements=self.checks,
            interrupted=self.interrupted,
            passed=self.passed,
        )


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
        config = validate(
            dataclasses.replace(
                base,
                profile=scenario.profile,
                wait=scenario.wait,
                device=scenario.device,
                scenario=scenario.name,
                trace=base.trace if scenario.trace is None else scenario.trace,
                trace_mode=scenario.trace_mode or base.trace_mode,
                samples=base.samples if scenario.samples is None else scenario.samples,
                ecat_drives=scenario.ecat_drives or base.ecat_drives,
                duration_ns=scenario.duration_ns or base.duration_ns,
                dc_lock=scenario.dc_lock,
                dc_shift_ns=scenario.dc_shift_ns,
            ),
            online,
            allowed,
        )
        placed = tuple((spec.name, spec.resolve_cpus(rt_cpu, online & allowed)) for spec in scenario.loads)
        for name, cpus in placed:
            if not len(cpus):
                raise ConfigError(
                    f"scenario {scenario.name}: load {name!r} has no CPU to run on",
                    hint="a housekeeping CPU is needed besides the RT CPU",
                )
        try:
            check_placement(
                [make_load(name, cpus, backend) for name, cpus in placed], rt_cpu, allow_rt=scenario.loads_on_rt_cpus
            )
        except ConfigError as err:
            raise ConfigError(f"scenario {scenario.name}: {err.msg}", hint=err.hint) from None
        planned.append(Planned(scenario, config, placed))
    return planned


def compare(
    planned: list[Planned],
    repeat: int = 1,
    backend: str = "auto",
    requirements: list[Requirement] = (),
    settle_s: float = 1.0,
    on_event: Callable[[str], None] | None = None,
    on_run: Callable[[ScenarioRun], None] | None = None,
    on_progress: Callable[[Progress], None] | None = None,
) -> CompareResult:
    """Run every planned scenario *repeat* times, alternating; return the comparison.

    *on_run* gets each scenario run as soon as it is stored (the command line adds it to the
    history then, so an interrupted comparison keeps every finished scenario); *on_progress* is
    passed to every run (:func:`softrt.session.run.run`: a live view, a metrics exporter).
    """
    if repeat < 1:
        raise ConfigError(f"--repeat must be at least 1, got {repeat}")
    # Refuse up front a comparison whose runs cannot all fit (each run checks its own too).
    for out_dir in {item.config.out_dir for item in planned}:
        check_free(
            out_dir,
            repeat
            * sum(
                space_needed(
                    item.config.duration_ns // item.config.period_ns, item.config.samples, item.config.period_ns
                )
                for item in planned
                if item.config.out_dir == out_dir
            ),
        )
    say = on_event or (lambda msg: None)
    runs: list[ScenarioRun] = []
    left = _Remaining([(item.config.duration_ns / 1e9, bool(item.load_cpus)) for item in planned] * repeat, settle_s)
    with interrupts.deferred():
        for rnd in range(1, repeat + 1):
            for item in planned:
                if interrupts.requested():
                    break
                step = f"[{left.done + 1}/{left.total}] {item.scenario.name}"
                step += f", round {rnd}/{repeat}" if repeat > 1 else ""
                runs.append(
                    _run_one(
                        item,
                        rnd,
                        backend,
                        settle_s,
                        on_progress,
                        lambda what, step=step: say(f"{step}: {what}; {left.sentence()}"),
                        compare_id=runs[0].result.summary.run_id if runs else None,
                    )
                )
                left.finished()
                if on_run is not None:
                    on_run(runs[-1])
        interrupted = bool(interrupts.requested())
    done = [item for item in planned if any(r.scenario is item.scenario for r in runs)]
    pooled = {item.scenario.name: _pool(item, [r for r in runs if r.scenario is item.scenario]) for item in done}
    checks = [_check(req, name, figures) for name, figures in pooled.items() if figures.tuned for req in requirements]
    return CompareResult(runs=runs, pooled=pooled, verdict=verdict(pooled), checks=checks, interrupted=interrupted)


class _Remaining:
    """What is left of a comparison, for its progress lines: scenario runs, and an estimate of the
    time. A run costs its measurement and an overhead (arming, storing; with loads also starting,
    settling and stopping them: seconds more), learned from the runs so far, with and without loads
    apart; the run in progress counts only what it has not yet used of its own estimate."""

    def __init__(self, runs: list[tuple[float, bool]], settle_s: float, clock=time.monotonic) -> None:
        self.runs, self.total, self.done = runs, len(runs), 0  # (measurement s, with loads)
        self._guess = {False: 1.0, True: settle_s + 3.0}  # first guesses, replaced by what runs took
        self._spent: dict[bool, list[float]] = {False: [], True: []}
        self._clock = clock
        self._run_started = clock()

    def _overhead_s(self, loaded: bool) -> float:
        spent = self._spent[loaded]
        return sum(spent) / len(spent) if spent else self._guess[loaded]

    def finished(self) -> None:
        measure_s, loaded = self.runs[self.done]
        now = self._clock()
        self._spent[loaded].append(max(0.0, now - self._run_started - measure_s))
        self.done += 1
        self._run_started = now

    def sentence(self) -> str:
        estimates = [measure_s + self._overhead_s(loaded) for measure_s, loaded in self.runs[self.done :]]
        if estimates:
            estimates[0] = max(0.0, estimates[0] - (self._clock() - self._run_started))
        return f"{self.done} of {self.total} done, about {format_duration_s(sum(estimates))} left"


def _run_one(
    item: Planned,
    rnd: int,
    backend: str,
    settle_s: float,
    on_progress=None,
    say: Callable[[str], None] = lambda what: None,
    compare_id: str | None = None,
) -> ScenarioRun:
    """One scenario run under its loads; *compare_id* names the comparison (None: this run is its first)."""
    timeout_s = item.config.duration_ns / 1e9 + 120.0  # the loads' own safety net, past the measurement
    loads = [make_load(name, cpus, backend, timeout_s=timeout_s) for name, cpus in item.load_cpus]
    notes: list[str] = []
    names = ", ".join(load.name for load in loads)
    measuring = f"measuring {item.config.duration_ns / 1e9:g} s"
    group = LoadGroup(loads, settle_s=settle_s if loads else 0.0)
    with ExitStack() as stack:  # the loads, once started, stop on every way out

        def start_loads() -> None:  # the worker is armed, its loop not yet released
            say(f"starting {len(loads)} load(s) ({names}) and letting them settle {settle_s:g} s")
            stack.enter_context(group)
            say(measuring)

        if not loads:
            say("no loads")
            say(measuring)
        result = run(item.config, on_progress=on_progress, before_go=start_loads if loads else None)
        try:
            group.check_alive()
        except LoadFailed as err:
            notes.append(str(err))
        if loads:
            say(f"stopping the loads ({names})")
    load_results = list(group.results)
    summary = update_summary(
        result.path, loads=load_results, notes=notes, compare_round=rnd, compare_id=compare_id or result.summary.run_id
    )
    return ScenarioRun(item.scenario, rnd, RunResult(summary, result.path, result.recovered), load_results, notes)


def _pooled_tail(runs: list[ScenarioRun], period_ns: int) -> Tail | None:
    """The tail model of every round's kept periods (tail.npz) as one run; one round: its own block."""
    if len(runs) == 1:
        return runs[0].result.summary.tail
    try:
        keeps = [read_tail_keep(r.result.path) for r in runs]
    except SoftRTError as err:
        runs[0].notes.append(str(err))
        return None
    if any(k is None for k in keeps):
        return None
    pooled = pool([k["period"] for k in keeps], period_ns)
    return fit_kept(pooled, hours=pooled.hours(period_ns), series="period_us")


def _pool(item: Planned, runs: list[ScenarioRun]) -> Pooled:
    scenario, config = item.scenario, item.config
    # Each run's stored histograms (stats.json), merged: no samples are re-read, and no period
    # spans two runs. A run recorded before stats.json existed is streamed from its samples.
    pooled = RunStats(config.period_ns, config.late_threshold_ns)
    for r in runs:
        try:
            pooled.merge(load_run_stats(r.result.path, config.period_ns, config.late_threshold_ns))
        except (SoftRTError, ValueError) as err:
            r.notes.append(str(err))
    metrics = _authoritative_misses(pooled.summary(), runs)
    tail = _pooled_tail(runs, config.period_ns)
    judged = judge(
        metrics,
        period_ns=config.period_ns,
        threshold_ns=config.late_threshold_ns,
        require=config.require,
        why_late=[r.result.summary.why_late for r in runs],
        tail=tail,
    )
    motions = [m for m in (r.result.summary.motion_impact for r in runs) if m is not None]
    return Pooled(
        metrics=metrics,
        scenario=scenario.name,
        description=scenario.description,
        tuned=scenario.tuned,
        rounds=len(runs),
        modes=sorted({r.result.summary.mode for r in runs if r.result.summary.mode}),
        partial=[r.round for r in runs if r.result.summary.state != "complete"],
        motion=PooledMotion(
            max_deviation_counts=max(
                (m.max_deviation_counts for m in motions if m.max_deviation_counts is not None), default=None
            ),
            max_velocity_step_counts_per_s=max(
                (m.max_velocity_step_counts_per_s for m in motions if m.max_velocity_step_counts_per_s is not None),
                default=None,
            ),
        ),
        loads=_merge_loads({r.round: r.loads for r in runs}),
        run_ids=[r.result.summary.run_id for r in runs],
        tail=tail,
        verdict=judged,
    )


def _missed(metrics: Metrics) -> int | None:
    return metrics.misses.missed_updates if metrics.misses is not None else None


def _authoritative_misses(metrics: Metrics, runs: list[ScenarioRun]) -> Metrics:
    """Pool the runs' own miss counts (the board's, see session.run) when the records hold fewer.

    ``--require misses==0`` must judge every missed update, also those in records the ring dropped.
    """
    counted = sum(_missed(r.result.summary.metrics) or 0 for r in runs)
    misses = metrics.misses
    if misses is None or counted <= (misses.missed_updates or 0):
        return metrics
    notes = "; ".join(m.note or "" for m in (r.result.summary.metrics.misses for r in runs) if m is not None)
    return metrics.replace(
        misses=misses.replace(
            missed_updates_in_records=misses.missed_updates, missed_updates=counted, note=notes.strip("; ") or None
        )
    )


def _merge_loads(per_round: dict[int, list[LoadRun]]) -> list[LoadRun]:
    """Average what each load achieved over the rounds (or keep why it was skipped), with every round's
    problems (once each) and the rounds in which it achieved nothing: a load that failed in every round
    stays FAILED (LoadRun.failed), one that failed in some is not hidden in the average."""
    merged: dict[str, list[tuple[int, LoadRun]]] = {}
    for rnd, loads in per_round.items():
        for load in loads:
            merged.setdefault(load.name, []).append((rnd, load))
    out = []
    for name, rounds in merged.items():
        sums: dict[str, float] = {}
        problems: dict[str, None] = {}
        for _rnd, load in rounds:
            for k, v in load.achieved.items():
                sums[k] = sums.get(k, 0.0) + float(v)
            problems.update(dict.fromkeys(load.problems or []))
        failed = [rnd for rnd, load in rounds if load.failed]
        if failed and len(failed) < len(rounds):
            problems[
                f"achieved nothing in {len(failed)} of {len(rounds)} rounds (round {', '.join(map(str, failed))})"
            ] = None
        first = rounds[0][1]
        out.append(
            LoadRun(
                name=name,
                backend=first.backend,
                skipped_reason=first.skipped_reason,
                achieved={k: v / len(rounds) for k, v in sums.items()},
                problems=list(problems) or None,
            )
        )
    return out


def _check(req: Requirement, name: str, figures: Pooled) -> RequirementCheck:
    passed, value = req.check(figures.metrics, figures.tail)
    return RequirementCheck(scenario=name, requirement=req.text, measured=value, passed=passed)


def overall(pooled: dict[str, Pooled]) -> str | None:
    """One line after the scenarios' verdicts: where the machine meets the cycle and where not."""
    judged = {name: f.verdict for name, f in pooled.items() if f.verdict is not None and f.verdict.meets is not None}
    if not judged:
        return None
    cycle = f"the {next(iter(judged.values())).period_us:g} µs cycle"
    meets = [name for name, v in judged.items() if v.meets]
    fails = [name for name, v in judged.items() if not v.meets]
    parts = [f"meets {cycle} in {', '.join(meets)}"] if meets else []
    if fails:
        parts.append(f"fails {'it' if meets else cycle} in {', '.join(fails)}")
    return "Overall: the machine " + "; ".join(parts)


def verdict(pooled: dict[str, Pooled]) -> list[str]:
    """Plain sentences in the seed's terms: what tuning did, and whether it held under load (a loaded
    scenario is first judged against the requirement; only one that meets it can have held)."""
    lines = []
    untuned = next((f for f in pooled.values() if not f.tuned), None)
    tuned = next((f for f in pooled.values() if f.tuned and not f.loads), None)
    u = untuned.metrics.period_us.max if untuned else None
    t = tuned.metrics.period_us.max if tuned else None
    if u is not None and t is not None:
        if t < u:
            lines.append(f"Tuning cut the worst period from {num(u, 1)} µs to {num(t, 1)} µs.")
        else:
            lines.append(f"Tuning did not lower the worst period ({num(u, 1)} µs untuned, {num(t, 1)} µs tuned).")
    for name, f in pooled.items():
        worst, missed = f.metrics.period_us.max, _missed(f.metrics) or 0
        if not (f.tuned and f.loads) or worst is None:
            continue
        if tuned is None or t is None:
            lines.append(f"Under load ({name}): worst period {num(worst, 1)} µs, {missed} missed updates.")
            continue
        unloaded_missed = _missed(tuned.metrics) or 0
        versus = (
            f"worst period {num(worst, 1)} µs vs {num(t, 1)} µs unloaded, {missed} vs {unloaded_missed} missed updates."
        )
        if f.verdict is not None and f.verdict.meets is False:
            lines.append(f"Under load ({name}) it failed the requirement ({f.verdict.requirement}): {versus}")
            continue
        held = worst <= HELD_MAX_FACTOR * t and missed <= 2 * unloaded_missed
        lines.append(f"Under load ({name}) it {'held' if held else 'did not hold'}: {versus}")
    return lines
