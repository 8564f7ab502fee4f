"""Report rendering at scale: a 1-hour run at 250 µs (14.4 M cycles) → HTML, time and peak memory.

Issue 5's target: the report renders in under 30 s with under 2 GB of memory. The run is
synthetic (tests/synthetic.py: the virtual board's rules, summary computed by softrt's own
analysis) with misses scattered through the hour, a few of them long, so every plot has work to
do. The report is built in a fresh child process, so its peak resident set (VmHWM) is the report's
alone: Python, numpy, pyarrow and matplotlib included, the generator excluded.

    python bench/report_scale.py                       # generate, then time the report (about 2 min)
    python bench/report_scale.py --keep /tmp/scale     # keep the run directory for another try
    python bench/report_scale.py --run-dir /tmp/scale/<run-id> --png   # reuse it; PNGs too
    python bench/report_scale.py --json                # the result as JSON on stdout
    python bench/report_scale.py --late-24h            # issue 10 (c): a 24 h run stored with --samples late
    python bench/report_scale.py --full-24h            # issue 31: 24 h with --samples all (345.6 M rows, 1.5 GB)
    python bench/report_scale.py --full-24h --rows 34560000 --delete   # 2.4 h, for the ratio

The --full-24h run is past the report's row budget (report.load.ROW_BUDGET): the report reads it by
row group and draws a min/max envelope (report.longrun). It is generated once into --cache-dir (a
few minutes; 1.5 GB for 24 h) with injected spikes (misses of 3 to 1,000 cycles and a late detection
that makes a short period), then `softrt report` is timed under /usr/bin/time -v (peak RSS), and
the report's loader checks that every spike is its slice's maximum (or minimum) in the envelope.
Targets (issue 31): under 60 s and 1 GB.

Nothing here is real-time: run it any time (it uses one CPU fully while it works).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CYCLES_1H = 3_600 * 4_000  # one hour at 250 µs

# Measured in the child: wall time of build_report and the peak resident set. The peak is the
# process's VmHWM (/proc/self/status, proc(5)), not getrusage's ru_maxrss: Linux carries
# ru_maxrss over execve from the parent's memory (exec_mmap → setmax_mm_hiwater_rss), so a
# child of the 2 GB generator would report the generator's peak.
_CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
from softrt.report import build_report
t1 = time.perf_counter()
result = build_report([sys.argv[1]], sys.argv[2], sys.argv[3] or None)
t2 = time.perf_counter()
hwm_kib = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print(json.dumps({"import_s": t1 - t0, "report_s": t2 - t1, "total_s": t2 - t0, "cpu_s": time.process_time(),
                  "peak_rss_mib": hwm_kib / 1024, "pngs": len(result.pngs), "runs": result.runs}))
"""


def misses_for(cycles: int, seed: int = 7) -> list[tuple[int, int]]:
    """About one miss per 100,000 cycles (many 1-3 cycles, a few long stalls like the seed's 14.6 ms)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    count = max(cycles // 100_000, 1)
    where = np.sort(rng.choice(np.arange(1, max(cycles - 1, 2)), size=min(count, max(cycles - 2, 1)), replace=False))
    lengths = rng.choice([1, 1, 1, 2, 3, 5, 58], size=where.size)
    return [(int(i), int(k)) for i, k in zip(where, lengths)]


def generate(base: Path, cycles: int) -> tuple[Path, float]:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout's tests/synthetic.py
    from tests.synthetic import write_synthetic_run

    t0 = time.perf_counter()
    run = write_synthetic_run(base, cycles=cycles, misses=misses_for(cycles), scenario="scale-1h", seed=1)
    return run, time.perf_counter() - t0


def generate_late_24h(base: Path) -> tuple[Path, float]:
    """A 24 h ``--samples late`` run (345.6 M cycles): aggregates, late cycles, stats.json built directly."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout's tests/synthetic.py
    from tests.synthetic import write_synthetic_long_late_run

    t0 = time.perf_counter()
    run = write_synthetic_long_late_run(base, hours=24.0, events=2_000, seed=1)
    return run, time.perf_counter() - t0


def measure(run: Path, out_html: Path, png_dir: Path | None) -> dict:
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, str(run), str(out_html), str(png_dir or "")],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise SystemExit(f"report_scale: the report failed:\n{proc.stderr}")
    result = json.loads(proc.stdout)
    result["html_mib"] = out_html.stat().st_size / 2**20
    return result


# -- issue 31 (item 4): a day of --samples all, past the report's row budget ----------------------
ROWS_24H = 24 * CYCLES_1H  # 345.6 M cycles: 24 h at 250 µs
FULL_RUN_ID = "20261130-071502-synthhost-full"
GEN_CHUNK = 1 << 20
#: Injected at these fractions of the run: (missed board cycles, extra detection latency ns). A miss
#: of k cycles makes a period of about (k + 1) x 250 µs; a 100 µs late detection without a miss makes a
#: long period then a short one (150 µs), the dip the envelope's minimum must keep.
SPIKES = ((0.137, 400, 0), (0.5, 58, 0), (0.731, 1_000, 0), (0.9, 3, 0), (0.31, 0, 100_000))


def _spike_rows(rows: int) -> dict[int, tuple[int, int]]:
    """Row -> (missed, extra latency), some rows into its generation chunk (never on a chunk's edge)."""
    return {
        int(f * rows) // GEN_CHUNK * GEN_CHUNK + 1_000 + 10_000 * j: (k, lat) for j, (f, k, lat) in enumerate(SPIKES)
    }


def generate_full(cache: Path, rows: int, period_ns: int = 250_000) -> Path:
    """A complete run directory of *rows* cycles stored with ``--samples all`` (cached in *cache*).

    Written the way softrt writes it (store.rundir's schema, writer options and row groups of
    ROW_GROUP_ROWS), chunk by chunk with the virtual board's rules (tests/synthetic.py), its summary
    and stats.json from softrt's streaming pass over the same records (exact, not scaled). The
    injected spikes and the periods they make go to ``spikes.json``, written last (the cache's mark).
    """
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    from softrt.analysis import RunStats
    from softrt.motion import MotionConfig
    from softrt.schema.summary import SCHEMA, RunSummary
    from softrt.store import rundir
    from softrt.store.rundir import write_json_atomic

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout's tests/synthetic.py
    from tests.synthetic import T0_NS, synthetic_records

    run = cache / f"{rows}" / FULL_RUN_ID
    done = run / "spikes.json"
    if done.is_file():
        return run
    run.mkdir(parents=True, exist_ok=True)
    spikes = _spike_rows(rows)
    stats = RunStats(period_ns)
    expect = []  # (row ending the period, period ns, "max" or "min")
    cycle0 = 0
    writer = pq.ParquetWriter(run / rundir.SAMPLES, rundir._ARROW_SCHEMA, **rundir._WRITER_OPTIONS)
    t0 = time.perf_counter()
    for a in range(0, rows, GEN_CHUNK):
        n = min(GEN_CHUNK, rows - a)
        here = {r - a: v for r, v in spikes.items() if a <= r < a + n}
        rec = synthetic_records(n, period_ns, [(i, k) for i, (k, _) in here.items() if k], seed=a // GEN_CHUNK)
        for i, (_, lat) in here.items():
            for name in ("detect_ns", "write_ns", "done_ns"):
                rec[name][i] += lat
        rec["seq"] += a
        rec["cycle"] += cycle0
        for name in ("edge_ns", "detect_ns", "done_ns", "write_ns"):
            rec[name] += cycle0 * period_ns
        for i, (k, lat) in here.items():
            p = np.diff(rec["detect_ns"][i - 1 : i + 3])  # the periods ending at rows i, i + 1, i + 2
            expect.append((a + i + 1, int(p[1]), "max") if k else (a + i, int(p[0]), "max"))
            if lat:
                expect.append((a + i + 1, int(p[1]), "min"))
        cycle0 = int(rec["cycle"][-1] + rec["missed"][-1]) + 1
        stats.add(rec)
        writer.write_table(
            pa.table({c: rec[c] for c in rundir._ARROW_SCHEMA.names}, schema=rundir._ARROW_SCHEMA),
            row_group_size=rundir.ROW_GROUP_ROWS,
        )
        if a // GEN_CHUNK % 32 == 0:
            print(f"report_scale: {a + n:,} of {rows:,} rows ({time.perf_counter() - t0:.0f} s)", file=sys.stderr)
    writer.close()
    seconds = cycle0 * period_ns / 1e9
    config = {
        "period_ns": period_ns,
        "duration_ns": cycle0 * period_ns,
        "cpu": 1,
        "priority": 80,
        "profile": "rt",
        "wait": "spin",
        "margin_ns": 50_000,
        "axes": 1,
        "motion": MotionConfig().to_dict(),
        "out_dir": str(cache),
        "max_duration_ns": 72 * 3_600_000_000_000,
        "scenario": "synthetic-24h-all",
        "extra": {},
        "samples": "all",
        "late_threshold_ns": stats.rule.threshold_ns,
    }
    host = {
        "os": "linux",
        "hostname": "synthhost",
        "kernel": "6.1.0-synthetic-rt",
        "preemption": "PREEMPT_RT",
        "cpu_model": "Synthetic CPU",
        "cpu_count": 2,
        "cmdline": "isolcpus=1",
        "clocksource": "tsc",
    }
    summary = {
        "schema": SCHEMA,
        "run_id": FULL_RUN_ID,
        "scenario": "synthetic-24h-all",
        "started_at": "2026-11-30T07:15:02+00:00",
        "finished_at": "2026-12-01T07:15:02+00:00",
        "status": "complete",
        "partial_reason": None,
        "mode": "real-time",
        "config": config,
        "host": host,
        "tuning": {"applied": [], "not_applied": [], "system_changes": [], "recovered_from_earlier_runs": []},
        **stats.summary().to_dict(),
        "ring": {"capacity": 65536, "overflows": 0},
        "board": {"writes": rows, "missed_updates": sum(k for k, _ in spikes.values())},
        "motion": {"not_computed": f"synthetic run: motion_impact over {rows:,} writes is not computed"},
    }
    write_json_atomic(run / "config.json", config)
    write_json_atomic(run / "host.json", host)
    write_json_atomic(run / rundir.STATS, stats.document().to_dict())
    write_json_atomic(run / "summary.json", RunSummary.read(summary, run).to_dict())
    write_json_atomic(
        done,
        {"rows": rows, "seconds": seconds, "t0_ns": T0_NS, "expect": expect, "generate_s": time.perf_counter() - t0},
    )
    return run


def measure_cli(run: Path, out_html: Path) -> dict:
    """``softrt report`` on *run* in a child under /usr/bin/time -v: wall time and peak RSS (the
    child's own maximum resident set; /usr/bin/time's fork keeps the bench's memory out of it)."""
    cmd = [sys.executable, "-m", "softrt", "report", str(run), "-o", str(out_html)]
    t0 = time.perf_counter()
    proc = subprocess.run(["/usr/bin/time", "-v", *cmd], capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"report_scale: softrt report failed:\n{proc.stderr[-3000:]}")
    fields = dict(line.strip().split(": ", 1) for line in proc.stderr.splitlines() if ": " in line)
    cpu = float(fields.get("User time (seconds)", 0)) + float(fields.get("System time (seconds)", 0))
    return {
        "total_s": wall,
        "cpu_s": cpu,
        "peak_rss_mib": int(fields["Maximum resident set size (kbytes)"]) / 1024,
        "html_mib": out_html.stat().st_size / 2**20,
    }


def check_envelope(run: Path) -> dict:
    """The report's own loader on *run*: every injected spike is in the plotted envelope (its slice's
    maximum, or minimum for the dip), and the report says it is downsampled."""
    from softrt.report.data import envelope
    from softrt.report.load import load_run

    doc = json.loads((run / "spikes.json").read_text())
    t0 = time.perf_counter()
    view = load_run(run)
    s = view.series
    _, y = envelope(s)
    total = doc["rows"] - 1  # periods: no record dropped
    found = []
    for row, period, side in doc["expect"]:
        b = (row - 1) * s.t_s.size // total  # MinMaxDownsampler's bucket of the period ending at *row*
        got = int(s.hi[b] if side == "max" else s.lo[b])
        found.append({"row": row, "period_us": period / 1e3, "side": side, "in_envelope": got == period})
    worst = max(p for _, p, side in doc["expect"] if side == "max")
    return {
        "load_s": time.perf_counter() - t0,
        "spikes": found,
        "all_spikes_drawn": all(f["in_envelope"] for f in found),
        "envelope_max_is_worst": int(y.max()) == worst,
        "slices": int(s.t_s.size),
        "periods": s.n,
        "note": next(iter(view.notes), ""),
        "motion_note": view.motion_note,
    }


def main_full(args) -> None:
    """--full-24h: generate (once) and report a day of --samples all."""
    cache = args.cache_dir
    print(f"report_scale: {args.rows:,} rows --samples all in {cache} (generated once) …", file=sys.stderr)
    run = generate_full(cache, args.rows)
    gen = json.loads((run / "spikes.json").read_text())
    samples_mib = (run / "samples.parquet").stat().st_size / 2**20
    with tempfile.TemporaryDirectory(prefix="softrt-report-scale-") as tmp:
        print("report_scale: softrt report …", file=sys.stderr)
        result = measure_cli(run, Path(tmp) / "report.html")
        result["says_downsampled"] = "drawn downsampled" in (Path(tmp) / "report.html").read_text()
    print("report_scale: checking the envelope …", file=sys.stderr)
    result.update(
        check_envelope(run),
        rows=args.rows,
        samples_mib=samples_mib,
        generate_s=gen["generate_s"],
        cpu_count=os.cpu_count(),
    )
    if args.delete:
        shutil.rmtree(run.parent)
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(
        f"| rows | samples.parquet | softrt report (s) | CPU (s) | peak RSS (MiB) | spikes drawn | downsampled note |\n"
        f"|---|---|---|---|---|---|---|\n"
        f"| {args.rows:,} | {samples_mib:,.0f} MiB | {result['total_s']:.1f} | {result['cpu_s']:.1f} | "
        f"{result['peak_rss_mib']:,.0f} | {sum(f['in_envelope'] for f in result['spikes'])}/{len(result['spikes'])}"
        f" | {'yes' if result['says_downsampled'] else 'NO'} |"
    )
    print(result["note"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cycles", type=int, default=CYCLES_1H, help="cycles to generate (default: 1 h at 250 µs)")
    ap.add_argument("--run-dir", type=Path, default=None, help="report this existing run instead of generating one")
    ap.add_argument("--keep", type=Path, default=None, help="generate into this directory and keep it")
    ap.add_argument("--png", action="store_true", help="also export every plot as PNG")
    ap.add_argument("--json", action="store_true", help="print the result as JSON")
    ap.add_argument(
        "--late-24h",
        action="store_true",
        help="generate a 24 h run stored with --samples late instead (issue 10, benchmark c)",
    )
    ap.add_argument(
        "--full-24h",
        action="store_true",
        help="issue 31: a day stored with --samples all (345.6 M rows), past the report's row budget",
    )
    ap.add_argument("--rows", type=int, default=ROWS_24H, help="rows of the --full-24h run (default: 24 h)")
    ap.add_argument(
        "--cache-dir",
        type=Path,
        default=Path(tempfile.gettempdir()) / "softrt-report-scale-full",
        help="where the --full-24h run is generated once and kept (default: %(default)s)",
    )
    ap.add_argument("--delete", action="store_true", help="delete the --full-24h run when done")
    args = ap.parse_args()
    if args.full_24h:
        main_full(args)
        return

    with tempfile.TemporaryDirectory(prefix="softrt-report-scale-") as tmp:
        tmp_path = Path(tmp)
        gen_s = None
        if args.run_dir is not None:
            run = args.run_dir
        else:
            base = args.keep if args.keep is not None else tmp_path / "runs"
            if args.late_24h:
                print(f"report_scale: generating a 24 h --samples late run in {base} …", file=sys.stderr)
                run, gen_s = generate_late_24h(base)
            else:
                print(f"report_scale: generating {args.cycles:,} cycles in {base} …", file=sys.stderr)
                run, gen_s = generate(base, args.cycles)
        samples_mib = (run / "samples.parquet").stat().st_size / 2**20
        cycles = json.loads((run / "summary.json").read_text())["cycles"]
        print("report_scale: building the report …", file=sys.stderr)
        result = measure(run, tmp_path / "report.html", tmp_path / "png" if args.png else None)
        result.update(
            {
                "cycles": cycles,
                "samples_mib": samples_mib,
                "generate_s": gen_s,
                "cpu_count": os.cpu_count(),
                "python": sys.version.split()[0],
            }
        )
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(
        f"| cycles | samples.parquet | report (s) | of which imports (s) | CPU (s) | peak RSS (MiB) | HTML (MiB) | PNGs |\n"
        f"|---|---|---|---|---|---|---|---|\n"
        f"| {cycles:,} | {samples_mib:,.1f} MiB | {result['total_s']:.1f} | {result['import_s']:.1f} | "
        f"{result['cpu_s']:.1f} | "
        f"{result['peak_rss_mib']:,.0f} | {result['html_mib']:.2f} | {result['pngs']} |"
    )


if __name__ == "__main__":
    main()
