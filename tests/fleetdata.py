"""Summaries of many rigs for the fleet tests: built in code, as another rig's history rows would hold them.

Each is a complete summary as ``softrt run`` writes it (checked by RunSummary.read), with its
provenance and figures chosen by the test; stored with History.add_row, so the fleet commands read
them through the same History API (SQLite or PostgreSQL) as a lab's.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone
from pathlib import Path

from softrt.schema.summary import SCHEMA, RunSummary
from softrt.store.history import History

T0 = datetime(2026, 3, 1, 8, 0, tzinfo=timezone.utc)


def summary(
    n: int,
    *,
    rig: str = "aaaa000000000001",
    label: str = "rig-1",
    host: str = "pc1",
    kernel: str = "6.18.4-rt",
    worst_us: float = 300.0,
    p9999_us: float = 280.0,
    late: int = 2,
    scenario: str = "tuned",
    bios: str = "1.02",
    microcode: str = "0xde",
    cycles: int = 40_000,
    meets: bool | None = True,
    profile: str = "rt",
    hours: float = 0.0,
    tail: dict | None = None,
) -> RunSummary:
    """Run *n* of a rig (started *n* hours, plus *hours*, after T0)."""
    start = T0 + timedelta(hours=n + hours)
    run_id = f"{start:%Y%m%d-%H%M%S}-{re.sub(r'[^A-Za-z0-9._-]', 'x', host)}-{n:04x}"
    stats = {
        "mean": 250.0,
        "min": 240.0,
        "max": worst_us,
        "std": 1.0,
        "p50": 250.0,
        "p99": 260.0,
        "p99_9": 270.0,
        "p99_99": p9999_us,
    }
    doc = {
        "schema": SCHEMA,
        "run_id": run_id,
        "scenario": scenario,
        "started_at": start.isoformat(timespec="seconds"),
        "finished_at": (start + timedelta(seconds=10)).isoformat(timespec="seconds"),
        "status": "complete",
        "partial_reason": None,
        "mode": "real-time",
        "config": {
            "period_ns": 250_000,
            "duration_ns": cycles * 250_000,
            "cpu": 1,
            "profile": profile,
            "out_dir": f"/runs/{n}",
        },
        "host": {
            "os": "linux",
            "hostname": host,
            "kernel": kernel,
            "kernel_version": "#1 SMP PREEMPT_RT",
            "preemption": "PREEMPT_RT",
            "cpu_model": "Test CPU 9000",
            "cmdline": "isolcpus=1",
        },
        "provenance": {
            "rig_id": rig,
            "rig_label": label,
            "bios_vendor": "ACME",
            "bios_version": bios,
            "bios_date": "01/02/2026",
            "product_name": "IPC-1",
            "microcode": microcode,
            "nics": [],
        },
        "tuning": {
            "applied": [{"what": "sched_fifo"}],
            "not_applied": [],
            "system_changes": [],
            "recovered_from_earlier_runs": [],
        },
        "cycles": cycles,
        "records_expected": cycles,
        "records_missing": 0,
        "late_cycles": late,
        "period_us": stats,
        "process_us": {},
        "latency_us": {},
        "slack_us": {},
        "misses": {
            "missed_updates": 0,
            "cycles_with_miss": 0,
            "longest_miss_run": 0,
            "overruns": 0,
            "device_errors": 0,
        },
        "ring": None,
        "board": None,
        "verdict": {"meets": meets, "requirement": "no late cycle", "checks": []},
    }
    if tail is not None:
        doc["tail"] = tail
    return RunSummary.read(doc)


def store(history: History, summaries: list[RunSummary], base: Path) -> list[str]:
    """Add *summaries* to *history* as rows (their run folders under *base*, not written)."""
    return [history.add_row(History.row_of(base / s.run_id, s)) for s in summaries]
