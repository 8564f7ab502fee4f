"""The CPU load (load layer): one busy worker per CPU of the load.

stress-ng --cpu (stress-ng(1)), or one spinning built-in worker per CPU (_worker.spin).
"""

from __future__ import annotations

from ...cpus import CpuSet
from .._metrics_yaml import Metrics
from ..builtin import BuiltinLoad, Figure, one_per_cpu
from ..kind import LoadKind, register
from ..stressng import StressNgLoad, cpu_pct, rate


def stress_ng(cpus: CpuSet, **kw) -> StressNgLoad:
    """CPU: one stress-ng --cpu worker per CPU of the load, cycling through all CPU methods."""

    def metrics(m: Metrics) -> dict[str, float]:
        return {"bogo_ops_per_s": rate(m, "cpu"), "cpu_pct_per_worker": cpu_pct(m, "cpu")}

    return StressNgLoad("cpu", cpus, ["--cpu", str(len(cpus))], metrics, **kw)


#: The built-in workers' achieved figures.
FIGURES = (Figure("ops_per_s", ("spin.ops",)),)


def builtin(cpus: CpuSet, **kw) -> BuiltinLoad:
    """CPU: one spinning process pinned to each CPU of the load."""
    return BuiltinLoad("cpu", cpus, FIGURES, one_per_cpu("spin", "spin", cpus), **kw)


register(LoadKind("cpu", 20, backends={"stress-ng": stress_ng, "builtin": builtin}))
