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
import socket
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


def _rate(m: Metrics, stressor: str) -> float:
    return m.get(stressor, {}).get("bogo-ops-per-second-real-time", 0.0)


def _cpu_pct(m: Metrics, stressor: str) -> float:
    return m.get(stressor, {}).get("cpu-usage-per-instance", 0.0)


HDD_WRITE_BYTES = 64 * 1024  # --hdd-write-size: one hdd bogo op is one read or write of this size


def disk(cpus: CpuSet, **kw) -> StressNgLoad:
    """Disk: sequential writes with fsync and reads of a temporary file, plus a random I/O mix.

    hdd (stress-ng(1) --hdd-opts wr-seq,rd-seq,fsync,fadv-dontneed) writes a 16 MiB file in
    64 KiB writes, each followed by fsync, drops it from the page cache and reads it back, so the
    reads reach the device; iomix adds random reads and writes, fsync, fdatasync and cache drops
    on a second file. ``io_MB_per_s`` is what hdd moved over the whole run (stress-hdd.c counts
    one bogo op per read or write); ``*_call_MB_per_s`` are stress-ng's speeds while inside
    write() or read(), which leave out the time spent in fsync.
    """

    def metrics(m: Metrics) -> dict[str, float]:
        hdd = m.get("hdd", {})
        return {
            "io_MB_per_s": _rate(m, "hdd") * HDD_WRITE_BYTES / 1e6,
            "write_call_MB_per_s": hdd.get("mbsec-write-rate", 0.0) * MIB_TO_MB,
            "read_call_MB_per_s": hdd.get("mbsec-read-rate", 0.0) * MIB_TO_MB,
            "hdd_bogo_ops_per_s": _rate(m, "hdd"),
            "iomix_bogo_ops_per_s": _rate(m, "iomix"),
        }

    kw["workdir"] = kw.get("workdir") or procs.DISK_WORKDIR
    args = ["--hdd", "1", "--hdd-opts", "wr-seq,rd-seq,fsync,fadv-dontneed", "--hdd-bytes", "16M",
            "--hdd-write-size", str(HDD_WRITE_BYTES), "--iomix", "1", "--iomix-bytes", "64M"]  # fmt: skip
    return StressNgLoad("disk", cpus, args, metrics, report_fs=True, **kw)


def cpu(cpus: CpuSet, **kw) -> StressNgLoad:
    """CPU: one stress-ng --cpu worker per CPU of the load, cycling through all CPU methods."""

    def metrics(m: Metrics) -> dict[str, float]:
        return {"bogo_ops_per_s": _rate(m, "cpu"), "cpu_pct_per_worker": _cpu_pct(m, "cpu")}

    return StressNgLoad("cpu", cpus, ["--cpu", str(len(cpus))], metrics, **kw)


def memory(cpus: CpuSet, **kw) -> StressNgLoad:
    """Memory bandwidth: one stress-ng --memrate worker per CPU on a 64 MiB buffer each.

    memrate reports a rate per method (read64, write128, memset…) for one worker; the load's
    figures are the mean over the read and over the write methods, times the number of workers.
    """
    workers = len(cpus)

    def metrics(m: Metrics) -> dict[str, float]:
        rates = m.get("memrate", {})
        reads = [v for k, v in rates.items() if k.startswith("read") and k.endswith("-mb-per-sec")]
        writes = [v for k, v in rates.items() if k.startswith(("write", "memset")) and k.endswith("-mb-per-sec")]
        mean = lambda xs: sum(xs) / len(xs) if xs else 0.0  # noqa: E731
        return {
            "read_MB_per_s": mean(reads) * workers * MIB_TO_MB,
            "write_MB_per_s": mean(writes) * workers * MIB_TO_MB,
            "bogo_ops_per_s": _rate(m, "memrate"),
        }

    return StressNgLoad("memory", cpus, ["--memrate", str(workers), "--memrate-bytes", "64M"], metrics, **kw)


def _free_loopback_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def network(cpus: CpuSet, **kw) -> StressNgLoad:
    """Network: a TCP client and server over loopback (stress-ng --sock, --sock-if lo).

    Each sock bogo op is one accepted connection over which the server sends a burst of data
    (stress-sock.c server loop), so bogo ops/s are connections/s. The port is picked free when
    the load starts (stress-ng's default, 5000, is often taken). stress-ng 0.15 still listens on
    the wildcard address (seen with ss(8)); its clients connect over 127.0.0.1.
    """

    def metrics(m: Metrics) -> dict[str, float]:
        return {"connections_per_s": _rate(m, "sock"), "cpu_pct_per_worker": _cpu_pct(m, "sock")}

    def args() -> list[str]:
        port = str(_free_loopback_port())
        return ["--sock", "1", "--sock-domain", "ipv4", "--sock-if", "lo", "--sock-port", port]

    load = StressNgLoad("network", cpus, args, metrics, **kw)
    load.notes.append("stress-ng listens on 0.0.0.0 (all interfaces) while it runs; its traffic uses 127.0.0.1")
    return load


def churn(cpus: CpuSet, **kw) -> StressNgLoad:
    """Process churn: fork and fork+exec storms, one worker of each per CPU (like make -jN).

    stress-ng refuses its exec stressor as root ("must not run as root"), so as root the whole
    stress-ng runs as the unprivileged user through setpriv(1).
    """
    workers = str(len(cpus))
    as_root = procs.is_root()
    can_drop = procs.uid_of(procs.UNPRIVILEGED_USER) is not None
    args = ["--fork", workers]
    if not as_root or can_drop:
        # At most 16 children per exec worker and round, about what make -j16 keeps in flight
        # (stress-ng's default, 4096, is a fork bomb rather than a build).
        args += ["--exec", workers, "--exec-max", "16"]

    def metrics(m: Metrics) -> dict[str, float]:
        fork, exec_ = _rate(m, "fork"), _rate(m, "exec")
        return {"fork_ops_per_s": fork, "exec_ops_per_s": exec_, "ops_per_s": fork + exec_}

    load = StressNgLoad("churn", cpus, args, metrics, drop_root=as_root and can_drop, **kw)
    if as_root and can_drop:
        load.notes.append(f"run as user {procs.UNPRIVILEGED_USER}: stress-ng's exec stressor refuses root")
    elif as_root:
        load.notes.append(f"fork only: no user {procs.UNPRIVILEGED_USER} to run stress-ng's exec stressor as")
    return load
