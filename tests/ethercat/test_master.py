"""The softrt EtherCAT master Device (pysoem) against the virtual drives over veth.

States and data only, never timing: receive timeouts are generous so that only injected faults
count as lost frames.
"""

from __future__ import annotations

import time
from typing import ClassVar

import pytest

from softrt.ethercat.master import SW_MASK, SW_OE, EtherCATMaster, MasterState
from softrt.ipc.layout import FLAG_DEVICE_ERROR, FLAG_DEVICE_FAILED
from softrt.motion import MotionConfig, Trajectory

PERIOD_NS = 250_000
TIMEOUT_US = 200_000  # a reply later than this is a lost frame


def open_master(ns, axes=1, **options) -> EtherCATMaster:
    options.setdefault("receive_timeout_us", TIMEOUT_US)
    options.setdefault("watchdog_ms", 1000)
    dev = EtherCATMaster(ns.master_iface, PERIOD_NS, axes, **options)
    with ns.inside():
        return dev.open()


def run_cycles(dev: EtherCATMaster, n: int, values, start: bool = True) -> list[int]:
    """Run *n* cycles, sleeping to each edge; return the flags of every cycle."""
    flags = []
    if start:
        dev.start(time.monotonic_ns() + 1_000_000)
    for k in range(n):
        wait_s = (dev.edge_ns - time.monotonic_ns()) / 1e9
        if wait_s > 0:
            time.sleep(wait_s)
        while not dev.permit():
            pass
        dev.write(values(k))
        flags.append(dev.flags)
    return flags


def test_enable_sequence_sets_target_to_actual_first(start_sim, ecat_ns):
    sim = start_sim("--slaves", "2")
    dev = open_master(ecat_ns, axes=2)
    try:
        assert dev.state is MasterState.READY
        assert dev.expected_wkc == 6 and dev.dc_active
        slaves = sim.stats()["slaves"]
        for ax, s in zip(dev.drive_status(), slaves):
            assert s["drive_state"] == "OPERATION_ENABLED" and s["al_state"] == "OP"
            assert ax.statusword & SW_MASK == SW_OE
            # The drives start at 1000 and 2000 counts: the origin is where each one was.
            assert ax.origin_counts == s["position_counts"] == s["target_counts"]
        assert [s["position_counts"] for s in slaves] == [1000, 2000]
        assert all(s["drive_faults"] == 0 for s in slaves)
    finally:
        dev.stop()
    assert dev.state is MasterState.CLOSED
    after = sim.stats()["slaves"]
    assert [s["al_state"] for s in after] == ["INIT", "INIT"]
    assert [s["drive_state"] for s in after] == ["SWITCH_ON_DISABLED"] * 2


CYCLES = 4_000  # a second at 250 µs, with faults of each kind every 1,000-1,601 frames


def test_csp_4000_cycles_with_counted_faults(start_sim, ecat_ns):
    sim = start_sim(
        "--slaves", "3", "--device", "csp-drive", "--device", "io-16di", "--device", "csp-drive", fifo=True
    )  # (lost frames are counted exactly: a stalled simulator would lose one more)
    dev = open_master(ecat_ns, axes=2)
    trajectory = Trajectory(
        MotionConfig(
            axes=2,
            distance_counts=20_000,
            velocity_counts_per_s=40_000,
            accel_counts_per_s2=400_000,
            jerk_counts_per_s3=8e6,
            dwell_s=0.1,
        ),
        PERIOD_NS,
    )
    targets = []

    def values(k):
        v = trajectory.next_target().copy()
        targets.append(v)
        return v

    try:
        dev.start(time.monotonic_ns() + 50_000_000)  # the keep-alive stops: the run's frames only
        before = sim.stats()
        sim.control(cmd="drop", every=1000)
        sim.control(cmd="bad_wkc", every=1201)
        # Late by half a timeout more than the deadline: lost; the next frame, queued behind it,
        # still comes back within its own deadline (which is exact now, not rounded up to a tick).
        sim.control(cmd="delay", every=1601, delay_us=3 * TIMEOUT_US // 2)
        flags = run_cycles(dev, CYCLES, values, start=False)
        sim.control(cmd="drop", every=0)
        sim.control(cmd="bad_wkc", every=0)
        sim.control(cmd="delay", every=0)
        after = sim.stats()
        counters = dev.counters().to_dict()
    finally:
        dev.stop()
    injected = {k: after["injected"][k] - before["injected"][k] for k in after["injected"]}
    assert after["pd_frames"] - before["pd_frames"] == CYCLES
    assert injected["drop"] >= 3 and injected["bad_wkc"] >= 3 and injected["delay"] >= 2
    assert counters["writes"] == CYCLES
    assert counters["lost_frames"] == injected["drop"] + injected["delay"]
    assert counters["wkc_errors"] == injected["bad_wkc"]
    assert sum(1 for f in flags if f & FLAG_DEVICE_ERROR) == sum(injected.values())
    assert counters["drive_not_enabled_cycles"] == 0
    # Data: every drive got the last target exactly (origin + the trajectory) and follows it.
    drives = [s for s in after["slaves"] if "drive_state" in s]
    assert after["slaves"][1]["name"] == "softrt virtual 16DI" and after["slaves"][1]["al_state"] == "OP"
    for i, (ax, s) in enumerate(zip(counters["drives"], drives)):
        assert s["drive_state"] == "OPERATION_ENABLED" and s["drive_faults"] == 0
        assert s["target_counts"] == ax["origin_counts"] + round(targets[-1][i])
        assert abs(s["following_error_counts"]) < 500
        assert s["cycles"] >= CYCLES - sum(injected.values())


def test_watchdog_faults_the_drive(start_sim, ecat_ns):
    sim = start_sim("--slaves", "1")
    dev = open_master(ecat_ns, watchdog_ms=50)
    try:
        dev.start(time.monotonic_ns())  # the keep-alive stops; nobody sends frames now
        time.sleep(0.5)
        s = sim.stats()["slaves"][0]
        assert s["al_state"] == "SAFEOP+ERR" and s["al_code"] == 0x001B
        assert s["drive_state"] == "FAULT" and s["error_code"] == 0x8100
        assert s["watchdog_expiries"] == 1
        while not dev.permit():
            pass
        dev.write(0.0)
        # Out of OP, the slave no longer takes outputs: the working counter drops, AL status is
        # read in that (lost) cycle and names the cause; the device has failed.
        assert dev.flags & FLAG_DEVICE_ERROR and dev.flags & FLAG_DEVICE_FAILED
        assert (
            dev.failure
            == "slave 0 'softrt virtual CSP drive' left OP: SAFEOP+ERR, AL status 0x001B sync manager watchdog"
        )
        assert dev.counters().to_dict()["wkc_errors"] == 1 and dev.al_reads == 1
        assert dev.drive_status()[0].confirmed_cycle == -1  # no valid frame in the run
    finally:
        dev.stop()
    assert sim.stats()["slaves"][0]["al_state"] == "INIT"  # acknowledged on the way out


def test_injected_drive_fault_is_reported(start_sim, ecat_ns):
    sim = start_sim("--slaves", "1")
    dev = open_master(ecat_ns)
    try:
        flags = run_cycles(dev, 20, lambda k: 0.0)
        assert not any(flags)
        sim.control(cmd="drive_fault", slave=0, code=0x2310)  # CiA 402: continuous over-current
        flags = run_cycles_more(dev, 5)
        assert all(f & FLAG_DEVICE_ERROR for f in flags[1:])
        status = dev.drive_status()[0]
        assert status.statusword & 0x4F == 0x08 and status.error_code == 0x2310
        assert status.state == "fault" and all(f & FLAG_DEVICE_FAILED for f in flags[1:])
        assert dev.failure.startswith("drive 'softrt virtual CSP drive' (slave 0) faulted: statusword 0x")
        assert dev.failure.endswith("error code 0x2310")
    finally:
        dev.stop()


def run_cycles_more(dev: EtherCATMaster, n: int) -> list[int]:
    flags = []
    for _ in range(n):
        time.sleep(max(0.0, (dev.edge_ns - time.monotonic_ns()) / 1e9))
        while not dev.permit():
            pass
        dev.write(0.0)
        flags.append(dev.flags)
    return flags


def test_ctrl_c_disables_drives_and_returns_bus_to_init(start_sim, ecat_ns):
    sim = start_sim("--slaves", "2")
    with pytest.raises(KeyboardInterrupt), open_master(ecat_ns, axes=2) as dev:
        run_cycles(dev, 100, lambda k: [k * 1.0, -k * 1.0])
        raise KeyboardInterrupt
    assert dev.state is MasterState.CLOSED
    slaves = sim.stats()["slaves"]
    assert [s["al_state"] for s in slaves] == ["INIT", "INIT"]
    assert [s["drive_state"] for s in slaves] == ["SWITCH_ON_DISABLED"] * 2
    assert [s["drive_faults"] for s in slaves] == [0, 0]


def test_coe_drive_configured_by_sdo(start_sim, ecat_ns):
    sim = start_sim("--slaves", "1", "--device", "csp-drive-coe")
    dev = EtherCATMaster(ecat_ns.master_iface, 500_000, 1, dc=False, receive_timeout_us=TIMEOUT_US)
    with ecat_ns.inside():
        dev.open()
    try:
        s = sim.stats()["slaves"][0]
        assert s["cycle_ns"] == 500_000  # 0x60C2 written by SDO (no DC here)
        assert s["sdo_requests"] > 0 and s["drive_state"] == "OPERATION_ENABLED"
        assert not dev.dc_active
        assert dev.counters().to_dict()["distributed_clocks"] == {
            "absent": "distributed clocks were turned off (dc=False)"
        }
        run_cycles(dev, 50, lambda k: 10.0 * k)
    finally:
        dev.stop()
    assert sim.stats()["slaves"][0]["target_counts"] == dev.drive_status()[0].origin_counts + 490


def _drive_states_at_shutdown(monkeypatch, sim) -> list:
    """Patch bringup.shutdown to record the simulated drives' states when it is called."""
    from softrt.ethercat import bringup

    seen = []
    real = bringup.shutdown

    def shutdown(m):
        seen.append([s["drive_state"] for s in sim.stats()["slaves"]])
        real(m)

    monkeypatch.setattr(bringup, "shutdown", shutdown)
    return seen


def test_enable_failure_after_a_drive_enabled_runs_the_disable_sequence(start_sim, ecat_ns, monkeypatch):
    from softrt.ethercat import EcatError

    sim = start_sim("--slaves", "2")
    real_enable = EtherCATMaster._enable

    def enable_then_fail(self):
        real_enable(self)  # both drives reach OPERATION ENABLED, then the bring-up fails
        raise EcatError("drive_fault", self.iface, "injected after enabling")

    monkeypatch.setattr(EtherCATMaster, "_enable", enable_then_fail)
    seen = _drive_states_at_shutdown(monkeypatch, sim)
    dev = EtherCATMaster(ecat_ns.master_iface, PERIOD_NS, 2, receive_timeout_us=TIMEOUT_US, watchdog_ms=1000)
    with pytest.raises(EcatError, match="injected"), ecat_ns.inside():
        dev.open()
    assert dev.state is MasterState.CLOSED
    # Disabled by CiA 402 commands before the bus left OP (not stopped by the AL change).
    assert seen == [["SWITCH_ON_DISABLED"] * 2]
    slaves = sim.stats()["slaves"]
    assert [s["al_state"] for s in slaves] == ["INIT", "INIT"]
    assert [s["drive_faults"] for s in slaves] == [0, 0]


def test_ctrl_c_inside_disable_still_returns_bus_to_init(start_sim, ecat_ns, monkeypatch):
    sim = start_sim("--slaves", "1")
    dev = open_master(ecat_ns)

    def interrupted():
        raise KeyboardInterrupt

    monkeypatch.setattr(dev, "_disable", interrupted)
    with pytest.raises(KeyboardInterrupt):
        dev.stop()
    assert dev.state is MasterState.CLOSED and dev._m is None
    assert sim.stats()["slaves"][0]["al_state"] == "INIT"
    dev.stop()  # closed: a no-op


def test_keep_alive_failure_is_recorded(start_sim, ecat_ns, monkeypatch):
    start_sim("--slaves", "1")
    dev = open_master(ecat_ns)
    try:
        assert dev.keepalive_error is None
        keeper = dev._keeper

        def broken():
            raise OSError(100, "Network is down")

        monkeypatch.setattr(dev, "_exchange", broken)
        keeper.join(5)
        assert not keeper.is_alive()
        assert dev.flags & FLAG_DEVICE_ERROR
        assert "Network is down" in dev.keepalive_error
    finally:
        monkeypatch.undo()
        dev.stop()
    assert dev.state is MasterState.CLOSED


def test_read_sii_stops_at_8_kib_before_reading():
    import struct

    from softrt.ethercat.bringup import SII_MAX_BYTES, read_sii

    class Slave:
        reads = 0

        def eeprom_read(self, word):
            self.reads += 1
            if word == 0x40:  # the first category claims 0xFFFF words (128 KiB)
                return struct.pack("<HH", 0x000A, 0xFFFF)
            return bytes(4)

    slave = Slave()
    image = read_sii(slave)
    assert len(image) <= SII_MAX_BYTES
    assert slave.reads <= SII_MAX_BYTES // 4


def test_a_fault_on_the_second_axis_of_a_drive_names_that_axis(start_sim, ecat_ns):
    sim = start_sim("--device", "csp-drive-coe", "--axes-per-slave", "2")
    dev = open_master(ecat_ns, axes=2)
    try:
        run_cycles(dev, 20, lambda k: [0.0, 0.0])
        sim.control(cmd="drive_fault", slave=0, axis=1, code=0x2310)
        run_cycles(dev, 5, lambda k: [0.0, 0.0], start=False)
        assert dev.failure.startswith("drive 'softrt virtual CSP drive (2 axes) (CoE)' (slave 0, axis 1) faulted: ")
        assert dev.failure.endswith("error code 0x2310")
    finally:
        dev.stop()


def test_an_enable_step_not_reached_names_every_drive(start_sim, ecat_ns, monkeypatch):
    """Two identical drives share a name: the message and ``seen`` keep one entry per axis."""
    from softrt.ethercat import EcatError
    from softrt.ethercat.cia402 import CW_ENABLE

    start_sim("--slaves", "2")
    real_enable = EtherCATMaster._enable

    def enable_then_wait_for_the_impossible(self):
        real_enable(self)
        self._command(CW_ENABLE, SW_MASK, 0x7F, "a state no drive reaches")

    monkeypatch.setattr(EtherCATMaster, "_enable", enable_then_wait_for_the_impossible)
    with pytest.raises(EcatError, match="a state no drive reaches") as info:
        open_master(ecat_ns, axes=2, enable_timeout_s=0.05)
    assert sorted(info.value.seen) == [
        "drive 'softrt virtual CSP drive' (slave 0)",
        "drive 'softrt virtual CSP drive' (slave 1)",
    ]
    assert "(slave 0) statusword 0x" in str(info.value) and "(slave 1) statusword 0x" in str(info.value)


def test_a_slave_leaving_op_early_in_the_run_is_named_not_a_lost_bus(start_sim, ecat_ns):
    """AL status is read on a wrong working counter from the first cycle on (the periodic read
    every al_check_ns is not due yet)."""
    sim = start_sim("--slaves", "1")
    dev = open_master(ecat_ns)
    try:
        dev.start(time.monotonic_ns() + 1_000_000)
        sim.control(cmd="al_error", slave=0, state="SAFEOP", code=0x001A)
        flags = run_cycles(dev, dev.bus_timeout_frames + 5, lambda k: 0.0, start=False)
        assert flags[-1] & FLAG_DEVICE_FAILED
        assert dev.failure == (
            "slave 0 'softrt virtual CSP drive' left OP: SAFEOP+ERR, AL status 0x001A synchronization error"
        )
    finally:
        dev.stop()


def test_a_link_that_goes_down_is_named_not_a_silent_bus(start_sim, ecat_ns):
    """The slave side goes down (the cable is pulled: no carrier on ours), then our side: the
    failure names the link, and frames that could not be sent are unanswered ones."""
    from softrt.ethercat.netif import link_problem

    start_sim("--slaves", "1", fifo=True)
    dev = open_master(ecat_ns, receive_timeout_us=1000, bus_timeout_ns=20 * PERIOD_NS)
    try:
        flags = run_cycles(dev, 20, lambda k: 0.0)
        assert not any(f & FLAG_DEVICE_FAILED for f in flags) and dev.failure is None
        ecat_ns.ip("link", "set", ecat_ns.slave_iface, "down")
        flags = run_cycles(dev, 25, lambda k: 0.0, start=False)
        assert flags[-1] & FLAG_DEVICE_FAILED
        assert dev.failure.startswith(f"link down on {ecat_ns.master_iface} (no carrier): 20 frames sent in a row"), (
            dev.failure
        )
        assert link_problem(ecat_ns.master_iface, dev._sock) == "no carrier"
        ecat_ns.ip("link", "set", ecat_ns.master_iface, "down")
        assert link_problem(ecat_ns.master_iface, dev._sock) == "the interface is down"
        before = dev.counters().to_dict()["frames"]["send_errors"]  # (sends to a link without carrier may fail too)
        dev.write(0.0)
        assert dev.counters().to_dict()["frames"]["send_errors"] == before + 1  # ENETDOWN: unanswered, not a crash
    finally:
        dev.stop()


def test_confirmed_at_is_from_the_run_start_when_the_phase_lock_moves_the_cycle(start_sim, ecat_ns):
    start_sim("--slaves", "2")
    dev = open_master(ecat_ns, axes=2, dc_lock=True, dc_shift_ns=PERIOD_NS // 3)
    try:
        t0 = time.monotonic_ns() + 1_000_000
        dev.start(t0)
        run_cycles(dev, 200, lambda k: [0.0, 0.0], start=False)
        assert abs(dev.t0_ns - t0) >= 1_000  # the lock moved the cycle's origin (µs resolution below)
        status = dev.drive_status()[0]
        assert status.confirmed_cycle == dev.confirmed_cycle >= 0
        assert status.confirmed_at_s == round((dev.confirmed_ns - t0) / 1e9, 6)
    finally:
        dev.stop()


def test_an_sii_read_of_zeros_is_read_again_and_zeros_of_its_own_are_kept():
    """SOEM's EEPROM read returns zeros when the slave did not answer in time. Taken as data, a
    zeroed category header cut the PDO categories off: a CSP drive "lacked" all its PDO objects.
    The SII's own zeros (reserved header words) read as zeros again and stay."""
    from softrt.ethercat.bringup import read_sii
    from softrt.ethercat.description import csp_drive
    from softrt.ethercat.mapping import drive_map
    from softrt.ethercat.sii import build_image, parse_image

    true = build_image(csp_drive())
    assert not any(true[0x20:0x28])  # reserved header words: zeros of the SII's own

    class Slave:
        missed: ClassVar[set[int]] = {0x40, 0x50}  # words whose first read the slave does not answer in time

        def eeprom_read(self, word):
            if word in self.missed:
                self.missed.discard(word)
                return bytes(4)
            return true[2 * word : 2 * word + 4].ljust(4, b"\xff")

    image = read_sii(Slave())
    assert len(image) > 2 * 0x50 and image == true[: len(image)]
    info = parse_image(image)
    assert drive_map(info.rx_pdos, info.tx_pdos) is not None


def test_the_sii_name_is_the_one_the_general_category_points_at():
    """ETG.2010 Table 8: the General category's NameIdx (byte 3) names the device; the first string
    is often the group or the order number (the name SOEM reports, and the one bring-up takes)."""
    import dataclasses

    from softrt.ethercat.description import csp_drive
    from softrt.ethercat.sii import CAT_GENERAL, build_image, iter_categories, parse_image

    image = bytearray(build_image(dataclasses.replace(csp_drive(), group="Drives")))
    assert parse_image(bytes(image)).name == "softrt virtual CSP drive"
    pos = 0x40 * 2
    for cat, data in iter_categories(bytes(image)):
        if cat == CAT_GENERAL:
            image[pos + 4 + 3] = 2  # NameIdx -> the second string, the group
            break
        pos += 4 + len(data)
    assert parse_image(bytes(image)).name == "Drives"


class _MappedBus:
    """What pysoem shows after ``config_map``: a slave in PREOP+ERR with *al_status* (what it refused
    SAFE-OP with) and the process data sizes SOEM mapped for it."""

    def __init__(self, output_bytes: int, input_bytes: int, al_status: int = 0x001E) -> None:
        slave = type(
            "Slave",
            (),
            {
                "name": "softrt virtual CSP drive",
                "state": 0x12,
                "al_status": al_status,
                "output": bytes(output_bytes),
                "input": bytes(input_bytes),
            },
        )
        self.slaves = [slave()]

    def config_map(self) -> int:
        return 1

    def read_state(self) -> int:
        return 0x02  # PRE-OP: the bus answers, the slave refuses


def _drive_info():
    from softrt.ethercat.bringup import SlaveInfo

    return SlaveInfo(
        position=0,
        name="softrt virtual CSP drive",
        vendor_id=0x1337,
        product_code=1,
        has_coe=True,
        has_dc=True,
        drives=[],
        missing=[],
        output_bytes=12,
        input_bytes=14,
    )


def test_a_slave_refusing_its_syncmanagers_is_a_refused_mapping_named_with_soems_sizes():
    """CI, once in ~10 full runs: a slave refused SAFE-OP with 0x001E (invalid input config). SOEM
    sizes the SyncManagers from its own single read of the PDO assignment (zeros when the slave did
    not answer in time) and never checks its writes of them; softrt read the PDOs itself, so sizes
    other than those are named."""
    from softrt.ethercat.bringup import map_and_safeop
    from softrt.ethercat.errors import EcatError, MappingRefused
    from softrt.ethercat.steps import Steps

    def refused(bus) -> EcatError:
        with pytest.raises(EcatError) as info:
            map_and_safeop(bus, "ecm0", 0.05, [_drive_info()], Steps(bus, "ecm0", 10_000_000))
        return info.value

    err = refused(_MappedBus(12, 0))
    assert isinstance(err, MappingRefused) and err.reason == "state_timeout"
    assert "AL status code 0x001E (invalid input config)" in str(err)
    assert str(err).endswith(
        "on slave 0 'softrt virtual CSP drive': SOEM mapped 12 output and 0 input bytes, its PDOs take 12 and 14"
    )
    err = refused(_MappedBus(12, 14, al_status=0x001D))  # the sizes its PDOs take: a write that did not land
    assert isinstance(err, MappingRefused) and "0x001D (invalid output config)" in str(err)
    assert "SOEM mapped" not in str(err)
    err = refused(_MappedBus(12, 14, al_status=0x0011))  # another refusal: the slave's own, no second try
    assert not isinstance(err, MappingRefused) and "0x0011" in str(err)


def test_a_refused_mapping_is_brought_up_again_once_and_said(start_sim, ecat_ns, monkeypatch):
    from softrt.ethercat import bringup
    from softrt.ethercat.errors import MappingRefused

    sim = start_sim("--slaves", "1")
    real, calls = bringup.map_and_safeop, []

    def refused(m, iface, *args, **kw):
        calls.append(len(m.slaves))
        if len(calls) == 1:  # SOEM's first mapping (done, then refused): the bus is left in INIT, SOEM closed
            real(m, iface, *args, **kw)
            raise MappingRefused(
                "state_timeout",
                iface,
                "bring-up, step SAFE-OP: not all slaves reached SAFE-OP; "
                "on slave 0 'softrt virtual CSP drive': SOEM mapped 12 output and 0 input bytes, "
                "its PDOs take 12 and 14",
            )
        return real(m, iface, *args, **kw)

    monkeypatch.setattr(bringup, "map_and_safeop", refused)
    dev = open_master(ecat_ns)
    try:
        assert calls == [1, 1]  # a whole second bring-up, from a new SOEM context
        assert dev.warnings[-1] == (
            "bring-up was tried twice: bring-up, step SAFE-OP: not all slaves reached "
            "SAFE-OP; on slave 0 'softrt virtual CSP drive': SOEM mapped 12 output and 0 "
            "input bytes, its PDOs take 12 and 14"
        )
        assert sim.stats()["slaves"][0]["al_state"] == "OP"
    finally:
        dev.stop()
    monkeypatch.setattr(
        bringup,
        "map_and_safeop",
        lambda *a, **kw: (_ for _ in ()).throw(MappingRefused("state_timeout", "ecm0", "refused again")),
    )
    with pytest.raises(MappingRefused, match="refused again"):  # refused again: the run fails
        open_master(ecat_ns)
    assert sim.stats()["slaves"][0]["al_state"] == "INIT"
