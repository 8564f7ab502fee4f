"""softrt's frames over a pcap handle (softrt.ethercat.transport): the master Windows uses, run here on libpcap.

The master brings the simulated bus to OP through pysoem and cycles its own frame through libpcap, the library
whose API Npcap's wpcap.dll implements (softrt.platform.pcap). Faults are injected to show that a reply which
comes after its deadline is counted late, never taken for a later cycle's answer.
"""

from __future__ import annotations

import time

import pytest

from softrt.errors import ConfigError
from softrt.ethercat import transport
from softrt.ethercat.master import SW_MASK, SW_OE, EtherCATMaster
from softrt.ipc.layout import FLAG_DEVICE_ERROR

PERIOD_NS = 250_000
TIMEOUT_US = 100_000  # generous (receive times are the kernel's): only injected faults are lost frames


def test_the_transport_is_chosen_by_argument_then_environment(monkeypatch):
    monkeypatch.setenv(transport.ENV, "pcap")
    assert transport.choose() == "pcap"
    assert transport.choose("af_packet") == "af_packet"
    monkeypatch.setenv(transport.ENV, "npcap")
    with pytest.raises(ConfigError, match=r"unknown EtherCAT transport: SOFTRT_ECAT_TRANSPORT='npcap'.*pcap"):
        transport.choose()
    monkeypatch.delenv(transport.ENV)
    assert transport.choose() == "af_packet"  # Linux's own


@pytest.mark.rt  # a SCHED_FIFO simulator and exact frame counts: one at a time, as test_run_health
def test_the_master_runs_over_pcap_and_never_takes_a_late_reply(start_sim, ecat_ns):
    sim = start_sim("--slaves", "2", fifo=True)  # (lost frames are counted exactly)
    dev = EtherCATMaster(
        ecat_ns.master_iface, PERIOD_NS, 2, receive_timeout_us=TIMEOUT_US, watchdog_ms=1000, transport="pcap"
    )
    with ecat_ns.inside():
        dev.open()
    try:
        assert isinstance(dev._sock, transport.PcapLink) and isinstance(dev._dc.probe.link, transport.PcapLink)
        assert [s["al_state"] for s in sim.stats()["slaves"]] == ["OP", "OP"]
        dev.start(time.monotonic_ns() + 20_000_000)
        before = sim.stats()
        sim.control(cmd="drop", every=131)
        # Held past the deadline: it comes back while a later frame is awaited, and must be judged late.
        sim.control(cmd="delay", every=173, delay_us=3 * TIMEOUT_US // 2)
        flags = []
        for k in range(400):
            while not dev.permit():
                time.sleep(max(0.0, (dev.edge_ns - time.monotonic_ns()) / 1e9))
            dev.write([float(k), -float(k)])
            flags.append(dev.flags)
        sim.control(cmd="drop", every=0)
        sim.control(cmd="delay", every=0)
        time.sleep(3 * TIMEOUT_US / 2e6)  # the last delayed reply arrives, then is read by the next cycles
        for _ in range(4):
            while not dev.permit():
                pass
            dev.write([400.0, -400.0])
        after = sim.stats()
        counters = dev.counters().to_dict()
    finally:
        dev.stop()
    injected = {k: after["injected"][k] - before["injected"][k] for k in ("drop", "delay")}
    frames = counters["frames"]
    assert injected["drop"] >= 3 and injected["delay"] >= 2
    assert counters["lost_frames"] == injected["drop"] + injected["delay"] and counters["wkc_errors"] == 0
    assert sum(1 for f in flags if f & FLAG_DEVICE_ERROR) == injected["drop"] + injected["delay"]
    # Each delayed reply came back and was counted late; none was an answer, none was read twice or as our own.
    assert frames["late"] == injected["delay"] and frames["duplicates"] == 0 and frames["bad"] == {}
    assert frames["answered"] == frames["sent"] - frames["unanswered"] and frames["foreign"] == 0
    assert counters["rtt_us"]["max"] < TIMEOUT_US
    assert all(d["statusword"] & SW_MASK == SW_OE for d in counters["drives"])
    assert counters["distributed_clocks"]["probe"]["sent"] >= 3
    slaves = after["slaves"]
    assert [s["target_counts"] - d["origin_counts"] for s, d in zip(slaves, counters["drives"])] == [400, -400]
