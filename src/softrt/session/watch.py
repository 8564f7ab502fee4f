"""``softrt watch``: measure and explain the cycles of threads softrt did not write, without
changing them (session layer; docs/watch.md).

validate → find the threads → trace them (trace.watch) → every 50 ms: their cycles from the events
(analysis.watch) as the run's records → the run's streaming pass, samples file and attribution
(analysis.watch_why) → stop at the end of ``duration``, on Ctrl-C or when every thread has exited →
one stored run (scenario ``watch``) per thread.

Nothing is changed on a watched thread or on the system: softrt only moves *itself* off the
threads' CPUs where another is free (so that its reader does not take their CPU), and traces in a
private instance (removed at the end, or by the next softrt command if softrt is killed).
"""

from __future__ import annotations

import gc
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ..analysis.cycles import CycleStream
from ..analysis.watch import Cycle, RecordMaker, ThreadCycles, infer_period_ns
from ..analysis.watch_why import RecentEvents, ThreadAttribution, split_by_cpu
from ..audit.state import in_force as tune_in_force
from ..cpus import CpuSet
from ..errors import ConfigError, SoftRTError
from ..platform import get_platform
from ..platform.linux.ktasks import Task
from ..platform.provenance import collect as collect_provenance
from ..schema.config import (
    DEFAULT_MAX_DURATION_NS,
    DEFAULT_THRESHOLD_NS,
    TRACE_MODES,
    RunConfig,
    check_duration,
    check_keep_late,
    check_late_threshold_ns,
    check_period_ns,
    effective_trace_mode,
)
from ..schema.summary import SCHEMA, RunSummary, Tuning
from ..schema.why_late import WhyLate
from ..store.history import History, local_db_path
from ..store.late import resolve_mode
from ..store.rundir import SUMMARY, RunDir, check_space, check_writable, new_run_id
from ..trace import sweep_orphans
from ..trace.session import rt_throttling
from ..trace.tracefs import TracingUnavailable
from ..trace.watch import WatchTrace
from ..units import NS_PER_S
from . import changes as _changes
from . import interrupts
from .collect import Collector
from .drain import Progress
from .summary import checkpoint_interval_s, judged, supervisor_now, utcnow
from .watch_docs import config_doc as _config_doc
from .watch_docs import watch_block as _watch_block
from .watch_targets import Target, find_threads, still_running

POLL_S = 0.05
#: The thread's own period is the median step of its first requested expiries: this many, or what
#: came in the first second (at least two).
PERIOD_PROBE_CYCLES = 32
PERIOD_PROBE_NS = NS_PER_S
EXIT_CHECK_S = 0.5  # how often /proc is asked whether a thread still runs (its exit event says when)


@dataclass(frozen=True)
class WatchConfig:
    """One watch (times in integer ns); ``period_ns`` None: each thread's own, from its timers."""

    target: Target = field(default_factory=Target)
    duration_ns: int = 10 * NS_PER_S
    max_duration_ns: int = DEFAULT_MAX_DURATION_NS
    period_ns: int | None = None
    late_threshold_ns: int = DEFAULT_THRESHOLD_NS
    keep_late: int = 100
    samples: str | None = None
    out_dir: Path = Path("softrt-runs")
    explain: bool = True  # trace what ran on the threads' CPUs and explain every late cycle (--no-explain)
    trace_mode: str = "auto"  # --trace-mode: a watched thread sleeps on its timers, so auto is lean


@dataclass
class WatchResult:
    """Every thread's stored run, in tid order."""

    runs: list[tuple[RunSummary, Path]]
    duration_s: float
    ended_early: bool


def validate(config: WatchConfig) -> None:
    """Raise ConfigError for a value out of range (before anything starts)."""
    check_duration(config.duration_ns, config.max_duration_ns)
    if config.period_ns is not None:
        check_period_ns(config.period_ns, "e.g. --period 250us, or leave it out to take the thread's own")
    if config.trace_mode not in TRACE_MODES:
        raise ConfigError(f"unknown --trace-mode {config.trace_mode!r}", hint=f"use one of {', '.join(TRACE_MODES)}")
    check_late_threshold_ns(config.late_threshold_ns)
    check_keep_late(config.keep_late)


def clock_offsets_ns() -> dict[str, int]:
    """Each timer clock minus CLOCK_MONOTONIC now (the trace's clock), to convert its expiries."""
    out = {}
    for name in ("CLOCK_REALTIME", "CLOCK_BOOTTIME", "CLOCK_TAI"):
        clock = getattr(time, name, None)
        if clock is not None:
            out[name] = time.clock_gettime_ns(clock) - time.monotonic_ns()
    return out


class _Watched:
    """One thread: its cycles, and once its period is known, its run (records, pass, attribution)."""

    def __init__(
        self,
        task: Task,
        config: WatchConfig,
        offsets: dict[str, int],
        back: str,
        recent: RecentEvents,
        throttling: bool | None,
    ) -> None:
        self.task, self.config, self.recent, self.throttling = task, config, recent, throttling
        self.cycles = ThreadCycles(task.tid, offsets, back)
        self.pending: list[Cycle] = []
        self.period_ns: int | None = config.period_ns
        self.observed_ns: int | None = None
        self.edges: list[int] = []  # the first expiries, for the observed period
        self.first_pending_ns: int | None = None
        self.rundir: RunDir | None = None
        self.collector: Collector | None = None
        self.late: CycleStream | None = None  # the late rule's view of each chunk, made once
        self.maker: RecordMaker | None = None
        self.attribution: ThreadAttribution | None = None
        self.progress = Progress(run_id=new_run_id())
        self.gone_ns: int | None = None  # when /proc (or its exit event) said it had exited
        self.done = False  # exited and every event up to its exit was read
        self.next_checkpoint = 0.0

    @property
    def run_config(self) -> RunConfig:
        """The run's shape, as the live view, metrics and summary read it."""
        cpus = list(self.task.allowed)
        return RunConfig(
            period_ns=self.period_ns or 0,
            duration_ns=self.config.duration_ns,
            cpu=cpus[0] if len(cpus) == 1 else None,
            priority=self.task.rt_priority,
            profile="none",
            wait="sleep",
            device="none",
            axes=0,
            out_dir=self.config.out_dir,
            scenario="watch",
            late_threshold_ns=self.config.late_threshold_ns,
            keep_late=self.config.keep_late,
            samples=resolve_mode(self.config.samples, self.config.duration_ns),
            trace_mode=self.config.trace_mode,
        )

    def feed(self, events, by_cpu, steal, horizon_ns: int, final: bool = False) -> None:
        add = self.cycles.add
        for ev in events:
            add(ev)
        new = self.cycles.take()
        if len(self.edges) < PERIOD_PROBE_CYCLES:
            self.edges += [c.edge_ns for c in new[: PERIOD_PROBE_CYCLES - len(self.edges)]]
        if self.attribution is not None:
            self.attribution.add_events(by_cpu, steal)
        if self.maker is None:
            self.pending += new
            if self.pending and self.first_pending_ns is None:
                self.first_pending_ns = self.pending[0].detect_ns
            probe_over = self.first_pending_ns is not None and horizon_ns - self.first_pending_ns >= PERIOD_PROBE_NS
            if final or len(self.pending) >= PERIOD_PROBE_CYCLES or (probe_over and len(self.pending) >= 2):
                self._open()
            new, self.pending = (self.pending, []) if self.maker is not None else ([], self.pending)
        if new and self.maker is not None:
            records, cpus = self.maker.records(new)
            view = self.late.view(records)  # seen once by the run's late rule, as a run's drainer does
            self.rundir.append(view)
            self.collector.add(view)
            if self.attribution is not None:
                self.attribution.add_records(view, cpus)
            self.progress.cycles += view.size
        if self.attribution is not None and horizon_ns > 0:
            self.attribution.advance(horizon_ns)

    def _open(self) -> None:
        """The period is known (or the watch ends): make the run directory, pass and attribution."""
        self.observed_ns = infer_period_ns(self.edges)
        if self.period_ns is None:
            self.period_ns = self.observed_ns or 0
        c = self.config
        samples = resolve_mode(c.samples, c.duration_ns)
        self.rundir = RunDir(
            c.out_dir,
            self.progress.run_id,
            c.duration_ns // (self.period_ns or 1_000_000),
            samples=samples,
            period_ns=self.period_ns,
            late_threshold_ns=c.late_threshold_ns,
        )
        self.collector = Collector(self.period_ns, threshold_ns=c.late_threshold_ns)
        self.late = CycleStream(self.collector.stats.rule)
        self.maker = RecordMaker(self.period_ns)
        if c.explain:
            self.attribution = ThreadAttribution(
                self.task.tid,
                self.period_ns,
                c.late_threshold_ns,
                c.keep_late,
                self.recent,
                self.throttling,
                lean=effective_trace_mode(c.trace_mode, "sleep") == "lean",
            )
        self.progress.stats, self.progress.config = self.collector.stats, self.run_config

    @property
    def exited_ns(self) -> int | None:
        """When it exited: its exit event's time, else when /proc said so."""
        return self.cycles.exited_ns or self.gone_ns

    def update_progress(self, elapsed_s: float) -> None:
        p = self.progress
        p.elapsed_s, p.duration_s = elapsed_s, self.config.duration_ns / 1e9
        if self.collector is not None:
            snap = self.collector.progress()
            p.snapshot, p.max_period_us, p.missed_updates = snap, snap.max_period_us or 0.0, snap.missed_updates


class _Session:
    """The state of one watch, for the loop and the summaries."""

    def __init__(self, config: WatchConfig, threads: list[Task], trace: WatchTrace) -> None:
        self.config, self.trace = config, trace
        self.host = get_platform().host_facts().to_dict()
        self.provenance = collect_provenance(tune_applied=tune_in_force())
        self.started_at = utcnow()
        self.applied: list[dict] = []
        self.not_applied: list[dict] = []
        self.recovered: list = []
        self.t0 = time.monotonic()
        self.t0_ns = time.monotonic_ns()
        self.stopped: float | None = None
        self.interrupted = False
        self.attribution_cpu_s = 0.0
        self.recent = RecentEvents()
        self.tids = frozenset(t.tid for t in threads)
        self.threads: list[_Watched] = []
        self.failure: str | None = None  # the trace reader stopped
        self.checkpoint_interval_s = checkpoint_interval_s()

    def elapsed_s(self) -> float:
        return round((self.stopped or time.monotonic()) - self.t0, 3)


def watch(config: WatchConfig, on_progress: Callable[[Progress], None] | None = None, root: str = "/") -> WatchResult:
    """Watch the threads *config* names; return their stored runs.

    Bad input (no such thread, a value out of range, no trace to read) raises ConfigError before
    anything is started or written.
    """
    with interrupts.deferred():
        return _watch(config, on_progress, root)


def _watch(config: WatchConfig, on_progress, root: str) -> WatchResult:
    plat = get_platform()
    if not plat.caps.kernel_trace:
        raise ConfigError(
            "softrt watch reads the Linux kernel's trace (tracefs), which this OS does not have",
            hint="watch threads on a Linux machine",
        )
    recovered = _changes.recover()
    sweep_orphans()
    validate(config)
    threads = find_threads(config.target, root, exclude_pid=os.getpid())
    out_dir = Path(config.out_dir)
    made = not out_dir.exists()
    check_writable(out_dir)
    rows = config.duration_ns // (config.period_ns or 250_000)
    check_space(
        out_dir, rows * len(threads), resolve_mode(config.samples, config.duration_ns), config.period_ns or 250_000
    )
    cpus = CpuSet(sorted(set().union(*(set(t.allowed) for t in threads)) & set(plat.online_cpus())))
    previous = plat.allowed_cpus()
    free = CpuSet(sorted(set(previous) - set(cpus)))
    mode = effective_trace_mode(config.trace_mode, "sleep")
    with WatchTrace([t.tid for t in threads], cpus, explain=config.explain, mode=mode) as trace:
        applied, not_applied = [], []
        pins = None
        if free:  # the reader and the attribution off the watched threads' CPUs (softrt's own placement):
            pins = plat.pin_threads(free)  # every thread of softrt's, the metrics server's too
            detail = f"softrt on CPUs {free}, off the watched threads' CPUs {cpus}"
            if pins.failed:
                not_applied.append({"what": "watcher_affinity", "detail": detail, "why": "; ".join(pins.failed)})
            else:
                applied.append({"what": "watcher_affinity", "detail": detail})
        try:
            try:
                trace.start()
            except TracingUnavailable as err:
                if made:  # bad input leaves nothing behind, not even the empty --out-dir it checked
                    out_dir.rmdir()
                raise ConfigError(
                    f"cannot trace the threads: {err}", hint="run softrt watch as root on a kernel with tracefs"
                ) from None
            session = _Session(config, threads, trace)
            session.applied, session.not_applied, session.recovered = applied, not_applied, recovered
            throttling = rt_throttling()
            offsets = clock_offsets_ns()
            session.threads = [_Watched(t, config, offsets, trace.back, session.recent, throttling) for t in threads]
            # What softrt built before the loop lives as long as the watch: out of the collector's way.
            # The reader makes ~30,000 objects a second, and each full collection walked the ~40,000
            # long-lived ones too: 0.14 s of CPU in 8 s at 32,000 events/s, 0.05 s frozen (docs/watch.md).
            gc.freeze()  # https://docs.python.org/3/library/gc.html#gc.freeze
            try:
                _loop(session, on_progress, root)
                trace.stop()
                _pump(session, final=True)
            finally:
                gc.unfreeze()
        finally:
            if pins is not None:
                pins.undo()
    return _store(session)


def _loop(session: _Session, on_progress, root: str) -> None:
    end = session.t0 + session.config.duration_ns / 1e9
    next_exit_check = 0.0
    while True:
        time.sleep(POLL_S)
        if interrupts.requested():
            session.interrupted = True
            break
        _pump(session)
        now = time.monotonic()
        if now >= next_exit_check:
            next_exit_check = now + EXIT_CHECK_S
            for w in session.threads:
                if w.exited_ns is None and not still_running(root, w.task):
                    w.gone_ns = time.monotonic_ns()
        elapsed = now - session.t0
        live = sorted(session.threads, key=lambda w: w.progress.cycles)
        for w in live:
            w.update_progress(elapsed)
            if on_progress is not None and w.progress.config is not None:
                on_progress(w.progress)
            if w.rundir is not None and now >= w.next_checkpoint:
                _checkpoint(session, w)
                w.next_checkpoint = now + session.checkpoint_interval_s
        consumer = session.trace.consumer
        if consumer.error:
            session.failure = f"the trace reader stopped: {consumer.error}"
            break
        if now >= end or all(w.exited_ns is not None and w.exited_ns < consumer.horizon_ns for w in session.threads):
            break
    session.stopped = time.monotonic()


def _pump(session: _Session, final: bool = False) -> None:
    t0 = time.thread_time()
    events, steal, horizon = session.trace.take()
    by_cpu = split_by_cpu(events, session.tids) if session.config.explain else {}
    session.recent.add(by_cpu, steal, horizon)
    for w in session.threads:
        if not w.done:
            w.feed(events, by_cpu, steal, horizon, final)
            w.done = w.exited_ns is not None and horizon >= w.exited_ns
    session.attribution_cpu_s += time.thread_time() - t0


def _checkpoint(session: _Session, w: _Watched) -> None:
    """The summary so far (``"status": "running"``) and the history row; never fails the watch."""
    try:
        w.rundir.write_json(SUMMARY, _summary(session, w, running=True).to_dict())
        History(local_db_path(), timeout_s=1.0).add_run(w.rundir.path)  # the rig's own history
    except SoftRTError:
        pass


def _store(session: _Session) -> WatchResult:
    """Finish every thread's run and write it; the runs in tid order."""
    runs = []
    for w in session.threads:
        if w.rundir is None:
            w._open()  # no cycle at all (a polling thread, or one that never ran): its run still says why
        w.rundir.close()
        summary = _summary(session, w, running=False)
        w.collector.write(w.rundir)
        w.rundir.write_json("config.json", _config_doc(w).to_dict())
        w.rundir.write_json("host.json", session.host)
        w.rundir.write_json(SUMMARY, summary.to_dict())
        w.collector.write_tail(w.rundir)
        runs.append((summary, w.rundir.path))
    ended_early = (
        session.interrupted or session.failure is not None or any(w.exited_ns is not None for w in session.threads)
    )
    return WatchResult(runs, session.elapsed_s(), ended_early)


def _status(session: _Session, w: _Watched) -> tuple[str, str | None]:
    reasons = []
    if w.exited_ns is not None:
        reasons.append(f"the thread exited {max(w.exited_ns - session.t0_ns, 0) / 1e9:,.3f} s into the watch")
    if session.interrupted:
        reasons.append(interrupts.reason())
    if session.failure:
        reasons.append(session.failure)
    return ("partial", "; ".join(reasons)) if reasons else ("complete", None)


def _summary(session: _Session, w: _Watched, *, running: bool) -> RunSummary:
    """The thread's summary.json: a run of scenario ``watch`` with its ``watch`` block."""
    status, reason = ("running", None) if running else _status(session, w)
    metrics, _ = w.collector.summary()
    trace = session.trace
    if running:
        end = dict(
            checkpoint_at=utcnow(),
            supervisor=supervisor_now(session.checkpoint_interval_s),
        )
    else:
        if session.failure is not None:
            why = WhyLate.build(tracing=f"failed: {session.failure}")
        elif w.attribution is None:
            why = WhyLate.build(tracing="off (--no-explain: only the thread's own events were traced)")
        else:
            why = w.attribution.finish(trace.lost_events, home_cpu=min(w.task.allowed))
        end = dict(
            records_unwritten=w.rundir.unwritten, why_late=why.replace(trace=trace.info(session.attribution_cpu_s))
        )
    model = RunSummary.build(
        schema=SCHEMA,
        run_id=w.progress.run_id,
        scenario="watch",
        started_at=session.started_at,
        finished_at=None if running else utcnow(),
        status=status,
        partial_reason=reason,
        elapsed_s=session.elapsed_s(),
        mode="real-time" if w.task.realtime else "not real-time",
        config=_config_doc(w),
        host=session.host,
        provenance=session.provenance,
        tuning=Tuning.build(
            applied=session.applied,
            not_applied=session.not_applied,
            system_changes=trace.system_changes(),
            recovered_from_earlier_runs=[c.to_dict() for c in session.recovered],
        ),
        metrics=metrics,
        samples=w.rundir.kept(),
        watch=_watch_block(session, w),
        **end,
    )
    # Judged as a run is (the same rule, the same words); a thread without a period has no verdict.
    # Its tail model is of the wake-up latency (late beyond the threshold): the series cyclictest
    # and rtla measure, fitted once at the end.
    tail = None if running else w.collector.tail("latency")
    return judged(model, w.run_config, running=running, tail=tail) if w.period_ns else model
