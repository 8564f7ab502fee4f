"""Held-out prediction and the known disturber rate of the tail model on real runs (issue 33). Not a test.

Two real runs of the 250 µs loop (softrt.session.run, traced, spin wait on the last CPU), one plain
and one with the known-answer disturber of tests/trace (disturber.c: a SCHED_FIFO thread above the
loop on its CPU that spins 300 µs every 2 s). Needs root, a C compiler, and the machine free (it
takes the real-time lock as every run does; it retries while another run holds it).

Held-out prediction (after Silva de Oliveira et al., RTSS 2017, and Arcaro et al., RTSS 2020): each
run is cut into windows; in each, the tail is fitted on the first half (fit_tail on the periods the
run kept, tail.npz) and the number of clusters (bursts, 10 ms gap) above a high level L in the second
half is predicted. L is the first half's 5th-highest cluster peak (chosen without the model), so about
5 are expected. The model's late rate at L (fit_tail with deadline L: Λ(L) with its 95 % interval,
which holds the uncertainty of ξ, σ and the cluster rate) gives a 95 % prediction interval for the
count over the second half: [Poisson 2.5 % quantile at the low rate, 97.5 % quantile at the high rate].
Reported: how often the observed count falls inside, over all windows whose fit was not refused.

Known disturber rate: in the disturbed run, the late cycles whose attribution (why_late.worst) names
the disturber are fitted alone (fit_tail on their periods and times, the run's cycles and hours): the
interval of their fitted late rate must contain the injected rate (1 per 2 s = 1,800 per hour), and
the no-model bound of all late cycles must lie above it.

    sudo PYTHONPATH=src python bench/tail_heldout.py --seconds 90 --windows 3
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

import numpy as np
from scipy.stats import poisson

from softrt.analysis.tail import fit_tail
from softrt.analysis.tail_clusters import decluster
from softrt.schema.config import RunConfig
from softrt.session.run import run
from softrt.store.tailkeep import read_tail_keep

ROOT = Path(__file__).resolve().parent.parent
NAME = "softrt-disturb"
SPIN_US, EVERY_US = 300, 2_000_000
GAP_S = 0.010


def _cpu() -> int:
    return max(os.sched_getaffinity(0))


def _run(out: Path, seconds: float):
    config = RunConfig(
        duration_ns=int(seconds * 1e9), wait="spin", cpu=_cpu(), priority=80, out_dir=out, keep_late=100_000
    )
    for _ in range(300):
        try:
            return run(config)
        except Exception as err:
            if "another real-time softrt run" not in str(err):
                raise
            time.sleep(2)
    raise SystemExit("the machine stayed busy")


def _kept(path: Path) -> tuple[np.ndarray, np.ndarray, int, float, int]:
    """The kept periods (µs), their times (ns since the run's first period), cycles, hours, and
    the first period's time (CLOCK_MONOTONIC ns)."""
    k = read_tail_keep(path)["period"]
    values, times = k.arrays()
    return values / 1e3, times.astype(np.int64) - int(k.first), k.seen, k.hours(250_000), int(k.first)


def heldout(path: Path, windows: int) -> list[dict]:
    values, times_ns, seen, hours, _ = _kept(path)
    t0 = 0
    span_ns = hours * 3.6e12
    out = []
    for w in range(windows):
        a, b = t0 + span_ns * w / windows, t0 + span_ns * (w + 1) / windows
        mid = (a + b) / 2
        first = (times_ns >= a) & (times_ns < mid)
        second = (times_ns >= mid) & (times_ns < b)
        half_h, half_cycles = hours / windows / 2, int(seen / windows / 2)
        v1, t1 = values[first], (times_ns[first] - t0) / 1e9
        peaks = np.sort(decluster(v1, t1, float(np.min(v1)) - 1e-9, GAP_S, None).peaks)[::-1]
        if peaks.size < 40:
            out.append({"window": w, "skipped": f"{peaks.size} clusters in the first half"})
            continue
        level = float(peaks[4])
        tail = fit_tail(v1, t1, deadline_us=level, hours=half_h, cycles=half_cycles)
        observed = decluster(values[second], (times_ns[second] - t0) / 1e9, level, GAP_S, None).count
        row = {
            "window": w,
            "level_us": round(level, 1),
            "observed": observed,
            "refused": tail.refused,
            "xi": None
            if tail.xi is None
            else [round(tail.xi.estimate, 2), round(tail.xi.low, 2), round(tail.xi.high, 2)],
        }
        if tail.fitted and tail.late_rate_per_h is not None:
            lr = tail.late_rate_per_h
            lo, hi = int(poisson.ppf(0.025, lr.low * half_h)), int(poisson.ppf(0.975, lr.high * half_h))
            row.update(expected=round(lr.estimate * half_h, 1), interval=[lo, hi], inside=lo <= observed <= hi)
        out.append(row)
    return out


def disturber_rate(result, spikes: int) -> dict:
    why = result.summary.why_late
    late = why.worst if why is not None else []
    hit_ns = sorted(lc.window.end_ns for lc in late if any(c.name == NAME for c in lc.causes))
    values, times_ns, seen, hours, first = _kept(result.path)
    index = {int(t) + first: i for i, t in enumerate(times_ns)}
    idx = [index[t] for t in hit_ns if t in index]  # a late cycle's window ends at its permit
    tail = fit_tail(
        values[idx],
        times_ns[idx] / 1e9,
        deadline_us=270.0,
        hours=hours,
        cycles=seen,
        series="disturber-attributed period_us",
    )
    injected = 3600 * 1e6 / EVERY_US
    lr = tail.late_rate_per_h
    return {
        "spikes_during_run": spikes,
        "attributed_late_cycles": len(hit_ns),
        "matched_to_kept": len(idx),
        "injected_per_h": injected,
        "refused": tail.refused,
        "fitted_per_h": None if lr is None else [lr.estimate, lr.low, lr.high],
        "fitted_contains_injected": None if lr is None else lr.low <= injected <= lr.high,
        "all_late": result.summary.tail.late,
        "all_late_bound_per_h": result.summary.tail.late_rate_bound_per_h,
        "bound_above_injected": result.summary.tail.late_rate_bound_per_h >= injected,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=90.0)
    ap.add_argument("--windows", type=int, default=3)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="softrt-tail-heldout-"))
    binary = tmp / "disturber"
    subprocess.run(["cc", "-O2", "-o", str(binary), str(ROOT / "tests/trace/disturber.c")], check=True)
    plain = _run(tmp / "plain", args.seconds)
    proc = subprocess.Popen(
        [str(binary), NAME, str(_cpu()), "fifo", "90", str(SPIN_US), str(EVERY_US)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr.readline().strip() == "ready"
        disturbed = _run(tmp / "disturbed", args.seconds)
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=10)
    spikes = len(out.splitlines())
    report = {
        "plain": {"run": str(plain.path), "heldout": heldout(plain.path, args.windows)},
        "disturbed": {
            "run": str(disturbed.path),
            "heldout": heldout(disturbed.path, args.windows),
            "rate": disturber_rate(disturbed, spikes),
        },
    }
    rows = [r for part in ("plain", "disturbed") for r in report[part]["heldout"] if "inside" in r]
    report["coverage"] = {"windows_fitted": len(rows), "inside": sum(r["inside"] for r in rows)}
    json.dump(report, sys.stdout, indent=2, default=str)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
