"""Network interface checks in the calling thread's network namespace (OS layer, Linux only)."""

from __future__ import annotations

import fcntl
import socket
import struct

from .errors import EcatError, EcatInputError
from .wire import ETH_P_ECAT

IFF_UP = 0x1
SIOCGIFFLAGS = 0x8913


def interface_flags(iface: str) -> int | None:
    """Return the interface flags (SIOCGIFFLAGS, netdevice(7)), or None if there is no such interface.

    An ioctl asks the calling thread's network namespace; /sys/class/net would show the namespace
    that mounted sysfs instead.
    """
    if not iface or len(iface) >= 16:
        return None
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            res = fcntl.ioctl(s, SIOCGIFFLAGS, struct.pack("16sH22x", iface.encode(), 0))
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
        raise EcatError("permission", iface, "raw sockets are not permitted (needs CAP_NET_RAW)",
                        hint="run as root, or: setcap cap_net_raw,cap_net_admin+ep $(readlink -f $(which python3))") from err
