"""The real SOEM master (pysoem) against the virtual slaves, over a veth pair in a netns.

These tests assert bus states and data, never timing.
"""

from __future__ import annotations

import struct
import time

import pysoem

from softrt.ethercat.description import FAKE_VENDOR_ID, csp_drive

DRIVE = csp_drive()


def test_config_init_finds_slaves_with_identity(start_sim, soem_master):
    start_sim("--slaves", "3")
    m = soem_master()
    assert m.config_init() == 3
    for s in m.slaves:
        assert s.name == DRIVE.name
        assert (s.man, s.id, s.rev) == (FAKE_VENDOR_ID, DRIVE.product_code, DRIVE.revision)


def test_map_dc_op_and_process_data(start_sim, soem_master):
    sim = start_sim("--slaves", "2")
    m = soem_master()
    assert m.config_init() == 2
    assert m.config_map() == 2 * (DRIVE.output_bytes + DRIVE.input_bytes)
    assert m.expected_wkc == 6  # per drive: outputs written (2) + inputs read (1)
    assert m.config_dc()
    assert m.state_check(pysoem.SAFEOP_STATE, 500_000) == pysoem.SAFEOP_STATE
    m.state = pysoem.OP_STATE
    m.write_state()
    assert m.state_check(pysoem.OP_STATE, 500_000) == pysoem.OP_STATE
    dc_times = []
    for _ in range(50):
        m.send_processdata()
        assert m.receive_processdata(500_000) == 6
        dc_times.append(m.dc_time)
    assert all(b > a for a, b in zip(dc_times, dc_times[1:]))  # the reference clock advances
    # Inputs carry each drive's statusword (switch on disabled + remote) and position actual.
    for i, s in enumerate(m.slaves):
        statusword, position = struct.unpack_from("<Hi", s.input)
        assert statusword & 0x4F == 0x40
        assert position == sim.stats()["slaves"][i]["position_counts"]
    stats = sim.stats()
    assert [s["al_state"] for s in stats["slaves"]] == ["OP", "OP"]
    # Each answer is timed from the kernel's receive time (the ring's), its wait to be read a part of it.
    assert stats["pd_frames"] >= 50 and 0 <= stats["wait_us"]["max"] <= stats["answer_us"]["max"]


def test_invalid_transition_sets_error_and_ack_clears_it(start_sim, soem_master):
    start_sim("--slaves", "1")
    m = soem_master()
    assert m.config_init() == 1
    assert m.state_check(pysoem.PREOP_STATE, 500_000) == pysoem.PREOP_STATE
    s = m.slaves[0]
    s.state = pysoem.OP_STATE  # PREOP -> OP skips SAFEOP: invalid (ETG.1000.6 §6.4.1)
    s.write_state()
    s.state_check(pysoem.OP_STATE, 50_000)
    assert s.state == pysoem.PREOP_STATE | 0x10
    assert s.al_status == 0x0011
    s.state = pysoem.SAFEOP_STATE  # without the acknowledge the request is ignored
    s.write_state()
    s.state_check(pysoem.SAFEOP_STATE, 50_000)
    assert s.state == pysoem.PREOP_STATE | 0x10
    s.state = pysoem.PREOP_STATE | pysoem.STATE_ACK
    s.write_state()
    assert s.state_check(pysoem.PREOP_STATE, 500_000) == pysoem.PREOP_STATE
    assert s.state == pysoem.PREOP_STATE
    assert s.al_status == 0


def test_sm_config_checked_on_safeop(start_sim, soem_master):
    start_sim("--slaves", "1")
    m = soem_master()
    assert m.config_init() == 1
    m.state_check(pysoem.PREOP_STATE, 500_000)
    s = m.slaves[0]
    s._fpwr(0x0810, struct.pack("<HHBBBB", 0x1100, 3, 0x64, 0, 1, 0))  # SM2 with a wrong length
    s.state = pysoem.SAFEOP_STATE
    s.write_state()
    s.state_check(pysoem.SAFEOP_STATE, 50_000)
    assert s.state == pysoem.PREOP_STATE | 0x10
    assert s.al_status == 0x001D  # invalid output configuration


def test_sii_read_word_by_word(start_sim, soem_master):
    start_sim("--slaves", "1")
    m = soem_master()
    assert m.config_init() == 1
    s = m.slaves[0]
    assert struct.unpack("<I", s.eeprom_read(0x08))[0] == FAKE_VENDOR_ID
    assert struct.unpack("<I", s.eeprom_read(0x0A))[0] == DRIVE.product_code


def test_coe_sdo_upload_download(start_sim, soem_master):
    sim = start_sim("--slaves", "1", "--device", "csp-drive-coe")
    m = soem_master()
    assert m.config_init() == 1
    assert m.config_map() == DRIVE.output_bytes + DRIVE.input_bytes  # mapping read by SDO
    s = m.slaves[0]
    assert struct.unpack("<I", s.sdo_read(0x1018, 1))[0] == FAKE_VENDOR_ID
    assert s.sdo_read(0x1008, 0).decode() == csp_drive(coe=True).name  # a normal (non-expedited) upload
    assert struct.unpack("<H", s.sdo_read(0x1C12, 1))[0] == 0x1600
    s.sdo_write(0x6065, 0, struct.pack("<I", 12345))
    assert struct.unpack("<I", s.sdo_read(0x6065, 0))[0] == 12345
    s.sdo_write(0x60C2, 1, bytes([100]))
    s.sdo_write(0x60C2, 2, struct.pack("<b", -6))
    assert sim.stats()["slaves"][0]["cycle_ns"] == 100_000
    try:
        s.sdo_read(0x6077, 0)
    except pysoem.SdoError as err:
        assert err.abort_code == 0x06020000  # object does not exist
    else:
        raise AssertionError("reading a missing object must abort")
    try:
        s.sdo_write(0x6041, 0, b"\x00\x00")
    except pysoem.SdoError as err:
        assert err.abort_code == 0x06010002  # read-only
    else:
        raise AssertionError("writing the statusword must abort")
    assert sim.stats()["slaves"][0]["sdo_requests"] > 0
    time.sleep(0)
