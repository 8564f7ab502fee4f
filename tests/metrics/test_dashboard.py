"""The shipped Grafana dashboard asks only for series softrt serves, and has the fleet's panels."""

from __future__ import annotations

import json
import re
from pathlib import Path

DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_every_series_of_the_dashboard_is_a_documented_one():
    documented = set(re.findall(r"^\| `(softrt_\w+)` \|", (DOCS / "metrics.md").read_text(), re.M))
    board = json.loads((DOCS / "grafana-softrt.json").read_text())
    exprs = [t["expr"] for p in board["panels"] for t in p.get("targets", [])]
    used = {m for e in exprs for m in re.findall(r"\bsoftrt_\w+", e)}
    assert used and used <= documented, used - documented
    titles = {p["title"].split(" ")[0]: p for p in board["panels"]}
    assert "softrt_latency_quantile_seconds" in json.dumps(titles["Latency"])
    assert "softrt_late_seconds_total" in json.dumps(titles["Culprits:"])
    ids = [p["id"] for p in board["panels"]]
    assert len(ids) == len(set(ids))
