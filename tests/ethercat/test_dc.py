"""Distributed clocks, pure parts: the 0x092C code, the phase, the PI phase lock, the monitor's
figures fed with a known DC time (no network)."""

from __future__ import annotations

import random
import socket

import numpy as np
import pytest

from softrt.ethercat.dc import PhaseLock, decode_diff, encode_diff, phase_error
from softrt.ethercat.dcmonitor import DcMonitor, DcOptions, DiffProbe, _SlaveDiff
from softrt.ethercat.nsstat import NsStat
from softrt.ethercat.rawsock import INDEX_OFFSET, index_filter
from softrt.ethercat.wire import Cmd, encode_frame, parse_frame, write_wkc


def test_0x092c_is_sign_and_magnitude():
    # Bit 31 set: the slave's copy is behind the received time (ESC datasheet II, 0x092C).
    assert decode_diff(0x0000_0064) == 100
    assert decode_diff(0x8000_0064) == -100
    assert decode_diff(0x8000_0000) == 0
    assert decode_diff(0xFFFF_FFFF) == -(2**31 - 1)  # not two's complement (that would be -1)
    for v in (0, 1, -1, 12_345, -987_654, 2**31 - 1, -(2**31 - 1)):
        assert decode_diff(encode_diff(v)) == v
    assert encode_diff(-5) == 0x8000_0005
    assert encode_diff(2**40) == 0x7FFF_FFFF  # saturates


def test_phase_error_wraps_to_half_a_cycle():
    period, sync0 = 1_000_000, 5_000_000_000
    assert phase_error(sync0 + 3 * period + 100, sync0, period) == 100
    assert phase_error(sync0 + 3 * period - 100, sync0, period) == -100
    assert phase_error(sync0 + period // 2, sync0, period) == -period // 2  # [-P/2, P/2)
    # With a shift the target moves: 300 µs after SYNC0 is then "on time".
    assert phase_error(sync0 + 7 * period + 300_000, sync0, period, 300_000) == 0
    assert phase_error(sync0 + 7 * period + 250_000, sync0, period, 300_000) == -50_000
    assert phase_error(sync0 - 7 * period - 250_000, sync0, period, -250_000) == 0


def _plant(
    lock: PhaseLock, period: int, drift_ppm: float, start_error: int, cycles: int, jitter_ns: int = 0, seed: int = 1
) -> list[int]:
    """The phase the lock sees, cycle by cycle: the frame's DC time runs drift_ppm fast, and each edge
    move shifts the next frame by as much (plus random wake-up jitter)."""
    rng = random.Random(seed)
    true_phase = start_error
    seen = []
    for _ in range(cycles):
        e = true_phase + (rng.randint(0, jitter_ns) if jitter_ns else 0)
        e = (e + period // 2) % period - period // 2
        seen.append(e)
        true_phase += int(period * drift_ppm / 1e6) + lock.update(e)
    return seen


def test_phase_lock_converges_and_learns_the_drift():
    period = 1_000_000
    lock = PhaseLock(period)
    seen = _plant(lock, period, drift_ppm=300, start_error=400_000, cycles=3000)
    # Slewed at the bounded step first (400 µs at 10 µs a cycle), then settled: no drift left.
    assert all(abs(a - b) <= lock.max_step_ns + 300 for a, b in zip(seen, seen[1:40]))
    assert max(abs(e) for e in seen[-1000:]) <= 2
    # the integral holds the drift: the host's cycle shortened by 300 ppm of the period
    assert lock.integral_ns / period * 1e6 == pytest.approx(300, rel=0.01)


def test_phase_lock_filters_jitter_and_holds_on_lost_frames():
    period = 250_000
    lock = PhaseLock(period)
    seen = _plant(lock, period, drift_ppm=-50, start_error=-100_000, cycles=4000, jitter_ns=20_000)
    late = np.abs(np.array(seen[-2000:]))
    early = np.abs(np.array(seen[:100]))
    assert late.mean() < early.mean() / 4
    # A lost frame keeps following the drift the integral learned (and never more than a step).
    assert lock.hold() == pytest.approx(-lock.integral_ns, abs=1)
    big = PhaseLock(period, max_step_ns=10)
    big.integral_ns = 1e6
    assert big.hold() == -10


def test_phase_lock_clamps_without_winding_up():
    lock = PhaseLock(1_000_000)
    assert lock.update(400_000) == -lock.max_step_ns
    assert lock.integral_ns == 0  # clamped: not integrated
    assert lock.update(-400_000) == lock.max_step_ns
    assert lock.update(1000) == -round(0.05 * 1000 + lock.ki * 0)
    with pytest.raises(ValueError):
        PhaseLock(1000, kp=1.5)


def test_abs_stat_percentiles_within_the_histogram_bound():
    rng = np.random.default_rng(3)
    values = rng.integers(-80_000, 80_000, 5000)
    stat = NsStat()
    for v in values.tolist():
        stat.add(v)
    a = np.abs(values)
    got = stat.summary()
    assert got.min == a.min() and got.max == a.max()
    assert got.mean == pytest.approx(a.mean(), abs=0.1)
    assert got.p99 == pytest.approx(np.percentile(a, 99), rel=2e-3)
    assert NsStat().summary() is None


def test_monitor_phase_rate_and_series():
    period = 1_000_000
    sync0 = 10 * period
    mon = DcMonitor(period, sync0, (0, "ref"), None, DcOptions(), sync0_active=True)
    drift = 200e-6
    host0 = 1_000_000_000
    rng = random.Random(5)
    for k in range(3000):
        host = host0 + k * period
        delay = 20_000 + (rng.randint(0, 400_000) if k % 7 == 0 else 0)  # some frames late by up to 0.4 ms
        dc = sync0 + 40_000 + int((host - host0) * (1 + drift)) + delay
        assert mon.cycle(host, dc if k % 50 != 3 else None) == 0  # unlocked: the edge never moves
    r = mon.report().to_dict()
    # The late frames only add delay: the minimum filter recovers the rate.
    assert r["dc_vs_host_ppm"] == pytest.approx(200, abs=5)
    assert r["phase"]["n"] == 3000 - 60
    assert r["lock"] is None and r["slaves"] == []
    # Unlocked, the phase walks 200 ns a cycle: 600 µs over the run, through the wrap at +500 µs.
    series = r["phase_series"]["mean_us"]
    assert r["phase_series"]["every_cycles"] == 100 and len(series) == 30
    assert series[0] < series[10] < series[20] and series[-1] < 0
    assert r["phase"]["min_us"] >= -500 and r["phase"]["max_us"] < 500


def test_monitor_lock_moves_the_edges():
    period = 500_000
    mon = DcMonitor(period, 0, (0, "ref"), None, DcOptions(lock=True, shift_ns=-100_000), sync0_active=True)
    origin = 0  # the host's cycle origin, moved by the lock
    for k in range(4000):
        host = origin + k * period
        origin += mon.cycle(host, 7 * period + 123_456 + int(host * (1 - 80e-6)))
    r = mon.report().to_dict()
    assert r["lock"]["correction_ppm"] == pytest.approx(80, rel=0.05)  # DC slow: the host's cycle lengthened
    assert r["lock"]["last_tenth_abs_mean_us"] < 1 < r["lock"]["first_tenth_abs_mean_us"]
    assert r["target_shift_us"] == -100


def test_probe_reads_every_slave_and_matches_its_sequence():
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    a.setblocking(False)
    slaves = [_SlaveDiff(1, "s1", 0x1001), _SlaveDiff(2, "s2", 0x1002)]
    probe = DiffProbe(a, slaves)
    probe.send()
    frame = bytearray(b.recv(2048))
    dgs = parse_frame(frame)
    assert [(d.cmd, d.adp, d.ado, d.length) for d in dgs[:2]] == [
        (Cmd.FPRD, 0x1001, 0x092C, 4),
        (Cmd.FPRD, 0x1002, 0x092C, 4),
    ]
    assert frame[INDEX_OFFSET] == 0xDC and len(frame) >= 60
    # An answer: slave 1 is 1.5 µs behind; slave 2 did not answer (working counter 0).
    frame[dgs[0].data_offset : dgs[0].data_offset + 4] = encode_diff(-1500).to_bytes(4, "little")
    write_wkc(frame, dgs[0], 1)
    stale = bytearray(frame)
    stale[dgs[2].data_offset] ^= 0xFF  # another sequence number: an older probe's answer
    b.send(bytes(stale))
    b.send(bytes(frame))
    probe.send()  # collects the answer first
    assert slaves[0].stat.n == 1 and slaves[0].stat.max == 1500
    assert slaves[1].stat.n == 0 and slaves[1].unanswered == 1
    probe.collect()  # nothing came for the second probe
    assert probe.unanswered_frames == 1 and slaves[0].unanswered == 1
    a.close()
    b.close()


def test_index_filter_program():
    code = index_filter(0xDC)
    assert len(code) == 6 * 8
    frame = encode_frame([(Cmd.FPRD, 0xDC, 0x1001, 0x092C, bytes(4))])
    assert frame[INDEX_OFFSET] == 0xDC
