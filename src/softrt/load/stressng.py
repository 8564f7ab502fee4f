"""Loads run by stress-ng, the preferred backend (load layer, Linux).

One stress-ng process per load, pinned with taskset, in its own session, killed with its whole
group on stop. Its numbers come from ``--metrics-brief --yaml FILE`` (stress-ng(1)): stress-ng
writes the file when it ends, also after SIGTERM, and this module reads it back. Rates that
stress-ng gives in MB/sec are MiB/s (its ``MB`` is 1 << 20); they are converted to MB/s here.
Tested with stress-ng 0.15.06 (Debian 12).
"""

from __future__ import annotations

import math
import os
import shutil
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path

from ..cpus import CpuSet
from ..platform import procs
from ._metrics_yaml import MIB_TO_MB, Metrics, parse_metrics_yaml
from .base import DEFAULT_TIMEOUT_S, LoadFailed, ProcessLoad

__all__ = ["MIB_TO_MB", "StressNgLoad", "parse_metrics_yaml", "stress_ng_path"]

MetricsFn = Callable[[Metrics], dict[str, float]]


def stress_ng_path() -> str | None:
    """Return the stress-ng executable, or None when it is not installed."""
    return shutil.which("stress-ng")


class StressNgLoad(ProcessLoad):
    """A load made of one or more stress-ng stressors."""

    backend = "stress-ng"

    def __init__(
        self,
        name: str,
        cpus: CpuSet,
        stressor_args: Sequence[str] | Callable[[], Sequence[str]],
        metrics: MetricsFn,
        *,
        drop_root: bool = False,
        report_fs: bool = False,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        workdir: str | os.PathLike[str] | None = None,
    ) -> None:
        super().__init__(name, cpus, timeout_s=timeout_s, workdir=workdir)
        self._stressor_args = stressor_args  # a callable is evaluated at start (free ports)
        self._report_fs = report_fs
        self._metrics_fn = metrics
        self._drop_root = drop_root
        self._proc: subprocess.Popen[bytes] | None = None
        self._dir: Path | None = None
        self._metrics: Metrics = {}
        self._argv: list[str] = []

    def _start(self) -> None:
        exe = stress_ng_path()
        if exe is None:
            raise LoadFailed(self.name, "needs stress-ng, which is not installed", hint="apt install stress-ng")
        owner = procs.uid_of(procs.UNPRIVILEGED_USER) if self._drop_root else None
        self._dir = procs.make_private_dir(self.workdir, owner_uid=owner)
        if self.workdir is not None and self._dir.parent != self.workdir.resolve():
            self.notes.append(f"files in {self._dir.parent}: {self.workdir} is closed to {procs.UNPRIVILEGED_USER}")
        # stress-ng's own --timeout is the safety net if stop() is never called.
        self._argv = [
            exe, *(self._stressor_args() if callable(self._stressor_args) else self._stressor_args),
            "--timeout", f"{math.ceil(self.timeout_s)}s",
            "--metrics-brief", "--yaml", str(self._dir / "metrics.yaml"),
            "--temp-path", str(self._dir),
        ]  # fmt: skip
        argv = procs.guarded_argv(self._argv, self.cpus, drop_root=self._drop_root)
        self._proc = procs.spawn(argv, cwd=self._dir, log=self._dir / "stress-ng.log", cpus=self.cpus)
        if self._report_fs:
            self.notes.append(f"files in {self._dir.parent} ({procs.filesystem_of(self._dir.parent)})")

    def _stop(self) -> None:
        try:
            if self._proc is not None:
                ended_early = self._proc.poll() is not None
                status = procs.terminate(self._proc)
                if ended_early:
                    self.problems.append(f"stress-ng ended on its own before stop ({procs.describe_exit(status)})")
                    self.problems.extend(self._log_problems())
                elif status != 0:  # stress-ng(1) EXIT STATUS: 2 a stressor failed, 3 no resources, …
                    self.problems.append(f"stress-ng stopped with {procs.describe_exit(status)}")
                    self.problems.extend(self._log_problems())
            if self._dir is not None:
                yaml = self._dir / "metrics.yaml"
                if yaml.exists():
                    self._metrics = parse_metrics_yaml(yaml.read_text(errors="replace"))
                else:
                    self.problems.append("stress-ng wrote no metrics file")
        finally:
            procs.remove_private_dir(self._dir)

    def _log_problems(self) -> list[str]:
        """Return stress-ng's error, warning and skip lines (while the load's files exist)."""
        if self._dir is None or not (self._dir / "stress-ng.log").exists():
            return []
        lines = (self._dir / "stress-ng.log").read_text(errors="replace").splitlines()
        keys = ("error", "fail", "warn", "skipping", "must not", "cannot")
        return [ln.strip() for ln in lines if any(k in ln.lower() for k in keys)][:5]

    def _achieved(self, duration_s: float) -> dict[str, float]:
        if not self._metrics:
            return {}
        return {k: round(v, 3) for k, v in self._metrics_fn(self._metrics).items()}


# -- the loads --------------------------------------------------------------------------------


def rate(m: Metrics, stressor: str) -> float:
    """A stressor's bogo ops per second of wall-clock time."""
    return m.get(stressor, {}).get("bogo-ops-per-second-real-time", 0.0)


def cpu_pct(m: Metrics, stressor: str) -> float:
    """A stressor's CPU use per instance, in percent."""
    return m.get(stressor, {}).get("cpu-usage-per-instance", 0.0)
