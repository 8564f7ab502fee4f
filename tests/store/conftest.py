"""Fixtures for the store tests: an isolated data directory and synthetic runs."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest

from ..synthetic import write_synthetic_run


@pytest.fixture
def three_runs(tmp_path):
    """Three small runs on two hosts, two scenarios and three days."""
    base = tmp_path / "runs"
    specs = [
        ("pc-a", "tuned", datetime(2026, 11, 28, 9, 0, tzinfo=timezone.utc), 1),
        ("pc-a", "untuned", datetime(2026, 11, 29, 23, 30, tzinfo=timezone.utc), 2),
        ("pc-b", "tuned", datetime(2026, 11, 30, 7, 15, tzinfo=timezone.utc), 3),
    ]
    return [
        write_synthetic_run(base, cycles=2_000, host=h, scenario=s, started_at=t, seed=seed, misses=[(500, seed)])
        for h, s, t, seed in specs
    ]


def cyclictest_doc(
    threads: dict, cmdline: str = "cyclictest -m -p 90 -i 250 -h 400 --json=x.json", resolution_in_ns: int = 0
) -> dict:
    """A cyclictest --json document as rt_write_json writes it (keys with a trailing colon)."""
    return {
        "file_version": 1,
        "cmdline:": cmdline,
        "rt_test_version:": "2.40",
        "start_time": "Mon, 30 Nov 2026 06:48:43 +0000",
        "end_time": "Mon, 30 Nov 2026 06:48:44 +0000",
        "return_code": 0,
        "sysinfo": {
            "sysname": "Linux",
            "nodename": "labpc",
            "release": "6.1.0-rt",
            "version": "#1 SMP PREEMPT_RT",
            "machine": "x86_64",
            "realtime": 1,
        },
        "num_threads": len(threads),
        "resolution_in_ns": resolution_in_ns,
        "thread": threads,
    }


@pytest.fixture
def write_doc(tmp_path):
    """Factory: write a JSON document to a file and return its path."""

    def write(doc: dict, name: str = "result.json"):
        path = tmp_path / name
        path.write_text(json.dumps(doc))
        return path

    return write
