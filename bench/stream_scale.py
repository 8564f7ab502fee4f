"""The one streaming metrics pass at scale (issue 10, benchmark parts a and b). Not a test.

(a) collector rate: records per second through ``RunStats.add`` alone, with the motion impact
    (``session.collect.Collector``), ``RunDir.append`` (Parquet) alone, and Collector + Parquet,
    at the drainer's chunk (200 records = 50 ms at 250 µs) and at 1 s chunks.
(b) a synthetic 24 h run at 250 µs (345.6 M records) fed to one ``RunStats`` in chunks: wall and CPU
    time, peak memory (``resource.getrusage(RUSAGE_SELF).ru_maxrss``), the size of ``stats.json``,
    and a check of the result (cycles, records missing, missed updates) against what was fed.

The records are built from a few pre-made 1 s templates (jitter, misses, a ring overflow in one),
shifted in place chunk after chunk so seq, cycles and times run on without a break; the cost of
that shifting is measured on its own and subtracted ("pass only").

    python bench/stream_scale.py                      # (b) 24 h in 1 s chunks, then (a) (~3 min idle)
    python bench/stream_scale.py --hours 1 --chunk 40000
    python bench/stream_scale.py --json

Run it with softrt importable (``PYTHONPATH=src`` from a checkout). Nothing here is real-time;
it uses one CPU fully while it works.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from softrt.analysis import RunStats
from softrt.motion import MotionConfig
from softrt.session.collect import Collector
from softrt.store.rundir import RunDir

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout's tests/synthetic.py
from tests.synthetic import synthetic_records

PERIOD_NS = 250_000
TEMPLATES = 8


def templates(chunk: int) -> list[np.ndarray]:
    """*TEMPLATES* chunks of *chunk* records: sparse misses, and in the last one 50 records the ring dropped."""
    out = []
    rng = np.random.default_rng(10)
    for t in range(TEMPLATES):
        drop = 50 if t == TEMPLATES - 1 else 0
        misses = [(int(i), int(k)) for i, k in zip(rng.integers(0, chunk + drop, 2), rng.integers(1, 4, 2))]
        rec = synthetic_records(chunk + drop, PERIOD_NS, misses, seed=t)
        if drop:
            rec = np.delete(rec, np.arange(chunk // 2, chunk // 2 + drop))
        out.append(rec)
    return out


class Feed:
    """Chunks that continue one another: each template shifted by the seq and cycles so far."""

    def __init__(self, chunk: int) -> None:
        self.templates = templates(chunk)
        # Per template: how far it moves seq and the board cycle (the next template starts there).
        self.seq_span = [int(r["seq"][-1]) + 1 for r in self.templates]
        self.cycle_span = [int(r["cycle"][-1] + r["missed"][-1]) + 1 for r in self.templates]
        self.buf = np.empty_like(self.templates[0])
        self.seq = self.cycle = 0
        self.fed = self.missed = self.missing = 0

    def next(self, i: int) -> np.ndarray:
        t = i % TEMPLATES
        src, buf = self.templates[t], self.buf
        buf[:] = src
        buf["seq"] += self.seq
        buf["cycle"] += self.cycle
        shift = self.cycle * PERIOD_NS
        for name in ("edge_ns", "detect_ns", "write_ns", "done_ns"):
            buf[name] += shift
        self.seq += self.seq_span[t]
        self.cycle += self.cycle_span[t]
        self.fed += buf.size
        self.missed += int(src["missed"].sum())
        self.missing += self.seq_span[t] - src.size
        return buf


def rate(fn, records: int) -> tuple[float, float]:
    w, c = time.perf_counter(), time.process_time()
    fn()
    return records / (time.perf_counter() - w), records / (time.process_time() - c)


def collector(total: int) -> dict:
    """(a): records/s of the pass, the pass with the motion impact (the run's Collector), the
    Parquet append (RunDir), and Collector + Parquet, at two chunk sizes."""
    out = {}
    for chunk in (200, 4000):
        n_chunks = total // chunk
        feed = Feed(chunk)
        chunks = [feed.next(i).copy() for i in range(min(n_chunks, 100))]  # reused in turn (32 MB)

        def feed_all(sink, write=False, n_chunks=n_chunks, chunks=chunks):  # this chunk size's feed
            with tempfile.TemporaryDirectory() as tmp:
                rd = RunDir(Path(tmp), "bench")
                target = sink() if sink else None
                for i in range(n_chunks):
                    c = chunks[i % len(chunks)]
                    if write:
                        rd.append(c)
                    if target is not None:
                        if i and i % len(chunks) == 0:  # the chunks repeat: a new stream, not seq going back
                            target = sink()
                        target.add(c)
                rd.close()

        n = n_chunks * chunk
        out[chunk] = {
            "pass": rate(lambda: feed_all(lambda: RunStats(PERIOD_NS)), n),
            "pass+motion": rate(lambda: feed_all(lambda: Collector(PERIOD_NS, MotionConfig())), n),
            "parquet": rate(lambda: feed_all(None, write=True), n),
            "pass+motion+parquet": rate(lambda: feed_all(lambda: Collector(PERIOD_NS, MotionConfig()), write=True), n),
        }
    return out


def day(hours: float, chunk: int) -> dict:
    """(b): a synthetic run of *hours* at 250 µs, fed in chunks of *chunk* records."""
    n_chunks = int(hours * 3600 * 1e9 / PERIOD_NS) // chunk
    feed = Feed(chunk)
    w, c = time.perf_counter(), time.process_time()
    for i in range(n_chunks):
        feed.next(i)
    gen_wall, gen_cpu = time.perf_counter() - w, time.process_time() - c

    feed = Feed(chunk)
    stats = RunStats(PERIOD_NS)
    w, c = time.perf_counter(), time.process_time()
    for i in range(n_chunks):
        stats.add(feed.next(i))
    wall, cpu = time.perf_counter() - w, time.process_time() - c
    t = time.perf_counter()
    m = stats.summary()
    doc = json.dumps(stats.document().to_dict())
    summary_s = time.perf_counter() - t
    ok = m.cycles == feed.fed and m.records_missing == feed.missing and m.misses.missed_updates == feed.missed
    return {
        "hours": hours,
        "chunk_records": chunk,
        "records": feed.fed,
        "wall_s": wall,
        "cpu_s": cpu,
        "shift_wall_s": gen_wall,
        "shift_cpu_s": gen_cpu,
        "pass_cpu_s": cpu - gen_cpu,
        "records_per_s_cpu": feed.fed / cpu,
        "summary_and_json_s": summary_s,
        "stats_json_bytes": len(doc),
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "checked": ok,
        "period_us": m.period_us.to_dict(),
        "records_missing": m.records_missing,
        "missed_updates": m.misses.missed_updates,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--hours", type=float, default=24.0)
    ap.add_argument("--chunk", type=int, default=4000, help="records per chunk for (b) (4000 = 1 s)")
    ap.add_argument("--collector-records", type=int, default=4_000_000)
    ap.add_argument("--no-collector", action="store_true")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    result = {"load_1min_before": _load()}
    result["day"] = day(args.hours, args.chunk)  # first: its peak memory is then its own
    if not args.no_collector:
        result["collector"] = collector(args.collector_records)
    result["load_1min_after"] = _load()
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    for chunk, r in result.get("collector", {}).items():
        print(
            f"(a) chunks of {chunk:>5} records: "
            + ", ".join(f"{k} {wall / 1e6:.2f} M/s wall, {cpu / 1e6:.2f} M/s CPU" for k, (wall, cpu) in r.items())
        )
    d = result["day"]
    print(f"    peak RSS above is after (b) alone ({d['peak_rss_mib']:.0f} MiB)")
    print(
        f"(b) {d['hours']:g} h = {d['records']:,} records in chunks of {d['chunk_records']}: "
        f"{d['wall_s']:.1f} s wall, {d['cpu_s']:.1f} s CPU (of which shifting the templates "
        f"{d['shift_cpu_s']:.1f} s CPU), {d['records_per_s_cpu'] / 1e6:.2f} M records/s CPU; peak RSS "
        f"{d['peak_rss_mib']:.0f} MiB; summary + stats.json {d['summary_and_json_s'] * 1e3:.0f} ms, "
        f"{d['stats_json_bytes']:,} bytes; result checked: {d['checked']}"
    )
    print(f"    period µs: {d['period_us']}")
    print(f"load (1 min) before {result['load_1min_before']}, after {result['load_1min_after']}", file=sys.stderr)
    return 0 if d["checked"] else 1


def _load() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


if __name__ == "__main__":
    sys.exit(main())
