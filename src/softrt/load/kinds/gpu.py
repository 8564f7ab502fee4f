"""The GPU-rendering load (load layer): stress-ng's gpu stressor on a DRM render node (Linux), or
ffmpeg decoding video on the GPU (Windows: D3D11VA/DXVA2, softrt.platform.procs.gpu_video_api).

It uses its own tools whatever the backend says, and becomes a SkippedLoad naming what is missing
when the machine lacks them (media.gpu_skip_reason).
"""

from __future__ import annotations

from ...cpus import CpuSet
from ...platform import procs
from .. import media
from ..base import LoadGenerator, SkippedLoad
from ..kind import LoadKind, register


def make(cpus: CpuSet, backend: str, **kw) -> LoadGenerator:
    """The GPU load on *cpus*, or why it is skipped here."""
    reason = media.gpu_skip_reason(backend)
    if reason:
        return SkippedLoad("gpu", cpus, reason, backend="ffmpeg" if procs.gpu_video_api() else backend)
    if (api := procs.gpu_video_api()) is not None:  # Windows: ffmpeg decoding on the GPU
        return media.VideoLoad(cpus, hwaccel=api, **kw)
    return media.gpu(cpus, media.render_nodes()[0], **kw)


register(LoadKind("gpu", 60, make=make))
