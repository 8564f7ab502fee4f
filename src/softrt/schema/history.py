"""What ``softrt history --json`` prints for each run (schema layer; the history: docs/lab.md): the run's
listing fields as the history's database holds them (store.dialect.COLUMNS), its tuning from the
stored summary, and for a run marked running whether it still goes (store.running.RunState).
"""

from __future__ import annotations

from .doc import Doc, opt
from .summary import Tuning


class HistoryEntry(Doc):
    """One run in ``softrt history --json`` (the full summary is ``softrt show RUN --json``)."""

    run_id: str = ""
    started_at: str | None = None
    finished_at: str | None = None
    host: str | None = None
    scenario: str | None = None
    source: str | None = None
    status: str | None = None
    mode: str | None = None
    period_ns: int | None = None
    cycles: int | None = None
    period_max_us: float | None = None
    period_p99_99_us: float | None = None
    latency_max_us: float | None = None
    process_max_us: float | None = None
    missed_updates: int | None = None
    tuning: Tuning = Tuning()
    path: str = ""
    samples_path: str | None = None
    added_at: str = ""
    compare_id: str | None = None
    late_rate_high_per_h: float | None = None
    late_rate_per_h: float | None = None
    running: StillRunning | None = opt()


class StillRunning(Doc):
    """A run the history lists as running: whether its supervisor still exists (None: cannot tell),
    how long it has run and the age of its last checkpoint."""

    alive: bool | None = None
    elapsed_s: float | None = None
    checkpoint_age_s: float | None = None
