"""session.run: the checkpoints of a real run."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from softrt.schema.config import RunConfig
from softrt.session.run import run
from softrt.store.history import History
from softrt.store.rundir import read_summary
from softrt.units import NS_PER_S


@pytest.mark.rt
def test_a_real_run_checkpoints_while_it_runs(tmp_path, state_dir, monkeypatch):
    monkeypatch.setenv("SOFTRT_CHECKPOINT_INTERVAL", "0.3")
    seen: dict[float, dict] = {}

    def on_progress(p):
        for f in Path(tmp_path).glob("*/summary.json"):
            doc = json.loads(f.read_text())  # never a half-written file: it is replaced by rename(2)
            seen[doc["elapsed_s"]] = doc

    result = run(RunConfig(duration_ns=2 * NS_PER_S, out_dir=tmp_path), on_progress=on_progress)
    checkpoints = [seen[k] for k in sorted(seen) if seen[k]["status"] == "running"]
    assert len(checkpoints) >= 3, sorted(seen)
    assert checkpoints[0]["elapsed_s"] < 0.3  # the first at the start: the run is in the history from then
    later = [c for c in checkpoints if c["cycles"]]
    assert later and all(a["cycles"] <= b["cycles"] for a, b in zip(later, later[1:]))
    assert result.summary.status == "complete" and result.summary.elapsed_s >= checkpoints[-1]["elapsed_s"]
    assert read_summary(result.path) == result.summary  # the final summary replaced the checkpoints
    assert History().get(result.summary.run_id).status == "complete"


@pytest.mark.rt
def test_an_error_after_the_run_entered_the_history_ends_it_failed(tmp_path, state_dir, monkeypatch, run_cli):
    """Issue 32: an exception in the supervisor once the run is in the history (there: the motion
    model's OverflowError) left the row "running", listed as "died 0s", and the ring behind, with
    a traceback. Now: the row and summary.json say failed and why, the ring is gone, one line, exit 1."""
    from softrt.session import collect

    calls = []
    real = collect.Collector.summary

    def summary(self, *args, **kwargs):
        calls.append(1)
        if len(calls) == 2:  # the first is the first checkpoint's, which put the run in the history
            raise OverflowError("Python int too large to convert to C long")
        return real(self, *args, **kwargs)

    monkeypatch.setattr(collect.Collector, "summary", summary)
    code, out, err = run_cli(
        "run", "--duration", "0.3s", "--profile", "none", "--no-trace", "--quiet", "--out-dir", str(tmp_path)
    )
    assert code == 1 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    assert (
        lines[0].startswith("softrt: error: the run failed: OverflowError: Python int too large") and "--debug" in err
    )
    [row] = History().list_runs()
    assert row.status == "failed" and "OverflowError" in row.summary.partial_reason
    stored = read_summary(row.path)
    assert stored.status == "failed" and stored.supervisor is None and stored.finished_at
    assert list(Path("/dev/shm").glob(f"softrt-{os.getpid()}-*")) == []  # the ring is removed
    assert not (row.path / ".softrt-reserve").exists()


def test_debug_shows_the_traceback_of_an_error(run_cli):
    code, _, err = run_cli("--debug", "show", "no-such-run")
    assert code == 2 and "Traceback" in err and err.strip().splitlines()[-1].startswith("softrt: error: unknown run id")
    code, _, err = run_cli("show", "no-such-run")
    assert code == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1
