"""What real CoE slaves do, checked with SOEM (pysoem) against the virtual drives over veth:
complete access, segmented download, SDO information, emergencies, PDO assignment by SDO,
two-axis drives and the complete-access abort some slaves answer with.

States and data only, never timing.
"""

from __future__ import annotations

import struct

import pysoem
import pytest

from softrt.ethercat.description import csp_drive

COE = ("--device", "csp-drive-coe")


def preop(m, n: int = 1):
    assert m.config_init() == n
    assert m.state_check(pysoem.PREOP_STATE, 500_000) == pysoem.PREOP_STATE
    return m.slaves


def abort_code(call) -> int:
    with pytest.raises(pysoem.SdoError) as err:
        call()
    return err.value.abort_code


def write_pdo(s, index: int, values: list[int]) -> None:
    """Rewrite a PDO mapping or assignment object the CiA 301 way: count 0, entries, count."""
    fmt = "<H" if index in (0x1C12, 0x1C13) else "<I"
    s.sdo_write(index, 0, b"\x00")
    for sub, value in enumerate(values, start=1):
        s.sdo_write(index, sub, struct.pack(fmt, value))
    s.sdo_write(index, 0, bytes([len(values)]))


def test_complete_access_upload_and_download(start_sim, soem_master):
    sim = start_sim(*COE)
    (s,) = preop(soem_master())
    # 0x1C12 from subindex 0: the count as 16 bits, then the assigned PDO.
    assert s.sdo_read(0x1C12, 0, ca=True) == bytes([1, 0]) + struct.pack("<H", 0x1600)
    rx = s.sdo_read(0x1600, 0, ca=True)
    assert rx[0] == 4 and struct.unpack_from("<I", rx, 2)[0] == 0x6040_0010
    # A new mapping in one transfer: target position first, then the controlword.
    s.sdo_write(0x1600, 0, bytes([2, 0]) + struct.pack("<II", 0x607A_0020, 0x6040_0010), ca=True)
    assert struct.unpack("<I", s.sdo_read(0x1600, 1))[0] == 0x607A_0020
    slave = sim.stats()["slaves"][0]
    assert slave["pdo"]["0x1600"] == ["0x607A:00/32", "0x6040:00/16"]
    assert slave["coe"]["complete_access"] == 3


def test_segmented_download(start_sim, soem_master):
    sim = start_sim(*COE)
    (s,) = preop(soem_master())
    # 2 + 30 x 4 = 122 bytes: more than the 112 a 128-byte mailbox carries in one request.
    entries = [0x6041_0010, 0x6064_0020] + [0x0000_0008] * 28
    s.sdo_write(0x1A00, 0, bytes([30, 0]) + b"".join(struct.pack("<I", v) for v in entries), ca=True)
    slave = sim.stats()["slaves"][0]
    assert slave["coe"]["segmented_downloads"] == 1
    assert slave["pdo"]["0x1A00"] == ["0x6041:00/16", "0x6064:00/32"] + ["0x0000:00/8"] * 28
    assert s.sdo_read(0x1A00, 0, ca=True) == bytes([30, 0]) + b"".join(struct.pack("<I", v) for v in entries)


def test_sdo_information(start_sim, soem_master):
    start_sim(*COE)
    (s,) = preop(soem_master())
    objects = {o.index: o for o in s.od}
    assert {0x1000, 0x1018, 0x1C12, 0x1600, 0x1A00, 0x6040, 0x6041, 0x6064, 0x607A} <= set(objects)
    assert objects[0x6041].name == b"Statusword" and objects[0x6041].data_type == 0x0006
    assert objects[0x6041].object_code == 7  # VAR
    identity = objects[0x1018]
    assert identity.name == b"Identity" and identity.object_code == 8  # ARRAY of UNSIGNED32
    assert [e.name for e in identity.entries[1:3]] == [b"Vendor ID", b"Product code"]
    assert identity.entries[1].bit_length == 32
    assert objects[0x6064].bit_length == 32
    assert objects[0x6040].obj_access & 0x40  # mappable into an RxPDO
    assert objects[0x6064].obj_access & 0x80  # mappable into a TxPDO


def test_emergency_on_a_drive_fault(start_sim, soem_master):
    sim = start_sim(*COE)
    (s,) = preop(soem_master())
    seen = []
    s.add_emergency_callback(seen.append)
    assert s.sdo_read(0x1001, 0) == b"\x00"
    sim.control(cmd="drive_fault", code=0x2310)  # continuous over-current
    # The emergency is in the mailbox before the next SDO answer; SOEM hands it over.
    assert s.sdo_read(0x1001, 0) == bytes([0x01 | 0x02])  # generic + current
    assert [(e.error_code, e.error_reg, e.b1) for e in seen] == [(0x2310, 0x03, 0)]
    assert struct.unpack("<H", s.sdo_read(0x603F, 0))[0] == 0x2310
    assert sim.stats()["slaves"][0]["coe"]["emergencies"] == 1


def test_pdo_assignment_by_sdo_changes_the_process_data(start_sim, soem_master):
    sim = start_sim(*COE)
    m = soem_master()
    (s,) = preop(m)
    write_pdo(s, 0x1C12, [])
    write_pdo(s, 0x1601, [0x607A_0020, 0x6040_0010])  # a second, smaller RxPDO
    write_pdo(s, 0x1C12, [0x1601])
    write_pdo(s, 0x1A00, [0x6064_0020, 0x6041_0010])
    assert m.config_map() == 6 + 6  # SOEM reads the new mapping and sizes SM2/SM3 for it
    assert m.state_check(pysoem.SAFEOP_STATE, 500_000) == pysoem.SAFEOP_STATE
    m.send_processdata()
    m.receive_processdata(200_000)
    position, statusword = struct.unpack("<iH", s.input)
    slave = sim.stats()["slaves"][0]
    assert position == slave["position_counts"] == 1000 and statusword & 0x4F == 0x40
    assert slave["pdo"]["0x1C12"] == ["0x1601"] and slave["pdo"]["0x1601"] == ["0x607A:00/32", "0x6040:00/16"]
    # In SAFEOP the assignment is fixed.
    assert abort_code(lambda: s.sdo_write(0x1C12, 0, b"\x00")) == 0x08000022


def test_pdo_rules(start_sim, soem_master):
    start_sim(*COE)
    (s,) = preop(soem_master())
    assert abort_code(lambda: s.sdo_write(0x1600, 1, struct.pack("<I", 0x6041_0010))) == 0x06010003  # count not 0
    s.sdo_write(0x1600, 0, b"\x00")
    s.sdo_write(0x1600, 1, struct.pack("<I", 0x6041_0010))  # the statusword is an input
    assert abort_code(lambda: s.sdo_write(0x1600, 0, b"\x01")) == 0x06040041
    s.sdo_write(0x1600, 1, struct.pack("<I", 0x607A_0010))  # the target position has 32 bits
    assert abort_code(lambda: s.sdo_write(0x1600, 0, b"\x01")) == 0x06040041
    write_pdo(s, 0x1C13, [])
    s.sdo_write(0x1C13, 1, struct.pack("<H", 0x1600))  # an RxPDO cannot go to the inputs
    assert abort_code(lambda: s.sdo_write(0x1C13, 0, b"\x01")) == 0x06090030


def test_fixed_pdos_are_read_only(start_sim, soem_master):
    start_sim(*COE, "--fixed-pdos")
    (s,) = preop(soem_master())
    assert struct.unpack("<H", s.sdo_read(0x1C12, 1))[0] == 0x1600
    assert abort_code(lambda: s.sdo_write(0x1C12, 0, b"\x00")) == 0x06010002


def test_two_axis_drive(start_sim, soem_master):
    sim = start_sim(*COE, "--axes-per-slave", "2")
    m = soem_master()
    (s,) = preop(m)
    two = csp_drive(coe=True, axes=2)
    assert s.sdo_read(0x1C12, 0, ca=True) == bytes([2, 0]) + struct.pack("<HH", 0x1600, 0x1610)
    assert struct.unpack("<I", s.sdo_read(0x1610, 1))[0] == 0x6840_0010  # axis 1's controlword
    assert m.config_map() == two.output_bytes + two.input_bytes == 2 * (8 + 14)
    assert m.state_check(pysoem.SAFEOP_STATE, 500_000) == pysoem.SAFEOP_STATE
    m.send_processdata()
    m.receive_processdata(200_000)
    positions = [struct.unpack_from("<i", s.input, off)[0] for off in (2, 16)]
    axes = sim.stats()["slaves"][0]["axes"]
    assert positions == [a["position_counts"] for a in axes] == [1000, 1500]


def test_complete_access_abort_falls_back_to_plain_reads(start_sim, soem_master):
    sim = start_sim(*COE, "--ca-abort")
    m = soem_master()
    preop(m)
    assert abort_code(lambda: m.slaves[0].sdo_read(0x1C12, 0, ca=True)) == 0x06010000
    # SOEM's mapping read tries complete access first (the SII announces it), gets the abort,
    # reads the mapping subindex by subindex instead, completes, then reports the abort.
    with pytest.raises(pysoem.ConfigMapError) as err:
        m.config_map()
    assert [(e.index, e.abort_code) for e in err.value.error_list] == [(0x1C00, 0x06010000)]
    assert m.state_check(pysoem.SAFEOP_STATE, 500_000) == pysoem.SAFEOP_STATE
    assert len(m.slaves[0].output) == 8 and len(m.slaves[0].input) == 14
    assert sim.stats()["slaves"][0]["al_state"] == "SAFEOP"
