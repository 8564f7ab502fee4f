"""store.regressions on two sets of real runs that differ in a recorded provenance field and in their figures.

How the two sets are made (few, short real runs; the rest are copies):

- *good*: two real ``softrt run --duration 0.5s --no-trace`` runs on this rig as it is (tuned: pinned,
  SCHED_FIFO), and a copy of the first with a new id and a later start, so the rig has the three runs
  with one provenance that its noise needs (analysis.regress.MIN_RUNS);
- *bad*: one real run with ``--profile none`` (no tuning) while a SCHED_OTHER busy loop runs on every
  CPU, so its figures are really worse (a loop that shares its CPU waits for the scheduler's slices,
  milliseconds), and a copy of it; in both, the recorded kernel release (``host.kernel``) is rewritten
  to a candidate kernel's name, as if the rig had been updated between the sets. Their recorded tuning
  differs too, truly: the bad run applied none.

``softrt fleet --regressions`` must then name this rig, the last good and the first bad run, the kernel
change between them, and rank the candidate kernel as having made one rig worse. No latency bound is
asserted: only that an untuned run under load is worse than the same rig tuned and idle by more than
the scatter of the tuned runs, which the late rate (hundreds of late cycles against a few) shows.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path

import pytest

CANDIDATE = "-candidate-kernel"


def _run(softrt_cmd, out: Path, *extra: str) -> Path:
    proc = softrt_cmd("run", "--duration", "0.5s", "--no-trace", "-q", "--rig-label", "lab-rig-1",
                      "--out-dir", str(out), *extra, timeout=120)
    assert proc.returncode in (0, 1), proc.stderr  # 1: the run did not meet the cycle (this VM, or the load)
    (run,) = [p for p in out.iterdir() if (p / "summary.json").is_file()]
    return run


def _copy(run: Path, dest: Path, *, after: Path, kernel: str | None = None) -> Path:
    """*run* as a run of its own: a new id, started a second after *after*; its kernel rewritten if given."""
    doc = json.loads((run / "summary.json").read_text())
    start = datetime.fromisoformat(json.loads((after / "summary.json").read_text())["started_at"]) + timedelta(seconds=1)
    doc["run_id"] = f"{doc['run_id']}-copy"
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
    good = [_run(softrt_cmd, tmp_path / f"good{i}") for i in range(2)]
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(os.cpu_count() or 1)]
    try:
        bad = _run(softrt_cmd, tmp_path / "bad", "--profile", "none")
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    kernel = json.loads((good[0] / "summary.json").read_text())["host"]["kernel"]
    good.append(_copy(good[0], tmp_path / "copies", after=good[1]))
    _rewrite_kernel(bad, kernel + CANDIDATE)
    bad_copy = _copy(bad, tmp_path / "copies", after=bad, kernel=kernel + CANDIDATE)
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
