"""Is a run marked ``running`` still going? (store layer).

A run writes its summary-so-far every minute with ``"status": "running"`` (docs/run-format.md,
"Checkpoints"); the final summary replaces it. A supervisor that was killed (SIGKILL, OOM killer,
power cut) never writes the final one, so the files keep saying ``running``: readers ask
:func:`run_state` instead of believing them.

The checkpoint names its supervisor by ``BOOT_ID/PID/START`` (``platform.process_identity``): on
the machine that ran it, the run is alive exactly when that process still exists (a reused pid
has another start time, a reboot another boot id). A run directory read on another machine can
only be judged by the age of its last checkpoint.

A run that died ran until its last record, not its last checkpoint (a run killed 7 s in, before
its second checkpoint, is not "died 0s"): on the machine that ran it, its samples file was last
written then (row groups, and the supervisor marks it every second while it drains: session.run).
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from ..platform import get_platform
from ..schema.summary import RunSummary, Supervisor
from ..units import format_duration_s
from .late import AGGREGATES

#: The files a run writes as its records come in (store.rundir, store.late).
_RECORD_FILES = ("samples.parquet", AGGREGATES)

#: A run whose liveness cannot be checked (read on another machine) is presumed gone when its last
#: checkpoint is older than this many checkpoint intervals (and at least STALE_MIN_S).
STALE_INTERVALS = 3
STALE_MIN_S = 300.0


@dataclass(frozen=True)
class RunState:
    """What a summary's ``status`` means now."""

    status: str  # the file's: "complete", "partial", "failed" or "running"
    alive: bool | None = None  # running only: the supervisor exists (True), is gone (False), cannot tell (None)
    elapsed_s: float | None = None  # running: how long it has run (a live run: until now)
    checkpoint_age_s: float | None = None  # running: since the last checkpoint was written

    @property
    def running(self) -> bool:
        """The run is (or, read elsewhere, may still be) in progress."""
        return self.status == "running" and self.alive is not False

    def label(self) -> str:
        """A few characters for a table cell: "running 12m", "died 3h05m"."""
        if self.status != "running":
            return self.status
        if self.alive is False:
            return f"died {format_duration_s(self.elapsed_s, compact=True)}"
        return f"running {format_duration_s(self.elapsed_s, compact=True)}"

    def sentence(self) -> str:
        """One line for ``softrt show``."""
        if self.status != "running":
            return f"Status: {self.status}"
        age = format_duration_s(self.checkpoint_age_s)
        if self.alive:
            return f"Running for {format_duration_s(self.elapsed_s)} (last checkpoint {age} ago; figures so far)"
        if self.alive is False:
            return (
                f"Not running any more: the supervisor is gone (killed, or the machine stopped) after "
                f"{format_duration_s(self.elapsed_s)}; the figures are its last checkpoint, {age} ago"
            )
        return (
            f"Marked running, {format_duration_s(self.elapsed_s)} in, on another machine; last checkpoint "
            f"{age} ago (figures so far)"
        )


def run_state(
    summary: RunSummary, now: datetime | None = None, root: str = "/", run_dir: Path | None = None
) -> RunState:
    """Return what *summary* means now; never raises on odd fields. With the run's *run_dir*, a run
    that died on this machine is timed to its last record (:func:`last_record_at`)."""
    if not summary.running:
        return RunState(summary.state)
    now = now or datetime.now(timezone.utc)
    elapsed = summary.elapsed_s
    age = _age_s(summary.checkpoint_at, now)
    supervisor = summary.supervisor or Supervisor()
    alive = _alive(supervisor, summary.hostname, root)
    interval = supervisor.checkpoint_interval_s
    if alive is None and age is not None:
        limit = max(STALE_MIN_S, STALE_INTERVALS * interval) if interval is not None else STALE_MIN_S
        if age > limit:
            alive = False  # no checkpoint for several intervals: the supervisor is gone
    if alive and elapsed is not None and age is not None:
        elapsed += age  # a live run has gone on since its checkpoint
    elif alive is False and elapsed is not None and run_dir is not None and summary.hostname == socket.gethostname():
        elapsed += _after_checkpoint_s(summary, run_dir)
    return RunState(summary.state, alive, elapsed, age)


def last_record_at(run_dir: Path) -> datetime | None:
    """When the run last put records on disk: its record files' modification time (None: none)."""
    times = []
    for name in _RECORD_FILES:
        try:
            times.append(os.stat(Path(run_dir) / name).st_mtime)
        except (OSError, ValueError):
            pass
    return datetime.fromtimestamp(max(times), timezone.utc) if times else None


def _after_checkpoint_s(summary: RunSummary, run_dir: Path) -> float:
    """Seconds the run went on after its last checkpoint (on the machine that wrote both: a copy
    elsewhere has the copy's times), at most the rest of its planned duration."""
    last = last_record_at(run_dir)
    checkpoint = _when(summary.checkpoint_at)
    if last is None or checkpoint is None:
        return 0.0
    after = (last - checkpoint).total_seconds()
    duration_ns = summary.config.duration_ns
    if duration_ns is not None and summary.elapsed_s is not None:
        after = min(after, max(0.0, duration_ns / 1e9 - summary.elapsed_s))
    return max(0.0, round(after, 3))


def _alive(supervisor: Supervisor, hostname: str | None, root: str) -> bool | None:
    identity, pid = supervisor.identity, supervisor.pid
    if identity is None or not pid:
        return None
    plat = get_platform()
    mine = plat.process_identity(0, root) or ""
    if identity.split("/", 1)[0] == mine.split("/", 1)[0]:  # this boot of this machine
        return plat.process_identity(pid, root) == identity
    if hostname == socket.gethostname():
        return False  # this machine, an earlier boot: a power cut or a reboot ended the run
    return None


def _when(iso: str | None) -> datetime | None:
    if iso is None:
        return None
    try:
        when = datetime.fromisoformat(iso.replace("Z", "+00:00"))
    except ValueError:
        return None
    return when.replace(tzinfo=timezone.utc) if when.tzinfo is None else when


def _age_s(iso: str | None, now: datetime) -> float | None:
    when = _when(iso)
    return None if when is None else max(0.0, (now - when).total_seconds())
