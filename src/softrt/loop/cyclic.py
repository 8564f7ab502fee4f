"""The hot loop: the seed's three steps, once per board cycle (loop layer).

Nothing here allocates beyond the integers CPython makes for timestamps, logs, or branches on
anything but the wait strategy. Locals are bound once before the loop (a global or attribute
lookup costs 20-40 ns in CPython 3.11, a noticeable share of a 1 µs budget).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from ..ipc.layout import FLAG_DEVICE_FAILED, H_STOP
from ..ipc.ring import RingWriter

WAITS = ("spin", "sleep", "hybrid")


def run_cycles(
    device,
    step: Callable[[int], Any],
    writer: RingWriter,
    header,
    end_ns: int,
    sleep_until: Callable[[int], None] | None = None,
    margin_ns: int = 0,
    clock_ns: Callable[[], int] = time.monotonic_ns,
) -> int:
    """Run cycles until *end_ns* (on *clock_ns*, the platform's clock), a stop request or a failed
    device (its ``flags`` carry FLAG_DEVICE_FAILED; ``device.failure`` says why); return the cycle count.

    Each cycle: (1) wait for the permit — with *sleep_until*, first sleep to ``edge - margin_ns``
    (``sleep``: margin 0; ``hybrid``: a margin, then spin); without it, spin (the seed's polling);
    (2) write the buffered output to the device; (3) compute the next output with ``step(seq)``.
    """
    mono = clock_ns
    permit = device.permit
    write = device.write
    put = writer.put
    stop_slot = H_STOP
    failed = FLAG_DEVICE_FAILED
    seq = 0
    out = step(0)
    while True:
        cycle = device.cycle
        edge = device.edge_ns
        if sleep_until is not None:
            wake = edge - margin_ns
            if wake > mono():
                sleep_until(wake)
        while not permit():
            pass
        detect = mono()
        missed = write(out)
        written = mono()
        seq += 1
        out = step(seq)
        done = mono()
        flags = device.flags
        put(seq - 1, cycle, edge, detect, written, done, missed, flags, device.last_rtt_ns, device.last_wkc)
        if done >= end_ns or header[stop_slot] or flags & failed:
            return seq
