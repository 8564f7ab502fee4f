"""The pcap binding (softrt.platform.pcap) against a library softrt did not write: libpcap here, on a veth pair;
Npcap's absence under Wine (the same module loads System32\\Npcap\\wpcap.dll on Windows).

The veth tests need root (a veth pair in a network namespace of their own); the Windows test runs under
scripts/ci-wine, where no Npcap is installed.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import subprocess
import sys
import time

import pytest

from softrt.platform import pcap

ON_WINDOWS = sys.platform == "win32"
ECAT = "ether proto 0x88a4"


def _frame(index: int, fill: int = 0) -> bytearray:
    """An EtherCAT frame (broadcast, EtherType 0x88A4) whose first datagram has *index*, padded to 60 bytes."""
    return bytearray(b"\xff" * 6 + b"\x01" * 6 + b"\x88\xa4" + bytes([0x10, 0x10, 0x07, index]) + bytes([fill]) * 42)


@pytest.fixture
def veth():
    """``(a, b)``: the ends of a veth pair, up, in a network namespace this test enters alone (unshare)."""
    if ON_WINDOWS or os.geteuid() != 0:
        pytest.skip("needs root on Linux (a veth pair)")
    try:
        pcap.load()
    except pcap.PcapError as err:
        pytest.skip(str(err))
    libc = ctypes.CDLL(None, use_errno=True)
    here = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    if libc.unshare(0x40000000) != 0:  # CLONE_NEWNET: this thread only, undone below
        os.close(here)
        pytest.skip("cannot create a network namespace")
    try:
        for cmd in (
            ["ip", "link", "add", "pa0", "type", "veth", "peer", "name", "pb0"],
            ["ip", "link", "set", "pa0", "up"],
            ["ip", "link", "set", "pb0", "up"],
        ):
            subprocess.run(cmd, check=True, capture_output=True)
        yield "pa0", "pb0"
    finally:
        libc.setns(here, 0x40000000)  # back; the namespace and its veth pair go with its last user
        os.close(here)


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True)


def test_frames_go_out_and_come_in_filtered_never_our_own(veth):
    a_name, b_name = veth
    with (
        contextlib.closing(pcap.Capture(a_name, f"{ECAT} and ether[17] = 0xc0")) as a,
        contextlib.closing(pcap.Capture(b_name, ECAT)) as b,
    ):
        assert a.fileno() >= 0 and a.nanoseconds
        buf = bytearray(2048)
        a.send(_frame(0xC0, 1))
        assert b.wait(1.0)
        n, at_ns = b.receive_into(buf)
        assert (n, bytes(buf[:n])) == (60, bytes(_frame(0xC0, 1)))
        assert abs(time.time_ns() - at_ns) < 5e9  # the kernel's CLOCK_REALTIME, in ns
        assert b.receive_into(buf) is None  # non-blocking: nothing more
        assert not a.wait(0.02) and a.receive_into(buf) is None  # its own frame is not read back (PCAP_D_IN)
        b.send(_frame(0x05))  # another index: filtered out
        b.send(bytes(_frame(0xC0, 2)))  # bytes or bytearray alike
        assert a.wait(1.0)
        time.sleep(0.01)
        got = a.receive_into(buf)
        assert got is not None and buf[18] == 2
        assert a.receive_into(buf) is None
    assert a.closed and a.receive_into(buf) is None
    with pytest.raises(OSError):
        a.send(_frame(0xC0))


def test_a_missing_or_down_device_says_so_with_the_fix(veth):
    with pytest.raises(pcap.PcapError, match=r"no network interface 'nosuch0'.*ip link") as err:
        pcap.Capture("nosuch0", ECAT)
    assert err.value.reason == "no_device"
    _ip("link", "set", "pa0", "down")
    found = {d.name: d for d in pcap.devices()}
    # pcap's flags: pa0 is down, and pb0, still up, has lost its carrier with its peer.
    assert (found["pa0"].problem(), found["pb0"].problem()) == ("the interface is down", "no carrier")
    with pytest.raises(pcap.PcapError, match="pa0") as err:
        pcap.Capture("pa0", ECAT)
    assert err.value.reason == "down" and "ip link set pa0 up" in str(err.value)
    with pytest.raises(pcap.PcapError, match="could not compile"):
        pcap.Capture("pb0", "ether proto nonsense")


def test_the_library_is_npcap_s_folder_on_windows_and_its_absence_is_one_line(tmp_path):
    system32 = tmp_path / "System32"
    system32.mkdir()
    assert pcap.library_path(str(tmp_path)) == [os.path.join(str(tmp_path), "System32", "Npcap", "wpcap.dll")]
    assert pcap.missing_reason(str(tmp_path)) == "Npcap is not installed (no System32\\Npcap\\wpcap.dll)"
    (system32 / "wpcap.dll").write_bytes(b"")
    assert "System32 has a wpcap.dll (WinPcap's, or Wine's) but" in pcap.missing_reason(str(tmp_path))


@pytest.mark.skipif(not ON_WINDOWS, reason="Windows: Npcap's absence (scripts/ci-wine)")
def test_without_npcap_windows_says_install_it():
    if os.path.isfile(pcap.library_path()[0]):
        pytest.skip("Npcap is installed here")
    with pytest.raises(pcap.PcapError, match=r"System32\\Npcap.*install Npcap from npcap\.com") as err:
        pcap.load()
    assert err.value.reason == "missing"
    from softrt.ethercat import transport

    assert transport.choose() == "pcap"
    with pytest.raises(Exception, match="install Npcap") as err:
        transport.check_interface("\\Device\\NPF_{4D36E972-E325-11CE-BFC1-08002BE10318}", "pcap")
    assert type(err.value).__name__ == "EcatInputError"
