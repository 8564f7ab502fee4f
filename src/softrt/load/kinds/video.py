"""The video-playback load (load layer): ffmpeg decoding an H.264 clip it encodes first (media.VideoLoad).

It needs ffmpeg whatever the backend says, and becomes a SkippedLoad saying so when it is missing.
"""

from __future__ import annotations

from ...cpus import CpuSet
from .. import media
from ..base import LoadGenerator, SkippedLoad
from ..kind import LoadKind, register


def make(cpus: CpuSet, backend: str, **kw) -> LoadGenerator:
    """The video load on *cpus*, or why it is skipped here."""
    reason = media.video_skip_reason()
    if reason:
        return SkippedLoad("video", cpus, reason, backend="ffmpeg")
    return media.VideoLoad(cpus, **kw)


register(LoadKind("video", 70, make=make))
