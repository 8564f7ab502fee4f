"""What the tail model costs at scale (issue 33: "the tail of a 24 h run is computed in under 10 s and
under 500 MB"). Not a test.

(a) every cycle of a run given: ``--all-minutes`` of 250 µs cycles (default 20 min = 4.8 M values);
(b) a 24 h run (345.6 M cycles) of which the streaming pass kept the cycles above a low running
    threshold, ``--kept`` of them (default 1 %, 3.5 M values), with their times.
Both: 20 µs + Exp(4 µs) per cycle, plus 3-10-cycle bursts (2,000 an hour) whose peaks are
100 µs + GPD(0.1, 15 µs). Prints the wall time of ``fit_tail``, the memory it allocated at its peak (tracemalloc, which
numpy reports to) and the whole process's peak RSS (with the synthetic data).

    PYTHONPATH=src python bench/tail_scale.py
"""

from __future__ import annotations

import argparse
import resource
import time
import tracemalloc

import numpy as np

from softrt.analysis.tail import fit_tail
from softrt.analysis.tail_tests import sample_gpd

PERIOD_S = 250e-6


def _bursts(rng, cycles, hours, values_at):
    starts = np.sort(rng.choice(cycles - 16, rng.poisson(2000 * hours), replace=False))
    lengths = rng.integers(3, 11, starts.size)
    peaks = 100 + sample_gpd(rng, 0.1, 15.0, (starts.size,))
    idx = np.concatenate([s + np.arange(n) for s, n in zip(starts, lengths)])
    return idx, np.repeat(peaks, lengths) * np.concatenate([np.r_[1.0, rng.uniform(0.5, 1, n - 1)] for n in lengths])


def run_all(minutes: float) -> None:
    rng = np.random.default_rng(1)
    cycles = int(minutes * 60 / PERIOD_S)
    values = 20 + rng.exponential(4.0, cycles)
    idx, burst = _bursts(rng, cycles, minutes / 60, None)
    values[idx] = np.maximum(values[idx], burst)
    times = np.arange(cycles) * PERIOD_S
    tracemalloc.start()
    start = time.perf_counter()
    tail = fit_tail(values, times, deadline_us=270.0)
    _report(f"(a) all {cycles:,} cycles of {minutes:g} min", time.perf_counter() - start, tail)


def run_kept(hours: float, kept: float) -> None:
    rng = np.random.default_rng(2)
    cycles = int(hours * 3600 / PERIOD_S)
    n = rng.binomial(cycles, kept)
    idx = np.sort(rng.choice(cycles, n, replace=False)) if n < 5e6 else np.unique(rng.integers(0, cycles, n))
    low = 20 + 4.0 * np.log(1 / kept)  # the running keep-threshold: Exp(4)'s (1 - kept) quantile
    values = low + rng.exponential(4.0, idx.size)
    b_idx, burst = _bursts(rng, cycles, hours, None)
    idx = np.r_[idx, b_idx]
    values = np.r_[values, burst]
    order = np.argsort(idx, kind="stable")
    idx, values = idx[order], values[order]
    times = idx * PERIOD_S
    tracemalloc.start()
    start = time.perf_counter()
    tail = fit_tail(values, times, deadline_us=270.0, hours=hours, cycles=cycles)
    _report(f"(b) {hours:g} h, {cycles:,} cycles, {values.size:,} kept", time.perf_counter() - start, tail)


def _report(what: str, seconds: float, tail) -> None:
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    fit_mb = tracemalloc.get_traced_memory()[1] / 2**20  # what fit_tail allocated at its peak
    tracemalloc.stop()
    xi = tail.xi
    shown = f"ξ = {xi.estimate:+.3f} [{xi.low:+.3f}, {xi.high:+.3f}]" if xi else f"refused: {tail.refused}"
    print(
        f"{what}: fit_tail {seconds:.2f} s, {fit_mb:.0f} MB at its peak (process RSS {peak_mb:.0f} MB); u = {tail.threshold_us:.1f} µs, "
        f"{tail.clusters} clusters, θ = {tail.extremal_index}, {shown}, run_h_needed = {tail.run_h_needed}",
        flush=True,
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--all-minutes", type=float, default=20.0)
    ap.add_argument("--hours", type=float, default=24.0)
    ap.add_argument("--kept", type=float, default=0.01)
    args = ap.parse_args()
    run_all(args.all_minutes)
    run_kept(args.hours, args.kept)


if __name__ == "__main__":
    main()
