"""softrt: can this PC run my 250 µs control loop, and if not, why not?

The public API::

    import softrt
    result = softrt.run_cyclic(step, period_us=250, duration_s=10)   # your own cyclic code
    result = softrt.run(softrt.RunConfig())                           # the seed's motion test
"""

from __future__ import annotations

import typing as _typing

from .cpus import CpuSet
from .errors import ConfigError, InvalidCpu, NotSupported, PermissionDenied, SoftRTError, WorkerFailed
from .lazy import lazy as _lazy

if _typing.TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path
    from typing import Any

    from .schema.config import RunConfig
    from .session.run import RunResult, run

__version__ = "0.1.0"

# The run API is imported on first use (PEP 562, module __getattr__): importing any softrt module
# imports this package first, and the command line, each spawned real-time worker and each load
# process would otherwise load the whole session layer (numpy, pyarrow, the trace) before their first line.
__getattr__ = _lazy(__name__, {"RunConfig": ".schema.config", "RunResult": ".session.run", "run": ".session.run"})


def run_cyclic(
    step: Callable[[int], Any],
    *,
    period_us: float = 250,
    duration_s: float = 10,
    cpu: int | None = None,
    priority: int = 80,
    profile: str = "rt",
    wait: str = "spin",
    setup: Callable[[], None] | None = None,
    out_dir: str | Path = "softrt-runs",
) -> RunResult:
    """Run your own ``step(seq) -> output`` once per cycle in the real-time worker; measure every cycle.

    *step* must be a module-level function (it is pickled by name into the worker process,
    so scripts need the usual ``if __name__ == "__main__":`` guard). Its return value is written
    to the (virtual) board at the next cycle's permit, as the seed's target buffer is.
    """
    from pathlib import Path  # here, not at the top: `import softrt` stays cheap (tests/test_public_api.py)

    from .schema.config import RunConfig
    from .session.run import run

    config = RunConfig(
        period_ns=int(round(period_us * 1000)),
        duration_ns=int(round(duration_s * 1e9)),
        cpu=cpu,
        priority=priority,
        profile=profile,
        wait=wait,
        out_dir=Path(out_dir),
        scenario="run_cyclic",
    )
    return run(config, step=step, setup=setup)


# What the README documents as the Python API ("Your own cyclic code"); tests/test_public_api.py holds the two
# equal and every name importable.
__all__ = [
    "ConfigError",
    "CpuSet",
    "InvalidCpu",
    "NotSupported",
    "PermissionDenied",
    "RunConfig",
    "RunResult",
    "SoftRTError",
    "WorkerFailed",
    "run",
    "run_cyclic",
]
