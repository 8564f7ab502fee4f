"""Benchmark: cross-run queries over a lab's 30-rig, 1,000-run archive (issue 30; store.query, store.fleet).

The archive is SYNTHETIC: no run here was measured. Each run is a summary made in code
(RunSummary.read checks it as any summary is checked), spread over 30 rigs, 3 kernels and 60 days.
Each also gets a small samples.parquet (--rows cycles each, default 2,000: the columns softrt
writes, with made-up times) under ``rig=<id>/date=<YYYY-MM-DD>/<run id>/``, as store.archive lays
runs out. Every run's row goes into a SQLite history through History.add_row, as a rig's push
stores it.

It then times, each --repeat times, keeping the best:
- connect: DuckDB with its sqlite extension loaded from the package's file, the index attached
  read-only, the archive's views made;
- index: the p99.99 of every rig on one kernel (the README's first query);
- archive: a cross-run query over every samples.parquet (per rig and kernel: cycles, worst
  latency, runs), joined with the index;
- softrt query: the whole command in a new process (Python start, imports, connect, query);
- fleet and regressions: store.fleet's rows and store.regressions over the 1,000 runs.

    PYTHONPATH=src python bench/lab_query.py [--runs 1000] [--rigs 30] [--rows 2000] [--dir DIR] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from softrt.schema.summary import SCHEMA, RunSummary
from softrt.store.fleet import fleet_rows, jsonable, load_runs
from softrt.store.history import History
from softrt.store.query import connect, run
from softrt.store.regressions import find

KERNELS = ("6.18.4-rt", "6.18.9-rt", "6.19.1-rt")
T0 = datetime(2026, 3, 1, tzinfo=timezone.utc)
PERIOD_NS = 250_000


def _summary(i: int, rig: int, rng: np.random.Generator, runs_per_rig: int) -> RunSummary:
    k = i * len(KERNELS) // runs_per_rig  # each rig moves through the kernels in order
    start = T0 + timedelta(days=60 * i / runs_per_rig, minutes=rig)
    worst = float(rng.gamma(4.0, 30.0) + 260 + (400 if k == 1 and rig % 5 == 0 else 0))
    late = int(rng.poisson(2 + (30 if k == 1 and rig % 5 == 0 else 0)))
    doc = {
        "schema": SCHEMA,
        "run_id": f"{start:%Y%m%d-%H%M%S}-rig{rig:02d}-{i:04x}",
        "scenario": "tuned",
        "started_at": start.isoformat(timespec="seconds"),
        "finished_at": None,
        "status": "complete",
        "partial_reason": None,
        "mode": "real-time",
        "config": {"period_ns": PERIOD_NS, "duration_ns": 600 * 10**9},
        "host": {
            "os": "linux",
            "hostname": f"rig{rig:02d}",
            "kernel": KERNELS[k],
            "preemption": "PREEMPT_RT",
            "cpu_model": f"IPC model {rig % 4}",
            "cmdline": "isolcpus=3 nohz_full=3",
        },
        "provenance": {
            "rig_id": f"{rig:016x}",
            "rig_label": f"line {rig // 10} / cell {rig % 10}",
            "bios_version": "1.0",
            "microcode": "0xde",
            "nics": [],
        },
        "tuning": {"applied": [{"what": "sched_fifo"}]},
        "cycles": 2_400_000,
        "late_cycles": late,
        "period_us": {"max": worst, "p99_99": worst * 0.8, "p50": 250.0},
        "misses": {"missed_updates": 0},
        "verdict": {"meets": late == 0, "requirement": "no late cycle"},
    }
    return RunSummary.read(doc)


def _samples(rows: int, rng: np.random.Generator) -> pa.Table:
    edge = np.arange(rows, dtype=np.int64) * PERIOD_NS
    detect = edge + rng.integers(2_000, 40_000, rows)
    return pa.table(
        {
            "seq": np.arange(rows),
            "cycle": np.arange(rows),
            "edge_ns": edge,
            "detect_ns": detect,
            "write_ns": detect + 3_000,
            "done_ns": detect + 6_000,
            "missed": np.zeros(rows, np.int64),
            "flags": np.zeros(rows, np.int64),
        }
    )


def build(root: Path, runs: int, rigs: int, rows: int) -> History:
    rng = np.random.default_rng(30)
    history = History(root / "index" / "history.sqlite")
    per_rig = runs // rigs + (runs % rigs > 0)
    made = 0
    for rig in range(rigs):
        for j in range(per_rig):
            if made == runs:
                break
            s = _summary(j, rig, rng, per_rig)
            folder = root / "archive" / f"rig={rig:016x}" / f"date={s.started_at[:10]}" / s.run_id
            folder.mkdir(parents=True)
            (folder / "summary.json").write_text(json.dumps(s.to_dict()))
            pq.write_table(_samples(rows, rng), folder / "samples.parquet", compression="zstd")
            history.add_row(History.row_of(folder, s))
            made += 1
    return history


def _best(fn, repeat: int) -> tuple[float, object]:
    best, out = float("inf"), None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return best, out


INDEX_SQL = (
    "SELECT rig_label, count(*) AS runs, max(period_p99_99_us) AS p99_99_us FROM runs "
    "WHERE kernel = '6.18.9-rt' GROUP BY ALL ORDER BY p99_99_us DESC"
)
ARCHIVE_SQL = (
    "SELECT r.kernel, s.rig, count(*) AS cycles, max(s.detect_ns - s.edge_ns) / 1000 AS worst_latency_us, "
    "count(DISTINCT s.run_id) AS runs FROM samples s JOIN runs r USING (run_id) "
    "GROUP BY ALL ORDER BY worst_latency_us DESC"
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--rigs", type=int, default=30)
    ap.add_argument("--rows", type=int, default=2000, help="cycles in each run's samples.parquet")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--dir", type=Path, default=None, help="where to build the archive [a temporary directory]")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="softrt-labq-") as tmp:
        root = args.dir or Path(tmp)
        t = time.perf_counter()
        history = build(root, args.runs, args.rigs, args.rows)
        out = {
            "synthetic": True,
            "runs": len(history),
            "rigs": args.rigs,
            "rows_per_run": args.rows,
            "build_s": round(time.perf_counter() - t, 1),
        }
        archive = str(root / "archive")
        out["connect_s"], con = _best(lambda: connect(history, archive), args.repeat)
        out["index_query_s"], (_, index_rows, _) = _best(lambda: run(con, INDEX_SQL, 10_000), args.repeat)
        out["archive_query_s"], (_, archive_rows, _) = _best(lambda: run(con, ARCHIVE_SQL, 10_000), args.repeat)
        out["archive_cycles"] = sum(r[2] for r in archive_rows)
        out["index_rows"] = len(index_rows)
        env = {**os.environ, "SOFTRT_HOME": str(root / "home")}
        cmd = [
            sys.executable,
            "-m",
            "softrt",
            "query",
            "--db",
            str(history.path),
            "--archive",
            archive,
            "--json",
            ARCHIVE_SQL,
        ]
        out["softrt_query_command_s"], proc = _best(
            lambda: subprocess.run(cmd, capture_output=True, env=env), args.repeat
        )
        assert proc.returncode == 0, proc.stderr
        out["fleet_s"], rows = _best(lambda: fleet_rows(load_runs(history)), args.repeat)
        out["regressions_s"], found = _best(lambda: find(load_runs(history)), args.repeat)
        out["regressions"] = len(found.regressions)
        out["kernels"] = jsonable(found.kernels[:3])
    for k, v in out.items():
        if k.endswith("_s"):
            out[k] = round(v, 3)
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        for k, v in out.items():
            print(f"{k:>24}: {v}")


if __name__ == "__main__":
    main()
