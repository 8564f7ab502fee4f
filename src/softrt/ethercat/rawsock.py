"""A raw EtherCAT socket on an interface, optionally seeing only frames of one datagram index (OS layer).

``AF_PACKET``/``SOCK_RAW`` bound to EtherType 0x88A4 (packet(7)): a socket bound to one protocol
sees the frames the interface receives, not those this host sends (only ``ETH_P_ALL`` taps see
outgoing ones). Several sockets on one interface each get a copy of every received frame, so a
second socket beside SOEM's (the DC probe of :mod:`.dcmonitor`) attaches a classic BPF filter
(SO_ATTACH_FILTER, Documentation/networking/filter.rst) that keeps only the frames whose first
datagram carries its own index byte: the cyclic frames never queue up on it.
"""

from __future__ import annotations

import ctypes
import socket
import struct

from .errors import EcatError, EcatInputError
from .netif import interface_flags
from .wire import ECAT_HEADER_BYTES, ETH_HEADER_BYTES, ETH_P_ECAT

SO_ATTACH_FILTER = 26
#: Byte offset of the first datagram's index in an Ethernet frame: the second byte of its header
#: (ETG.1000.4 §5.4).
INDEX_OFFSET = ETH_HEADER_BYTES + ECAT_HEADER_BYTES + 1

# Classic BPF opcodes (linux/filter.h).
_LD_H_ABS, _LD_B_ABS, _JEQ_K, _RET_K = 0x28, 0x30, 0x15, 0x06


def index_filter(index: int) -> bytes:
    """Return the BPF program (struct sock_filter[]) accepting EtherCAT frames whose first datagram has *index*."""
    prog = [
        (_LD_H_ABS, 0, 0, 12),  # EtherType
        (_JEQ_K, 0, 3, ETH_P_ECAT),  # not EtherCAT: drop
        (_LD_B_ABS, 0, 0, INDEX_OFFSET),  # first datagram's index
        (_JEQ_K, 0, 1, index),  # not ours: drop
        (_RET_K, 0, 0, 0xFFFF),  # keep the whole frame
        (_RET_K, 0, 0, 0),  # drop
    ]
    return b"".join(struct.pack("HBBI", *ins) for ins in prog)


def open_raw_socket(iface: str, index: int | None = None) -> socket.socket:
    """Open an EtherCAT raw socket bound to *iface* (with *index*: only frames of that first
    datagram index); raise :class:`EcatError` with the reason."""
    if interface_flags(iface) is None:
        raise EcatInputError("no_interface", iface, "no such network interface", hint="list interfaces with 'ip link'")
    try:
        sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ECAT))
    except PermissionError as err:
        raise EcatError(
            "permission",
            iface,
            "raw sockets are not permitted",
            hint="run as root, or grant CAP_NET_RAW (setcap cap_net_raw+ep)",
        ) from err
    try:
        if index is not None:
            code = index_filter(index)
            buf = ctypes.create_string_buffer(code)
            fprog = struct.pack("HL", len(code) // 8, ctypes.addressof(buf))  # struct sock_fprog
            sock.setsockopt(socket.SOL_SOCKET, SO_ATTACH_FILTER, fprog)
        sock.bind((iface, ETH_P_ECAT))
        if index is not None:  # frames that came in before the filter was attached
            sock.setblocking(False)
            try:
                while True:
                    sock.recv(2048)
            except BlockingIOError:
                pass
    except OSError as err:
        sock.close()
        raise EcatInputError("no_interface", iface, f"cannot bind a raw socket ({err.strerror})") from err
    return sock
