"""The session layer's drain of one run: the shared-memory ring into the run directory, the
streaming pass and the trace (:class:`Drainer`), the live :class:`Progress` it keeps, and the run's
:class:`Outcome` as it goes; read by ``session.run`` and ``session.summary``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ..analysis import RunStats, Snapshot
from ..analysis.cycles import CycleStream
from ..ipc.ring import Ring
from ..schema.config import RunConfig
from ..schema.summary import FairServer
from ..schema.worker import NOTHING, WorkerReport
from ..store.rundir import RunDir
from ..trace import TraceSession
from .collect import Collector


@dataclass
class Progress:
    """What the live progress shows, updated after every drain (in the supervisor's thread).

    ``snapshot`` holds the streaming pass's live figures (p99, worst cycle and when); ``stats`` is
    the pass itself (its histograms), for a live view or a metrics exporter to read in the same
    thread, never to change.
    """

    elapsed_s: float = 0.0
    duration_s: float = 0.0
    cycles: int = 0
    max_period_us: float = 0.0
    missed_updates: int = 0
    snapshot: Snapshot | None = None
    stats: RunStats | None = None
    run_id: str = ""  # identity for a metrics exporter (with config: scenario, RT CPU, threshold)
    config: RunConfig | None = None
    ring_overflows: int = 0  # records the worker dropped because the ring was full, so far
    culprits: Callable[[], list] | None = None  # the trace's sources of late time so far (TraceSession.culprits)


class Drainer:
    """Drains the ring into the run directory, the streaming pass and the trace; keeps the live progress.

    Each drained chunk is seen once by the run's late rule (softrt.analysis.cycles: its periods and
    late cycles), and that one view goes to every consumer, so the live view, Prometheus, the
    summary, the attribution and the ``--samples late`` store agree on every cycle.
    """

    def __init__(self, ring: Ring, rundir: RunDir, collector: Collector) -> None:
        self.reader = ring.reader()
        self.rundir = rundir
        self.collector = collector
        self.cycles = CycleStream(collector.stats.rule)
        self.progress = Progress(stats=collector.stats, run_id=rundir.run_id)
        self.overflows = 0
        self.trace: TraceSession | None = None  # fed every chunk (issue 9: why cycles were late)

    def drain(self) -> None:
        if self.reader is None:
            return
        view = self.cycles.view(self.reader.drain())
        self.progress.ring_overflows = int(self.reader.overflows)
        if self.trace is not None:
            self.trace.feed(view)
        if not view.size:
            return
        self.rundir.append(view)
        self.collector.add(view)
        snap = self.collector.progress()  # up to one batch (about 1 s) behind
        self.progress.cycles += view.size  # exact: _close_rundir relies on it
        self.progress.max_period_us = snap.max_period_us or 0.0
        self.progress.missed_updates = snap.missed_updates
        self.progress.snapshot = snap

    def release(self) -> None:
        """Keep the overflow count, drop the reader (its view pins the shared mapping)."""
        if self.reader is not None:
            self.overflows = self.reader.overflows
            self.reader = None


@dataclass
class Outcome:
    """How the run went, filled in as it goes (read by the cleanup and the summary)."""

    status: str = "complete"
    reason: str | None = None
    released: bool = False  # the worker was told "go"
    interrupted_early: bool = False  # Ctrl-C before "go": the (empty) run is kept all the same
    applied: list = field(default_factory=list)
    not_applied: list = field(default_factory=list)
    worker: WorkerReport = NOTHING  # the worker's last report (DONE, or FAILED), once it stopped
    fair_server: FairServer | None = None  # the fair server on the RT CPU (Linux 6.12+), for the Mode block

    def partial(self, reason: str) -> None:
        if self.reason is None:
            self.status, self.reason = "partial", reason

    def failed(self, reason: str) -> None:
        """The device failed (bus lost, drive fault): the run is failed, whatever else happened."""
        if self.status != "failed":
            self.status, self.reason = "failed", reason if self.reason is None else f"{reason}; {self.reason}"
