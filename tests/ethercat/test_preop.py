"""Drive configuration in PRE-OP by the softrt master (pysoem) against the virtual drives:
PDO assignment by SDO, the drive's own mapping when it refuses, two-axis drives, a
complete-access abort, identity, error codes and emergencies.

States and data only, never timing.
"""

from __future__ import annotations

import time

import pytest

from softrt.ethercat.description import FAKE_VENDOR_ID
from softrt.ethercat.drives import parse_drives
from softrt.ethercat.errors import EcatError
from softrt.ethercat.master import SW_MASK, SW_OE, EtherCATMaster

PERIOD_NS = 1_000_000
COE = ("--device", "csp-drive-coe")
#: Target first and no mode object; statusword after the position, plus the error code.
REORDERED = parse_drives(
    {"defaults": {"rx": ["0x607A/32", "0x6040/16"], "tx": ["0x6064/32", "0x6041/16", "0x603F/16"]}}, "test"
)


def open_master(ns, axes=1, **options) -> EtherCATMaster:
    dev = EtherCATMaster(ns.master_iface, PERIOD_NS, axes, receive_timeout_us=200_000, watchdog_ms=1000, **options)
    with ns.inside():
        return dev.open()


def move(dev: EtherCATMaster, counts: int, cycles: int = 200) -> None:
    """Ramp every axis by *counts* over *cycles* cycles."""
    dev.start(time.monotonic_ns() + 1_000_000)
    for k in range(cycles):
        while not dev.permit():
            time.sleep(0.0002)
        value = counts * min(1.0, (k + 1) / (cycles // 2))
        dev.write(value if dev.axes == 1 else [value] * dev.axes)


def test_pdo_assignment_by_sdo_takes_effect(start_sim, ecat_ns):
    sim = start_sim(*COE)
    dev = open_master(ecat_ns, drives=REORDERED)
    try:
        pdo = sim.stats()["slaves"][0]["pdo"]
        assert pdo["0x1C12"] == ["0x1600"] and pdo["0x1600"] == ["0x607A:00/32", "0x6040:00/16"]
        assert pdo["0x1C13"] == ["0x1A00"] and pdo["0x1A00"] == ["0x6064:00/32", "0x6041:00/16", "0x603F:00/16"]
        assert dev.slaves[0].pdo_source == "assigned by SDO"
        m = dev.drive_status()[0]
        assert m.statusword & SW_MASK == SW_OE
        move(dev, 3000)
        slave = sim.stats()["slaves"][0]
        # The drive followed targets written at the new offsets, and reported at its new offsets.
        assert slave["target_counts"] == 1000 + 3000
        assert abs(dev.drive_status()[0].position_counts - slave["position_counts"]) < 200
    finally:
        dev.stop()


def test_a_drive_that_refuses_assignment_keeps_its_own_mapping(start_sim, ecat_ns):
    start_sim(*COE, "--fixed-pdos")
    dev = open_master(ecat_ns, drives=REORDERED)
    try:
        assert dev.slaves[0].pdo_source.startswith(
            "the drive's own (0x1600:00 = 0 is not writable: SDO abort 0x06010002"
        )
        assert dev.drive_status()[0].statusword & SW_MASK == SW_OE
    finally:
        dev.stop()


def test_assign_always_names_the_slave_and_the_object(start_sim, ecat_ns):
    start_sim(*COE, "--fixed-pdos")
    always = parse_drives({"defaults": {"assign": "always", "rx": ["0x607A/32", "0x6040/16"]}}, "test")
    with pytest.raises(EcatError) as err:
        open_master(ecat_ns, drives=always)
    assert "slave 0 'softrt virtual CSP drive (CoE)' refuses PDO assignment: writing 0x1600:00 = 0" in str(err.value)
    assert "0x06010002" in str(err.value)


def test_a_mapping_the_drive_rejects_is_a_failure_naming_the_object(start_sim, ecat_ns):
    sim = start_sim(*COE)
    bad = parse_drives({"defaults": {"rx": ["0x6040/16", "0x607A/32", "0x6065/32"]}}, "test")  # not mappable
    with pytest.raises(EcatError) as err:
        open_master(ecat_ns, drives=bad)
    assert "slave 0 'softrt virtual CSP drive (CoE)': writing 0x1600:00 = 3 failed: SDO abort 0x06040041" in str(
        err.value
    )
    assert sim.stats()["slaves"][0]["al_state"] == "INIT"  # the bus was left safe


def test_a_description_for_a_drive_that_is_not_there_is_a_warning(start_sim, ecat_ns):
    start_sim(*COE)
    typo = parse_drives({"drive": [{"position": 3, "axes": 2}]}, "drives.toml")
    dev = open_master(ecat_ns, drives=typo)
    try:
        assert dev.warnings == ["drive description drives.toml: [[drive]] 1 matches no slave on the bus"]
    finally:
        dev.stop()


def test_a_two_axis_drive_moves_both_axes(start_sim, ecat_ns):
    sim = start_sim(*COE, "--axes-per-slave", "2")
    dev = open_master(ecat_ns, axes=2)
    try:
        assert [(d.slave, d.axis) for d in dev.drive_status()] == [(0, 0), (0, 1)]
        move(dev, 2000)
        axes = sim.stats()["slaves"][0]["axes"]
        assert [a["drive_state"] for a in axes] == ["OPERATION_ENABLED"] * 2
        assert [a["target_counts"] for a in axes] == [1000 + 2000, 1500 + 2000]
    finally:
        dev.stop()


def test_axes_count_across_slaves(start_sim, ecat_ns):
    start_sim(*COE, "--slaves", "2", "--axes-per-slave", "2")
    with pytest.raises(EcatError, match="5 axis\\(es\\) asked, 4 CSP drive axis\\(es\\) found"):
        open_master(ecat_ns, axes=5)


def test_a_complete_access_abort_reaches_op_with_a_warning(start_sim, ecat_ns):
    start_sim(*COE, "--ca-abort")
    dev = open_master(ecat_ns)
    try:
        assert dev.drive_status()[0].statusword & SW_MASK == SW_OE
        assert dev.warnings == [
            "PDO mapping: slave 0: 0x1C00:00 SDO abort 0x06010000 (Unsupported access to an "
            "object); SOEM recovered (the mapping is complete)"
        ]
        assert dev.counters().to_dict()["warnings"] == dev.warnings
    finally:
        dev.stop()


def test_identity_error_code_and_emergency_are_reported(start_sim, ecat_ns):
    sim = start_sim(*COE)
    dev = open_master(ecat_ns)
    try:
        report = dev.counters().to_dict()["slaves"][0]
        assert report["vendor_id"] == FAKE_VENDOR_ID and report["product_code"] == 0x0001_0402
        assert report["device_name"] == "softrt virtual CSP drive (CoE)"
        assert report["error_register"] == 0 and report["error_codes"] == [0]
        sim.control(cmd="drive_fault", code=0x2310)
        move(dev, 0, cycles=20)
        assert dev.drive_status()[0].error_code == 0x2310  # from the PDO
    finally:
        dev.stop()  # reads the faulted drive's errors by SDO; the emergency comes with them
    report = dev.counters().to_dict()["slaves"][0]
    assert report["error_register"] == 0x03 and report["error_codes"] == [0x2310]
    assert dev.counters().to_dict()["emergencies"] == [
        {"slave": 0, "error_code": 0x2310, "error_register": 0x03, "data": "0000000000"}
    ]


class _SoemMailbox:
    """A slave's mailbox as SOEM's ecx_SDOread meets it: it first reads out what the slave posted
    (no wait), sends the request and takes the first answer whose *index* matches (the subindex is
    not compared). A request whose number is in *late* reaches the slave, but SOEM gives up before
    its answer comes (pysoem.WkcError), and that answer arrives afterwards; one in *silent* is lost
    on the way (no answer ever); one in *stalled* finds the slave stalled when SOEM reads out first
    (nothing read). *objects* maps ``(index, sub)`` to the value; a missing one gets an SDO abort."""

    def __init__(self, objects, late=(), silent=(), stalled=()) -> None:
        self.objects, self.late, self.silent, self.stalled = objects, set(late), set(silent), set(stalled)
        self.requests, self.coming, self.posted = 0, [], []

    def _arrive(self) -> None:
        self.posted += self.coming
        self.coming = []

    def mbx_receive(self) -> int:  # pysoem: one read-out of the slave's mailbox, no wait
        self._arrive()
        return 1 if self.posted and self.posted.pop(0) else 0

    def sdo_read(self, index, sub, size=0):
        import pysoem

        self.requests += 1
        if self.requests not in self.stalled and self.posted:
            self.posted.pop(0)
        self._arrive()
        if self.requests in self.silent:
            raise pysoem.WkcError("", 0)
        answer = (index, sub, self.objects.get((index, sub)))
        if self.requests in self.late:
            self.coming.append(answer)
            raise pysoem.WkcError("", 0)
        self.posted.append(answer)
        got_index, got_sub, value = self.posted.pop(0)
        assert got_index == index  # (else SOEM's PacketError)
        if value is None:
            raise pysoem.SdoError(0, index, got_sub, 0x06020000, "Object does not exist in the object dictionary")
        return value


def test_an_unanswered_sdo_read_is_tried_again_an_abort_is_not(monkeypatch):
    """A statusword read the busy host missed once made a CiA 402 drive look like a slave without
    CSP objects (exit 2, "lacks 0x6040 ..."); an abort is the drive's answer and final."""
    from softrt.ethercat import preop
    from softrt.ethercat.preop import NO_ANSWER_RETRIES, read_uint

    monkeypatch.setattr(preop, "LATE_ANSWER_S", 0.01)  # (no late answer comes here: each wait is spent whole)
    statusword = {(0x6041, 0): b"\x37\x12"}
    assert read_uint(_SoemMailbox(statusword, silent={1}), 0x6041, 0, 2) == 0x1237
    missing = _SoemMailbox({})
    assert read_uint(missing, 0x6041, 0, 2) is None and missing.requests == 1
    dead = _SoemMailbox(statusword, silent=range(1, 99))
    assert read_uint(dead, 0x6041, 0, 2) is None and dead.requests == NO_ANSWER_RETRIES + 1


def test_a_late_answer_is_never_taken_for_the_next_requests():
    """The first read of 0x1600:01 reaches the drive but its answer comes after SOEM gave up; tried
    again, SOEM takes that late answer (same index), and the retry's own answer is left over. When
    SOEM's read-out before the next request finds the drive stalled, 0x1600:02 would be read as
    0x1600:01 (a CI run: a drive "lacking 0x607A"). The late answer is read out before the retry."""
    from softrt.ethercat.preop import sdo_read

    mapping = {(0x1600, sub): bytes([sub]) * 4 for sub in range(4)}
    mailbox = _SoemMailbox(mapping, late={2}, stalled={4})
    assert [sdo_read(mailbox, 0x1600, sub) for sub in range(4)] == [mapping[0x1600, sub] for sub in range(4)]
    assert mailbox.posted == [] and mailbox.coming == []
