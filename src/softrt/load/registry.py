"""Load names to generators (load layer): ``make_load("disk", CpuSet.parse("0"))``.

The backend ``auto`` picks stress-ng when it is installed and the built-in workers otherwise
(issue 4). GPU and video use their own tools whatever the backend says, and become a
SkippedLoad naming what is missing when the machine lacks it.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from ..cpus import CpuSet
from ..errors import ConfigError, MissingTool
from ..platform import procs
from . import builtin, media, stressng
from .base import DEFAULT_TIMEOUT_S, LoadGenerator, SkippedLoad

LOAD_NAMES = ("disk", "cpu", "memory", "network", "churn", "gpu", "video")
BACKEND_CHOICES = ("auto", "stress-ng", "builtin")

_Factory = Callable[..., LoadGenerator]
_FACTORIES: dict[str, dict[str, _Factory]] = {
    "stress-ng": {
        "disk": stressng.disk,
        "cpu": stressng.cpu,
        "memory": stressng.memory,
        "network": stressng.network,
        "churn": stressng.churn,
    },
    "builtin": {
        "disk": builtin.disk,
        "cpu": builtin.cpu,
        "memory": builtin.memory,
        "network": builtin.network,
        "churn": builtin.churn,
    },
}


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
    chosen = resolve_backend(backend)
    kw = {"timeout_s": timeout_s, "workdir": workdir}
    if name == "gpu":
        reason = media.gpu_skip_reason(chosen)
        if reason:
            return SkippedLoad(name, cpus, reason, backend="ffmpeg" if procs.gpu_video_api() else chosen)
        if (api := procs.gpu_video_api()) is not None:  # Windows: ffmpeg decoding on the GPU
            return media.VideoLoad(cpus, hwaccel=api, **kw)
        return media.gpu(cpus, media.render_nodes()[0], **kw)
    if name == "video":
        reason = media.video_skip_reason()
        if reason:
            return SkippedLoad(name, cpus, reason, backend="ffmpeg")
        return media.VideoLoad(cpus, **kw)
    return _FACTORIES[chosen][name](cpus, **kw)
