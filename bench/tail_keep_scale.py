"""The tail model's raw material and fit at the scale of a 24 h run, end to end (issue 33, item 7). Not a test.

bench/tail_scale.py (the model's own) times the fit of given data; this one feeds the stream through the keeper.

A synthetic 24 h run at 250 µs (345.6 M periods) is fed to one ``TailKeeper`` (softrt.analysis.tail_keep,
as the streaming pass feeds it) in 1 s chunks (4,000 periods): ordinary jitter plus, at a known rate, bursts
of late cycles whose peaks follow a generalized Pareto tail (ξ = -0.1, σ = 30 µs above 300 µs, 3-10
cycles a burst). Periods and times are int64 ns, as the pass keeps them. It reports:

* the keeper's cost per chunk (it runs inside the streaming pass: compare with its ~0.3 ms per call),
  how many values it holds, its final threshold and how often it rose;
* the fit of what it held (``fit_kept``: threshold choice, declustering, GPD, intervals, tests): wall
  time, and the process's peak RSS (``ru_maxrss``) — the budget is < 10 s and < 500 MB;
* the fitted ξ and cluster rate against the injected ones.

The chunks are built from a few pre-made templates with time shifted in place, so the generator costs
little; that cost is measured separately and subtracted ("keeper only").

    python bench/tail_keep_scale.py               # 24 h (~1-2 min on this VM)
    python bench/tail_keep_scale.py --hours 1 --json
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time

import numpy as np

from softrt.analysis.tail_keep import TailKeeper, fit_kept

PERIOD_NS = 250_000
CHUNK = 4_000  # 1 s
XI, SIGMA_NS, U_NS = -0.1, 30_000, 300_000
BURSTS_PER_H = 400.0


def _templates(rng: np.random.Generator, n: int = 64) -> list[np.ndarray]:
    """Chunks of periods (ns): jitter around nominal, some with a burst of late cycles."""
    out = []
    p_burst = BURSTS_PER_H / 3600  # bursts per 1 s chunk
    for _ in range(n):
        periods = PERIOD_NS + np.rint(rng.normal(0, 1_500, CHUNK) + rng.exponential(800, CHUNK)).astype(np.int64)
        out.append(periods)
    return out, p_burst


def _burst(rng: np.random.Generator) -> np.ndarray:
    size = int(rng.integers(3, 11))
    peak = U_NS + SIGMA_NS / XI * (rng.random() ** -XI - 1)  # GPD by inversion
    # The other cycles of a burst stay below U: above it, only the peaks (GPD) exceed.
    rest = np.minimum(peak * rng.uniform(0.6, 0.95, size), U_NS - 1_000)
    rest[int(rng.integers(0, size))] = peak
    return np.rint(rest).astype(np.int64)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hours", type=float, default=24.0)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    rng = np.random.default_rng(7)
    templates, p_burst = _templates(rng)
    chunks = int(args.hours * 3600)
    keeper = TailKeeper(PERIOD_NS, PERIOD_NS + 20_000)
    base_times = np.arange(CHUNK, dtype=np.int64) * PERIOD_NS
    injected = 0
    gen_s = keep_s = 0.0
    for c in range(chunks):
        t0 = time.perf_counter()
        periods = templates[c % len(templates)]
        times = base_times + c * CHUNK * PERIOD_NS
        if rng.random() < p_burst:
            periods = periods.copy()
            b = _burst(rng)
            at = int(rng.integers(0, CHUNK - b.size))
            periods[at : at + b.size] = b
            injected += 1
        t1 = time.perf_counter()
        keeper.add(periods, times)
        t2 = time.perf_counter()
        gen_s += t1 - t0
        keep_s += t2 - t1
    rss_keep_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    t0 = time.perf_counter()
    tail = fit_kept(keeper, hours=keeper.hours(PERIOD_NS), series="period_us")
    fit_s = time.perf_counter() - t0
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    at_u = fit_kept(keeper, hours=keeper.hours(PERIOD_NS), series="period_us", threshold_us=U_NS / 1e3)
    out = {
        "hours": args.hours,
        "cycles": keeper.seen,
        "chunks": chunks,
        "keeper_s": round(keep_s, 2),
        "keeper_us_per_chunk": round(keep_s / chunks * 1e6, 1),
        "generator_s": round(gen_s, 2),
        "held": keeper.held,
        "threshold_us": keeper.threshold / 1e3,
        "raised": keeper.raised,
        "peak_rss_after_keeping_mb": round(rss_keep_mb, 1),
        "fit_s": round(fit_s, 2),
        "peak_rss_after_fit_mb": round(rss_mb, 1),
        "bursts_injected_per_h": round(injected / args.hours, 1),
        "threshold_model_us": tail.threshold_us,
        "clusters": tail.clusters,
        "refused": tail.refused,
        "xi": None if tail.xi is None else [tail.xi.estimate, tail.xi.low, tail.xi.high],
        "xi_at_injected_u": None if at_u.xi is None else [at_u.xi.estimate, at_u.xi.low, at_u.xi.high],
        "clusters_per_h_at_u": None if not at_u.clusters else round(at_u.clusters / at_u.hours, 1),
        "late_rate_bound_per_h": tail.late_rate_bound_per_h,
    }
    if args.json:
        json.dump(out, sys.stdout, indent=2)
        print()
    else:
        for k, v in out.items():
            print(f"{k:>24}: {v}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
