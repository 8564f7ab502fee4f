"""The run's collector: every chunk drained from the ring goes through the one streaming pass
(session layer).

:class:`Collector` holds the run's :class:`softrt.analysis.RunStats` (every summary metric, the
live progress, ``stats.json``) and, for the motion test, a :class:`softrt.motion.MotionImpactStream`
(what the misses did to the motor). It keeps no record, so the end of a run never re-reads
``samples.parquet``: a 24 h run at 250 µs (345 M records) is summarised in a few MB
(docs/benchmarks.md, "Streaming metrics pass").
"""

from __future__ import annotations

import numpy as np

from ..analysis import RunStats, Snapshot
from ..analysis.cycles import CycleView, concat
from ..analysis.tail_keep import fit_kept
from ..errors import SoftRTError
from ..motion import MotionConfig, MotionImpactStream
from ..schema.summary import Metrics, Motion
from ..schema.tail import Tail
from ..store.batch import Batch
from ..store.rundir import STATS, RunDir
from ..store.tailkeep import write_tail_keep

#: Drained records are passed on in batches of at least this many (about 1 s at 250 µs): the pass
#: costs a few hundred µs per call whatever its size, so 50 ms drains of 200 records would run at
#: a tenth of its rate (docs/benchmarks.md). The live progress lags by at most one batch.
RECORDS_BATCH = 4_096
#: Board cycles of this many writes are fed to the motion stream at once (its per-call cost is higher).
MOTION_BATCH = 16_384


class Collector:
    """Feed it the records as they are drained; ask it for the progress, the summary, stats.json."""

    def __init__(self, period_ns: int, motion: MotionConfig | None = None, threshold_ns: int | None = None) -> None:
        self.stats = RunStats(period_ns) if threshold_ns is None else RunStats(period_ns, threshold_ns)
        self.motion = MotionImpactStream(motion, period_ns=period_ns) if motion is not None else None
        self._views: Batch[CycleView] = Batch(concat)
        self._windows: Batch[np.ndarray] = Batch(np.concatenate)  # the board cycles the motion samples landed in

    def add(self, chunk: np.ndarray | CycleView) -> None:
        """Consume the next drained chunk: records (RECORD_DTYPE, in write order) or their cycle view
        (softrt.analysis.cycles, the drainer's). The records are kept until the batch is full, so
        they must not be overwritten: Ring.drain returns a copy."""
        view = self.stats.cycles.view(chunk)
        if not view.size:
            return
        if self._views.add(view, view.size) >= RECORDS_BATCH:
            self.flush()

    def flush(self) -> None:
        """Pass every queued record on (summary() and write() do it themselves)."""
        view = self._views.take()
        if view is None:
            return
        self.stats.add(view)
        records = view.records
        if self.motion is not None:
            # Write i carries sample i and lands in board cycle cycle + missed (motion.impact).
            if self._windows.add(records["cycle"] + records["missed"], int(records.size)) >= MOTION_BATCH:
                self._feed_motion()

    def _feed_motion(self) -> None:
        windows = self._windows.take()
        if windows is not None:
            self.motion.add(windows)

    def progress(self) -> Snapshot:
        """Cycles, missed updates, max and p99 period, the worst cycle and when (cheap; up to one
        batch, about 1 s, behind the ring)."""
        return self.stats.snapshot()

    def summary(self, worker_cycles: int | None = None) -> tuple[Metrics, Motion | None]:
        """The numeric part of summary.json, and the motion impact of a motion test (else None).

        *worker_cycles* is the worker's own record count: it also covers records dropped at the
        very end, after the last one the ring delivered.
        """
        self.flush()
        metrics = self.stats.summary()
        if worker_cycles is not None:
            metrics = metrics.replace(
                records_expected=worker_cycles, records_missing=worker_cycles - (metrics.cycles or 0)
            )
        if self.motion is None or not metrics.cycles:
            return metrics, None
        if metrics.records_missing:
            return metrics, Motion(
                not_computed=f"{metrics.records_missing} records were dropped by the ring, so the "
                "delivered samples are unknown"
            )
        self._feed_motion()
        return metrics, self.motion.result()

    def write(self, rundir: RunDir) -> None:
        """Store the pass's state with the run (``stats.json``, docs/run-format.md)."""
        self.flush()
        rundir.write_json(STATS, self.stats.document().to_dict())

    def write_tail(self, rundir: RunDir) -> bool:
        """Store the tail model's raw material (``tail.npz``, store.tailkeep), after the summary: it
        may be MBs, so it is written last and never on a disk that already filled (the summary's
        space comes first). Never raises; False when it was not written (softrt tail RUN then reads
        samples.parquet)."""
        if self.stats.keep is None or rundir.failure is not None:
            return False
        try:
            write_tail_keep(rundir.path, self.stats.keep)
        except SoftRTError:
            return False
        return True

    def tail(self, series: str = "period") -> Tail | None:
        """The tail model (analysis.tail) of *series* ("period": late beyond nominal + the late
        threshold; "latency": beyond the threshold), over the cycles passed so far; None before any."""
        self.flush()
        keep = self.stats.keep
        if keep is None or not keep[series].seen:
            return None
        hours = keep[series].hours(self.stats.period_ns)  # the run's span: an untuned loop's cycles are long
        return fit_kept(keep[series], hours=hours, series=f"{series}_us")
