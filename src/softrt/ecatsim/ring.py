"""A packet socket's receive ring: frames read from memory shared with the kernel (ecatsim layer).

packet(7) ``PACKET_RX_RING`` with ``TPACKET_V2`` (Documentation/networking/packet_mmap.rst): the
kernel writes each frame the socket receives into the next slot of a ring mapped into this
process, with its receive time, and hands the slot over by setting ``TP_STATUS_USER`` in the
slot's header; the reader copies the frame out and hands the slot back (``TP_STATUS_KERNEL``).
Looking for a frame is a read of one word, not a system call: on this VM a ``recvmsg`` cost 7-10
µs and a poll that found nothing about 4 µs, so the simulator that waits for a frame in a tight
loop sees it microseconds sooner, and reading it costs no system call either. ``select``/``poll``
on the socket still wake a sleeper when a slot is filled.
"""

from __future__ import annotations

import mmap
import socket
import struct

SOL_PACKET = getattr(socket, "SOL_PACKET", 263)
PACKET_RX_RING, PACKET_VERSION = 5, 10  # linux/if_packet.h
TPACKET_V2 = 1
TP_STATUS_KERNEL, TP_STATUS_USER = 0, 1
#: struct tpacket2_hdr: status, len, snaplen, mac, net, sec, nsec (vlan fields and padding follow).
_HEADER = struct.Struct("=IIIHHII")
#: sll_pkttype in the struct sockaddr_ll after the header (TPACKET_ALIGN(32) + 10).
_PKTTYPE_AT = 42
#: struct tpacket_req: block size, block count, frame size, frame count.
_REQUEST = struct.Struct("=IIII")


class RxRing:
    """The receive ring of packet socket *sock*: *slots* frames of *slot_bytes* (a whole frame of
    up to 1,514 bytes with its header fits 2,048)."""

    def __init__(self, sock: socket.socket, slots: int = 64, slot_bytes: int = 2048) -> None:
        block = mmap.PAGESIZE * max(1, -(-slot_bytes // mmap.PAGESIZE))
        per_block = block // slot_bytes
        blocks = -(-slots // per_block)
        sock.setsockopt(SOL_PACKET, PACKET_VERSION, TPACKET_V2)
        sock.setsockopt(SOL_PACKET, PACKET_RX_RING, _REQUEST.pack(block, blocks, slot_bytes, blocks * per_block))
        self._map = mmap.mmap(sock.fileno(), block * blocks, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        self._slot_bytes = slot_bytes
        self._slots = blocks * per_block
        self._next = 0

    def take(self) -> tuple[bytearray, int, int] | None:
        """Take the next frame and give its slot back: ``(the frame, its receive time
        (CLOCK_REALTIME ns), its packet type)``, or None when no frame is waiting."""
        ring, at = self._map, self._next * self._slot_bytes
        status, _length, snap, mac, _net, sec, nsec = _HEADER.unpack_from(ring, at)
        if not status & TP_STATUS_USER:
            return None
        frame = bytearray(ring[at + mac : at + mac + snap])
        kind = ring[at + _PKTTYPE_AT]
        ring[at : at + 4] = b"\0\0\0\0"  # TP_STATUS_KERNEL: the slot is the kernel's again
        self._next = (self._next + 1) % self._slots
        return frame, sec * 1_000_000_000 + nsec, kind

    def close(self) -> None:
        """Unmap the ring (the map holds a duplicate of the socket's descriptor)."""
        self._map.close()
