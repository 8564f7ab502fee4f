"""How softrt's own EtherCAT frames reach the wire: an ``AF_PACKET`` socket or a pcap handle (OS layer).

SOEM (pysoem) brings the bus up on its own handle: a raw socket on Linux, Npcap on Windows (``oshw/win32/nicdrv.c``).
softrt's frames, the cyclic frame (:mod:`.cyclic`) and the DC probe (:mod:`.dcmonitor`), go through a *link*:

``af_packet``  Linux's raw socket (packet(7)): the cyclic frame on a duplicate of SOEM's socket (:mod:`.receive`),
               the probe on a socket of its own with a BPF filter on its datagram index (:mod:`.rawsock`).
``pcap``       a pcap handle of softrt's own (:mod:`softrt.platform.pcap`: Npcap's ``wpcap.dll`` on Windows, libpcap
               on Linux), filtered to EtherCAT frames of its datagram index, that never captures the frames it
               sends. SOEM's handle gets a copy of each reply and drops it as not its own (an index above its 16,
               ``ecx_inframe``); where SOEM's is a Linux raw socket it is made non-blocking as with ``af_packet``.

The default is the platform's (:func:`softrt.platform.pcap.raw_ethernet`: pcap on Windows, where there is no raw
socket, AF_PACKET on Linux); ``SOFTRT_ECAT_TRANSPORT=pcap`` (or the master's ``transport=``) takes pcap on Linux too,
which is how the Windows path's own code runs against a real bus simulator here.

A link has ``send(frame)`` (OSError on failure), ``receive_into(buf)`` → ``(length, CLOCK_REALTIME ns or 0)`` or
None when nothing waits (never blocks), ``wait(timeout_s)``, ``link_problem(iface)``, ``fileno()`` (a descriptor
for select(2) and ioctl(2), -1 where there is none) and ``close()``. Freshness
does not depend on the link: the cyclic frame carries its number and every reply is checked (:mod:`.cyclic`).
"""

from __future__ import annotations

import os
import socket
import struct

from ..errors import ConfigError
from ..platform import pcap
from .errors import EcatError, EcatInputError
from .netif import link_problem
from .wire import CYCLIC_INDEX, ECAT_HEADER_BYTES, ETH_HEADER_BYTES

TRANSPORTS = ("af_packet", "pcap")
ENV = "SOFTRT_ECAT_TRANSPORT"
#: SO_TIMESTAMPNS / SCM_TIMESTAMPNS (socket(7), asm-generic/socket.h; not in Python's socket module).
SO_TIMESTAMPNS = 35
_ANCILLARY = socket.CMSG_SPACE(16) if hasattr(socket, "CMSG_SPACE") else 0  # (Windows' socket module has none)
_TIMESPEC = struct.Struct("<qq")
#: Byte offset of the first datagram's index in a frame (pcap-filter(7)'s ``ether[17]``).
INDEX_OFFSET = ETH_HEADER_BYTES + ECAT_HEADER_BYTES + 1


def choose(asked: str | None = None) -> str:
    """The transport to use: *asked*, else ``$SOFTRT_ECAT_TRANSPORT``, else the platform's; ConfigError if unknown."""
    kind = (asked or os.environ.get(ENV) or pcap.raw_ethernet()).strip().lower()
    if kind not in TRANSPORTS:
        where = f"{ENV}={kind!r}" if not asked else f"transport {kind!r}"
        raise ConfigError(f"unknown EtherCAT transport: {where}", hint=f"use one of {', '.join(TRANSPORTS)}")
    if kind == "af_packet" and not hasattr(socket, "AF_PACKET"):
        raise ConfigError(
            "AF_PACKET raw sockets are Linux's; this system reaches the bus through pcap (Npcap)",
            hint=f"unset {ENV} or set it to pcap",
        )
    return kind


class SocketLink:
    """A datagram socket as a link (AF_PACKET; the tests' socket pairs): kernel receive times from SO_TIMESTAMPNS."""

    kind = "af_packet"

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self._bufs: list = [None]  # recvmsg_into's buffer list, kept (the cyclic frame reads into one buffer)
        sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)

    @property
    def closed(self) -> bool:
        return self.sock.fileno() < 0

    def fileno(self) -> int:
        return self.sock.fileno()

    def send(self, frame) -> None:
        self.sock.send(frame)

    def receive_into(self, buf: bytearray) -> tuple[int, int] | None:
        bufs = self._bufs
        if bufs[0] is not buf:
            bufs[0] = buf
        try:
            n, ancillary, _flags, _addr = self.sock.recvmsg_into(bufs, _ANCILLARY, socket.MSG_DONTWAIT)
        except (BlockingIOError, InterruptedError):
            return None
        except OSError:  # the interface went away: nothing to read, the sends say why
            return None
        for level, kind, data in ancillary:
            if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(data) >= _TIMESPEC.size:
                sec, nsec = _TIMESPEC.unpack_from(data)
                return n, sec * 1_000_000_000 + nsec
        return n, 0

    def wait(self, timeout_s: float) -> bool:
        import select

        return bool(select.select([self.sock], [], [], max(0.0, timeout_s))[0])

    def link_problem(self, iface: str) -> str | None:
        return link_problem(iface, self.sock)

    def close(self) -> None:
        self.sock.close()


class PcapLink:
    """A pcap handle as a link (:class:`softrt.platform.pcap.Capture`)."""

    kind = "pcap"

    def __init__(self, capture: pcap.Capture) -> None:
        self.capture = capture
        self.send = capture.send
        self.receive_into = capture.receive_into
        self.wait = capture.wait
        self.fileno = capture.fileno

    @property
    def closed(self) -> bool:
        return self.capture.closed

    def link_problem(self, iface: str) -> str | None:
        """Through libpcap's own socket where it has one (Linux: in the network namespace it was opened in), else
        by the library's interface flags (Npcap: up, connection status)."""
        fd = self.capture.fileno()
        if fd >= 0:
            with socket.socket(fileno=os.dup(fd)) as sock:
                return link_problem(iface, sock)
        try:
            found = [d for d in pcap.devices() if d.name == iface]
        except pcap.PcapError:
            return None
        return found[0].problem() if found else "no such interface"

    def close(self) -> None:
        self.capture.close()


def as_link(sock_or_link):
    """A link for *sock_or_link*: a socket is wrapped in :class:`SocketLink`, a link is itself."""
    return SocketLink(sock_or_link) if isinstance(sock_or_link, socket.socket) else sock_or_link


def index_filter(index: int | None) -> str:
    """The pcap-filter(7) expression of EtherCAT frames (whose first datagram has *index*, when given)."""
    expr = "ether proto 0x88a4"
    return expr if index is None else f"{expr} and ether[{INDEX_OFFSET}] = {index}"


def open_pcap(iface: str, index: int | None) -> PcapLink:
    """A pcap link on *iface* seeing only received EtherCAT frames of datagram *index*; EcatError with the fix."""
    try:
        return PcapLink(pcap.Capture(iface, index_filter(index)))
    except pcap.PcapError as err:
        if err.reason == "no_device":
            raise EcatInputError("no_interface", iface, err.msg, hint=err.hint) from None
        if err.reason == "down":
            raise EcatInputError("interface_down", iface, err.msg, hint=err.hint) from None
        if err.reason == "missing":
            raise EcatInputError("config", iface, err.msg, hint=err.hint) from None
        raise EcatError(
            "permission" if err.reason == "permission" else "config", iface, err.msg, hint=err.hint
        ) from None


def open_cyclic(iface: str, kind: str):
    """The link of the cyclic frame, just after pysoem opened *iface* (see the module docstring)."""
    from . import receive

    if kind == "af_packet":
        sock = socket.socket(fileno=os.dup(receive.soem_socket(iface)))
        # Non-blocking from here on, SOEM's too (one file description): its waits then hold their µs
        # timeouts instead of whole kernel ticks (.receive), in bring-up and in the run.
        sock.setblocking(False)
        return SocketLink(sock)
    for fd in receive.ethercat_sockets(iface):  # SOEM's raw socket where pysoem has one (Linux)
        with socket.socket(fileno=os.dup(fd)) as dup:
            dup.setblocking(False)
    return open_pcap(iface, CYCLIC_INDEX)


def open_link(iface: str, index: int, kind: str):
    """A link of its own on *iface* for the frames of datagram *index* (the DC probe)."""
    if kind == "af_packet":
        from .rawsock import open_raw_socket

        sock = open_raw_socket(iface, index)
        sock.setblocking(False)
        return SocketLink(sock)
    return open_pcap(iface, index)


def check_interface(iface: str, kind: str) -> None:
    """Fail early, with the reason, if *iface* cannot carry the bus through *kind*."""
    if kind == "af_packet":
        from .netif import check_interface as check_af_packet

        check_af_packet(iface)
        return
    open_pcap(iface, None).close()  # the library, the device, its state and the permission, as the run opens them
