"""Load names, backends, skip reasons, results and stress-ng's YAML."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from softrt.cpus import CpuSet
from softrt.errors import ConfigError, InvalidCpu
from softrt.load import LOAD_NAMES, SkippedLoad, make_load, media, resolve_backend
from softrt.load.stressng import MIB_TO_MB, parse_metrics_yaml

FIXTURES = Path(__file__).parent / "fixtures"


def test_unknown_load_names_the_known_ones(load_cpus):
    with pytest.raises(ConfigError) as info:
        make_load("kcompile", load_cpus)
    msg = str(info.value)
    assert "'kcompile'" in msg
    for name in LOAD_NAMES:
        assert name in msg


def test_unknown_backend(load_cpus):
    with pytest.raises(ConfigError, match="backend"):
        make_load("cpu", load_cpus, "dbench")


def test_auto_backend_follows_stress_ng_presence():
    assert resolve_backend("auto") == ("stress-ng" if shutil.which("stress-ng") else "builtin")
    assert resolve_backend("builtin") == "builtin"


def test_cpu_outside_this_process_is_refused():
    with pytest.raises(InvalidCpu):
        make_load("cpu", CpuSet([max(os.sched_getaffinity(0)) + 64]), "builtin")
    with pytest.raises(ConfigError):
        make_load("cpu", CpuSet(), "builtin")


def test_gpu_without_render_node_is_skipped_with_reason(load_cpus, tmp_path):
    reason = media.gpu_skip_reason("stress-ng", dri_dir=str(tmp_path))
    assert reason and "renderD" in reason and str(tmp_path) in reason


def test_gpu_on_this_machine(load_cpus):
    load = make_load("gpu", load_cpus)
    if not media.render_nodes():
        assert isinstance(load, SkippedLoad)
        load.start()
        load.stop()
        result = load.result()
        assert result.skipped_reason and "/dev/dri/renderD" in result.skipped_reason
        assert result.achieved == {}
    else:
        assert load.backend in ("stress-ng", "builtin")


def test_video_without_ffmpeg_is_skipped_with_reason(load_cpus, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # a PATH with no ffmpeg on it
    load = make_load("video", load_cpus, "builtin")
    assert isinstance(load, SkippedLoad)
    assert "ffmpeg" in load.reason


def test_skipped_result_is_the_summary_document(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no ffmpeg: video is skipped, and says why
    load = make_load("video", CpuSet.parse("0"), "builtin")
    load.start()
    load.stop()
    data = json.loads(json.dumps(load.result().to_dict()))
    assert data["cpus"] == "0" and data["achieved"] == {} and "ffmpeg" in data["skipped_reason"]
    assert list(data) == [
        "name",
        "backend",
        "cpus",
        "achieved",
        "duration_s",
        "skipped_reason",
        "command",
        "notes",
        "problems",
    ]


def test_parse_stress_ng_yaml():
    metrics = parse_metrics_yaml((FIXTURES / "stress-ng-0.15.06-disk-sock.yaml").read_text())
    assert set(metrics) == {"hdd", "iomix", "sock"}
    assert metrics["hdd"]["mbsec-write-rate"] == pytest.approx(2591.100739)
    assert metrics["sock"]["bogo-ops-per-second-real-time"] == pytest.approx(148.038499)
    assert all("stress-ng-version" not in m for m in metrics.values())  # system-info is not metrics


def test_stress_ng_mib_is_converted_to_mb():
    assert pytest.approx(1.048576) == MIB_TO_MB


def test_a_missing_stress_ng_is_bad_input_exit_2(run_cli, tmp_path, monkeypatch, state_dir):
    """compare --load-backend stress-ng without stress-ng: one line, exit 2 (it was 1), nothing run."""
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    code, out, err = run_cli(
        "compare", "tuned+load", "--load-backend", "stress-ng", "--duration", "1s", "--out-dir", str(tmp_path / "runs")
    )
    assert code == 2 and out == "" and err.count("\n") == 1 and "stress-ng is not installed" in err
    assert not (tmp_path / "runs").exists()
