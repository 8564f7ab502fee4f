"""The load-generator contract (load layer); its result is the summary's document, schema LoadRun.

A load runs in other processes, never in softrt's own: ``start()`` launches it, ``alive()`` says
whether it is still running, ``stop()`` ends it and reaps every process and file it made, and
``result()`` returns what it actually achieved, so a report shows that the load was real.

    NEW ─prepare()─▶ PREPARED ─start()─▶ RUNNING ─stop()─▶ STOPPED ─result()─▶ LoadRun

``prepare()`` does slow set-up (ffmpeg encodes its clip) before any load runs, as rteval's
_WorkloadPrepare does; ``start()`` on a NEW load prepares it first. ``stop()`` works from any
state and is idempotent. A prepare() or start() that fails cleans up and leaves the load FAILED.
"""

from __future__ import annotations

import abc
import enum
import os
import time
from pathlib import Path

from ..cpus import CpuSet
from ..errors import ConfigError, InvalidCpu, InvalidState, SoftRTError
from ..platform import get_platform
from ..schema.summary import LoadRun

# Safety net: every load ends by itself after this long even if softrt never calls stop()
# (stress-ng(1) --timeout; the built-in workers and ffmpeg honour the same limit).
DEFAULT_TIMEOUT_S = 3600.0


class LoadFailed(SoftRTError):
    """A load could not start, or its process died before it was stopped."""

    def __init__(self, name: str, why: str, *, hint: str | None = None) -> None:
        self.name = name
        self.why = why
        super().__init__(f"load {name!r} {why}", hint=hint)


class LoadState(enum.Enum):
    """Where a load is in its life."""

    NEW = "new"  # made, nothing launched
    PREPARED = "prepared"  # set-up done (files made), nothing running yet
    RUNNING = "running"  # processes launched (they may have died since: see alive())
    STOPPED = "stopped"  # stopped and cleaned up; result() is available
    FAILED = "failed"  # start() failed and cleaned up; no result


class LoadGenerator(abc.ABC):
    """A background load placed on a set of CPUs (rteval's load module, reduced to its lifecycle).

    Subclasses implement ``_start``, ``_stop``, ``alive``, ``pids`` and ``_achieved``; this class
    keeps the state machine, the timing and the rule that a failed start leaves nothing behind.
    Processes are tied to the thread that starts them (PR_SET_PDEATHSIG, prctl(2), fires when
    that *thread* exits), so start loads from a thread that outlives them, such as the main one.
    """

    backend: str = ""

    def __init__(
        self,
        name: str,
        cpus: CpuSet,
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        workdir: str | os.PathLike[str] | None = None,
    ) -> None:
        if not len(cpus):
            raise ConfigError(f"load {name!r} has no CPUs to run on", hint="give a CPU list such as 0")
        allowed = get_platform().allowed_cpus()
        if not cpus <= allowed:
            bad = cpus - allowed
            raise InvalidCpu(bad, allowed, why=f"cannot run load {name!r}: not in this process's CPU set")
        if timeout_s <= 0:
            raise ConfigError(f"load {name!r}: timeout_s must be positive, got {timeout_s}")
        self.name = name
        self.cpus = cpus
        self.timeout_s = float(timeout_s)
        self.workdir = Path(workdir) if workdir is not None else None
        self.notes: list[str] = []
        self.problems: list[str] = []
        self._state = LoadState.NEW
        self._t_start = 0.0
        self._t_stop = 0.0

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r} backend={self.backend} cpus={self.cpus} {self._state.value}>"

    @property
    def state(self) -> LoadState:
        """The load's current state."""
        return self._state

    def prepare(self) -> None:
        """Do the load's slow set-up without starting it; on failure, clean up and raise."""
        if self._state is not LoadState.NEW:
            raise InvalidState(LoadState.NEW.value, self._state.value, what=f"load {self.name!r}")
        try:
            self._prepare()
        except BaseException:
            self._state = LoadState.FAILED
            self._stop()
            raise
        self._state = LoadState.PREPARED

    def start(self) -> None:
        """Launch the load's processes (preparing it first if needed); on failure, clean up and raise."""
        if self._state is LoadState.NEW:
            self.prepare()
        if self._state is not LoadState.PREPARED:
            raise InvalidState(LoadState.PREPARED.value, self._state.value, what=f"load {self.name!r}")
        self._t_start = time.monotonic()
        self._state = LoadState.RUNNING
        try:
            self._start()
        except BaseException:
            self._state = LoadState.FAILED
            self._stop()
            raise

    def stop(self) -> None:
        """Stop every process of the load and remove its files (safe to call more than once)."""
        if self._state in (LoadState.RUNNING, LoadState.PREPARED):
            ran = self._state is LoadState.RUNNING
            try:
                self._stop()
            finally:
                self._t_stop = time.monotonic() if ran else self._t_start
                self._state = LoadState.STOPPED
        elif self._state is LoadState.NEW:
            self._state = LoadState.STOPPED

    def result(self) -> LoadRun:
        """Return what the load achieved (after stop()), as the summary's :class:`~softrt.schema.summary.LoadRun`.

        ``achieved`` maps metric names, with their unit in the name (``write_MB_per_s``,
        ``connections_per_s``, ``bogo_ops_per_s``; MB = 10**6 bytes), to values, sorted by name.
        ``notes`` give context (where files went, which user ran it); ``problems`` say what went
        wrong (a process that ended early, a missing report).
        """
        if self._state is not LoadState.STOPPED:
            raise InvalidState(LoadState.STOPPED.value, self._state.value, what=f"load {self.name!r}")
        duration = max(0.0, self._t_stop - self._t_start)
        achieved = self._achieved(duration) if duration > 0 else {}
        return LoadRun(
            name=self.name,
            backend=self.backend,
            cpus=str(self.cpus),
            achieved={k: float(v) for k, v in sorted(achieved.items())},
            duration_s=duration,
            skipped_reason=None,
            command=self.command(),
            notes=list(self.notes),
            problems=list(self.problems),
        )

    def command(self) -> str:
        """Return the command line(s) the load runs, for the report."""
        return ""

    @abc.abstractmethod
    def alive(self) -> bool:
        """Return True while every process of the load is still running."""

    @abc.abstractmethod
    def pids(self) -> list[int]:
        """Return the process ids this load launched directly (its process-group leaders)."""

    def _prepare(self) -> None:  # noqa: B027 - an optional hook
        """Slow set-up before start (default: none)."""

    @abc.abstractmethod
    def _start(self) -> None: ...

    @abc.abstractmethod
    def _stop(self) -> None:
        """Stop and reap everything; must also work after a partial _prepare() or _start()."""

    @abc.abstractmethod
    def _achieved(self, duration_s: float) -> dict[str, float]: ...


class ProcessLoad(LoadGenerator):
    """A load that runs as one external command in its own process group (stress-ng, ffmpeg)."""

    _proc = None  # subprocess.Popen once started
    _argv: tuple[str, ...] | list[str] = ()

    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def pids(self) -> list[int]:
        return [self._proc.pid] if self._proc is not None else []

    def command(self) -> str:
        return " ".join(self._argv)


class SkippedLoad(LoadGenerator):
    """A load this machine cannot run (no GPU render node, no ffmpeg…); it says exactly why."""

    def __init__(self, name: str, cpus: CpuSet, reason: str, *, backend: str = "builtin") -> None:
        # No CPU validation: nothing will run, and the reason must reach the report regardless.
        self.name = name
        self.cpus = cpus
        self.reason = reason
        self.backend = backend
        self.notes = []
        self.problems = []
        self._state = LoadState.NEW
        self._t_start = self._t_stop = 0.0

    def alive(self) -> bool:
        return True  # nothing to die: a skipped load never fails the settle check

    def pids(self) -> list[int]:
        return []

    def _start(self) -> None:
        pass

    def _stop(self) -> None:
        pass

    def _achieved(self, duration_s: float) -> dict[str, float]:
        return {}

    def result(self) -> LoadRun:
        if self._state is not LoadState.STOPPED:
            raise InvalidState(LoadState.STOPPED.value, self._state.value, what=f"load {self.name!r}")
        return LoadRun(
            name=self.name,
            backend=self.backend,
            cpus=str(self.cpus),
            achieved={},
            duration_s=0.0,
            skipped_reason=self.reason,
            command="",
            notes=[],
            problems=[],
        )
