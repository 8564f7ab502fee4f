"""The simulated ESC's distributed clock, in process with a fake clock: drift, the time control loop
after the master's FRMW distribution, 0x092C, SYNC0 (no network)."""

from __future__ import annotations

import struct

import pytest

from softrt.ecatsim.bus import HOP_DELAY_NS, Segment
from softrt.ecatsim.dc import DcClock, Sync0Watch
from softrt.ecatsim.esc import Esc
from softrt.ecatsim.replies import sync0_counts
from softrt.ethercat.dc import decode_diff
from softrt.ethercat.description import csp_drive
from softrt.ethercat.wire import Cmd, encode_frame, parse_frame

MS = 1_000_000


class FakeClock:
    def __init__(self) -> None:
        self.now = 10**12

    def __call__(self) -> int:
        return self.now


def test_clock_drifts_and_the_loop_pulls_it_back():
    t0 = 0
    ref = DcClock(0, t0, drift_ppm=0)
    slave = DcClock(0, t0, drift_ppm=100)
    assert slave.local(t0 + 1_000 * MS) - ref.local(t0 + 1_000 * MS) == 100_000  # 100 µs a second
    diffs = []
    for k in range(1, 20_001):  # the master distributes the reference time every ms for 20 s
        t = t0 + k * MS
        diffs.append(slave.compare(ref.local(t) & 0xFFFF_FFFF, t, 0, 0))
    peak = max(abs(d) for d in diffs)
    assert 10_000 < peak < 100_000  # tens of µs while the loop catches up (tau 0.41 s)
    assert abs(diffs[-1]) < 100  # settled
    assert slave.correction_ppb == pytest.approx(-100_000, rel=0.01)  # it learned its quartz's error
    assert abs(slave.diff_mean_ns - diffs[-1]) < 100


def test_diff_register_sign_and_filter_reset():
    c = DcClock(0, 0)
    c.compare(5_000, 0, 0, 0)  # received 5 µs ahead of the local copy: behind
    assert decode_diff(c.diff_register) < 0 and c.diff_register & 0x8000_0000
    c.reset_filters(0x1000, 0)
    assert c.diff_register == 0 and c.correction_ppb == 0
    c.compare(0, 0, 7_000, 2_000)  # local + offset - delay = 5 µs ahead
    assert decode_diff(c.diff_register) > 0


def test_correction_is_bounded():
    c = DcClock(0, 0)
    c.compare(0, 0, 10**9, 0)  # a second ahead
    assert c.correction_ppb == -787_401


def test_sync0_watch_counts_missing_and_doubled_cycles():
    w = Sync0Watch()
    start, cyc = 1_000_000, 250_000
    for t in (start + 10_000, start + cyc + 20_000, start + 3 * cyc + 5_000, start + 3 * cyc + 7_000):
        w.frame(t, start, cyc)
    d = sync0_counts(w).to_dict()
    assert d["frames"] == 4 and d["cycles_without_frame"] == 1 and d["frames_in_same_cycle"] == 1
    assert d["phase_us"]["min"] == 5 and d["phase_us"]["max"] == 20
    w.frame(start - 1, start, cyc)  # before the start: not counted
    assert w.frames == 4


def _frmw_frame(ref_address: int) -> bytearray:
    return encode_frame([(Cmd.FRMW, 1, ref_address, 0x0910, bytes(8))])


def test_frmw_distribution_through_the_bus():
    clock = FakeClock()
    escs = [Esc(csp_drive(), i, None, clock=clock, last=i == 2, drift_ppm=d) for i, d in enumerate((0, 50, 0))]
    seg = Segment(escs, clock=clock)
    for i, esc in enumerate(escs):
        esc.write(0x0010, struct.pack("<H", 0x1001 + i))
        # Offsets as a master sets them (system time = reference's) and the propagation delays.
        esc.write(0x0920, struct.pack("<q", escs[0].local_time_ns(clock.now) - esc.local_time_ns(clock.now)))
        esc.write(0x0928, struct.pack("<I", i * HOP_DELAY_NS))
    for _ in range(3000):
        clock.now += MS
        frame = _frmw_frame(0x1001)
        seg.process(frame)
    ref_time = struct.unpack_from("<Q", frame, parse_frame(frame)[0].data_offset)[0]
    assert ref_time == escs[0].dc.system_time(clock.now)  # the reference's time, read as the frame passed
    d1 = decode_diff(struct.unpack("<I", escs[1].read(0x092C, 4))[0])
    d2 = decode_diff(struct.unpack("<I", escs[2].read(0x092C, 4))[0])
    assert abs(d1) > 1000 and abs(d2) < 50  # the drifting slave shows it, the true one does not
    assert escs[1].dc.clock.correction_ppb < -20_000


def test_sync0_start_reads_back_as_the_next_pulse():
    clock = FakeClock()
    esc = Esc(csp_drive(), 0, None, clock=clock)
    now = esc.dc.system_time(clock.now)
    start = now + 100 * MS
    esc.write(0x09A0, struct.pack("<I", MS))
    esc.write(0x0990, struct.pack("<Q", start))
    esc.write(0x0981, bytes([0x03]))
    assert struct.unpack("<Q", esc.read(0x0990, 8))[0] == start  # not started yet: the start
    clock.now += 100 * MS + 300_000
    assert struct.unpack("<Q", esc.read(0x0990, 8))[0] == start + MS  # then the next pulse
