"""Built-in loads, the fallback when stress-ng is missing (load layer).

Each load is one or more worker processes running ``_worker.py`` (stdlib Python), started like
the stress-ng ones (own session, taskset placement, setpriv --pdeathsig TERM; on Windows a new
process group placed through the platform, see ``_proc``) and reporting their counters as one
JSON line on stdout when SIGTERM (CTRL_BREAK_EVENT) ends them. Rates are averages over each worker's
whole run (MB = 10**6 bytes), so they show how hard the load pushed, not peak speeds.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from ..cpus import CpuSet
from ..errors import SoftRTError
from ..platform import get_platform, procs
from .base import DEFAULT_TIMEOUT_S, LoadGenerator

_WORKER = Path(__file__).with_name("_worker.py")


class Report(NamedTuple):
    """A worker's last line (``_worker.main``): what it counted (its kind's counters, by name), over
    how long, with how much CPU."""

    counters: dict[str, float]
    elapsed_s: float
    cpu_s: float


class Figure(NamedTuple):
    """One achieved figure of a built-in load: the per-second totals of its workers' *counters*
    ("role.counter", summed over the workers of that role), added, and divided by *per* (1e6: bytes
    to MB)."""

    name: str
    counters: tuple[str, ...]
    per: float = 1.0


@dataclass
class Worker:
    role: str
    kind: str
    cpus: CpuSet
    config: dict[str, Any] = field(default_factory=dict)
    proc: subprocess.Popen[bytes] | None = None
    log: Path | None = None
    report: Report | None = None


class BuiltinLoad(LoadGenerator):
    """A load made of built-in worker processes; its kind's :class:`Figure` table turns their reports into rates."""

    backend = "builtin"

    def __init__(
        self,
        name: str,
        cpus: CpuSet,
        figures: Sequence[Figure],
        workers: list[Worker],
        *,
        needs_dir: bool = False,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        workdir: str | os.PathLike[str] | None = None,
    ) -> None:
        super().__init__(name, cpus, timeout_s=timeout_s, workdir=workdir)
        self._workers = workers
        self._figures = tuple(figures)
        self._needs_dir = needs_dir
        self._dir: Path | None = None
        self._listener: socket.socket | None = None

    def command(self) -> str:
        return "; ".join(f"{w.role}: {_WORKER.name} {w.kind} on CPU {w.cpus}" for w in self._workers)

    def _start(self) -> None:
        self._dir = procs.make_private_dir(self.workdir)
        if self._needs_dir:
            self.notes.append(f"files in {self._dir.parent} ({procs.filesystem_of(self._dir.parent)})")
        if (note := procs.placement_note()) is not None:
            self.notes.append(note)
        for i, w in enumerate(self._workers):
            cfg = {"kind": w.kind, "cpus": list(w.cpus), "timeout_s": self.timeout_s, "dir": str(self._dir)}
            cfg.update(w.config)
            pass_fds: tuple[int, ...] = ()
            if w.kind == "net_server":
                # The listening socket is made here, bound to 127.0.0.1 only, and handed to the
                # server (inherited; on Windows shared through its stdin): the client can
                # connect at once, and nothing else can reach it.
                self._listener = socket.create_server(("127.0.0.1", 0), backlog=128)
                if procs.inherits_fds():
                    cfg["fd"] = self._listener.fileno()
                    pass_fds = (self._listener.fileno(),)
                else:
                    cfg["shared"] = True
                port = self._listener.getsockname()[1]
                for other in self._workers:
                    other.config.setdefault("port", port)
            cfg["stop_on_eof"] = procs.asks_through_stdin()
            argv = procs.guarded_argv([sys.executable, str(_WORKER), json.dumps(cfg)], w.cpus)
            w.log = self._dir / f"{w.role}-{i}.log"
            share = cfg.get("shared", False)
            w.proc = procs.spawn(
                argv,
                cwd=self._dir,
                log=w.log,
                stdout=subprocess.PIPE,
                pass_fds=pass_fds,
                stdin=subprocess.PIPE if share or cfg["stop_on_eof"] else None,
                cpus=w.cpus,
                term_held=True,
            )  # (a stop at once still gets its report: _worker.main)
            if share and w.proc.stdin is not None:
                w.proc.stdin.write(self._listener.share(w.proc.pid).hex().encode() + b"\n")
                w.proc.stdin.flush()
            if w.proc.stdin is not None and not cfg["stop_on_eof"]:
                w.proc.stdin.close()
        if self._listener is not None:
            self._listener.close()  # the server holds its own copy
            self._listener = None

    def alive(self) -> bool:
        return bool(self._workers) and all(w.proc is not None and w.proc.poll() is None for w in self._workers)

    def pids(self) -> list[int]:
        return [w.proc.pid for w in self._workers if w.proc is not None]

    def _stop(self) -> None:
        try:
            if self._listener is not None:
                self._listener.close()
            running = [w for w in self._workers if w.proc is not None]
            for w in running:  # signal all first, so the workers wind down in parallel
                if w.proc.poll() is None:
                    self._check_placement(w)
                    procs.ask_to_stop(w.proc)
                else:
                    how = procs.describe_exit(w.proc.returncode)
                    self.problems.append(f"{w.role} worker ended on its own ({how})")
                    self.problems.extend(self._log_tail(w))
            for w in running:
                procs.terminate(w.proc)
                out = w.proc.stdout.read().decode(errors="replace") if w.proc.stdout else ""
                if w.proc.stdout:
                    w.proc.stdout.close()
                w.report = _last_report(out)
                if w.report is None:
                    how = procs.describe_exit(w.proc.returncode)
                    self.problems.append(f"{w.role} worker reported nothing ({how})")
        finally:
            procs.remove_private_dir(self._dir)

    def _check_placement(self, w: Worker) -> None:
        """Record a problem if a running worker is not on its CPUs (taskset placed it; cgroups may move it)."""
        try:
            where = get_platform().get_affinity(w.proc.pid)
        except SoftRTError:
            return  # it exited meanwhile: its exit is reported below
        if where != w.cpus:
            self.problems.append(f"{w.role} worker ran on CPUs {where}, not on its CPUs {w.cpus}")

    @staticmethod
    def _log_tail(w: Worker) -> list[str]:
        if w.log is None or not w.log.exists():
            return []
        return [ln for ln in w.log.read_text(errors="replace").splitlines() if ln.strip()][-3:]

    def _achieved(self, duration_s: float) -> dict[str, float]:
        totals: dict[str, float] = {}  # per-second totals by "role.counter"
        cpu_pct: list[float] = []
        for w in self._workers:
            if w.report is None or w.report.elapsed_s <= 0:
                continue
            elapsed = w.report.elapsed_s
            for key, value in w.report.counters.items():
                totals[f"{w.role}.{key}"] = totals.get(f"{w.role}.{key}", 0.0) + value / elapsed
            cpu_pct.append(100.0 * w.report.cpu_s / elapsed)
        out = {f.name: sum(totals.get(c, 0) for c in f.counters) / f.per for f in self._figures}
        if cpu_pct:
            out["cpu_pct_per_worker"] = sum(cpu_pct) / len(cpu_pct)
        return {k: round(v, 3) for k, v in out.items()}


def _last_report(text: str) -> Report | None:
    """The last line of *text* that is a worker's report (``_worker.main``), None without one."""
    for line in reversed(text.strip().splitlines()):
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            return _report(value)
    return None


def _report(doc: dict[str, Any]) -> Report | None:
    """*doc* as a :class:`Report`, None when a field is missing or not a number."""
    counters, elapsed_s, cpu_s = doc.get("counters", {}), doc.get("elapsed_s", 0), doc.get("cpu_s", 0.0)
    numbers = [elapsed_s, cpu_s, *counters.values()] if isinstance(counters, dict) else [None]
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in numbers):
        return None
    return Report(counters, float(elapsed_s), float(cpu_s))


def one_per_cpu(role: str, kind: str, cpus: CpuSet, **config: Any) -> list[Worker]:
    # One worker pinned to each CPU: every housekeeping CPU is covered, none is doubled up.
    return [Worker(role, kind, CpuSet([c]), dict(config)) for c in cpus]
