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

Nothing here is real-time: run it any time (it uses one CPU fully while it works).
"""

from __future__ import annotations

import argparse
import json
import os
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
    proc = subprocess.run([sys.executable, "-c", _CHILD, str(run), str(out_html), str(png_dir or "")],
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"report_scale: the report failed:\n{proc.stderr}")
    result = json.loads(proc.stdout)
    result["html_mib"] = out_html.stat().st_size / 2**20
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cycles", type=int, default=CYCLES_1H, help="cycles to generate (default: 1 h at 250 µs)")
    ap.add_argument("--run-dir", type=Path, default=None, help="report this existing run instead of generating one")
    ap.add_argument("--keep", type=Path, default=None, help="generate into this directory and keep it")
    ap.add_argument("--png", action="store_true", help="also export every plot as PNG")
    ap.add_argument("--json", action="store_true", help="print the result as JSON")
    ap.add_argument("--late-24h", action="store_true",
                    help="generate a 24 h run stored with --samples late instead (issue 10, benchmark c)")
    args = ap.parse_args()

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
        result.update({"cycles": cycles, "samples_mib": samples_mib, "generate_s": gen_s, "cpu_count": os.cpu_count(),
                       "python": sys.version.split()[0]})
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"| cycles | samples.parquet | report (s) | of which imports (s) | CPU (s) | peak RSS (MiB) | HTML (MiB) | PNGs |\n"
          f"|---|---|---|---|---|---|---|---|\n"
          f"| {cycles:,} | {samples_mib:,.1f} MiB | {result['total_s']:.1f} | {result['import_s']:.1f} | "
          f"{result['cpu_s']:.1f} | "
          f"{result['peak_rss_mib']:,.0f} | {result['html_mib']:.2f} | {result['pngs']} |")


if __name__ == "__main__":
    main()
