"""What a run's summary.json holds: the checkpoints' summary-so-far and the final one (session layer).

:func:`run_summary` builds both from one :class:`RunParts`, so a checkpoint holds exactly what the
final summary would hold at that moment. :func:`checkpoint` writes the summary-so-far every
:data:`CHECKPOINT_INTERVAL_S` and at the stop (docs/run-format.md, "Checkpoints"): built in the
supervisor's thread, written (fsync, atomic rename) and added to the history by a writer thread,
so a slow disk never holds up the drain of the ring.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timezone

from ..analysis.verdict import judge
from ..audit.model import Report
from ..errors import ConfigError, SoftRTError
from ..ipc.ring import Ring
from ..platform import get_platform
from ..schema import summary as doc
from ..schema.check import CheckReport
from ..schema.config import RunConfig
from ..schema.device import Board
from ..schema.doc import present
from ..schema.provenance import Provenance
from ..schema.summary import SCHEMA, RunSummary, Supervisor, Tuning
from ..schema.tail import Tail
from ..store.history import History, local_db_path
from ..store.rundir import STATS, SUMMARY, RunDir
from ..trace import TraceSession
from . import changes as _changes
from .collect import Collector
from .drain import Drainer, Outcome

#: The summary-so-far is written this often (and when the run stops): a killed supervisor or a power
#: cut loses at most this much of the statistics (docs/run-format.md, "Checkpoints").
CHECKPOINT_INTERVAL_S = 60.0
#: Test knob: another checkpoint interval in seconds (a test cannot wait a minute). Not meant for users.
CHECKPOINT_INTERVAL_ENV = "SOFTRT_CHECKPOINT_INTERVAL"
#: A checkpoint waits at most this long for the history database (another softrt may be writing
#: it): the supervisor must get back to draining the ring (16 s of records at 250 µs).
CHECKPOINT_DB_TIMEOUT_S = 1.0


def utcnow() -> str:
    """Now, in UTC, as ISO 8601 to the second (summary.json's times)."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def supervisor_now(interval_s: float) -> Supervisor:
    """This process as a checkpoint names its supervisor (``softrt history`` tells a live run from one
    whose supervisor died by its pid and identity; store.running)."""
    return Supervisor(pid=os.getpid(), identity=get_platform().process_identity(), checkpoint_interval_s=interval_s)


def mode_of(config: RunConfig, not_applied: list[dict]) -> str:
    """Label the run: "real-time", "not real-time" (controls failed) or "untuned"."""
    if config.profile == "none":
        return "untuned"
    return "not real-time" if not_applied else "real-time"


@dataclass
class RunParts:
    """Everything a run's summary is assembled from (the checkpoints' and the final one's)."""

    config: RunConfig
    host: dict
    started_at: str
    recovered: list
    check: Report | None  # softrt check before the run (--check)
    out: Outcome  # the run's outcome so far (session.run)
    rundir: RunDir
    ring: Ring
    collector: Collector
    drainer: Drainer  # the ring's drainer (its overflow count)
    journal: _changes.ChangeJournal
    tracer: TraceSession
    checkpoint_interval_s: float
    released_at: float | None = None  # time.monotonic() when the loop was released
    stopped_at: float | None = None  # ... and when the supervisor stopped measuring
    checkpoints: int = 0  # written, or being written
    checkpoints_skipped: int = 0  # due while the previous one was still being written
    writer: threading.Thread | None = None  # writing the last checkpoint
    checkpoint_error: str | None = None  # the last reason a checkpoint could not be written
    history_error: str | None = None  # the last reason a checkpoint could not reach the history
    provenance: Provenance | None = None  # platform.provenance.collect, taken with the host facts

    def elapsed_s(self) -> float:
        if self.released_at is None:
            return 0.0
        return round((self.stopped_at or time.monotonic()) - self.released_at, 3)


def _check_of(report: Report) -> CheckReport:
    """The summary's part of the check taken before the run: the head of its report (ready, verdict,
    counts and fix_first, as ``softrt check --json`` and the run's ``check.json`` write them)."""
    doc = report.document()
    return CheckReport.build(ready=doc.ready, verdict=doc.verdict, counts=doc.counts, fix_first=doc.fix_first)


def run_summary(parts: RunParts, *, running: bool) -> RunSummary:
    """The run's summary.json: the summary-so-far of a checkpoint (*running*) or the final one.

    One function for both, so a checkpoint holds exactly what the final summary would hold at that
    moment, less what only the end knows: the worker's own count, the board's report, the trace's
    attribution (computed when the trace is closed) and ``finished_at``.
    """
    config, out, rundir, tracer = parts.config, parts.out, parts.rundir, parts.tracer
    if running:
        head = dict(
            checkpoint_at=utcnow(),
            supervisor=supervisor_now(parts.checkpoint_interval_s),
        )
    else:
        head = present(
            samples_error=None
            if rundir.complete
            else f"{rundir.failure}: the samples file has no footer and cannot be read"
        )
    # Every figure comes from the streaming pass over the drained records (also those the disk
    # refused): the end of a run never re-reads samples.parquet.
    metrics, motion = parts.collector.summary(worker_cycles=None if running else out.worker.cycles)
    overflows = (
        parts.drainer.reader.overflows if running and parts.drainer.reader is not None else parts.drainer.overflows
    )
    check = None if parts.check is None else _check_of(parts.check)
    end = {} if running else present(why_late=tracer.why_late(), check=check)
    model = RunSummary.build(
        schema=SCHEMA,
        run_id=rundir.run_id,
        scenario=config.scenario,
        started_at=parts.started_at,
        finished_at=None if running else utcnow(),
        status="running" if running else out.status,
        partial_reason=out.reason,
        elapsed_s=parts.elapsed_s(),
        mode=mode_of(config, out.not_applied),
        config=config.document(),
        host=parts.host,
        **present(provenance=parts.provenance),
        tuning=Tuning.build(
            applied=out.applied,
            not_applied=out.not_applied,
            system_changes=[*parts.journal.changes, *tracer.system_changes()],
            recovered_from_earlier_runs=[c.to_dict() for c in parts.recovered],
            **present(fair_server=out.fair_server or None),
        ),
        **head,
        metrics=metrics,
        **present(motion=motion),
        ring=doc.Ring(capacity=parts.ring.capacity, overflows=overflows),
        board=Board() if running or out.worker.board is None else out.worker.board,
        records_unwritten=rundir.unwritten,
        samples=rundir.kept(),
        **end,
    )
    if not running:
        model = reconcile_misses(model)
    # Judged on the final figures: the board's own miss count, the attribution's culprits; the tail
    # model of the periods (their late rule's bound is its deadline) is fitted once, at the end
    # (a fit takes up to seconds: never in a checkpoint, which the supervisor builds between drains).
    return judged(model, config, running=running, tail=None if running else parts.collector.tail("period"))


def judged(model: RunSummary, config: RunConfig, *, running: bool, tail: Tail | None = None) -> RunSummary:
    """*model* with its *tail* block and its verdict (analysis.verdict.judge), for a run and for a
    watched thread alike; a checkpoint's late cycles are explained only when the run ends."""
    model = model.replace(tail=tail)
    verdict = judge(
        model.metrics,
        period_ns=config.period_ns,
        threshold_ns=config.late_threshold_ns,
        require=config.require,
        why_late=[] if running else [model.why_late],
        tail=tail,
    )
    if running and verdict.meets is False:
        verdict = verdict.replace(why_unknown="the late cycles are explained when the run ends")
    return model.replace(verdict=verdict)


def checkpoint(parts: RunParts, *, wait: bool = False) -> None:
    """Write the summary-so-far (``summary.json``, ``"status": "running"``) and ``stats.json``
    atomically, and refresh the run's row in the history.

    The documents are built here, in the supervisor's thread (a few ms: the streaming pass is not
    shared with another thread); writing them (fsync) and the history (SQLite) are left to a
    thread, so a slow disk never holds up the drain. A checkpoint still being written when the
    next is due makes that one skip; with *wait* (at the stop) it is waited for, and this one is
    written before returning, so no checkpoint can land after the final summary. Never raises:
    a checkpoint that cannot be written costs the run nothing.
    """
    if parts.writer is not None and parts.writer.is_alive():
        if not wait:
            parts.checkpoints_skipped += 1
            return
        parts.writer.join()
    try:
        docs = {SUMMARY: run_summary(parts, running=True).to_dict()}
        parts.collector.flush()
        docs[STATS] = parts.collector.stats.document().to_dict()
    except SoftRTError:
        return
    if parts.checkpoints == 0:  # a killed run keeps what it ran with
        docs = {"config.json": parts.config.document().to_dict(), "host.json": parts.host, **docs}
    parts.checkpoints += 1
    if wait:
        _write_checkpoint(parts, docs)
    else:
        parts.writer = threading.Thread(
            target=_write_checkpoint, args=(parts, docs), name="softrt-checkpoint", daemon=True
        )
        parts.writer.start()


def _write_checkpoint(parts: RunParts, docs: dict) -> None:
    try:
        for name, doc in docs.items():  # summary.json last: it points at the rest
            parts.rundir.write_json(name, doc)
    except SoftRTError as err:
        parts.checkpoint_error = err.msg
        return
    try:  # a history database held by another softrt must not hold up the checkpoints for long
        History(local_db_path(), timeout_s=CHECKPOINT_DB_TIMEOUT_S).add_run(parts.rundir.path)  # the rig's own
        parts.history_error = None
    except SoftRTError as err:
        parts.history_error = str(err)


def checkpoint_interval_s() -> float:
    raw = os.environ.get(CHECKPOINT_INTERVAL_ENV)
    if not raw:
        return CHECKPOINT_INTERVAL_S
    try:
        interval = float(raw)
    except ValueError:
        interval = 0.0
    if not 0.1 <= interval <= 86400:
        raise ConfigError(
            f"{CHECKPOINT_INTERVAL_ENV}={raw!r} is not a number of seconds between 0.1 and 86400",
            hint=f"unset {CHECKPOINT_INTERVAL_ENV} (it is a test knob)",
        )
    return interval


def reconcile_misses(summary: RunSummary) -> RunSummary:
    """Make ``misses.missed_updates`` the board's own count, and say why the records differ.

    Every write carries the misses before it, so the records and the board agree, unless the
    ring dropped records: then only the board saw them all.
    """
    board = summary.board.missed_updates if summary.board is not None else None
    metrics = summary.metrics
    misses = metrics.misses
    if board is None or misses is None or board == misses.missed_updates:
        return summary
    in_records = misses.missed_updates or 0
    overflows = summary.ring.overflows if summary.ring is not None else 0
    note = (
        f"the board counted {board:,} missed updates; the records received hold {in_records:,}: "
        f"{metrics.records_missing or 0:,} records were dropped by the ring ({overflows or 0:,} overflows), "
        "so the per-cycle figures (cycles with a miss, longest run) cover the records received only"
    )
    misses = misses.replace(missed_updates=board, missed_updates_in_records=in_records, source="board", note=note)
    return summary.replace(metrics=metrics.replace(misses=misses))
