"""The simulator's fast path answers exactly as its general path: a frame of a layout seen before
(cached datagrams, compiled handlers, writes deferred until after the reply) gives the same reply
bytes and leaves every slave (registers, process RAM, AL state, drive, DC clock) as the general
path does, for any mix of frames; a frame whose headers change is parsed afresh."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from softrt.ecatsim.layouts import Layouts
from softrt.ecatsim.sim import Simulator
from softrt.ethercat.al import AlState
from softrt.ethercat.description import builtin
from softrt.ethercat.wire import Cmd, FrameError, encode_frame

PERIOD_NS = 250_000
REF, OTHER, THIRD = 0x1001, 0x1002, 0x1003
STATIONS = (REF, OTHER, THIRD)
#: Per slave: logical address of its outputs and of its inputs. Slave 2 takes slave 0's inputs as
#: its outputs (slave-to-slave data, legal in EtherCAT): within one LRW it writes what slave 0 read.
MAP = ((0, 16), (8, 30), (16, 44))
#: Slave 2 is a CoE drive whose receive mailbox (SM0, 128 bytes at 0x1000) is also mapped at this
#: logical address: a logical write of it is a mailbox request (a write with more than data to do).
MAILBOX_AT = 100
#: An SDO upload request of 0x1000:00 (mailbox header, CoE header, SDO: ETG.1000.6 §5.6.2).
SDO_UPLOAD = struct.pack("<HHBBHBHB4x", 10, 0, 0, 0x13, 0x2000, 0x40, 0x1000, 0).ljust(128, b"\0")


class Clock:
    def __init__(self) -> None:
        self.now = 10**12

    def __call__(self) -> int:
        return self.now


def _bring_up() -> list[bytearray]:
    """Station addresses, SM2/SM3 and FMMUs of three CSP drives (:data:`MAP`), then PRE-OP,
    SAFE-OP, OP: as a master configures them."""
    frames = [
        encode_frame([(Cmd.APWR, 0, -pos & 0xFFFF, 0x0010, struct.pack("<H", station))])
        for pos, station in enumerate(STATIONS)
    ]
    frames.append(
        encode_frame(
            [
                (Cmd.FPWR, 1, THIRD, 0x0800, struct.pack("<HHBBBB", 0x1000, 128, 0x26, 0, 1, 0)),
                (Cmd.FPWR, 2, THIRD, 0x0808, struct.pack("<HHBBBB", 0x1080, 128, 0x22, 0, 1, 0)),
                (Cmd.FPWR, 3, THIRD, 0x0620, struct.pack("<IHBBHBBB3x", MAILBOX_AT, 128, 0, 7, 0x1000, 0, 2, 1)),
            ]
        )
    )
    for station, (out_at, in_at) in zip(STATIONS, MAP):
        frames.append(
            encode_frame(
                [
                    (Cmd.FPWR, 1, station, 0x0810, struct.pack("<HHBBBB", 0x1100, 8, 0x64, 0, 1, 0)),
                    (Cmd.FPWR, 2, station, 0x0818, struct.pack("<HHBBBB", 0x1400, 14, 0x20, 0, 1, 0)),
                    (Cmd.FPWR, 3, station, 0x0600, struct.pack("<IHBBHBBB3x", out_at, 8, 0, 7, 0x1100, 0, 2, 1)),
                    (Cmd.FPWR, 4, station, 0x0610, struct.pack("<IHBBHBBB3x", in_at, 14, 0, 7, 0x1400, 0, 1, 1)),
                ]
            )
        )
    for state in (AlState.PREOP, AlState.SAFEOP, AlState.OP):
        frames.append(encode_frame([(Cmd.BWR, 5, 0, 0x0120, struct.pack("<H", state))]))
    return frames


def _outputs(cw: int, target: int) -> bytes:
    return struct.pack("<HibB", cw, target, 8, 0)


#: The cyclic frame: NOP, LRW of the process image, FRMW of the reference clock's time.
CYCLIC = [(Cmd.NOP, 0xC0, 0, 0, 8), (Cmd.LRW, 0xC0, 0, 0, 44), (Cmd.FRMW, 0xC0, REF, 0x0910, 8)]
#: What else a master sends (data drawn per frame): other logical windows, register and process
#: RAM reads, RMWs, writes that change the configuration (AL control) or the process RAM.
OTHERS = [
    (Cmd.LRD, 7, 16, 0, 42),
    (Cmd.LWR, 7, 0, 0, 24),
    (Cmd.LRW, 7, 8, 0, 16),
    (Cmd.LRW, 7, 0, 0, 58),
    (Cmd.FRMW, 8, OTHER, 0x0910, 8),
    (Cmd.FRMW, 8, 0x7777, 0x0910, 4),
    (Cmd.ARMW, 9, 0xFFFF, 0x0910, 8),
    (Cmd.FRMW, 8, 0x7777, 0x0120, 2),
    (Cmd.LWR, 7, MAILBOX_AT, 0, 128),
    (Cmd.FPRD, 1, THIRD, 0x080D, 1),
    (Cmd.FPRD, 1, REF, 0x0130, 2),
    (Cmd.FPRD, 1, THIRD, 0x092C, 4),
    (Cmd.FPRD, 1, OTHER, 0x1100, 8),
    (Cmd.BRD, 2, 0, 0x0130, 2),
    (Cmd.APRD, 3, 0xFFFF, 0x0010, 2),
    (Cmd.FPWR, 4, OTHER, 0x1100, 8),
    (Cmd.FPWR, 5, OTHER, 0x0120, 2),
    (Cmd.BWR, 6, 0, 0x0120, 2),
    (Cmd.FPRW, 6, REF, 0x0910, 8),
]


@st.composite
def _layout(draw) -> list:
    """The cyclic frame with up to two other datagrams put in, or up to four of any."""
    if draw(st.booleans()):
        layout = list(CYCLIC)
        for other in draw(st.lists(st.sampled_from(OTHERS), max_size=2)):
            layout.insert(draw(st.integers(0, len(layout))), other)
        return layout
    return draw(st.lists(st.sampled_from(CYCLIC + OTHERS), min_size=1, max_size=4))


layouts = st.lists(_layout(), min_size=1, max_size=3)


def _frame(layout, cycle: int, draw=None) -> bytearray:
    """A frame of *layout* at *cycle*, its data drawn (*draw*: Hypothesis's) or fixed."""
    datagrams = []
    for cmd, idx, adp, ado, length, *fixed in layout:
        if fixed:
            data = fixed[0]
        elif cmd == Cmd.LRW and length == 44:  # the cyclic frame: a CSP enable sequence, then motion
            cw = (0x06, 0x07, 0x0F)[min(cycle, 2)]
            data = _outputs(cw, 1000 + 3 * cycle) + _outputs(cw, 2000 + 3 * cycle) + bytes(28)
        elif ado == 0x0120:
            state = draw(st.sampled_from([AlState.PREOP, AlState.SAFEOP, AlState.OP])) if draw else AlState.PREOP
            data = struct.pack("<H", state)
        else:
            data = draw(st.binary(min_size=length, max_size=length)) if draw else bytes(range(cycle, cycle + length))
        datagrams.append((cmd, idx, adp, ado, data))
    return encode_frame(datagrams)


def _state(sim: Simulator) -> list:
    return [
        (
            bytes(e.mem),
            e.al.status,
            e.dc.clock.correction_ppb,
            e.dc.clock.diff_mean_ns,
            [(d.state, d.position, d.velocity, d.target) for d in sim.apps[e.position].drives],
        )
        for e in sim.escs
    ]


def _pair() -> tuple[Clock, Simulator, Simulator]:
    clock = Clock()
    slaves = [builtin("csp-drive"), builtin("csp-drive"), builtin("csp-drive-coe")]
    fast, general = (Simulator(slaves, clock=clock) for _ in range(2))
    for frame in _bring_up():
        _both(clock, fast, general, frame)
    assert all(e.al.state is AlState.OP for e in fast.escs)
    return clock, fast, general


def _both(clock: Clock, fast: Simulator, general: Simulator, frame: bytearray) -> tuple[bytes, bytes]:
    """Answer *frame* by the simulator's path (fast) and the general path; return both replies."""
    clock.now += PERIOD_NS
    a, b = bytearray(frame), bytearray(frame)
    size, _delay = fast.handle(a)
    fast.after_reply()
    general.segment.process(b)  # the general path: every datagram parsed and run in order
    b[6] |= 0x02
    return bytes(a[:size]), bytes(b)


@settings(max_examples=40, deadline=None)
@given(layouts, st.lists(st.integers(0, 2), min_size=1, max_size=24), st.data())
def test_fast_path_answers_and_leaves_every_slave_as_the_general_path(shapes, order, data):
    clock, fast, general = _pair()
    for cycle, pick in enumerate(order):
        frame = _frame(shapes[pick % len(shapes)], cycle, data.draw)
        reply_fast, reply_general = _both(clock, fast, general, frame)
        assert reply_fast == reply_general
        assert _state(fast) == _state(general)


#: Frames where a deferred write would show: a read of the outputs the LRW just wrote, a write
#: of them after it, the output SyncManager switched off (then on) after it, a mailbox request by
#: a logical write and its answer's SyncManager status read, the AL status an RMW (nobody at its
#: address: every slave writes) just changed, an FRMW read in the middle of the chain (the slave
#: after it writes what it read).
TRICKY = [
    [CYCLIC[0], CYCLIC[1], (Cmd.FPRD, 1, OTHER, 0x1100, 8), CYCLIC[2]],
    [CYCLIC[0], CYCLIC[1], (Cmd.FPWR, 4, OTHER, 0x1100, 8), CYCLIC[2]],
    [CYCLIC[0], CYCLIC[1], (Cmd.FPWR, 4, OTHER, 0x0816, 1), CYCLIC[2]],
    [(Cmd.LWR, 7, MAILBOX_AT, 0, 128, SDO_UPLOAD), (Cmd.FPRD, 1, THIRD, 0x080D, 1)],
    [(Cmd.FRMW, 8, 0x7777, 0x0120, 2), (Cmd.FPRD, 1, OTHER, 0x0130, 2)],
    [(Cmd.FRMW, 8, OTHER, 0x0910, 8)],
]


@pytest.mark.parametrize("layout", TRICKY)
def test_no_deferred_write_shows_in_the_frame_that_made_it(layout):
    clock, fast, general = _pair()
    for cycle in range(4):
        reply_fast, reply_general = _both(clock, fast, general, _frame(layout, cycle))
        assert reply_fast == reply_general
        assert _state(fast) == _state(general)


def test_the_cyclic_frame_is_parsed_once_and_a_changed_header_falls_back():
    clock, fast, general = _pair()
    before = fast.layouts.misses
    for cycle in range(12):
        reply_fast, reply_general = _both(clock, fast, general, _frame(CYCLIC, cycle))
        assert reply_fast == reply_general
    assert _state(fast) == _state(general)
    assert fast.layouts.misses == before + 1 and fast.layouts.hits >= 11
    # The same frame with its LRW moved to another logical address: another layout, parsed afresh.
    moved = _frame([CYCLIC[0], (Cmd.LRW, 0xC0, 8, 0, 44), CYCLIC[2]], 3)
    reply_fast, reply_general = _both(clock, fast, general, moved)
    assert reply_fast == reply_general and fast.layouts.misses == before + 2
    assert _state(fast) == _state(general)
    assert all(a.drive.state.name == "OPERATION_ENABLED" for a in fast.apps[:2])  # (slave 2: slave 0 drives it)


def test_layouts_keep_the_recent_and_never_a_malformed_frame():
    cache = Layouts(keep=2)
    a = encode_frame([(Cmd.FPRD, 1, REF, 0x0130, bytes(2))])
    b = encode_frame([(Cmd.FPRD, 1, REF, 0x0130, bytes(4))])
    c = encode_frame([(Cmd.FPRD, 2, REF, 0x0130, bytes(2))])
    first = cache.find(a)
    assert cache.find(bytearray(a)) is first and cache.find(b) is not first
    assert cache.find(c) is not first and cache.find(a) is not first  # a was the oldest of three: gone
    with pytest.raises(FrameError):
        cache.find(bytearray(a[:20]))
    assert cache.misses == 4 and cache.hits == 1
