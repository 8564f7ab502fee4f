"""The cyclic frame's receive deadline, honoured to microseconds (OS layer, Linux).

Why SOEM alone misses it: ``ecx_receive_processdata(timeout)`` waits in ``ecx_waitinframe_red``,
a loop that calls ``ecx_inframe`` → ``recv()`` on SOEM's raw socket until its µs timer
(``osal_timer_start``, CLOCK_MONOTONIC) expires. SOEM opens that socket blocking with
``SO_RCVTIMEO`` = 1 µs (``oshw/linux/nicdrv.c`` ``ecx_setupnic``), and the kernel keeps socket
timeouts in jiffies: ``sock_set_timeout`` rounds 1 µs *up* to one tick (4 ms at CONFIG_HZ=250),
and the timer wheel never fires early, so a ``recv()`` on an empty queue sleeps 1-2 ticks
(socket(7) SO_RCVTIMEO; kernel ``net/core/sock.c``, ``kernel/time/timer.c``). When the frame is
lost, the first ``recv()`` already outlives any timeout below a tick: measured here 4.2-13 ms for
an 800 µs timeout, so one lost frame costs 4-13 cycles at 1 ms.

The fix keeps SOEM's whole receive path (index bookkeeping, the FRMW DC time, redundancy) and
changes one thing: SOEM's socket is switched to non-blocking (``O_NONBLOCK`` on the open file
description, fcntl(2)) for the cyclic phase. ``recv()`` then returns EAGAIN at once and SOEM's
loop becomes a busy-poll of its own µs timer: a lost frame returns at the timeout (measured
810-818 µs median for 800 µs). pysoem does not expose the socket, so it is found by what it is:
the ``AF_PACKET`` socket in this process bound to the interface and EtherType 0x88A4
(packet(7), ``getsockname``).

A reply that arrives after its deadline is discarded by SOEM (its buffer is already released,
``ecx_inframe`` "strange things happened" branch), so a late frame is a lost frame, counted once.
"""

from __future__ import annotations

import os
import socket
import time

from .errors import EcatError
from .wire import ETH_P_ECAT

_FD_DIR = "/proc/self/fd"


def ethercat_sockets(iface: str, fd_dir: str = _FD_DIR, exclude: frozenset[int] = frozenset()) -> list[int]:
    """Return the file descriptors of this process's EtherCAT raw sockets bound to *iface*, but
    those in *exclude* (softrt's own, e.g. the DC probe's)."""
    found = []
    for name in os.listdir(fd_dir):
        if name.isdigit() and int(name) in exclude:
            continue
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


class PollingReceive:
    """SOEM's socket on *iface* in non-blocking mode while entered; blocking again on exit.

    *own_fds*: softrt's own sockets on the interface (the DC probe of :mod:`.dcmonitor`), not SOEM's.
    """

    def __init__(self, iface: str, own_fds: frozenset[int] = frozenset()) -> None:
        self.iface = iface
        self.own_fds = own_fds
        self.fds: list[int] = []

    def __enter__(self) -> PollingReceive:
        fds = ethercat_sockets(self.iface, exclude=self.own_fds)
        if len(fds) != 1:
            raise EcatError("config", self.iface,
                            f"expected SOEM's one raw socket on the interface, found {len(fds)}",
                            hint="one EtherCAT master per interface and process")
        os.set_blocking(fds[0], False)
        self.fds = fds
        return self

    def __exit__(self, *exc) -> None:
        for fd in self.fds:
            try:
                os.set_blocking(fd, True)
            except OSError:  # already closed with the master
                pass
        self.fds = []


def exchange(m, timeout_us: int) -> tuple[int, int]:
    """Send the process data and wait for it at most *timeout_us*; return ``(wkc, round trip ns)``.

    ``wkc`` is SOEM's working counter, or a negative value (EC_NOFRAME) when no frame came back
    before the deadline.
    """
    t = time.monotonic_ns()
    m.send_processdata(release_gil=True)
    wkc = m.receive_processdata(timeout_us, release_gil=True)
    return wkc, time.monotonic_ns() - t
