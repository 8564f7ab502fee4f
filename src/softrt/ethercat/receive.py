"""SOEM's raw socket: found, and non-blocking during a run so its receive deadlines hold to µs (OS layer, Linux).

Why SOEM alone misses it: ``ecx_receive_processdata(timeout)`` waits in ``ecx_waitinframe_red``,
a loop that calls ``ecx_inframe`` → ``recv()`` on SOEM's raw socket until its µs timer
(``osal_timer_start``, CLOCK_MONOTONIC) expires. SOEM opens that socket blocking with
``SO_RCVTIMEO`` = 1 µs (``oshw/linux/nicdrv.c`` ``ecx_setupnic``), and the kernel keeps socket
timeouts in jiffies: ``sock_set_timeout`` rounds 1 µs *up* to one tick (4 ms at CONFIG_HZ=250),
and the timer wheel never fires early, so a ``recv()`` on an empty queue sleeps 1-2 ticks
(socket(7) SO_RCVTIMEO; kernel ``net/core/sock.c``, ``kernel/time/timer.c``). When the frame is
lost, the first ``recv()`` already outlives any timeout below a tick: measured here 4.2-13 ms for
an 800 µs timeout, so one lost frame costs 4-13 cycles at 1 ms.

The fix changes one thing: SOEM's socket is switched to non-blocking (``O_NONBLOCK`` on the open
file description, fcntl(2), shared by every duplicate of the descriptor) as soon as it is open. ``recv()`` then returns EAGAIN at once and SOEM's
loop becomes a busy-poll of its own µs timer: a lost frame returns at the timeout (measured
810-818 µs median for 800 µs). pysoem does not expose the socket, so it is found by what it is:
the ``AF_PACKET`` socket in this process bound to the interface and EtherType 0x88A4
(packet(7), ``getsockname``).

The cyclic frame itself is softrt's own (:mod:`.cyclic`, on a duplicate of the same socket, read
with ``MSG_DONTWAIT``); what still goes through SOEM's receive during a run is its own transactions
(bring-up, the AL status reads of the bus health check), and those get their µs deadlines this
way. The master keeps that duplicate from ``open`` on, so SOEM's socket is found once, while it is
alone.
"""

from __future__ import annotations

import os
import socket

from .errors import EcatError
from .wire import ETH_P_ECAT

_FD_DIR = "/proc/self/fd"


def ethercat_sockets(iface: str, fd_dir: str = _FD_DIR) -> list[int]:
    """Return the file descriptors of this process's EtherCAT raw sockets bound to *iface*."""
    if not os.path.isdir(fd_dir):  # no /proc (Windows, where SOEM reads through Npcap): no raw socket either
        return []
    found = []
    for name in os.listdir(fd_dir):
        try:
            if not os.readlink(os.path.join(fd_dir, name)).startswith("socket:"):
                continue
            probe = socket.socket(fileno=os.dup(int(name)))  # a duplicate: closing it leaves SOEM's
        except OSError:  # the directory's own descriptor, or one closed meanwhile
            continue
        try:
            if probe.family == socket.AF_PACKET:
                bound_iface, proto = probe.getsockname()[:2]
                if bound_iface == iface and proto == ETH_P_ECAT:
                    found.append(int(name))
        except OSError:
            pass
        finally:
            probe.close()
    return found


def soem_socket(iface: str) -> int:
    """Return SOEM's raw socket on *iface* (just after pysoem opened it: the one EtherCAT socket of
    this process there); raise :class:`EcatError` when there is not exactly one."""
    fds = ethercat_sockets(iface)
    if len(fds) != 1:
        raise EcatError(
            "config",
            iface,
            f"expected SOEM's one raw socket on the interface, found {len(fds)}",
            hint="one EtherCAT master per interface and process",
        )
    return fds[0]
