"""The cyclic frame's freshness rules (softrt.ethercat.cyclic), over a datagram socket pair.

A thread plays the bus: it answers each frame as a segment would (inputs, working counter, the
reference clock's time), or late, twice, changed or with another frame's reply. In process and
fast; the same rules over veth against the simulator are in test_run_health.py.
"""

from __future__ import annotations

import socket
import struct
import threading

import pytest

from softrt.ethercat.cyclic import CYCLIC_INDEX, NOFRAME, CyclicFrame, ImageLayout
from softrt.ethercat.wire import Cmd, encode_frame, parse_frame, read_wkc, write_wkc

LAYOUT = ImageLayout(start=0x100, length=12, outputs={0: 0}, inputs={0: 6})
TIMEOUT_NS = 200_000_000  # generous: only what the bus does decides, never this machine's speed


class Bus(threading.Thread):
    """Answers every frame it reads by ``answer(frame) -> list of frames to send back``."""

    def __init__(self, sock: socket.socket, answer) -> None:
        super().__init__(daemon=True)
        self.sock, self.answer = sock, answer
        self.requests: list[bytearray] = []

    def run(self) -> None:
        while True:
            try:
                frame = bytearray(self.sock.recv(2048))
            except OSError:
                return
            self.requests.append(bytes(frame))
            try:
                for reply in self.answer(frame):
                    self.sock.send(reply)
            except OSError:  # the test ended and closed the socket while a reply was going out
                return


def segment(frame: bytearray) -> bytearray:
    """What a segment does to softrt's frame: inputs and WKC 3 into the LRW, a time into the FRMW."""
    out = bytearray(frame)
    nop, lrw, *rest = parse_frame(out)
    out[lrw.data_offset + 6 : lrw.data_offset + 12] = b"INPUTS"
    write_wkc(out, lrw, 3)
    for dg in rest:
        out[dg.data_offset : dg.data_offset + 8] = struct.pack("<Q", 123_456_789)
        write_wkc(out, dg, 1)
    return out


@pytest.fixture
def wire():
    """``start(answer)`` → a CyclicFrame whose bus answers with *answer*."""
    socks = []

    def start(answer, dc_reference=0x1001):
        master, bus = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
        socks.extend((master, bus))
        Bus(bus, answer).start()
        return CyclicFrame(master, LAYOUT, dc_reference)

    yield start
    for s in socks:
        s.close()


def test_the_frame_carries_its_number_and_takes_its_own_reply(wire):
    frame = wire(lambda f: [segment(f)])
    nop, lrw, frmw = parse_frame(frame.tx)
    assert [(d.cmd, d.idx) for d in (nop, lrw, frmw)] == [
        (Cmd.NOP, CYCLIC_INDEX),
        (Cmd.LRW, CYCLIC_INDEX),
        (Cmd.FRMW, CYCLIC_INDEX),
    ]
    assert (lrw.logical_address, lrw.length, frmw.adp, frmw.ado) == (0x100, 12, 0x1001, 0x0910)
    frame.tx[frame.data_at : frame.data_at + 6] = b"OUTPUT"
    for n in (1, 2, 3):
        assert frame.exchange(TIMEOUT_NS) == 3
        assert struct.unpack_from("<Q", frame.rx, nop.data_offset)[0] == frame.seq == n
        assert frame.rx[frame.data_at + 6 : frame.data_at + 12] == b"INPUTS"
        assert frame.rtt_ns > 0 and frame.dc_time == 123_456_789
    assert frame.report().to_dict() == {
        "sent": 3,
        "answered": 3,
        "unanswered": 0,
        "late": 0,
        "late_rtt_us": None,
        "duplicates": 0,
        "bad": {},
        "foreign": 0,
        "send_errors": 0,
    }


def test_a_reply_for_an_earlier_frame_is_late_never_the_answer():
    """The bus answers each frame with the reply to the frame 16 before it (SOEM's 16 indexes
    wrap there, and SOEM took such a reply for the current frame's)."""
    master, bus = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    held: list[bytearray] = []

    def sixteen_late(f):
        held.append(segment(f))
        return [held.pop(0)] if len(held) > 16 else []

    Bus(bus, sixteen_late).start()
    frame = CyclicFrame(master, LAYOUT, 0x1001)
    try:
        results = [frame.exchange(2_000_000) for _ in range(40)]
        frame.drain()
    finally:
        master.close()
        bus.close()
    assert results == [NOFRAME] * 40
    r = frame.report().to_dict()
    assert r["answered"] == 0 and r["unanswered"] == 40 and r["late"] >= 22  # 24 sent back, the last may be in flight
    assert r["late_rtt_us"]["min"] > 0
    assert frame.rtt_ns == 0  # no round trip from a frame not proven fresh


@pytest.mark.parametrize(
    "change, kind",
    [
        (lambda f, lrw: f.__setitem__(lrw.header_offset, Cmd.LRD), "command"),
        (lambda f, lrw: f.__setitem__(lrw.header_offset + 6, f[lrw.header_offset + 6] - 2), "length"),
        (lambda f, lrw: f.__setitem__(lrw.header_offset + 2, f[lrw.header_offset + 2] + 1), "address"),
        (lambda f, lrw: f.__setitem__(lrw.header_offset + 1, 0x05), "index"),
    ],
)
def test_a_changed_reply_is_bad_by_kind_never_accepted(wire, change, kind):
    def changed(f):
        out = segment(f)
        change(out, parse_frame(out)[1])
        return [out]

    frame = wire(changed)
    assert frame.exchange(20_000_000) == NOFRAME
    assert frame.report().to_dict()["bad"] == {kind: 1}


def test_short_duplicate_foreign_and_unsent_frames(wire):
    answers = iter(
        [
            lambda f: [segment(f)[:30]],  # cut short
            lambda f: [segment(f), segment(f)],  # answered twice: the copy is a duplicate
            lambda f: [encode_frame([(Cmd.BRD, 3, 0, 0x130, bytes(2))]), segment(f)],  # SOEM's own, then ours
            lambda f: [_renumbered(segment(f), 99)],  # a number never sent
        ]
    )
    frame = wire(lambda f: next(answers)(f))
    assert frame.exchange(20_000_000) == NOFRAME
    assert frame.exchange(TIMEOUT_NS) == 3
    assert frame.exchange(TIMEOUT_NS) == 3
    assert frame.exchange(20_000_000) == NOFRAME
    r = frame.report().to_dict()
    assert r["bad"] == {"short": 1, "tag": 1} and r["duplicates"] == 1 and r["foreign"] == 1
    assert (r["answered"], r["unanswered"]) == (2, 2)


def test_a_send_that_fails_is_an_unanswered_frame(wire):
    frame = wire(lambda f: [segment(f)])
    frame._link.close()
    assert frame.exchange(TIMEOUT_NS) == NOFRAME
    r = frame.report().to_dict()
    assert (r["sent"], r["unanswered"], r["send_errors"]) == (0, 1, 1)


def _renumbered(reply: bytearray, tag: int) -> bytearray:
    nop = parse_frame(reply)[0]
    struct.pack_into("<Q", reply, nop.data_offset, tag)
    return reply


def test_without_dc_there_is_no_frmw(wire):
    frame = wire(lambda f: [segment(f)], dc_reference=None)
    assert [d.cmd for d in parse_frame(frame.tx)] == [Cmd.NOP, Cmd.LRW]
    assert frame.exchange(TIMEOUT_NS) == 3 and read_wkc(frame.rx, parse_frame(frame.rx)[1]) == 3


def test_our_own_frame_read_back_is_an_echo_never_the_answer(wire):
    """A capture that taps the send path (pcap without a direction filter) reads the frame back as it went out:
    its number is this cycle's, its working counter 0. It must not stand for the bus's answer that follows."""
    frame = wire(lambda f: [bytearray(f), segment(f)])
    assert frame.exchange(TIMEOUT_NS) == 3
    r = frame.report().to_dict()
    assert r["bad"] == {"echo": 1} and (r["answered"], r["duplicates"]) == (1, 0)
