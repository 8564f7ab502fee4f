"""The memory-bandwidth load (load layer): 64 MiB buffers copied per CPU.

stress-ng --memrate (stress-ng(1)), or one built-in copier per CPU (_worker.memcopy).
"""

from __future__ import annotations

from ...cpus import CpuSet
from .._metrics_yaml import MIB_TO_MB, Metrics
from ..builtin import BuiltinLoad, Figure, one_per_cpu
from ..kind import LoadKind, register
from ..stressng import StressNgLoad, rate


def stress_ng(cpus: CpuSet, **kw) -> StressNgLoad:
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
            "bogo_ops_per_s": rate(m, "memrate"),
        }

    return StressNgLoad("memory", cpus, ["--memrate", str(workers), "--memrate-bytes", "64M"], metrics, **kw)


#: The built-in workers' achieved figures.
FIGURES = (Figure("copy_MB_per_s", ("copy.bytes_copied",), per=1e6),)


def builtin(cpus: CpuSet, **kw) -> BuiltinLoad:
    """Memory bandwidth: one process per CPU copying a 64 MiB buffer back and forth."""
    return BuiltinLoad("memory", cpus, FIGURES, one_per_cpu("copy", "memcopy", cpus), **kw)


register(LoadKind("memory", 30, backends={"stress-ng": stress_ng, "builtin": builtin}))
