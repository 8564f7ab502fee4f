"""The EtherCAT master as Windows runs it, under Wine: pysoem's Windows build (SOEM over wpcap.dll) for bring-up,
softrt's own frames through softrt.platform.pcap's Windows path (pcap_open with NOCAPTURE_LOCAL, no kernel times).

Run by scripts/ci-wine-ethercat inside a network namespace whose veth peer has ``softrt ecat-sim`` on it; Wine's
wpcap.dll stands in for Npcap's (the same pcap API, over the host's libpcap). Prints one JSON line: bring-up time,
the device's counters and the frames' fates; exits 1 when the run broke a rule (a frame lost or taken stale, a drive
not enabled). Timing is Wine's, not Windows': its wpcap has no immediate mode (replies wait for libpcap's 1 ms block).

    python.exe bench/ecat_wine.py DESCRIPTION CYCLES PERIOD_US
"""

from __future__ import annotations

import json
import sys
import time


def main(description: str, cycles: int, period_us: int) -> int:
    import pysoem

    t = pysoem.settings.timeouts  # a Python simulator on a shared VM: SOEM's defaults x10, as the suite does
    t.ret, t.safe, t.eeprom, t.tx_mailbox = 20_000, 200_000, 200_000, 200_000
    from softrt.ethercat.master import EtherCATMaster
    from softrt.platform import get_platform, pcap

    name = next(d.name for d in pcap.devices() if d.description == description)
    dev = EtherCATMaster(name, period_us * 1000, 1, receive_timeout_us=100_000, watchdog_ms=1000)
    clock = get_platform().clock_ns
    t0 = time.perf_counter()
    dev.open()
    bring_up_s = time.perf_counter() - t0
    link = type(dev._sock).__name__
    try:
        dev.start(clock() + 5_000_000)
        for k in range(cycles):
            while not dev.permit():
                pass
            dev.write(float(k))
        c = dev.counters().to_dict()  # the summary's board block
    finally:
        dev.stop()
    frames = c["frames"]
    out = {
        "device": name,
        "transport": dev.transport,
        "link": link,
        "pcap": pcap.lib_version(),
        "bring_up_s": round(bring_up_s, 2),
        "writes": c["writes"],
        "lost_frames": c["lost_frames"],
        "wkc_errors": c["wkc_errors"],
        "host_gaps": c["host_gaps"],
        "frames": frames,
        "rtt_us": c["rtt_us"],
        "drives": [d["state"] for d in c["drives"]],
        "dc_probe": c["distributed_clocks"].get("probe"),
    }
    print(json.dumps(out))
    ok = (
        c["writes"] == cycles
        and frames["answered"] + frames["unanswered"] == frames["sent"]
        and not frames["bad"]
        and not frames["duplicates"]
        and c["drives"][0]["state"] == "operation enabled"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3])))
