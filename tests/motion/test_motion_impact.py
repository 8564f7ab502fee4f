"""Motion impact of missed board cycles, on synthetic write records."""

from __future__ import annotations

import json
import tracemalloc

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import softrt.motion.impact as impact_mod
from softrt.errors import ConfigError
from softrt.motion import MotionConfig, Trajectory, motion_impact, motion_trace
from softrt.motion.impact import MotionImpactStream
from softrt.schema.summary import Motion

PERIOD_NS = 250_000
DT = PERIOD_NS / 1e9
V = 200_000.0  # default velocity limit
W0 = 1_000  # first board cycle of the synthetic records
CRUISE = 1_000  # sample 1000 = 0.25 s: constant velocity in the default move (0.15-0.5 s)


def _window(n_writes: int, misses: dict[int, int] | None = None) -> np.ndarray:
    """Board cycles of n_writes writes; misses {write index: board cycles skipped before it}."""
    step = np.ones(n_writes, dtype=np.int64)
    step[0] = W0
    for i, k in (misses or {}).items():
        step[i] += k
    return np.cumsum(step)


def _reference(window: np.ndarray, traj: Trajectory) -> dict:
    """Straightforward per-cycle model, written independently of the module's block logic."""
    w = [int(x) for x in window]
    w0 = w[0]
    cycles = range(w0, w[-1] + 1)
    delivered, i = [], -1
    for k in cycles:
        while i + 1 < len(w) and w[i + 1] <= k:
            i += 1
        delivered.append(i)
    delivered = np.array(delivered)
    commanded = np.arange(len(delivered))
    p_del, p_cmd = traj.positions(delivered), traj.positions(commanded)
    dev = np.abs(p_del - p_cmd)
    v_del, v_cmd = np.diff(p_del) / DT, np.diff(p_cmd) / DT
    written = set(w)
    runs, run = [], 0
    for k in cycles:
        run = 0 if k in written else run + 1
        runs.append(run)
    return {
        "missed": sum(1 for k in cycles if k not in written),
        "longest": max(runs),
        "max_dev": dev.max(),
        "worst": w0 + int(np.argmax(dev)),
        "step": np.abs(np.diff(v_del)).max() if v_del.size > 1 else 0.0,
        "cmd_step": np.abs(np.diff(v_cmd)).max() if v_cmd.size > 1 else 0.0,
        "lag": int(commanded[-1] - delivered[-1]),
        "dev": p_del - p_cmd,
    }


def test_no_misses_means_no_deviation():
    traj = Trajectory(MotionConfig(), PERIOD_NS)
    r = motion_impact(_window(3 * traj.cycle_samples), traj)
    assert (r.missed_updates, r.longest_miss_run_cycles, r.final_lag_cycles) == (0, 0, 0)
    assert r.max_deviation_counts == 0.0 and r.max_run_deviation_counts == 0.0
    assert r.max_velocity_step_counts_per_s == r.commanded_max_velocity_step_counts_per_s
    # the commanded profile changes velocity by about amax * period per cycle at most
    assert 0.9 * 2e6 * DT <= r.commanded_max_velocity_step_counts_per_s <= 2e6 * DT * (1 + 1e-6)
    assert r.first_cycle == W0 and r.board_cycles == r.writes == 3 * traj.cycle_samples


def test_single_miss_at_constant_velocity():
    traj = Trajectory(MotionConfig(), PERIOD_NS)
    w = _window(4000, {CRUISE: 1})  # write 1000 lands one board cycle late
    r = motion_impact(w, traj)
    assert (r.missed_updates, r.longest_miss_run_cycles, r.final_lag_cycles) == (1, 1, 1)
    assert r.max_deviation_counts == pytest.approx(V * DT, rel=1e-6)  # 50 counts
    assert r.max_run_deviation_counts == pytest.approx(V * DT, rel=1e-6)
    # the deviation starts in the cycle that repeated sample 999 and lasts the rest of the cruise
    # (equal up to rounding, so the reported maximum may be any of those cycles)
    assert W0 + CRUISE <= r.worst_deviation_cycle < W0 + 2000
    tr = motion_trace(w, traj, center_cycle=W0 + CRUISE, half_width_cycles=2)
    dev = tr.delivered_position_counts - tr.commanded_position_counts
    assert dev[:2].tolist() == [0.0, 0.0]
    assert np.allclose(dev[2:], -V * DT, rtol=1e-6)
    assert r.worst_run_cycle == W0 + CRUISE
    assert r.max_velocity_step_counts_per_s == pytest.approx(V, rel=1e-6)  # stop for one cycle
    assert r.worst_velocity_step_cycle == W0 + CRUISE
    assert r.commanded_max_velocity_step_counts_per_s < 0.01 * V


def test_consecutive_misses_and_resynchronisation():
    traj = Trajectory(MotionConfig(), PERIOD_NS)
    w = _window(8000, {CRUISE: 5, 1500: 1, 1700: 2})
    r = motion_impact(w, traj)
    assert r.missed_updates == 8
    assert r.longest_miss_run_cycles == 5
    assert r.final_lag_cycles == 8
    assert r.max_run_deviation_counts == pytest.approx(5 * V * DT, rel=1e-6)  # the 5-cycle hold
    assert r.worst_run_cycle == W0 + CRUISE + 4  # the last of the five held cycles
    # against the wall-clock schedule the lag adds up: 8 cycles at full speed
    assert r.max_deviation_counts == pytest.approx(8 * V * DT, rel=1e-6)
    # after the burst the board is updated every cycle again: the deviation stays at the
    # 5-cycle lag (it does not grow), the delivered velocity is the profile's again, and
    # once both are dwelling at the end of the move the deviation is zero
    ref = _reference(w, traj)["dev"]
    after = slice(CRUISE + 6, 1500)
    assert np.allclose(ref[after], -5 * V * DT, rtol=1e-6)
    tr = motion_trace(w, traj, center_cycle=W0 + 1200, half_width_cycles=100)
    assert np.allclose(tr.delivered_velocity_counts_per_s, V, rtol=1e-6)
    assert np.allclose(tr.delivered_position_counts - tr.commanded_position_counts, -5 * V * DT, rtol=1e-6)
    dwell = slice(3000, 4500)  # 0.75-1.125 s: both commanded and delivered are at D
    assert np.all(ref[dwell] == 0.0)


@pytest.mark.parametrize("shape", ["scurve", "trapezoid"])
def test_random_misses_match_the_reference_model(shape, monkeypatch):
    # small blocks so that runs of misses straddle block edges
    monkeypatch.setattr(impact_mod, "_BLOCK", 997)
    traj = Trajectory(MotionConfig(shape=shape, dwell_s=0.05), PERIOD_NS)
    rng = np.random.default_rng(11)
    n = 12_000
    skips = np.where(rng.random(n) < 0.01, rng.integers(1, 30, n), 0)
    skips[:995] = 0
    skips[990] = 25  # board cycles 990-1014 (relative) missed: across the block edge at 997
    w = _window(n, {i: int(s) for i, s in enumerate(skips) if s})
    assert (w[989] - W0) < 997 < (w[990] - W0)
    ref = _reference(w, traj)
    r = motion_impact(w, traj)
    assert r.missed_updates == ref["missed"] == int(skips.sum())
    assert r.longest_miss_run_cycles == ref["longest"] == int(skips.max())
    assert r.final_lag_cycles == ref["lag"]
    assert r.max_deviation_counts == ref["max_dev"]
    assert r.worst_deviation_cycle == ref["worst"]
    assert r.max_velocity_step_counts_per_s == pytest.approx(ref["step"], rel=1e-12)
    assert r.commanded_max_velocity_step_counts_per_s == pytest.approx(ref["cmd_step"], rel=1e-12)
    monkeypatch.setattr(impact_mod, "_BLOCK", 1 << 20)
    assert motion_impact(w, traj) == r  # block size does not change the answer


def test_multi_axis_and_config_input():
    cfg = MotionConfig(axes=64)
    w = _window(4000, {CRUISE: 3})
    r64 = motion_impact(w, cfg, period_ns=PERIOD_NS)
    r1 = motion_impact(w, Trajectory(MotionConfig(), PERIOD_NS))
    assert r64.axes == 64 and r64.worst_axis == 0 and r64.lead_axis == 0
    assert r64.max_deviation_counts == r1.max_deviation_counts
    assert r64.worst_axis_max_deviation_counts == r64.max_deviation_counts
    assert motion_impact(w, Trajectory(cfg, PERIOD_NS)) == r64


def test_two_writes_in_one_cycle_latch_the_later():
    traj = Trajectory(MotionConfig(), PERIOD_NS)
    # write 1000 is two cycles late, write 1001 lands in the same cycle (the host caught up one)
    w = _window(3000, {CRUISE: 2, CRUISE + 1: -1})
    assert w[CRUISE + 1] == w[CRUISE]
    r = motion_impact(w, traj)
    ref = _reference(w, traj)
    assert r.missed_updates == ref["missed"] == 2
    assert r.final_lag_cycles == ref["lag"] == 1
    assert r.max_deviation_counts == ref["max_dev"]


def test_to_dict_is_plain_json():
    traj = Trajectory(MotionConfig(), PERIOD_NS)
    r = motion_impact(_window(3000, {CRUISE: 2}), traj)
    d = r.to_dict()
    assert set(d) == set(Motion.__dataclass_fields__) - {"not_computed", "extra", "nulls", "order"}
    assert all(type(v) in (int, float) for v in d.values())
    assert json.loads(json.dumps(d)) == d


def test_trace_around_the_worst_deviation():
    traj = Trajectory(MotionConfig(), PERIOD_NS)
    w = _window(3000, {CRUISE: 4})
    r = motion_impact(w, traj)
    tr = motion_trace(w, traj, half_width_cycles=20)
    assert tr.center_cycle == r.worst_deviation_cycle
    assert tr.board_cycle.size == 41 and tr.board_cycle[20] == tr.center_cycle
    dev = np.abs(tr.delivered_position_counts - tr.commanded_position_counts)
    assert dev.max() == r.max_deviation_counts
    assert np.array_equal(tr.commanded_position_counts, traj.positions(tr.commanded_sample))
    held = tr.delivered_sample[(tr.board_cycle >= W0 + CRUISE) & (tr.board_cycle < W0 + CRUISE + 4)]
    assert np.all(held == CRUISE - 1)  # the board repeats sample 999 for four cycles
    assert np.nanmin(tr.delivered_velocity_counts_per_s) == 0.0
    # at the start of the record the velocity is unknown (NaN)
    start = motion_trace(w, traj, center_cycle=W0, half_width_cycles=3)
    assert start.board_cycle.size == 4 and np.isnan(start.commanded_velocity_counts_per_s[0])
    with pytest.raises(ConfigError):
        motion_trace(w, traj, center_cycle=W0 - 1)


@pytest.mark.parametrize(
    "window",
    [
        np.array([], dtype=np.int64),
        np.array([5, 4, 6]),
        np.array([1.0, 2.0]),
        np.zeros((2, 2), dtype=np.int64),
    ],
)
def test_bad_records(window):
    with pytest.raises(ConfigError):
        motion_impact(window, Trajectory(MotionConfig(), PERIOD_NS))


def test_bad_motion_argument():
    w = _window(10)
    with pytest.raises(ConfigError, match="period"):
        motion_impact(w, MotionConfig())
    with pytest.raises(ConfigError, match="period"):
        motion_impact(w, Trajectory(MotionConfig(), PERIOD_NS), period_ns=1_000_000)
    with pytest.raises(ConfigError):
        motion_impact(w, "scurve")


def test_single_write():
    r = motion_impact(np.array([7]), Trajectory(MotionConfig(), PERIOD_NS))
    assert r.board_cycles == 1 and r.missed_updates == 0 and r.max_velocity_step_counts_per_s == 0.0


def test_fifteen_million_cycles_fit_in_memory():
    """An hour at 250 µs: correct counts, and well under 1 GB of numpy memory."""
    n = 15_000_000
    rng = np.random.default_rng(3)
    steps = np.ones(n, dtype=np.int64)
    hit = rng.choice(n - 1, 500, replace=False) + 1
    steps[hit] += rng.integers(1, 40, hit.size)
    steps[0] = W0
    w = np.cumsum(steps)
    del steps
    traj = Trajectory(MotionConfig(axes=64), PERIOD_NS)
    tracemalloc.start()
    try:
        r = motion_impact(w, traj)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 600 * 2**20
    assert r.missed_updates == int(w[-1] - w[0] + 1 - n)
    assert r.longest_miss_run_cycles == int(np.diff(w).max() - 1)
    assert r.max_velocity_step_counts_per_s == pytest.approx(V, rel=1e-6)  # some miss hit a cruise


@pytest.mark.parametrize("block", [1, 2, 7])
def test_block_edges_do_not_change_the_answer(block, monkeypatch):
    """Tiny blocks: every carried value (delivered sample, position, velocity) is exercised."""
    traj = Trajectory(MotionConfig(shape="trapezoid", dwell_s=0.01), PERIOD_NS)
    w = _window(2500, {300: 3, 700: 1, 701: 2, 1500: 9})
    whole = motion_impact(w, traj)
    monkeypatch.setattr(impact_mod, "_BLOCK", block)
    assert motion_impact(w, traj) == whole


@settings(max_examples=40, deadline=None)
@given(
    cuts=st.lists(st.integers(0, 2_500), max_size=10),
    misses=st.dictionaries(st.integers(1, 2_499), st.integers(0, 12), max_size=12),
    twice=st.lists(st.integers(1, 2_499), max_size=3),
)
def test_streamed_in_chunks_equals_the_whole(cuts, misses, twice):
    """Fed chunk by chunk (the run's drainer), the impact is the one of the whole record, also when
    two writes share a cycle right at a chunk edge."""
    traj = Trajectory(MotionConfig(shape="trapezoid", dwell_s=0.01), PERIOD_NS)
    w = _window(2_500, misses)
    for i in twice:  # write i lands in the cycle of write i - 1 (the later one is latched)
        w[i:] -= w[i] - w[i - 1]
    edges = sorted({0, w.size, *cuts})
    stream = MotionImpactStream(traj)
    for a, b in zip(edges, edges[1:]):
        stream.add(w[a:b])
        if b < w.size:
            stream.result()  # a checkpoint on the way does not disturb the stream
    assert stream.result() == motion_impact(w, traj)


def test_stream_rejects_a_write_before_the_previous_chunk():
    stream = MotionImpactStream(Trajectory(MotionConfig(), PERIOD_NS)).add(np.array([10, 11, 12]))
    with pytest.raises(ConfigError, match="write 3"):
        stream.add(np.array([11]))
    with pytest.raises(ConfigError, match="empty"):
        MotionImpactStream(Trajectory(MotionConfig(), PERIOD_NS)).result()
