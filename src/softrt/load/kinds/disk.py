"""The disk load (load layer): a file written with fsync and read back past the page cache.

stress-ng's hdd and iomix stressors (stress-ng(1)), or one built-in worker (_worker.disk).
"""

from __future__ import annotations

from ...cpus import CpuSet
from ...platform import procs
from .._metrics_yaml import MIB_TO_MB, Metrics
from ..builtin import BuiltinLoad, Figure, Worker
from ..kind import LoadKind, register
from ..stressng import StressNgLoad, rate

HDD_WRITE_BYTES = 64 * 1024  # --hdd-write-size: one hdd bogo op is one read or write of this size


def stress_ng(cpus: CpuSet, **kw) -> StressNgLoad:
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
            "io_MB_per_s": rate(m, "hdd") * HDD_WRITE_BYTES / 1e6,
            "write_call_MB_per_s": hdd.get("mbsec-write-rate", 0.0) * MIB_TO_MB,
            "read_call_MB_per_s": hdd.get("mbsec-read-rate", 0.0) * MIB_TO_MB,
            "hdd_bogo_ops_per_s": rate(m, "hdd"),
            "iomix_bogo_ops_per_s": rate(m, "iomix"),
        }

    kw["workdir"] = kw.get("workdir") or procs.DISK_WORKDIR
    args = ["--hdd", "1", "--hdd-opts", "wr-seq,rd-seq,fsync,fadv-dontneed", "--hdd-bytes", "16M",
            "--hdd-write-size", str(HDD_WRITE_BYTES), "--iomix", "1", "--iomix-bytes", "64M"]  # fmt: skip
    return StressNgLoad("disk", cpus, args, metrics, report_fs=True, **kw)


#: The built-in worker's achieved figures.
FIGURES = (
    Figure("io_MB_per_s", ("io.bytes_written", "io.bytes_read"), per=1e6),
    Figure("write_MB_per_s", ("io.bytes_written",), per=1e6),
    Figure("read_MB_per_s", ("io.bytes_read",), per=1e6),
    Figure("fsyncs_per_s", ("io.fsyncs",)),
)


def builtin(cpus: CpuSet, **kw) -> BuiltinLoad:
    """Disk: one writer/reader of a 16 MiB file (sequential and random writes with fsync, uncached
    read-back), as in _worker.disk."""
    kw["workdir"] = kw.get("workdir") or procs.DISK_WORKDIR
    return BuiltinLoad("disk", cpus, FIGURES, [Worker("io", "disk", cpus)], needs_dir=True, **kw)


register(LoadKind("disk", 10, backends={"stress-ng": stress_ng, "builtin": builtin}))
