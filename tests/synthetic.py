"""Synthetic run directories with known properties, for the tests and the benchmarks (a test helper).

The records follow the virtual board's rules (:mod:`softrt.board.virtual`, docs/run-format.md):
write i sees the permit of board cycle ``cycle[i]`` and lands in ``cycle[i] + missed[i]``; the
next write sees the following edge, so ``cycle[i + 1] = cycle[i] + missed[i] + 1``. A miss is made
by stalling the work past the next edge(s), exactly what a preempted loop does. The summary is
computed by softrt's own streaming pass (:class:`softrt.analysis.RunStats`, also stored as
``stats.json``, as a real run stores it) and :func:`softrt.motion.motion_impact`,
so the report can be checked against the numbers a real run would carry.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np

from softrt.analysis import RunStats
from softrt.analysis.attribution import Attributor, unavailable
from softrt.analysis.events import StealSample, TraceEvent
from softrt.ipc.layout import RECORD_DTYPE
from softrt.motion import MotionConfig, motion_impact
from softrt.schema.config import DEFAULT_THRESHOLD_NS
from softrt.schema.device import Board
from softrt.schema.doc import present
from softrt.schema.runstats import StatsState
from softrt.schema.summary import SCHEMA, Config, Motion, Ring, RunSummary, Tuned, Tuning
from softrt.schema.why_late import WhyLate
from softrt.store.rundir import STATS, RunDir

T0_NS = 1_000_000_000_000  # an arbitrary CLOCK_MONOTONIC origin


def synthetic_records(
    cycles: int, period_ns: int = 250_000, misses: Iterable[tuple[int, int]] = (), seed: int = 0
) -> np.ndarray:
    """Records (RECORD_DTYPE) of *cycles* writes; *misses* are (write index, missed board cycles)."""
    rng = np.random.default_rng(seed)
    n = int(cycles)
    rec = np.zeros(n, dtype=RECORD_DTYPE)
    missed = np.zeros(n, dtype=np.int64)
    for i, k in misses:
        if 0 <= i < n:
            missed[i] = k
    rec["seq"] = np.arange(n)
    rec["missed"] = missed
    cycle = np.zeros(n, dtype=np.int64)
    np.cumsum(missed[:-1] + 1, out=cycle[1:])
    rec["cycle"] = cycle
    edge = T0_NS + cycle * period_ns
    # Detection latency ~0.2 µs and work ~0.9 µs: the order of a tuned busy-polling loop.
    latency = 70 + rng.gamma(2.0, 60.0, n).astype(np.int64)
    process = 600 + rng.gamma(2.0, 150.0, n).astype(np.int64)
    late = missed > 0
    # A stalled cycle finishes half a period into the board cycle its write lands in.
    process[late] = missed[late] * period_ns + period_ns // 2 - latency[late]
    rec["edge_ns"] = edge
    rec["detect_ns"] = edge + latency
    rec["done_ns"] = edge + latency + process
    rec["write_ns"] = rec["done_ns"] - process // 3
    rec["flags"] = 0
    return rec


#: The synthetic machine's host facts.
_HOST_FACTS = {
    "os": "linux",
    "hostname": "synthhost",
    "kernel": "6.1.0-synthetic-rt",
    "preemption": "PREEMPT_RT",
    "cpu_model": "Synthetic CPU",
    "cpu_count": 2,
    "cmdline": "isolcpus=1",
    "clocksource": "tsc",
}
WORKER_PID = 4242
HOG = ("stress-ng-cpu", 5151, 0)  # comm, pid, kernel prio (0: SCHED_FIFO 99)


def synthetic_trace(rec: np.ndarray, cpu: int = 1) -> tuple[list[TraceEvent], list[StealSample]]:
    """RT-CPU events that explain *rec*'s misses: a FIFO-99 thread preempts the worker for most of
    each stalled write, an IRQ comes first; every third miss instead has no event at all while the
    steal counter rises (a hypervisor gap). Steal samples come once a second."""
    worker = ("softrt-worker", WORKER_PID, 19)
    events: list[TraceEvent] = []

    def sw(ts, prev, nxt, state):
        events.append(
            TraceEvent(
                ts,
                cpu,
                "sched_switch",
                prev[1],
                prev[0],
                {
                    "prev_comm": prev[0],
                    "prev_pid": str(prev[1]),
                    "prev_prio": str(prev[2]),
                    "prev_state": state,
                    "next_comm": nxt[0],
                    "next_pid": str(nxt[1]),
                    "next_prio": str(nxt[2]),
                },
            )
        )

    start = int(rec["edge_ns"][0]) if rec.size else T0_NS
    events.append(TraceEvent(start - 1000, cpu, "sched_wakeup", WORKER_PID, worker[0], {"pid": "1"}))
    stolen, steal_at = [], {}
    for k, i in enumerate(np.flatnonzero(rec["missed"] > 0)):
        a, b = int(rec["detect_ns"][i]), int(rec["write_ns"][i])
        if k % 3 == 2:
            steal_at[(a - start) // 1_000_000_000] = b - a
            continue
        irq = {"irq": "24", "name": "eth0"}
        events.append(TraceEvent(a + 500, cpu, "irq_handler_entry", WORKER_PID, worker[0], irq))
        events.append(TraceEvent(a + 4_500, cpu, "irq_handler_exit", WORKER_PID, worker[0], {"irq": "24"}))
        sw(a + 5_000, worker, HOG, "R")
        sw(b - 2_000, HOG, worker, "S")
    end = int(rec["done_ns"][-1]) if rec.size else start
    total = 0
    for sec in range((end - start) // 1_000_000_000 + 2):
        total += steal_at.get(sec - 1, 0)
        stolen.append(StealSample(start + sec * 1_000_000_000, cpu, total))
    return events, stolen


def synthetic_why_late(rec: np.ndarray, period_ns: int, cpu: int = 1, keep_worst: int = 100) -> WhyLate:
    """summary.json's ``why_late`` for *rec*, from :func:`synthetic_trace` through the real Attributor."""
    events, steal = synthetic_trace(rec, cpu)
    att = Attributor(period_ns=period_ns, rt_cpu=cpu, worker_pid=WORKER_PID, keep_worst=keep_worst)
    att.add_steal(steal)
    att.add_events(events)
    for a in range(0, rec.size, 4096):  # in chunks, as the supervisor drains the ring
        att.add_records(rec[a : a + 4096])
        att.advance(int(rec["done_ns"][min(a + 4095, rec.size - 1)]))
    return att.finish(lost_events=0)


def write_synthetic_run(
    base: Path | str,
    *,
    cycles: int,
    period_ns: int = 250_000,
    misses: Iterable[tuple[int, int]] = (),
    seed: int = 0,
    run_id: str | None = None,
    scenario: str = "synthetic",
    host: str = "synthhost",
    motion: bool = True,
    started_at: datetime | None = None,
    chunk_rows: int = 1 << 20,
    why_late: bool | str = False,
    dropped: Iterable[tuple[int, int]] = (),
    samples: str = "all",
    late_threshold_ns: int = DEFAULT_THRESHOLD_NS,
    compare_round: int | None = None,
) -> Path:
    """Write a complete run directory under *base*; return its path.

    *why_late*: True adds the attribution of :func:`synthetic_why_late`; a string is the reason
    tracing was off (``why_late.tracing``). *dropped* lists [start, stop) ranges of records the
    ring lost (an overflow): they are missing from the samples and counted in the summary's
    ``records_missing``. *samples* ``late`` stores the run as ``softrt run --samples late`` does
    (softrt.store.late), through the same RunDir.
    """
    misses = list(misses)
    rec = synthetic_records(cycles, period_ns, misses, seed)
    keep = np.ones(rec.size, dtype=bool)
    for a, b in dropped:
        keep[a:b] = False
    rec = rec[keep]
    stats = RunStats(period_ns, late_threshold_ns)
    for a in range(0, rec.size, chunk_rows):
        stats.add(rec[a : a + chunk_rows])
    start = started_at or datetime(2026, 11, 30, 7, 15, 2, tzinfo=timezone.utc)
    run_id = run_id or f"{start:%Y%m%d-%H%M%S}-{host}-{seed % 0x10000:04x}"
    rd = RunDir(Path(base), run_id, samples=samples, period_ns=period_ns, late_threshold_ns=late_threshold_ns)
    for a in range(0, rec.size, chunk_rows):
        rd.append(rec[a : a + chunk_rows], flush_rows=1)
    rd.close()
    cfg_motion = MotionConfig() if motion else None
    config = Config.build(
        period_ns=period_ns,
        duration_ns=cycles * period_ns,
        cpu=1,
        priority=80,
        profile="rt",
        wait="spin",
        margin_ns=50_000,
        axes=1 if motion else 0,
        motion=cfg_motion.to_dict() if cfg_motion else None,
        out_dir=str(base),
        max_duration_ns=3_600_000_000_000,
        scenario=scenario,
        extra={},
        samples=samples,
        late_threshold_ns=late_threshold_ns,
    )
    if motion and rec.size and keep.all():  # with records dropped the delivered samples are unknown
        impact = motion_impact(rec["cycle"] + rec["missed"], cfg_motion, period_ns=period_ns)
    else:
        impact = None
    why = synthetic_why_late(rec, period_ns, cpu=1) if why_late is True else unavailable(why_late) if why_late else None
    summary = RunSummary.build(
        schema=SCHEMA,
        run_id=run_id,
        scenario=scenario,
        started_at=start.isoformat(timespec="seconds"),
        finished_at=(start + timedelta(seconds=cycles * period_ns / 1e9)).isoformat(timespec="seconds"),
        status="complete",
        partial_reason=None,
        mode="real-time",
        config=config,
        host=_HOST_FACTS | {"hostname": host},
        tuning=Tuning.build(
            applied=[
                Tuned.build(what="sched_fifo", detail="SCHED_FIFO priority 80"),
                Tuned.build(what="cpu_affinity", detail="worker pinned to CPU 1"),
            ],
            not_applied=[],
            system_changes=[],
            recovered_from_earlier_runs=[],
        ),
        metrics=stats.summary(),
        ring=Ring(capacity=65536, overflows=0),
        board=Board.build(writes=int(rec.size), missed_updates=int(rec["missed"].sum())),
        **present(motion=impact, compare_round=compare_round, why_late=why),
    )
    _write(rd, summary, stats)
    return rd.path


def write_synthetic_long_late_run(
    base: Path | str,
    *,
    hours: float = 24.0,
    period_ns: int = 250_000,
    events: int = 2_000,
    seed: int = 0,
    run_id: str | None = None,
    late_threshold_ns: int = DEFAULT_THRESHOLD_NS,
) -> Path:
    """A ``--samples late`` run of *hours* (345.6 M cycles for 24 h at 250 µs), written in seconds.

    Its 345 M cycles are never generated one by one: what a late run stores is built directly —
    the *events* late cycles (misses of 1 to 58 cycles) with their context records, following the
    virtual board's rules (:func:`synthetic_records`) at their place in the run; one aggregate row a
    second (4,000 ordinary periods of 249-251 µs, the events' periods where they fall); and
    ``stats.json``: the streaming pass over 100 s of ordinary records with its counts scaled to the
    run, pooled with the pass over the kept records. For benchmark (c) (docs/benchmarks.md).
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    from softrt.store.late import AGGREGATE_FIELDS, AGGREGATES, CONTEXT_RECORDS, aggregates_schema

    rng = np.random.default_rng(seed)
    per_s = 1_000_000_000 // period_ns
    seconds = int(hours * 3600)
    cycles = seconds * per_s
    c = CONTEXT_RECORDS
    at = np.sort(rng.choice(np.arange(c + 1, cycles - c - 1, 4 * c), size=events, replace=False))
    lengths = rng.choice([1, 1, 1, 2, 3, 5, 58], size=events)
    # Records: seq = write index; a write's board cycle is its index plus every cycle missed before it.
    lost_before = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    segments = []
    for j, (i, k, lost) in enumerate(zip(at, lengths, lost_before)):
        seg = synthetic_records(2 * c + 1, period_ns, [(c, int(k))], seed=seed + j)
        shift_seq, shift_cycle = int(i) - c, int(i) - c + int(lost)
        seg["seq"] += shift_seq
        seg["cycle"] += shift_cycle
        for name in ("edge_ns", "detect_ns", "done_ns", "write_ns"):
            seg[name] += shift_cycle * period_ns
        segments.append(seg)
    kept = np.concatenate(segments)
    stats = RunStats(period_ns)
    for seg in segments:
        stats.merge(RunStats(period_ns).add(seg))
    ordinary = RunStats(period_ns).add(synthetic_records(100 * per_s, period_ns, seed=seed)).document().to_dict()
    scale = (cycles - kept.size) / (100 * per_s)
    for h in ordinary["series_ns"].values():
        h["counts"] = [max(int(round(x * scale)), 1) for x in h["counts"]]
        h["n"] = sum(h["counts"])
        h["sum_ns"] = int(h["sum_ns"] * scale)
        h["m2_ns2"] = h["m2_ns2"] * scale
    for key in ("cycles", "records_expected"):
        ordinary["counters"][key] = int(cycles - kept.size)
    stats = RunStats.of_document(StatsState.from_dict(ordinary)).merge(stats)
    # One aggregate row a second.
    sec = np.arange(seconds, dtype=np.int64)
    cols = {
        "second": sec,
        "records": np.full(seconds, per_s, np.int64),
        "periods": np.full(seconds, per_s, np.int64),
        "period_min_ns": period_ns - 1_000 + rng.integers(0, 500, seconds),
        "period_max_ns": period_ns + 1_000 + rng.integers(0, 3_000, seconds),
        "period_mean_ns": period_ns + rng.normal(0, 5, seconds),
        "latency_min_ns": 70 + rng.integers(0, 30, seconds),
        "latency_max_ns": 1_000 + rng.integers(0, 2_000, seconds),
        "latency_mean_ns": 190 + rng.normal(0, 3, seconds),
        "missed": np.zeros(seconds, np.int64),
        "missed_cycles": np.zeros(seconds, np.int64),
        "late": np.zeros(seconds, np.int64),
    }
    ev_sec = (at + lost_before) // per_s
    np.add.at(cols["missed"], ev_sec, lengths)
    np.add.at(cols["missed_cycles"], ev_sec, 1)
    np.add.at(cols["late"], ev_sec, 2)  # the stalled write and the long period after it
    np.maximum.at(cols["period_max_ns"], ev_sec, (lengths + 1) * period_ns)
    start = datetime(2026, 11, 30, 7, 15, 2, tzinfo=timezone.utc)
    run_id = run_id or f"{start:%Y%m%d-%H%M%S}-synthhost-{seed % 0x10000:04x}"
    rd = RunDir(Path(base), run_id)
    for a in range(0, kept.size, 1 << 16):
        rd.append(kept[a : a + (1 << 16)])
    rd.close()
    schema = aggregates_schema(T0_NS, period_ns, late_threshold_ns, 0, 0)
    pq.write_table(
        pa.table({k: cols[k] for k in AGGREGATE_FIELDS}, schema=schema),
        rd.path / AGGREGATES,
        compression="zstd",
        row_group_size=3600,
    )
    config = Config.build(
        period_ns=period_ns,
        duration_ns=cycles * period_ns,
        cpu=1,
        priority=80,
        profile="rt",
        wait="spin",
        margin_ns=50_000,
        axes=1,
        motion=MotionConfig().to_dict(),
        out_dir=str(base),
        max_duration_ns=72 * 3_600_000_000_000,
        scenario="synthetic-24h",
        extra={},
        samples="late",
        late_threshold_ns=late_threshold_ns,
    )
    summary = RunSummary.build(
        schema=SCHEMA,
        run_id=run_id,
        scenario="synthetic-24h",
        started_at=start.isoformat(timespec="seconds"),
        finished_at=(start + timedelta(seconds=seconds)).isoformat(timespec="seconds"),
        status="complete",
        partial_reason=None,
        mode="real-time",
        config=config,
        host=_HOST_FACTS,
        tuning=Tuning.build(applied=[], not_applied=[], system_changes=[], recovered_from_earlier_runs=[]),
        metrics=stats.summary(),
        ring=Ring(capacity=65536, overflows=0),
        board=Board.build(writes=cycles, missed_updates=int(lengths.sum())),
        motion=Motion(not_computed="synthetic run: its 345 M writes are not generated"),
    )
    _write(rd, summary, stats)
    return rd.path


def _write(rd: RunDir, summary: RunSummary, stats: RunStats) -> None:
    """The run's config.json, host.json, stats.json and summary.json (checked as a reader checks it)."""
    summary.validate(rd.path)
    rd.write_json("config.json", summary.config.to_dict())
    rd.write_json("host.json", summary.host)
    rd.write_json(STATS, stats.document().to_dict())
    rd.write_json("summary.json", summary.to_dict())
