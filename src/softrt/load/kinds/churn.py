"""The process-churn load (load layer): fork and fork+exec storms, like a parallel build.

stress-ng --fork and --exec (stress-ng(1)), or one built-in spawner per CPU (_worker.churn).
"""

from __future__ import annotations

from ...cpus import CpuSet
from ...platform import procs
from .._metrics_yaml import Metrics
from ..builtin import BuiltinLoad, Figure, one_per_cpu
from ..kind import LoadKind, register
from ..stressng import StressNgLoad, rate


def stress_ng(cpus: CpuSet, **kw) -> StressNgLoad:
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
        fork, exec_ = rate(m, "fork"), rate(m, "exec")
        return {"fork_ops_per_s": fork, "exec_ops_per_s": exec_, "ops_per_s": fork + exec_}

    load = StressNgLoad("churn", cpus, args, metrics, drop_root=as_root and can_drop, **kw)
    if as_root and can_drop:
        load.notes.append(f"run as user {procs.UNPRIVILEGED_USER}: stress-ng's exec stressor refuses root")
    elif as_root:
        load.notes.append(f"fork only: no user {procs.UNPRIVILEGED_USER} to run stress-ng's exec stressor as")
    return load


#: The built-in workers' achieved figures.
FIGURES = (Figure("ops_per_s", ("churn.ops",)), Figure("failures_per_s", ("churn.failures",)))


def builtin(cpus: CpuSet, **kw) -> BuiltinLoad:
    """Process churn: per CPU, a process that forks and execs /bin/true as fast as it can
    (on Windows: creates ``cmd.exe /c rem``, the smallest stock program that exits at once)."""
    program, *args = procs.smallest_program()
    config = {"program": program, **({"args": args} if args else {})}
    return BuiltinLoad("churn", cpus, FIGURES, one_per_cpu("churn", "churn", cpus, **config), **kw)


register(LoadKind("churn", 50, backends={"stress-ng": stress_ng, "builtin": builtin}))
