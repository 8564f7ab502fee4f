"""Pure models, in process (no network): wire codec, SII, AL state machine, bus WKC rules,
CiA 402 drive, CoE SDO server, fault plan."""

from __future__ import annotations

import dataclasses
import struct

import pytest

from softrt.ecatsim.bus import Segment
from softrt.ecatsim.cia402 import ERROR_FOLLOWING, Drive, DriveState
from softrt.ecatsim.coe import CoeServer, ObjectDictionary
from softrt.ecatsim.esc import Esc
from softrt.ecatsim.faults import FaultPlan
from softrt.ecatsim.slave import make_app
from softrt.ethercat.al import AlState, AlStateMachine, AlStatusCode
from softrt.ethercat.description import FAKE_VENDOR_ID, csp_drive
from softrt.ethercat.mapping import drive_map
from softrt.ethercat.sii import build_image, crc8, parse_image
from softrt.ethercat.wire import Cmd, FrameError, encode_frame, parse_frame, read_wkc


def test_wire_round_trip_and_errors():
    frame = encode_frame([(Cmd.FPRD, 7, 0x1001, 0x0130, bytes(6)), (Cmd.LRW, 8, 0, 0, bytes(16))])
    a, b = parse_frame(frame)
    assert (a.cmd, a.idx, a.adp, a.ado, a.length, a.more) == (Cmd.FPRD, 7, 0x1001, 0x0130, 6, True)
    assert (b.cmd, b.logical_address, b.length, b.more) == (Cmd.LRW, 0, 16, False)
    assert read_wkc(frame, b) == 0
    with pytest.raises(FrameError):
        parse_frame(frame[:20])
    frame[12:14] = b"\x08\x00"
    with pytest.raises(FrameError, match="EtherType"):
        parse_frame(frame)


def test_sii_image_round_trip():
    desc = csp_drive()
    image = build_image(desc, serial=5)
    assert image[14] == crc8(image[:14])
    info = parse_image(image)
    assert (info.vendor_id, info.product_code, info.serial, info.name) == (
        FAKE_VENDOR_ID,
        desc.product_code,
        5,
        desc.name,
    )
    assert info.rx_pdos[0].index == 0x1600 and [e.index for e in info.tx_pdos[0].entries][:2] == [0x6041, 0x6064]
    m = drive_map(info.rx_pdos, info.tx_pdos)
    assert (m.controlword, m.target_position, m.modes_of_operation) == (0, 2, 6)
    assert (m.statusword, m.position_actual, m.following_error, m.error_code) == (0, 2, 8, 12)
    assert not parse_image(build_image(csp_drive(coe=False))).has_coe
    assert parse_image(build_image(csp_drive(coe=True))).has_coe
    # CoE details: SDO, SDO info, PDO assign and configuration, complete access (ETG.2010 Table 8).
    assert parse_image(build_image(csp_drive(coe=True))).coe_details == 0x2F
    fixed = dataclasses.replace(csp_drive(coe=True), pdo_assignable=False, complete_access=False)
    assert parse_image(build_image(fixed)).coe_details == 0x03


def test_al_state_machine():
    codes = {}
    al = AlStateMachine(lambda old, new: codes.get(new, 0))
    assert al.request(AlState.SAFEOP) == (AlState.INIT, AlState.INIT)  # INIT -> SAFEOP: invalid
    assert (al.status, al.code) == (0x11, AlStatusCode.INVALID_STATE_CHANGE)
    al.request(AlState.PREOP)  # no acknowledge: ignored
    assert al.status == 0x11
    assert al.request(AlState.PREOP | 0x10) == (AlState.INIT, AlState.PREOP)
    assert (al.status, al.code) == (0x02, 0)
    codes[AlState.SAFEOP] = AlStatusCode.INVALID_OUTPUT_CONFIG
    al.request(AlState.SAFEOP)
    assert (al.status, al.code) == (0x12, 0x001D)
    al.request(0x10 | 0x06)
    assert al.code == AlStatusCode.UNKNOWN_STATE
    al.request(0x10 | AlState.BOOT)
    assert al.code == AlStatusCode.BOOTSTRAP_NOT_SUPPORTED
    al.request(0x10 | AlState.INIT)
    assert al.status == AlState.INIT
    al.local_error(AlState.SAFEOP, AlStatusCode.SM_WATCHDOG)
    assert (al.status, al.code) == (0x14, 0x001B)


def _segment(n=3):
    desc = csp_drive()
    escs = [Esc(desc, i, make_app(desc), last=i == n - 1) for i in range(n)]
    return Segment(escs), escs


def _send(seg, *datagrams):
    frame = encode_frame(list(datagrams))
    seg.process(frame)
    return frame, parse_frame(frame)


def test_wkc_and_addressing_rules():
    seg, escs = _segment(3)
    frame, (d,) = _send(seg, (Cmd.BRD, 0, 0, 0x0000, bytes(2)))
    assert read_wkc(frame, d) == 3 and struct.unpack_from("<H", frame, d.header_offset + 2)[0] == 3
    for pos in range(3):  # auto-increment: the slave that sees ADP 0 is addressed
        frame, (d,) = _send(seg, (Cmd.APWR, 0, -pos & 0xFFFF, 0x0010, struct.pack("<H", 0x1001 + pos)))
        assert read_wkc(frame, d) == 1
    assert [int.from_bytes(e.mem[0x10:0x12], "little") for e in escs] == [0x1001, 0x1002, 0x1003]
    frame, (d,) = _send(seg, (Cmd.FPRW, 0, 0x1002, 0x0012, struct.pack("<H", 0x00AA)))
    assert read_wkc(frame, d) == 3  # read +1, write +2
    escs[0].mem[0x0500] = 0x01
    frame, (d,) = _send(seg, (Cmd.BRD, 0, 0, 0x0500, bytes(1)))
    assert frame[d.data_offset] == 0x01  # broadcast reads OR
    frame, (d,) = _send(seg, (Cmd.FRMW, 0, 0x1001, 0x0910, bytes(8)))
    assert read_wkc(frame, d) == 3  # the reference reads, the two others write
    frame, (d,) = _send(seg, (Cmd.FPRD, 0, 0x7777, 0x0000, bytes(2)))
    assert read_wkc(frame, d) == 0  # nobody has that address


def _mapped_segment():
    """Two drives with SM2/SM3 and FMMUs set up (outputs at 0 and 8, inputs at 16 and 30), in INIT."""
    seg, escs = _segment(2)
    for i, esc in enumerate(escs):
        esc.write(0x0810, struct.pack("<HHBBBB", 0x1100, 8, 0x64, 0, 1, 0))
        esc.write(0x0818, struct.pack("<HHBBBB", 0x1400, 14, 0x20, 0, 1, 0))
        esc.write(0x0600, struct.pack("<IHBBHBBB3x", 8 * i, 8, 0, 7, 0x1100, 0, 2, 1))
        esc.write(0x0610, struct.pack("<IHBBHBBB3x", 16 + 14 * i, 14, 0, 7, 0x1400, 0, 1, 1))
    return seg, escs


def _request(escs, *states):
    for state in states:
        for esc in escs:
            esc.write(0x0120, struct.pack("<H", state))


def test_lrw_counts_per_esc_and_exchanges_data():
    seg, escs = _mapped_segment()
    frame, (d,) = _send(seg, (Cmd.LRW, 0, 0, 0, bytes(44)))
    assert read_wkc(frame, d) == 0  # process-data SMs are closed below SAFEOP
    _request(escs, AlState.PREOP, AlState.SAFEOP, AlState.OP)
    assert all(e.al.state is AlState.OP for e in escs)
    out = struct.pack("<HibB", 0x0006, 1000, 8, 0) + struct.pack("<HibB", 0x0006, 2000, 8, 0)
    frame, (d,) = _send(seg, (Cmd.LRW, 0, 0, 0, out + bytes(28)))
    assert read_wkc(frame, d) == 6
    statuswords = [struct.unpack_from("<H", frame, d.data_offset + 16 + 14 * i)[0] for i in range(2)]
    assert statuswords == [0x0240, 0x0240]  # read before the outputs were consumed (one-cycle lag)
    frame, (d,) = _send(seg, (Cmd.LRW, 0, 0, 0, out + bytes(28)))
    assert [struct.unpack_from("<H", frame, d.data_offset + 16 + 14 * i)[0] & 0x6F for i in range(2)] == [0x21, 0x21]


def test_a_slave_leaving_op_on_its_own_error_stops_taking_outputs():
    seg, escs = _mapped_segment()
    _request(escs, AlState.PREOP, AlState.SAFEOP, AlState.OP)
    escs[1].local_error(AlState.SAFEOP, 0x001A)
    assert (escs[1].al.status, escs[1].al.code) == (0x14, 0x001A)
    frame, (d,) = _send(seg, (Cmd.LRW, 0, 0, 0, bytes(44)))
    assert read_wkc(frame, d) == 3 + 1  # slave 1: inputs still read, its outputs SyncManager off
    _request(escs[1:], AlState.OP | 0x10)  # acknowledged, back to OP: outputs taken again
    frame, (d,) = _send(seg, (Cmd.LRW, 0, 0, 0, bytes(44)))
    assert escs[1].al.state is AlState.OP and read_wkc(frame, d) == 6


def test_drive_enable_sequence_and_faults():
    d = Drive(start_counts=500)
    assert d.statusword & 0x4F == 0x40
    d.target = 500
    for cw, sw in ((0x06, 0x21), (0x07, 0x23), (0x0F, 0x27)):
        d.step(cw, 500, 8, 250e-6)
        assert d.statusword & 0x6F == sw
    assert d.statusword & 0x1000  # CSP: drive follows the command value
    for k in range(1, 4001):  # a 1 s ramp at 2000 counts/s, then hold
        d.step(0x0F, 500 + min(k, 2000), 8, 250e-6)
    assert d.position_counts == 2500 and d.faults == 0
    d.step(0x0F, 2500 + 10 * d.following_window, 8, 250e-6)  # a jump: following error
    for _ in range(60):
        d.step(0x0F, None, None, 250e-6)
    assert d.state is DriveState.FAULT and d.error_code == ERROR_FOLLOWING
    d.step(0x80, d.position_counts, 8, 250e-6)  # fault reset: rising edge of bit 7
    assert d.state is DriveState.SWITCH_ON_DISABLED and d.error_code == 0
    d2 = Drive(start_counts=0)
    d2.target = 10 * d2.following_window  # enabling with a far target would jump: refused
    for cw in (0x06, 0x07, 0x0F):
        d2.control(cw)
    assert d2.state is DriveState.FAULT


def test_coe_server_sdo_protocol():
    od = ObjectDictionary()
    od.add_value(0x6065, 0, "I", 7, writable=True)
    od.add(0x1008, 0, 0, lambda: b"x" * 300)
    coe = CoeServer(od, 128)

    def request(cmd, index, sub, data=b"\0" * 4):
        payload = struct.pack("<HBHB", 2 << 12, cmd, index, sub) + data
        (reply,) = coe.handle(struct.pack("<HHBB", len(payload), 0, 0, 0x13) + payload)
        return reply

    r = request(0x40, 0x6065, 0)  # expedited upload
    assert r[8] == 0x43 and struct.unpack_from("<I", r, 12)[0] == 7
    r = request(0x23, 0x6065, 0, struct.pack("<I", 99))  # expedited download
    assert r[8] == 0x60 and od.upload(0x6065, 0) == struct.pack("<I", 99)
    r = request(0x40, 0x1234, 0)
    assert r[8] == 0x80 and struct.unpack_from("<I", r, 12)[0] == 0x06020000
    assert struct.unpack_from("<H", r, 6)[0] >> 12 == 2  # aborts travel as SDO requests
    r = request(0x40, 0x1008, 0)  # normal upload, then segments
    assert r[8] == 0x41 and struct.unpack_from("<I", r, 12)[0] == 300
    got, toggle = bytes(r[16 : 16 + struct.unpack_from("<H", r, 0)[0] - 10]), 0
    while True:
        r = request(0x60 | toggle, 0x1008, 0)
        got += bytes(r[9 : 6 + struct.unpack_from("<H", r, 0)[0]])
        toggle ^= 0x10
        if r[8] & 0x01:
            break
    assert got[:300] == b"x" * 300
    request(0x40, 0x1008, 0)  # a segmented upload under way, which the master aborts: no answer
    abort = struct.pack("<HBHBI", 2 << 12, 0x80, 0x1008, 0, 0x05040000)
    assert coe.handle(struct.pack("<HHBB", len(abort), 0, 0, 0x13) + abort) == []
    r = request(0x60, 0x1008, 0)  # its segments are gone
    assert r[8] == 0x80 and struct.unpack_from("<I", r, 12)[0] == 0x05040001


def test_a_mailbox_write_sent_again_is_answered_once():
    """ETG.1000.4 mailbox header counter: a write with the counter of the last one is a repeat (SOEM
    sends a frame again after 2 ms without reply, ecx_SRconfirm) and gets no second answer; counter
    0 means "none" (every write is new), and INIT forgets the last counter."""
    desc = csp_drive(coe=True)
    esc = Esc(desc, 0, make_app(desc), last=True)
    seg, station = Segment([esc]), 0x1001
    _send(
        seg,
        (Cmd.APWR, 0, 0, 0x0010, struct.pack("<H", station)),
        (Cmd.FPWR, 0, station, 0x0800, struct.pack("<HHBBBB", 0x1000, 128, 0x26, 0, 1, 0)),
        (Cmd.FPWR, 0, station, 0x0808, struct.pack("<HHBBBB", 0x1080, 128, 0x22, 0, 1, 0)),
    )
    _request([esc], AlState.PREOP)

    def write(counter: int, sub: int) -> None:  # an SDO upload request of 0x1600:sub
        request = struct.pack("<HHBBHBHB4x", 10, 0, 0, counter << 4 | 0x03, 0x2000, 0x40, 0x1600, sub)
        frame, (d,) = _send(seg, (Cmd.FPWR, 0, station, 0x1000, request.ljust(128, b"\0")))
        assert read_wkc(frame, d) == 1  # the write itself succeeds: only its answer is withheld

    def answers() -> list[int]:  # the subindices answered, read from SM1 until it is empty
        subs = []
        while True:
            frame, (status,) = _send(seg, (Cmd.FPRD, 0, station, 0x080D, bytes(1)))
            if not frame[status.data_offset] & 0x08:
                return subs
            frame, (d,) = _send(seg, (Cmd.FPRD, 0, station, 0x1080, bytes(128)))
            subs.append(frame[d.data_offset + 11])

    write(1, 1)
    write(1, 1)  # the same frame again
    assert answers() == [1] and esc.mailbox_repeats == 1
    write(2, 2)
    write(2, 2)
    write(3, 3)
    assert answers() == [2, 3] and esc.mailbox_repeats == 2
    write(0, 4)
    write(0, 4)  # no counter: not a repeat
    assert answers() == [4, 4]
    write(3, 5)  # after 0, counter 3 is new again
    assert answers() == [5]
    _request([esc], AlState.INIT, AlState.PREOP)
    write(3, 6)  # a master that starts again after INIT may begin with any counter
    assert answers() == [6] and esc.mailbox_repeats == 2


def test_coe_sdo_information_fragments_a_long_object_list():
    od = ObjectDictionary()
    for index in range(0x2000, 0x2040):  # 64 objects: 130 bytes of list, more than a 64-byte mailbox holds
        od.add_value(index, 0, "H", 0, name="x")
    coe = CoeServer(od, 64)
    payload = struct.pack("<HBBHH", 8 << 12, 1, 0, 0, 1)  # get OD list, all objects
    replies = coe.handle(struct.pack("<HHBB", len(payload), 0, 0, 0x13) + payload)
    assert len(replies) == 3
    lefts = [struct.unpack_from("<H", r, 10)[0] for r in replies]
    assert lefts == [2, 1, 0] and [r[8] & 0x80 for r in replies] == [0x80, 0x80, 0]  # "incomplete" until the last
    data = b"".join(r[12 : 6 + struct.unpack_from("<H", r, 0)[0]] for r in replies)
    assert struct.unpack_from("<H", data)[0] == 1
    assert list(struct.unpack_from("<64H", data, 2)) == list(range(0x2000, 0x2040))


def test_fault_plan_counts():
    plan = FaultPlan()
    plan.arm("drop", 2)
    plan.set_every("bad_wkc", 5)
    decisions = [plan.decide(3) for _ in range(10)]
    assert [x.drop for x in decisions] == [True, True] + [False] * 8
    assert [x.skip_slave for x in decisions if x.skip_slave is not None] == [2, 2]
    assert plan.injected == {"drop": 2, "delay": 0, "bad_wkc": 2, "bad_frame": 0}
    with pytest.raises(ValueError):
        plan.arm("melt")


def test_pacer_learns_the_masters_cycle_and_ignores_a_lost_frame():
    from softrt.ecatsim.sim import Pacer

    pacer = Pacer(early_ns=60_000)
    assert pacer.window() is None  # nothing learned yet
    t = 0
    for gap in [250_000] * 20 + [500_000] + [250_000] * 3:  # one frame lost on the way
        t += gap
        pacer.frame(t)
    assert pacer.period_ns == 250_000
    assert pacer.window() == (t + 250_000 - 60_000, t + 250_000 + 60_000)
    for _ in range(8):  # the master now runs at 1 ms: learned again after 8 gaps that do not fit
        t += 1_000_000
        pacer.frame(t)
    assert pacer.period_ns == 1_000_000
    assert Pacer(early_ns=0).window() is None  # busy-poll off


def test_the_power_up_watchdog_is_the_one_asked_for():
    """``ecat-sim --sm-watchdog``: 0x0420 holds it in 100 µs units (0x0400's divider 2498)."""
    from softrt.ecatsim.esc import REG_WD_TIME_PD

    desc = csp_drive()
    esc = Esc(desc, 0, make_app(desc), watchdog_ns=1_000_000_000)
    assert struct.unpack_from("<H", esc.mem, REG_WD_TIME_PD)[0] == 10_000
    assert struct.unpack_from("<H", Esc(desc, 0, make_app(desc)).mem, REG_WD_TIME_PD)[0] == 1_000  # 100 ms
