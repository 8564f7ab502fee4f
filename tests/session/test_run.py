"""session.run: the checkpoints of a real run."""

from __future__ import annotations

import json
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
