"""Trajectory: repeated moves, multi-axis scaling, hot path == vectorised path, no allocation."""

from __future__ import annotations

import gc
import tracemalloc

import numpy as np
import pytest

from softrt.errors import ConfigError
from softrt.motion import MotionConfig, Trajectory

PERIOD_NS = 250_000
EPS = np.finfo(np.float64).eps


def _run(traj: Trajectory, n: int) -> np.ndarray:
    if traj.axes == 1:
        return np.array([traj.next_target() for _ in range(n)])
    return np.array([traj.next_target().copy() for _ in range(n)])


CONFIGS = [
    MotionConfig(),
    MotionConfig(shape="trapezoid"),
    MotionConfig(dwell_s=0.0),  # back-to-back moves
    MotionConfig(distance_counts=7_000, dwell_s=0.013),  # short move, odd dwell
    MotionConfig(distance_counts=1.0, dwell_s=0.001),  # one count
    MotionConfig(distance_counts=20_000, velocity_counts_per_s=200_000, jerk_counts_per_s3=1e7),
]


@pytest.mark.parametrize("cfg", CONFIGS)
@pytest.mark.parametrize("period_ns", [PERIOD_NS, 333_333, 1_000_000])
def test_hot_path_equals_vectorised_bit_for_bit(cfg, period_ns):
    traj = Trajectory(cfg, period_ns)
    n = 2 * traj.cycle_samples + 17  # more than two full back-and-forth cycles
    hot = _run(traj, n)
    assert traj.sample_index == n
    vec = traj.positions(np.arange(n))
    assert np.array_equal(hot, vec)  # bit for bit, not just close


def test_far_samples_match_after_reset():
    traj = Trajectory(MotionConfig(), PERIOD_NS)
    idx = np.array([0, 1, 4599, 4600, 4601, 9199, 9200, 15_000_000, 15_000_001, 2**40 + 12_345, 123_456_789])
    vec = traj.positions(idx)
    for i, want in zip(idx, vec):
        traj.reset(int(i))
        assert traj.sample_index == i
        got = traj.next_target()
        assert got == want
        assert traj.sample_index == i + 1
    # positions keeps the input's shape
    assert traj.positions(idx.reshape(1, -1)).shape == (1, idx.size)


def test_reset_restarts_the_profile():
    traj = Trajectory(MotionConfig(), PERIOD_NS)
    first = _run(traj, 5000)
    traj.reset()
    assert traj.sample_index == 0
    assert np.array_equal(_run(traj, 5000), first)
    with pytest.raises(ConfigError):
        traj.reset(-1)


def test_single_axis_returns_a_float():
    traj = Trajectory(MotionConfig(), PERIOD_NS)
    assert type(traj.next_target()) is float


def test_repeated_back_and_forth_moves_with_dwell():
    cfg = MotionConfig()
    traj = Trajectory(cfg, PERIOD_NS)
    prof = traj.profile
    H = traj.half_cycle_samples
    period_s = PERIOD_NS / 1e9
    assert H * period_s >= prof.duration_s + cfg.dwell_s - 1e-12
    assert (H - 1) * period_s < prof.duration_s + cfg.dwell_s  # dwell stretched by < 1 period
    p = traj.positions(np.arange(3 * 2 * H + 1))
    D = cfg.distance_counts
    assert p.min() == 0.0 and p.max() == D
    for c in range(3):
        s = 2 * c * H
        assert p[s] == 0.0  # every forward move starts at 0
        assert p[s + H] == D  # every backward move starts at D
        fwd, back = p[s : s + H], p[s + H : s + 2 * H]
        assert np.all(np.diff(fwd) >= 0) and np.all(np.diff(back) <= 0)  # monotonic moves
        # the dwell at each end holds exactly the end position for at least dwell_s
        assert np.count_nonzero(fwd == D) * period_s >= cfg.dwell_s
        assert np.count_nonzero(back == 0.0) * period_s >= cfg.dwell_s
        # the move itself lasts its planned duration
        moving = np.flatnonzero(fwd != D)
        assert (moving[-1] + 1) * period_s == pytest.approx(prof.duration_s, abs=period_s)
    # back is the mirror of forth
    assert np.allclose(p[H : 2 * H], D - p[:H], rtol=0, atol=1e-9 * D)


@pytest.mark.parametrize("cfg", [MotionConfig(axes=64), MotionConfig(axes=3, shape="trapezoid", dwell_s=0.0)])
def test_sampled_motion_respects_the_limits_per_axis(cfg):
    traj = Trajectory(cfg, PERIOD_NS)
    dt = PERIOD_NS / 1e9
    p = _run(traj, 2 * traj.cycle_samples)  # (n, axes)
    k = cfg.scales()
    D = cfg.distance_counts
    v = np.abs(np.diff(p, axis=0)) / dt
    a = np.abs(np.diff(p, 2, axis=0)) / dt**2
    assert np.all(v <= k * cfg.velocity_counts_per_s * (1 + 1e-9) + 4 * EPS * D / dt)
    assert np.all(a <= k * cfg.accel_counts_per_s2 * (1 + 1e-9) + 8 * EPS * D / dt**2)
    if cfg.shape == "scurve":
        j = np.abs(np.diff(p, 3, axis=0)) / dt**3
        assert np.all(j <= k * cfg.jerk_counts_per_s3 * (1 + 1e-9) + 16 * EPS * D / dt**3)
    # the lead axis really gets close to the limits (the test above is not vacuous)
    assert v[:, 0].max() == pytest.approx(cfg.velocity_counts_per_s, rel=1e-3)


def test_multi_axis_is_a_coordinated_scaled_move():
    cfg = MotionConfig(axes=64)
    traj = Trajectory(cfg, PERIOD_NS)
    k = cfg.scales()
    first = traj.next_target()
    buf_id = id(first)
    rows = [first.copy()]
    for _ in range(3 * traj.half_cycle_samples):
        out = traj.next_target()
        assert id(out) == buf_id  # one preallocated array, every call
        rows.append(out.copy())
    p = np.array(rows)
    n = np.arange(len(rows))
    lead = Trajectory(MotionConfig(), PERIOD_NS).positions(n)
    assert np.array_equal(p[:, 0], lead)  # axis 0 is the single-axis path
    assert np.array_equal(p, k * lead[:, None])  # axis a is k_a times the lead, exactly
    for axis in (0, 1, 31, 63):
        assert np.array_equal(p[:, axis], traj.positions(n, axis))
    # all axes start and stop together
    moving = np.diff(p, axis=0) != 0
    assert np.all(moving == moving[:, :1])
    with pytest.raises(ConfigError):
        traj.positions(n, axis=64)


def test_next_target_does_not_allocate_for_64_axes():
    traj = Trajectory(MotionConfig(axes=64), PERIOD_NS)
    f = traj.next_target
    buf = f()
    for _ in range(1000):
        f()
    gc.collect()
    tracemalloc.start()
    try:
        before, _ = tracemalloc.get_traced_memory()
        for _ in range(10_000):
            out = f()
        after, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert out is buf
    assert after - before < 1024  # no growth (a leak of one float per call would be 240 kB)


def test_positions_rejects_bad_indices():
    traj = Trajectory(MotionConfig(), PERIOD_NS)
    with pytest.raises(ConfigError):
        traj.positions(np.array([0.5, 1.0]))
    with pytest.raises(ConfigError):
        traj.positions(np.array([3, -1]))
    assert traj.positions(np.array([], dtype=np.int64)).size == 0


def test_positions_on_many_indices_matches_blockwise_hot_path():
    traj = Trajectory(MotionConfig(), PERIOD_NS)
    rng = np.random.default_rng(7)
    idx = np.sort(rng.integers(0, 15_000_000, 200_000))
    vec = traj.positions(idx)
    for i in rng.choice(idx.size, 300, replace=False):
        traj.reset(int(idx[i]))
        assert traj.next_target() == vec[i]
