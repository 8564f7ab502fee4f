"""The device interface the cyclic loop drives (one per board or bus).

The loop only ever does the seed's three steps against it::

    while not device.permit():  # (1) poll the update-permit bit (edge_ns says when it is due)
        pass
    missed = device.write(out)  # (2) write the buffered target; returns missed board cycles
    out = step(seq)             # (3) compute the next target (the application, not the device)

so a new device (an EtherCAT master, a PCIe board) plugs in without touching the loop.
"""

from __future__ import annotations

from typing import Any, Protocol

from ..schema.device import Board


class Device(Protocol):
    """A board with a hardware cycle, an update-permit bit and a latched output."""

    period_ns: int
    #: CLOCK_MONOTONIC time at which the next permit turns ON (for sleep-based waits).
    edge_ns: int
    #: Board cycle (edge index) of ``edge_ns``.
    cycle: int
    #: Error bits for the last write (FLAG_DEVICE_ERROR and friends); 0 when all is well.
    #: FLAG_DEVICE_FAILED: the device can no longer run; the loop stops and the run is failed.
    flags: int
    #: Why the device failed (e.g. "bus lost: no frame answered: 40 frames sent in a row (10.0 ms of cycles)
    #: since cycle 2,871"); None while healthy.
    failure: str | None
    #: The last write's frame round trip and working counter (0 for a device without frames).
    last_rtt_ns: int
    last_wkc: int

    def start(self, t0_ns: int) -> None:
        """Start the board's cycle: edge k is due at ``t0_ns + k * period_ns``."""

    def permit(self) -> bool:
        """Return True when the update-permit bit is ON (a new cycle has begun)."""

    def write(self, value: Any) -> int:
        """Latch *value* for the current cycle, clear the permit; return missed board cycles."""

    def stop(self) -> None:
        """Stop the board's cycle and leave the hardware safe."""

    def counters(self) -> Board:
        """Return the board's own report, the summary's schema ``Board`` (writes, missed updates)."""
