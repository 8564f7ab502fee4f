"""Load names to generators (load layer): ``make_load("disk", CpuSet.parse("0"))``.

The kinds are the modules of :mod:`.kinds`, each registered in :mod:`.kind`'s table. The backend
``auto`` picks stress-ng when it is installed and the built-in workers otherwise (issue 4). GPU and
video use their own tools whatever the backend says, and become a SkippedLoad naming what is
missing when the machine lacks it.
"""

from __future__ import annotations

import os

from ..cpus import CpuSet
from ..errors import ConfigError, MissingTool
from . import kinds, stressng  # noqa: F401 (kinds: importing it registers every kind module)
from .base import DEFAULT_TIMEOUT_S, LoadGenerator
from .kind import KINDS

#: The load kinds, in the order they are listed: what :mod:`.kinds` registered.
LOAD_NAMES = tuple(k.name for k in sorted(KINDS.values(), key=lambda k: k.rank))
BACKEND_CHOICES = ("auto", "stress-ng", "builtin")


def resolve_backend(backend: str = "auto") -> str:
    """Return "stress-ng" or "builtin" for a requested backend (auto, stress-ng, builtin)."""
    if backend not in BACKEND_CHOICES:
        raise ConfigError(f"unknown load backend {backend!r}", hint=f"choose one of {', '.join(BACKEND_CHOICES)}")
    if backend == "auto":
        return "stress-ng" if stressng.stress_ng_path() else "builtin"
    if backend == "stress-ng" and not stressng.stress_ng_path():
        raise MissingTool("the stress-ng load backend was asked for, but stress-ng is not installed",
                           hint="apt install stress-ng, or use the builtin backend")  # fmt: skip
    return backend


def make_load(
    name: str,
    cpus: CpuSet,
    backend: str = "auto",
    *,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    workdir: str | os.PathLike[str] | None = None,
) -> LoadGenerator:
    """Make the load *name* placed on *cpus* (not started).

    Args:
        name: one of LOAD_NAMES.
        cpus: where the load runs, normally the housekeeping CPUs.
        backend: "auto", "stress-ng" or "builtin" (ignored by gpu and video).
        timeout_s: safety net; the load ends by itself after this long. Make it longer than
            the intended run.
        workdir: where the load's private temporary directory goes (disk: /var/tmp by default).

    Raises:
        ConfigError: unknown load or backend, or CPUs this process may not use.
        MissingTool: backend "stress-ng" without stress-ng installed (bad input, exit status 2).
    """
    if name not in LOAD_NAMES:
        raise ConfigError(f"unknown load {name!r}", hint=f"known loads: {', '.join(LOAD_NAMES)}")
    return KINDS[name].build(cpus, resolve_backend(backend), timeout_s=timeout_s, workdir=workdir)
