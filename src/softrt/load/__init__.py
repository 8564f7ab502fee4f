"""Background loads for the loaded scenarios (issue 4): disk, CPU, memory, network, process
churn, GPU rendering and video playback, placed on the housekeeping CPUs.

    loads = [make_load(name, CpuSet.parse("0")) for name in ("disk", "cpu", "network")]
    check_placement(loads, rt_cpus=CpuSet.parse("1"), allow_rt=False)
    with LoadGroup(loads) as group:      # start, settle 1 s, check every load is alive
        ...                              # measure
    for result in group.results:         # schema LoadRun: what each load achieved, or why it was skipped
        print(result.describe())

Each kind is one module of :mod:`.kinds` registering itself in :mod:`.kind`'s table (LOAD_NAMES).
Backends: stress-ng when installed, built-in Python workers otherwise; ffmpeg for video.
On Linux placed with taskset and killed with their process group; on Windows placed through the
platform after they start (see softrt.platform.procs.WINDOWS_NOT_APPLIED).
"""

from __future__ import annotations

from .base import DEFAULT_TIMEOUT_S, LoadFailed, LoadGenerator, LoadState, SkippedLoad
from .group import DEFAULT_SETTLE_S, LoadGroup, check_placement
from .registry import BACKEND_CHOICES, LOAD_NAMES, make_load, resolve_backend

__all__ = [
    "BACKEND_CHOICES",
    "DEFAULT_SETTLE_S",
    "DEFAULT_TIMEOUT_S",
    "LOAD_NAMES",
    "LoadFailed",
    "LoadGenerator",
    "LoadGroup",
    "LoadState",
    "SkippedLoad",
    "check_placement",
    "make_load",
    "resolve_backend",
]
