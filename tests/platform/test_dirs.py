"""Where runs go without --out-dir: softrt-runs here on Linux, <data dir>\\runs (absolute) on Windows."""

from __future__ import annotations

from pathlib import Path

import softrt.platform as plat


def test_runs_go_to_softrt_runs_on_linux_and_under_the_data_directory_on_windows(monkeypatch, tmp_path):
    monkeypatch.delenv("SOFTRT_HOME", raising=False)
    assert plat.default_runs_dir() == Path("softrt-runs") and plat.RUNS_DIR_SHOWN == "softrt-runs"
    monkeypatch.setattr(plat, "IS_WINDOWS", True)  # (an elevated prompt starts in C:\Windows\System32)
    monkeypatch.setenv("LOCALAPPDATA", str(tmp_path / "Local"))
    assert plat.default_runs_dir() == tmp_path / "Local" / "softrt" / "runs"
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SOFTRT_HOME", "home")  # relative: made absolute, so the path printed is where they are
    assert plat.default_runs_dir() == tmp_path / "home" / "runs"
