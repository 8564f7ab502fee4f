"""GPU rendering and video playback loads, where the machine has what they need (load layer).

Video: ffmpeg encodes a two-second 1080p30 test clip once per process (lavfi testsrc2, ffmpeg-filters(1)),
then plays it in a loop at its native rate (``-re -stream_loop -1``) into the null muxer, which
is software H.264 decoding as a video player does it. Progress comes from ``-progress FILE``
(ffmpeg(1)), which ffmpeg finishes with ``progress=end`` when SIGTERM stops it.
GPU: stress-ng's gpu stressor (0.15+) on a DRM render node; each check that decides whether it
can run becomes, when it fails, the skip reason.
"""

from __future__ import annotations

import atexit
import functools
import glob
import math
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

from ..cpus import CpuSet
from ..platform import procs
from ._metrics_yaml import Metrics
from .base import DEFAULT_TIMEOUT_S, LoadFailed, ProcessLoad
from .stressng import StressNgLoad

DRI_DIR = "/dev/dri"
CLIP = "testsrc2=size=1920x1080:rate=30:duration=2"
_ENCODE_TIMEOUT_S = 60.0


def render_nodes(dri_dir: str = DRI_DIR) -> list[str]:
    """Return the DRM render nodes (``/dev/dri/renderD128``…), the devices GPU clients open."""
    return sorted(glob.glob(os.path.join(dri_dir, "renderD*")))


@functools.lru_cache(maxsize=4)
def _hwaccels(ffmpeg: str) -> tuple[str, ...]:
    """The hardware decoding methods this ffmpeg was built with (``ffmpeg -hwaccels``)."""
    listing = subprocess.run([ffmpeg, "-hide_banner", "-hwaccels"], capture_output=True, text=True, timeout=30)
    return tuple(line.strip() for line in listing.stdout.splitlines()[1:] if line.strip())


def gpu_skip_reason(backend: str, dri_dir: str = DRI_DIR) -> str | None:
    """Return why the GPU load cannot run here, or None when it can."""
    api = procs.gpu_video_api()
    if api is not None:  # ffmpeg decoding on the GPU (Windows: Direct3D 11 video)
        ffmpeg = shutil.which("ffmpeg")
        if ffmpeg is None:
            return (
                f"the GPU load here is ffmpeg decoding video on the GPU ({api}), and ffmpeg is not on PATH "
                "(install it, e.g. winget install Gyan.FFmpeg)"
            )
        if api not in _hwaccels(ffmpeg):
            return f"this ffmpeg cannot decode on the GPU through {api} (ffmpeg -hwaccels does not list it)"
        return None
    if not render_nodes(dri_dir):
        return (
            f"no GPU render node: {dri_dir}/renderD* does not exist "
            "(no GPU driver loaded, or a virtual machine without a virtual GPU)"
        )
    if backend == "builtin":
        return "softrt has no built-in GPU renderer; GPU rendering runs through stress-ng's gpu stressor"
    exe = shutil.which("stress-ng")
    if exe is None:
        return "GPU rendering needs stress-ng (its gpu stressor), which is not installed"
    helptext = subprocess.run([exe, "--help"], capture_output=True, text=True, timeout=30).stdout
    if "--gpu N" not in helptext:
        return "this stress-ng has no gpu stressor (it needs 0.15 or later, built with EGL and GLES2)"
    return None


def gpu(cpus: CpuSet, render_node: str, **kw) -> StressNgLoad:
    """GPU rendering: stress-ng --gpu (GBM + EGL + OpenGL ES 2 on a DRM render node)."""

    def metrics(m: Metrics) -> dict[str, float]:
        gpu_m = m.get("gpu", {})
        return {
            "render_bogo_ops_per_s": gpu_m.get("bogo-ops-per-second-real-time", 0.0),
            "cpu_pct_per_worker": gpu_m.get("cpu-usage-per-instance", 0.0),
        }

    return StressNgLoad("gpu", cpus, ["--gpu", "1", "--gpu-devnode", render_node], metrics, **kw)


def video_skip_reason() -> str | None:
    """Return why the video load cannot run here, or None when it can."""
    if shutil.which("ffmpeg") is None:
        return "ffmpeg not found on PATH (install the ffmpeg package)"
    return None


class Progress(NamedTuple):
    """What ffmpeg's last ``-progress`` block says (ffmpeg(1) ``-progress url``): the frames decoded so
    far, and the speed against real time (None: not said, as ``N/A`` at the start)."""

    frames: float = 0.0
    speed_x_realtime: float | None = None


def _read_progress(path: Path) -> Progress:
    """Return the last block of an ffmpeg ``-progress`` file (``key=value`` lines, a block ending
    with ``progress=``)."""
    last: dict[str, str] = {}
    block: dict[str, str] = {}
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return Progress()
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if not sep:
            continue
        block[key.strip()] = value.strip()
        if key == "progress":
            last, block = block, {}
    said = last or block
    return Progress(_number(said.get("frame")) or 0.0, _number(said.get("speed", "").rstrip("x")))


def _number(text: str | None) -> float | None:
    """*text* as a number, None when it is missing or not one (ffmpeg writes ``N/A``)."""
    try:
        return float(text) if text else None
    except ValueError:
        return None


@functools.lru_cache(maxsize=4)
def _encoder(ffmpeg: str) -> str:
    """The clip's codec: libx264 when this ffmpeg has it, else mpeg4. Asked once per ffmpeg (0.3 s
    here; a comparison prepares a video load for every loaded scenario and round)."""
    listing = subprocess.run([ffmpeg, "-hide_banner", "-encoders"], capture_output=True, text=True, timeout=30)
    return "libx264" if " libx264 " in listing.stdout else "mpeg4"


#: The clips made by this process, by (ffmpeg, codec). A comparison prepares a video load for every
#: loaded scenario and round, and the clip (about 1 s of CPU to encode) is the same every time.
_CLIPS: dict[tuple[str, str], Path] = {}


def _clip(ffmpeg: str, codec: str, cpus: CpuSet, name: str) -> Path:
    """The test clip, encoded on the first call (on *cpus*: making it never touches the RT CPU)."""
    known = _CLIPS.get((ffmpeg, codec))
    if known is not None and known.exists():
        return known
    where = Path(tempfile.mkdtemp(prefix="softrt-clip-"))
    clip = where / "clip.mp4"
    encode = [ffmpeg, "-nostdin", "-hide_banner", "-loglevel", "error", "-y",
              "-f", "lavfi", "-i", CLIP, "-c:v", codec, "-pix_fmt", "yuv420p"]  # fmt: skip
    if codec == "libx264":
        encode += ["-preset", "ultrafast"]
    enc = procs.spawn(procs.guarded_argv([*encode, str(clip)], cpus), cwd=where, log=where / "encode.log", cpus=cpus)
    try:
        try:
            enc.wait(timeout=_ENCODE_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise LoadFailed(name, f"could not make its test clip within {_ENCODE_TIMEOUT_S:.0f} s") from None
        finally:
            procs.terminate(enc)
        if enc.returncode != 0 or not clip.exists():
            why = (where / "encode.log").read_text(errors="replace").strip().splitlines()[-1:] or ["no message"]
            raise LoadFailed(name, f"could not make its test clip with ffmpeg: {why[0]}")
    except BaseException:  # includes Ctrl-C: no half-made clip is kept
        shutil.rmtree(where, ignore_errors=True)
        raise
    atexit.register(shutil.rmtree, where, ignore_errors=True)
    _CLIPS[(ffmpeg, codec)] = clip
    return clip


class VideoLoad(ProcessLoad):
    """Software video playback with ffmpeg: 1080p30 H.264 decoded in real time, looped.

    With *hwaccel* (``d3d11va``) it is the GPU load instead: the clip played at its rate and decoded on the
    GPU (``-hwaccel``), each frame copied back to memory, as a video player loads the GPU and the bus (the
    seed's test; ``-re`` keeps ``-t`` a wall-clock limit). A GPU that cannot (no device, a virtual machine) makes ffmpeg exit at once: its last
    words become the load's problem and it is shown FAILED.
    """

    backend = "ffmpeg"

    def __init__(
        self,
        cpus: CpuSet,
        *,
        hwaccel: str | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        workdir: str | os.PathLike[str] | None = None,
    ) -> None:
        super().__init__("gpu" if hwaccel else "video", cpus, timeout_s=timeout_s, workdir=workdir)
        self._hwaccel = hwaccel
        self._dir: Path | None = None
        self._clip: Path | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._argv: list[str] = []
        self._t_play = 0.0
        self._play_s = 0.0
        self._progress = Progress()

    def _prepare(self) -> None:
        ffmpeg = procs.which_or_raise("ffmpeg", "ffmpeg")
        codec = _encoder(ffmpeg)
        self._clip = _clip(ffmpeg, codec, self.cpus, self.name)
        self._dir = procs.make_private_dir(self.workdir)
        self.notes.append(
            f"GPU decoding ({self._hwaccel}) of a 1080p30 {codec} clip at playback speed"
            if self._hwaccel
            else f"software decoding of a 1080p30 {codec} clip at playback speed"
        )

    def _start(self) -> None:
        ffmpeg = procs.which_or_raise("ffmpeg", "ffmpeg")
        clip = self._clip
        # -t ends playback after timeout_s seconds of output, which -re makes wall-clock seconds.
        gpu = ["-hwaccel", self._hwaccel] if self._hwaccel else []
        self._argv = [ffmpeg, "-nostdin", "-hide_banner", "-loglevel", "error",
                      "-re", *gpu, "-stream_loop", "-1", "-i", str(clip),
                      "-t", str(math.ceil(self.timeout_s)), "-f", "null", "-",
                      "-progress", str(self._dir / "progress.txt")]  # fmt: skip
        self._t_play = time.monotonic()
        argv = procs.guarded_argv(self._argv, self.cpus)
        self._proc = procs.spawn(argv, cwd=self._dir, log=self._dir / "ffmpeg.log", cpus=self.cpus)

    def _stop(self) -> None:
        try:
            if self._proc is not None:
                if self._proc.poll() is not None:
                    how = procs.describe_exit(self._proc.returncode)
                    self.problems.append(f"ffmpeg ended on its own before stop ({how})")
                    self.problems.extend(self._log_tail())
                procs.terminate(self._proc)
                self._play_s = time.monotonic() - self._t_play
                if self._dir is not None:
                    self._progress = _read_progress(self._dir / "progress.txt")
        finally:
            procs.remove_private_dir(self._dir)

    def _log_tail(self, lines: int = 2) -> list[str]:
        """ffmpeg's last error lines (``No device available for decoder: device type d3d11va needed``)."""
        try:
            text = (self._dir / "ffmpeg.log").read_text(errors="replace") if self._dir is not None else ""
        except OSError:
            return []
        return [f"ffmpeg: {ln.strip()}" for ln in text.splitlines() if ln.strip()][-lines:]

    def _achieved(self, duration_s: float) -> dict[str, float]:
        progress, play_s = self._progress, self._play_s
        out = {"frames_per_s": round(progress.frames / play_s, 3) if play_s > 0 else 0.0}
        if progress.speed_x_realtime is not None:
            out["speed_x_realtime"] = progress.speed_x_realtime
        return out
