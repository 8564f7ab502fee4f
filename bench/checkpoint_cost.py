"""What one checkpoint costs the supervisor (issue 10 item 4). Not a test.

A checkpoint runs in the supervisor's thread between two drains of the ring, so while it runs
nothing is drained; the ring holds 65,536 records (16 s at 250 µs). This builds the state of a
run of ``--hours`` (default 1 h: 14.4 M records at 250 µs, jitter spread over four decades so
every histogram has thousands of non-empty buckets, one miss in 10,000 cycles) in a real
``session.collect.Collector`` with the motion impact, then times the real
``session.summary.checkpoint``: the summary built by ``run_summary`` (the final summary's builder)
and the streaming pass's state in the supervisor's thread (what holds up the drain), then
``stats.json`` and ``summary.json`` written atomically (with fsync) and the run's row refreshed in
a history database by the checkpoint's writer thread.

    PYTHONPATH=src python bench/checkpoint_cost.py            # 1 h of records (~30 s to build)
    PYTHONPATH=src python bench/checkpoint_cost.py --hours 0.1 --repeats 5
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import numpy as np


def chunk(start: int, n: int, period_ns: int, rng: np.random.Generator) -> np.ndarray:
    from softrt.ipc.layout import RECORD_DTYPE

    rec = np.zeros(n, dtype=RECORD_DTYPE)
    seq = np.arange(start, start + n)
    missed = (rng.random(n) < 1e-4).astype(np.int64) * rng.integers(1, 60, n)
    cycle = start + np.concatenate(([0], np.cumsum(missed[:-1] + 1))) + getattr(chunk, "offset", 0)
    chunk.offset = getattr(chunk, "offset", 0) + int(missed.sum())
    edge = 10**12 + cycle * period_ns
    latency = (10 ** rng.uniform(2, 6, n)).astype(np.int64) // 8  # 12 ns .. 125 µs, log-uniform
    process = 500 + (10 ** rng.uniform(2, 5, n)).astype(np.int64) // 4
    late = missed > 0
    process[late] = missed[late] * period_ns + period_ns // 2
    rec["seq"], rec["cycle"], rec["missed"], rec["edge_ns"] = seq, cycle, missed, edge
    rec["detect_ns"] = edge + latency
    rec["done_ns"] = edge + latency + process
    rec["write_ns"] = rec["done_ns"] - process // 3
    return rec


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hours", type=float, default=1.0)
    ap.add_argument("--repeats", type=int, default=7)
    args = ap.parse_args()

    from softrt.ipc.ring import Ring
    from softrt.schema.config import RunConfig
    from softrt.session import changes
    from softrt.session.collect import Collector
    from softrt.session.config import resolve_motion
    from softrt.session.drain import Drainer, Outcome
    from softrt.session.summary import RunParts, checkpoint
    from softrt.store.rundir import RunDir, new_run_id
    from softrt.trace import TraceSession

    with tempfile.TemporaryDirectory() as tmp:
        os.environ["SOFTRT_HOME"] = str(Path(tmp) / "home")
        config = resolve_motion(RunConfig(out_dir=Path(tmp) / "runs", trace=False))
        period = config.period_ns
        total = int(args.hours * 3600e9 / period)
        collector = Collector(period, config.motion)
        rng = np.random.default_rng(1)
        t0 = time.perf_counter()
        for start in range(0, total, 1 << 20):
            collector.add(chunk(start, min(1 << 20, total - start), period, rng))
        build_s = time.perf_counter() - t0
        rundir = RunDir(config.out_dir, new_run_id())
        ring = Ring.create(1 << 10)
        try:
            parts = RunParts(
                config,
                {"hostname": "bench"},
                "2026-11-30T00:00:00+00:00",
                [],
                None,
                Outcome(),
                rundir,
                ring,
                collector,
                Drainer(ring, rundir, collector),
                changes.ChangeJournal(),
                TraceSession(config),
                60.0,
                released_at=time.monotonic() - args.hours * 3600,
            )
            held, written, whole = [], [], []
            for _ in range(args.repeats):
                t = time.perf_counter()
                checkpoint(parts)  # what the drain loop does: build here, write in a thread
                held.append(time.perf_counter() - t)
                parts.writer.join()
                written.append(time.perf_counter() - t)
                t = time.perf_counter()
                checkpoint(parts, wait=True)  # at the stop: everything in this thread
                whole.append(time.perf_counter() - t)
            sizes = {p.name: p.stat().st_size for p in rundir.path.glob("*.json")}
        finally:
            parts.drainer.release()
            ring.close()
            rundir.close()
        hist_buckets = {k: int(h.counts.astype(bool).sum()) for k, h in collector.stats.hist.items()}
        print(
            f"state: {total:,} records ({args.hours:g} h at {period / 1e3:g} µs) fed in {build_s:.1f} s; "
            f"non-empty histogram buckets {hist_buckets}"
        )
        for label, xs in (
            ("drain loop held (build summary + stats, start the writer)", held),
            ("until written (+ stats.json, summary.json with fsync, history row)", written),
            ("at the stop, all in the supervisor's thread", whole),
        ):
            xs = sorted(xs)
            print(
                f"{label}: min {xs[0] * 1e3:.1f} ms, median {xs[len(xs) // 2] * 1e3:.1f} ms, "
                f"max {xs[-1] * 1e3:.1f} ms ({len(xs)} repeats)"
            )
        print(f"files: {sizes}; history row written: {parts.history_error is None} ({parts.history_error or 'ok'})")


if __name__ == "__main__":
    main()
