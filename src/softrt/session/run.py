"""One run: validate → arm (system changes, worker) → release → drain → stop, in ``finally``.

The supervisor (this process) owns every system-wide change and restores it whatever happens:
normal end, Ctrl-C, a crashed worker. The worker owns its process-scoped controls (the platform's
``worker_controls``: on Linux mlockall, affinity, SCHED_FIFO, the /dev/cpu_dma_latency hold; on
Windows affinity masks, REALTIME_PRIORITY_CLASS, a locked working set, timeBeginPeriod), which it
undoes when the loop ends and which die with it in any case.

A run that started is never lost: Ctrl-C, SIGTERM or SIGHUP (any number of them) is a request to
stop (:mod:`.interrupts`), a full disk stops the writing but not the loop (:mod:`..store.rundir`),
and either way the run ends partial, with its summary, from what was collected.
"""

from __future__ import annotations

import multiprocessing
import os
import time
from collections.abc import Callable
from contextlib import ExitStack, nullcontext
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..analysis.tail_keep import prefetch_fit
from ..audit.model import Report
from ..audit.state import in_force as tune_in_force
from ..cpus import CpuSet
from ..errors import ConfigError, SoftRTError, WorkerFailed
from ..ipc import layout as L
from ..ipc.ring import Ring
from ..loop.worker import WorkerSpec, worker_main
from ..platform import get_platform
from ..platform.provenance import collect as collect_provenance
from ..schema.config import RunConfig
from ..schema.summary import RunSummary
from ..schema.worker import ARMED, DONE, FAILED, NOTHING, WorkerReport
from ..store import arming
from ..store.history import History, local_db_path
from ..store.rundir import SUMMARY, RunDir, check_space, check_writable, new_run_id, read_summary
from ..trace import TraceSession, sweep_orphans
from . import changes as _changes
from . import interrupts
from .collect import Collector
from .config import RunPlan, resolve_plan
from .drain import Drainer, Outcome, Progress
from .summary import RunParts, checkpoint, checkpoint_interval_s, run_summary, utcnow
from .supervise import apply_system_changes as _apply_system_changes  # (tests call it here)
from .supervise import lock_rt_loop as _lock_rt_loop
from .supervise import repin_supervisor as _repin_supervisor
from .supervise import tie_worker as _tie_worker

DRAIN_INTERVAL_S = 0.05  # 200 records at 250 µs; the ring holds 16 s, so there is ample margin
ARM_TIMEOUT_S = 60.0
#: How often the samples file is marked written while the run drains (one utime(2)): a killed run
#: is listed with the time of its last record to within this (store.running).
MARK_INTERVAL_S = 1.0
STOP_GRACE_S = 10.0  # an EtherCAT master disables its drives and walks the bus to INIT in this time
#: Test knob: a smaller shared-memory ring (a power of two, records), so that a test can make the
#: ring overflow by stopping the supervisor for a moment. Not meant for users.
RING_CAPACITY_ENV = "SOFTRT_RING_CAPACITY"


@dataclass
class RunResult:
    """A finished (or partial) run: its summary and where it was stored."""

    summary: RunSummary
    path: Path
    recovered: list = field(default_factory=list)


class _Interrupted(Exception):
    """Ctrl-C before the loop was released: stop arming, keep the (empty) run."""


def run(
    config: RunConfig,
    step: Callable[[int], Any] | None = None,
    setup: Callable[[], None] | None = None,
    on_progress: Callable[[Progress], None] | None = None,
    before_go: Callable[[], None] | None = None,
) -> RunResult:
    """Run the cyclic test described by *config*; return its summary and run directory.

    With *step*, the loop runs the user's ``step(seq) -> output`` instead of the motion test.
    *before_go* is called once the worker is armed, before its loop is released (a comparison
    starts its loads there: see softrt.scenario.compare); what it raises ends the run unstarted.
    Bad input raises ConfigError before anything is started or written. Whatever fails once the
    run is in the history ends its row ``failed`` with the reason (:func:`_ended_failed`), never
    ``running`` (which the next command would call ``died``): it raises SoftRTError then.
    """
    with interrupts.deferred():
        started: list[RunParts] = []  # the run's parts, once they exist
        try:
            return _run(config, step, setup, on_progress, before_go, started)
        except Exception as err:
            if started and started[0].checkpoints:
                raise _ended_failed(started[0], err) from err
            if started and not (started[0].rundir.path / SUMMARY).exists():
                started[0].rundir.discard()  # released, then failed before its first checkpoint: nothing kept
            raise


def _ended_failed(parts: RunParts, err: Exception) -> SoftRTError:
    """Store the run as ``failed`` with *err* as its reason (its figures: the last checkpoint's) and
    return the one-line error to raise. The cleanup has run: the system is restored, the ring
    removed, the samples file closed."""
    reason = err.msg if isinstance(err, SoftRTError) else f"{type(err).__name__}: {err}"
    reason = " ".join(str(reason).split())[:300]  # one line, whatever the exception said
    if parts.writer is not None:
        parts.writer.join()  # no checkpoint may land after this
    path = parts.rundir.path
    kept = f"the run is kept in {path} as failed"
    try:
        last = read_summary(path)  # the last checkpoint (the first one put the run in the history)
        last = last.replace(
            status="failed",
            partial_reason=f"softrt failed: {reason}; the figures are the last checkpoint's",
            finished_at=utcnow(),
            elapsed_s=parts.elapsed_s(),
            checkpoint_at=None,
            supervisor=None,
        )
        parts.rundir.write_json(SUMMARY, last.to_dict())
        History().add_run(path)
    except SoftRTError as store_err:
        kept = f"its directory {path} could not be marked failed ({store_err.msg})"
    return SoftRTError(
        f"the run failed: {reason}",
        hint=f"a softrt bug, please report it with the output of softrt --debug run ...; {kept}",
    )


def _run(config: RunConfig, step, setup, on_progress, before_go, started: list) -> RunResult:
    plat = get_platform()
    recovered = _changes.recover()
    sweep_orphans()  # trace instances (and a tracefs mount) left by a softrt that was killed
    arming.sweep()  # ... and run directories it left before its first checkpoint
    plan = resolve_plan(config, plat.online_cpus(), plat.allowed_cpus(), motion=step is None)
    config = plan.config
    out_dir = Path(config.out_dir)
    check_writable(out_dir)
    expected_rows = config.duration_ns // config.period_ns
    check_space(out_dir, expected_rows, config.samples, config.period_ns)
    check = _take_check(plan) if config.check else None
    host = plat.host_facts().to_dict()  # before the run's changes (its rt_runtime_us is the machine's own)
    provenance = collect_provenance(device=config.device, tune_applied=tune_in_force())

    out = Outcome()
    started_at = utcnow()
    # Every resource is registered for cleanup as soon as it exists; ExitStack undoes them in
    # reverse order, each even when an earlier one failed. SIGINT only sets a flag (run() holds
    # interrupts.deferred()), so no Ctrl-C can cut the cleanup or the writing of the results short.
    with ExitStack() as cleanup:
        lock_fd = _lock_rt_loop(config)
        if lock_fd is not None:
            cleanup.callback(os.close, lock_fd)
        rundir = _open_rundir(config, out_dir, expected_rows, out, cleanup)
        ring = Ring.create(_ring_capacity())
        collector = Collector(
            config.period_ns, config.motion if step is None else None, threshold_ns=config.late_threshold_ns
        )
        drainer = Drainer(ring, rundir, collector)
        drainer.progress.config = config
        cleanup.callback(ring.close)
        cleanup.callback(drainer.release)
        journal = _changes.ChangeJournal()
        cleanup.callback(journal.restore)
        pins = _apply_system_changes(plan, plat, journal, out, cleanup)
        # Before the worker: on every path its last records are fed before the trace closes.
        tracer = cleanup.enter_context(TraceSession(config))
        parts = RunParts(
            config,
            host,
            started_at,
            recovered,
            check,
            out,
            rundir,
            ring,
            collector,
            drainer,
            journal,
            tracer,
            checkpoint_interval_s(),
            provenance=provenance,
        )
        started.append(parts)

        ctx = multiprocessing.get_context("spawn")
        parent_conn, child_conn = ctx.Pipe()
        spec = _worker_spec(plan, step, setup, pins)
        proc = ctx.Process(target=worker_main, args=(spec, ring.name, child_conn), name="softrt-worker", daemon=True)
        # Entered before _stop_worker is registered, so it is left after it: the worker's tie to
        # this process (a job object on Windows, which kills it when closed) outlasts the clean stop.
        tie = cleanup.enter_context(ExitStack())
        cleanup.callback(_stop_worker, proc, ring, parent_conn, drainer, out)
        try:
            _release(parts, plat, proc, (parent_conn, child_conn), tie, pins, before_go, on_progress, cleanup)
        except _Interrupted:
            out.interrupted_early = True
            out.partial(f"{interrupts.reason()} before the loop started")
    return RunResult(summary=_store(parts, check), path=rundir.path, recovered=recovered)


def _worker_spec(plan: RunPlan, step, setup, pins) -> WorkerSpec:
    """What the worker process is told to run: the resolved config, the user's step, its housekeeping CPUs."""
    config = plan.config
    return WorkerSpec(
        period_ns=config.period_ns,
        duration_ns=config.duration_ns,
        wait=config.wait,
        margin_ns=config.margin_ns,
        cpu=config.cpu,
        priority=config.priority,
        profile=config.profile,
        device=config.device,
        axes=config.axes,
        motion=config.motion,
        step=step,
        setup=setup,
        device_options=plan.device_options,
        housekeeping=tuple(pins.cpus) if pins is not None else (),
    )


def _release(
    parts: RunParts, plat, proc, conns, tie: ExitStack, pins, before_go, on_progress, cleanup: ExitStack
) -> None:
    """Start the worker, wait until it is armed, release its loop and measure until it ends;
    _Interrupted when Ctrl-C comes before the release."""
    config, out, tracer, drainer = parts.config, parts.out, parts.tracer, parts.drainer
    parent_conn, child_conn = conns
    if interrupts.requested():
        raise _Interrupted
    # The stop signals are shielded while the worker is created (it then ignores them itself),
    # so they reach only the supervisor, which stops the worker cleanly.
    # A real-time worker starts on its RT CPU, where it pins itself anyway (an untuned one
    # keeps this process's CPUs: where it runs is part of what is measured).
    start_on = plat.children_start_on(CpuSet([config.cpu])) if config.profile == "rt" else nullcontext()
    with plat.ctrl_c_shield(), start_on:
        proc.start()
    _tie_worker(plat, proc.pid, tie, out)
    child_conn.close()
    tracer.prepare()  # while the worker starts its interpreter and arms
    armed = _expect_armed(parent_conn, proc, ARM_TIMEOUT_S)
    out.applied.extend(armed.applied)
    out.not_applied.extend(armed.not_applied)
    if interrupts.requested():
        raise _Interrupted
    if before_go is not None:
        before_go()
        if interrupts.requested():
            raise _Interrupted
    tracer.start(proc.pid)  # the worker's pid filters its page faults and system calls
    _repin_supervisor(plat, pins, out, cleanup)
    drainer.trace = tracer
    drainer.progress.culprits = tracer.culprits
    parent_conn.send("go")
    out.released = True
    parts.released_at = time.monotonic()
    _measure(config, proc, drainer, out, on_progress, parts)


def _store(parts: RunParts, check: Report | None) -> RunSummary:
    """Write what the run produced (check, config, host, samples, summary) and mark it final in the
    history; return its summary (partial when it could not be stored)."""
    rundir, out = parts.rundir, parts.out
    if rundir.failure is not None:  # the disk: the loop ran on, the records it could not store are counted
        _note_partial(out, f"{rundir.failure}; {rundir.unwritten:,} records could not be written")
    stored_error = None
    try:  # first what does not depend on the summary, so a summary that cannot be built loses nothing else
        if check is not None:
            rundir.write_json("check.json", check.document().to_dict())
        rundir.write_json("config.json", parts.config.document().to_dict())
        rundir.write_json("host.json", parts.host)
        parts.collector.write(rundir)
    except SoftRTError as err:
        stored_error = err
    try:
        summary = run_summary(parts, running=False)
    except ConfigError as err:  # the model refused what the layers below produced: a bug, not bad input
        raise SoftRTError(
            f"the run's summary could not be built: {err.msg}",
            hint=f"a softrt bug, please report it; the samples, stats.json and the last checkpoint "
            f"are kept in {rundir.path}",
        ) from err
    try:
        if stored_error is not None:
            raise stored_error
        rundir.write_json(SUMMARY, summary.to_dict())
        parts.collector.write_tail(rundir)  # last: never at the cost of the summary's space
    except SoftRTError as err:  # (the reserve makes this rare) the caller still gets the figures to print
        reason = f"the results could not be stored: {err.msg}"
        summary = summary.replace(
            status="partial", partial_reason="; ".join(filter(None, (summary.partial_reason, reason)))
        )
    if parts.checkpoints:  # its history row says "running": make it the final one
        try:
            History(local_db_path()).add_run(rundir.path)  # the rig's own history (store.lab forwards)
        except SoftRTError:
            pass  # the caller adds it too, and says why it cannot (cli.history.remember)
    return summary


def _note_partial(out: Outcome, reason: str) -> None:
    """Mark the run partial with *reason*, after any reason already given."""
    if out.reason is None:
        out.partial(reason)
    else:
        out.reason = f"{out.reason}; {reason}"


def _ring_capacity() -> int:
    raw = os.environ.get(RING_CAPACITY_ENV)
    if not raw:
        return 1 << 16  # 16 s at 250 µs
    try:
        capacity = int(raw)
    except ValueError:
        capacity = 0
    if not 64 <= capacity <= 1 << 24 or capacity & (capacity - 1):
        raise ConfigError(
            f"{RING_CAPACITY_ENV}={raw!r} is not a power of two between 64 and {1 << 24}",
            hint=f"unset {RING_CAPACITY_ENV} (it is a test knob)",
        )
    return capacity


def _measure(config: RunConfig, proc, drainer: Drainer, out: Outcome, on_progress, parts: RunParts) -> None:
    """Drain the ring until the worker ends (or Ctrl-C, or it overstays the run); checkpoint the
    summary at the start, every ``parts.checkpoint_interval_s`` and when it stops."""
    t_start = time.monotonic()
    deadline = t_start + config.duration_ns / 1e9 + STOP_GRACE_S
    drainer.progress.duration_s = config.duration_ns / 1e9
    checkpoint(parts)  # the run is in the history (as running) from its start
    prefetch_fit()  # the tail model's imports while the loop runs (on this thread's CPUs), not after it
    next_checkpoint = time.monotonic() + parts.checkpoint_interval_s
    next_mark = 0.0
    try:
        while proc.is_alive():
            if interrupts.requested():
                out.partial(interrupts.reason())
                return
            time.sleep(DRAIN_INTERVAL_S)
            drainer.drain()
            drainer.progress.elapsed_s = time.monotonic() - t_start
            if time.monotonic() >= next_mark:  # a killed run is timed to its last record (store.running)
                parts.rundir.touch()
                next_mark = time.monotonic() + MARK_INTERVAL_S
            if on_progress is not None:
                try:
                    on_progress(drainer.progress)
                except OSError:  # its terminal hung up (EIO after SIGHUP, pty(7)): the run goes on unseen
                    on_progress = None
            if time.monotonic() > deadline:
                out.partial("the worker did not stop at the end of the run; it was stopped")
                return
            if time.monotonic() >= next_checkpoint:
                checkpoint(parts)  # between drains: milliseconds (docs/benchmarks.md, "Checkpoints")
                next_checkpoint = time.monotonic() + parts.checkpoint_interval_s
    except KeyboardInterrupt:  # off the main thread SIGINT cannot be deferred
        out.partial("interrupted by Ctrl-C")
    finally:
        parts.stopped_at = time.monotonic()
        drainer.drain()  # the records up to the stop, before the cleanup's grace time
        checkpoint(parts, wait=True)


def _stop_worker(proc, ring: Ring, conn, drainer: Drainer, out: Outcome) -> None:
    """Ask the worker to stop, let it make its device safe, collect its report, drain the rest.

    A worker in its loop sees the stop flag within a cycle; one still arming (blocked on "go")
    sees the pipe close. Only a worker that overstays the grace time is killed.
    """
    ring.header[L.H_STOP] = 1
    if proc.pid is not None:
        proc.join(0.5)
        out.worker = _final_report(conn)
        conn.close()
        proc.join(STOP_GRACE_S)
        if proc.is_alive():
            proc.kill()
            proc.join(2.0)
            out.partial("the worker did not stop when asked; it was killed")
    else:
        conn.close()
    if out.worker.device_failure:
        out.failed(out.worker.device_failure)
    if out.worker.kind == FAILED:
        out.partial(f"the worker failed: {out.worker.error}")
    elif proc.exitcode not in (0, None):
        out.partial(f"the worker died (exit code {proc.exitcode})")
    drainer.drain()


def _open_rundir(config: RunConfig, out_dir: Path, expected_rows: int, out: Outcome, cleanup: ExitStack) -> RunDir:
    """The run's directory, closed by *cleanup* (removed if the loop never started) and named in
    the state directory until then: killed before its first checkpoint, the next command removes
    it (store.arming)."""
    run_id = new_run_id()
    cleanup.callback(arming.unregister, arming.register(out_dir / run_id))  # named before it exists: no gap
    rundir = RunDir(
        out_dir,
        run_id,
        expected_rows,
        samples=config.samples,
        period_ns=config.period_ns,
        late_threshold_ns=config.late_threshold_ns,
    )
    cleanup.callback(_close_rundir, rundir, out)
    return rundir


def _close_rundir(rundir: RunDir, out: Outcome) -> None:
    rundir.close()
    if not out.released and not out.interrupted_early:  # (no cycle runs before the release)
        rundir.discard()  # the run failed to start: leave nothing half-written (an interrupted one is kept)


def _take_check(plan: RunPlan) -> Report:
    """Return ``softrt check`` of the run's RT CPU (with a 1 s live sample)."""
    from ..audit import run_checks

    return run_checks(CpuSet([plan.rt_cpu]), sample_s=1.0)


def _expect_armed(conn, proc, timeout_s: float) -> WorkerReport:
    """Wait for the worker's ARMED report; raise WorkerFailed if it fails or dies first."""
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if interrupts.requested():
            raise _Interrupted
        if conn.poll(0.1):
            try:
                report = conn.recv()
            except EOFError:
                break
            if report.kind == ARMED:
                return report
            if report.kind == FAILED:
                if isinstance(report.error, SoftRTError):
                    raise report.error  # e.g. an EtherCAT bus that cannot be used: the worker's own words
                raise WorkerFailed(f"the real-time worker failed while arming: {report.error}")
        elif not proc.is_alive():
            break
    raise WorkerFailed(f"the real-time worker did not arm (exit code {proc.exitcode})")


def _final_report(conn) -> WorkerReport:
    """Collect the worker's last report (DONE, or FAILED with its error as text), if it sent one."""
    report = NOTHING
    try:
        while conn.poll(0.5):
            got = conn.recv()
            if got.kind == DONE:
                report = got
            elif got.kind == FAILED:
                report = replace(report, kind=FAILED, error=str(got.error))
    except (EOFError, OSError):
        pass
    return report
