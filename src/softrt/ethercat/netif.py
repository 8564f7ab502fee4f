"""Network interface checks in the calling thread's network namespace (OS layer, Linux only).

``fcntl`` is imported where it is used: the module loads on Windows, where a pcap link asks Npcap instead
(:mod:`.transport`).
"""

from __future__ import annotations

import array
import socket
import struct

from .errors import EcatError, EcatInputError
from .wire import ETH_P_ECAT

IFF_UP = 0x1
IFF_RUNNING = 0x40  #: the link is up: carrier, RFC 2863 "operational" (netdevice(7))
SIOCGIFFLAGS = 0x8913
SIOCETHTOOL = 0x8946  #: linux/sockios.h
ETHTOOL_GLINK = 0x0000000A  #: linux/ethtool.h: struct ethtool_value {u32 cmd; u32 data}


def interface_flags(iface: str, sock: socket.socket | None = None) -> int | None:
    """Return the interface flags (SIOCGIFFLAGS, netdevice(7)), or None if there is no such interface.

    An ioctl asks the network namespace of the socket it goes through (*sock*'s, else a new one's:
    the calling thread's); /sys/class/net would show the namespace that mounted sysfs instead.
    """
    import fcntl

    if not iface or len(iface) >= 16:
        return None
    request = struct.pack("16sH22x", iface.encode(), 0)
    try:
        if sock is not None:
            res = fcntl.ioctl(sock, SIOCGIFFLAGS, request)
        else:
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
                res = fcntl.ioctl(s, SIOCGIFFLAGS, request)
    except OSError:  # ENODEV
        return None
    return struct.unpack_from("16sH", res)[1]


def check_interface(iface: str) -> None:
    """Fail early, with the reason, if *iface* is missing, down, or raw sockets are not allowed."""
    flags = interface_flags(iface)
    if flags is None:
        raise EcatInputError("no_interface", iface, "no such network interface", hint="list interfaces with 'ip link'")
    if not flags & IFF_UP:
        raise EcatInputError("interface_down", iface, "interface is down", hint=f"bring it up: ip link set {iface} up")
    try:
        socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ECAT)).close()
    except PermissionError as err:
        raise EcatError(
            "permission",
            iface,
            "raw sockets are not permitted (needs CAP_NET_RAW)",
            hint="run as root, or: setcap cap_net_raw,cap_net_admin+ep $(readlink -f $(which python3))",
        ) from err


def carrier(iface: str, sock: socket.socket | None = None) -> bool | None:
    """Whether *iface* has a carrier as its driver says now (ETHTOOL_GLINK; ethtool(8) "Link
    detected"), or None where the driver does not say.

    IFF_RUNNING follows the carrier only through the kernel's linkwatch work
    (net/core/link_watch.c), which a loaded host ran after a 5 ms bus timeout (a CI run named a
    veth whose peer went down a lost bus), and which holds a physical NIC's loss of carrier up to
    a second.
    """
    import fcntl

    value = array.array("I", [ETHTOOL_GLINK, 0])  # ifr_data points at it (struct ifreq, netdevice(7))
    request = struct.pack("16sP", iface.encode(), value.buffer_info()[0]).ljust(40, b"\0")
    try:
        if sock is not None:
            fcntl.ioctl(sock, SIOCETHTOOL, request)
        else:
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
                fcntl.ioctl(s, SIOCETHTOOL, request)
    except OSError:  # EOPNOTSUPP: a driver without ethtool's link query
        return None
    return bool(value[1])


def link_problem(iface: str, sock: socket.socket | None = None) -> str | None:
    """Say what is wrong with *iface*'s link ("no such interface", "the interface is down", "no
    carrier"), or None when it is up and running; asked in *sock*'s network namespace if given."""
    flags = interface_flags(iface, sock)
    if flags is None:
        return "no such interface"
    if not flags & IFF_UP:
        return "the interface is down"
    up = carrier(iface, sock)
    if up is False or (up is None and not flags & IFF_RUNNING):
        return "no carrier"
    return None
