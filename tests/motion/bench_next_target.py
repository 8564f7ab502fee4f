"""Per-call time of Trajectory.next_target (run by hand; not a test: the VM is too noisy to assert on).

cd /work/main && PYTHONPATH=src python tests/motion/bench_next_target.py
"""

from __future__ import annotations

import gc
import statistics
import time

import numpy as np

from softrt.motion import MotionConfig, Trajectory, motion_impact


def bench(axes: int, shape: str, calls: int = 200_000, repeats: int = 7) -> None:
    traj = Trajectory(MotionConfig(axes=axes, shape=shape), 250_000)
    f = traj.next_target
    for _ in range(10_000):
        f()
    gc.disable()
    try:
        per_call = []
        for _ in range(repeats):
            t0 = time.perf_counter_ns()
            for _ in range(calls):
                f()
            per_call.append((time.perf_counter_ns() - t0) / calls)
        single = np.empty(100_000, dtype=np.int64)
        now = time.perf_counter_ns
        for i in range(single.size):
            a = now()
            f()
            single[i] = now() - a
    finally:
        gc.enable()
    print(
        f"axes={axes:3d} {shape:9s}: {min(per_call):5.0f} ns/call best of {repeats}, "
        f"median {statistics.median(per_call):5.0f} ns | single calls (incl. ~40 ns clock): "
        f"p50 {np.percentile(single, 50):.0f}, p99 {np.percentile(single, 99):.0f}, "
        f"p99.9 {np.percentile(single, 99.9):.0f}, max {single.max()} ns"
    )


def bench_analysis() -> None:
    traj = Trajectory(MotionConfig(axes=64), 250_000)
    n = 15_000_000
    t0 = time.perf_counter()
    traj.positions(np.arange(n))
    t1 = time.perf_counter()
    rng = np.random.default_rng(1)
    steps = 1 + (rng.random(n) < 1e-4) * rng.integers(1, 20, n)
    window = np.cumsum(steps)
    t2 = time.perf_counter()
    motion_impact(window, traj)
    t3 = time.perf_counter()
    print(f"positions() on {n:,} samples: {t1 - t0:.2f} s; motion_impact on {n:,} writes: {t3 - t2:.2f} s")


if __name__ == "__main__":
    for axes in (1, 64):
        for shape in ("scurve", "trapezoid"):
            bench(axes, shape)
    bench_analysis()
