"""store.regressions on two sets of real runs that differ in a recorded provenance field and in their figures.

How the two sets are made (few, short real runs; the rest are copies):

- *good*: one real ``softrt run --duration 0.5s --no-trace`` on this rig as it is (tuned: pinned,
  SCHED_FIFO), and two copies of it with new ids and earlier starts, so the rig has the three runs with
  one provenance that its noise needs (analysis.regress.MIN_RUNS). Their range is 0, so any worse
  figure is beyond it: the noise rule itself is tested in tests/analysis/test_regress.py and
  tests/store/test_fleet.py; here the path from real runs to the entry is (a real run costs ~4 s
  on this VM, so two, not more);
- *bad*: one real run with ``--profile none`` (no tuning) while a SCHED_OTHER busy loop runs on every
  CPU for 2 s from its worker's start, so its figures are really worse (a loop that shares its CPU waits for the scheduler's slices,
  milliseconds), and a copy of it; in both, the recorded kernel release (``host.kernel``) is rewritten
  to a candidate kernel's name, as if the rig had been updated between the sets. Their recorded tuning
  differs too, truly: the bad run applied none.

``softrt fleet --regressions`` must then name this rig, the last good and the first bad run, the kernel
change between them, and rank the candidate kernel as having made one rig worse. No latency bound is
asserted: only that an untuned run under load is worse than the same rig tuned and idle, which its late
rate (hundreds of late cycles against a few) and worst period (milliseconds) show.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path

import pytest

CANDIDATE = "-candidate-kernel"


def _run(softrt_cmd, out: Path, *extra: str) -> Path:
    proc = softrt_cmd(
        "run",
        "--duration",
        "0.5s",
        "--no-trace",
        "-q",
        "--rig-label",
        "lab-rig-1",
        "--out-dir",
        str(out),
        *extra,
        timeout=120,
    )
    assert proc.returncode in (0, 1), proc.stderr  # 1: the run did not meet the cycle (this VM, or the load)
    (run,) = [p for p in out.iterdir() if (p / "summary.json").is_file()]
    return run


def _worker_started(pid: int) -> bool:
    """Process *pid* (softrt run) has spawned its worker (other children, such as ldconfig, do not count)."""
    import psutil

    try:
        children = psutil.Process(pid).children()
    except psutil.Error:  # it has just ended
        return False
    for child in children:
        try:
            if any("spawn_main" in part for part in child.cmdline()):
                return True
        except psutil.Error:  # gone, or a zombie not yet reaped
            pass
    return False


def _loaded_run(out: Path) -> Path:
    """An untuned run while a busy loop runs on every CPU, from its worker's start for 2 s (not during
    softrt's start-up, which the loops would only slow down)."""
    cmd = [
        sys.executable,
        "-m",
        "softrt",
        "run",
        "--duration",
        "0.5s",
        "--no-trace",
        "-q",
        "--rig-label",
        "lab-rig-1",
        "--out-dir",
        str(out),
        "--profile",
        "none",
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    hogs = []
    try:
        end = time.monotonic() + 60
        while proc.poll() is None and time.monotonic() < end and not _worker_started(proc.pid):
            time.sleep(0.01)
        hogs = [
            subprocess.Popen(
                [sys.executable, "-c", "import time\nend = time.monotonic() + 2\nwhile time.monotonic() < end: pass"]
            )
            for _ in range(os.cpu_count() or 1)
        ]
        _, err = proc.communicate(timeout=120)
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
        if proc.poll() is None:
            proc.terminate()  # SIGTERM: softrt stops cleanly and restores what it changed
            proc.wait(timeout=60)
    assert proc.returncode in (0, 1), err
    (run,) = [p for p in out.iterdir() if (p / "summary.json").is_file()]
    return run


def _copy(run: Path, dest: Path, *, seconds: int, kernel: str | None = None, suffix: str = "copy") -> Path:
    """*run* as a run of its own: a new id, started *seconds* after it (before it when negative; the
    runs' own rows order runs of one second by when they entered the history); its kernel rewritten if given."""
    doc = json.loads((run / "summary.json").read_text())
    start = datetime.fromisoformat(doc["started_at"]) + timedelta(seconds=seconds)
    doc["run_id"] = f"{doc['run_id']}-{suffix}"
    doc["started_at"] = start.isoformat(timespec="seconds")
    if kernel is not None:
        doc["host"]["kernel"] = kernel
    target = dest / doc["run_id"]
    shutil.copytree(run, target)
    (target / "summary.json").write_text(json.dumps(doc))
    return target


def _rewrite_kernel(run: Path, kernel: str) -> None:
    doc = json.loads((run / "summary.json").read_text())
    doc["host"]["kernel"] = kernel
    (run / "summary.json").write_text(json.dumps(doc))


@pytest.mark.rt
def test_a_kernel_that_made_a_rig_worse_is_found(tmp_path, softrt_cmd, run_cli, softrt_home, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    good = [_run(softrt_cmd, tmp_path / "good")]
    bad = _loaded_run(tmp_path / "bad")
    kernel = json.loads((good[0] / "summary.json").read_text())["host"]["kernel"]
    # The copies start before the real run (the bad run may start within a second of it).
    good = [_copy(good[0], tmp_path / f"copies{n}", seconds=-n, suffix=f"copy{n}") for n in (2, 1)] + good
    _rewrite_kernel(bad, kernel + CANDIDATE)
    bad_copy = _copy(bad, tmp_path / "copies", seconds=1, kernel=kernel + CANDIDATE)
    code, _, err = run_cli("history", "add", *map(str, good), str(bad), str(bad_copy))
    assert code == 0, err

    code, out, err = run_cli("fleet", "--regressions", "--json")
    found = json.loads(out)
    assert code == 1, (out, err)
    (entry,) = found["regressions"]
    assert entry["label"] == "lab-rig-1"
    assert entry["last_good"]["run_id"] == good[2].name and entry["first_bad"]["run_id"] == bad.name
    assert entry["change"]["kernel"] == {"before": kernel, "after": kernel + CANDIDATE}
    assert "tuning" in entry["change"] and entry["worse"]
    assert found["kernels"][0]["kernel"] == kernel + CANDIDATE and found["kernels"][0]["rigs_worse"] == 1

    code, out, _ = run_cli("diff", good[0].name, bad.name)
    assert code == 0 and f"kernel: {kernel} → {kernel}{CANDIDATE}" in out and "profile: rt → none" in out
