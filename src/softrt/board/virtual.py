"""The virtual board: an ideal EtherCAT-like board on the loop's clock (the platform's ``clock_ns``:
CLOCK_MONOTONIC on Linux, QueryPerformanceCounter on Windows).

Edge k is at exactly ``t0 + k * period``; the board adds no jitter of its own, so everything
measured is the host's. Semantics (the seed's board):

* the update-permit bit turns ON at every edge;
* a host write clears it and is latched in the current board cycle (window [edge j, edge j+1)),
  and delivered to the axis at edge j+1;
* a window that ends without a write repeats the previous target at its edge: a *missed update*.
  A write that lands after later edges therefore reports how many windows it missed, and the
  permit then waits for the edge after the write (the host resynchronises to the board).
"""

from __future__ import annotations

import time

import numpy as np

from ..errors import ConfigError
from ..schema.device import Board


class VirtualBoard:
    """Virtual board with an ideal cycle on the loop's clock (see the module docstring)."""

    last_rtt_ns = 0  # no frames: the write is a store into the board's memory
    last_wkc = 0
    failure = None  # an ideal board never fails

    def __init__(self, period_ns: int, axes: int = 1, clock=time.monotonic_ns) -> None:
        if period_ns <= 0:
            raise ConfigError(f"board period must be positive, got {period_ns} ns")
        self.period_ns = period_ns
        self.axes = axes
        self.t0_ns = 0
        self.edge_ns = 0
        self.cycle = 0
        self.flags = 0
        self.writes = 0
        self.missed_total = 0
        # The board's output register: what is delivered to the axes at the next edge.
        self.latched: float | np.ndarray = 0.0 if axes == 1 else np.zeros(axes)
        self._now = clock  # the board's hardware clock; tests pass a manual one

    def start(self, t0_ns: int) -> None:
        """Start the cycle; the first permit turns ON at *t0_ns*."""
        self.t0_ns = t0_ns
        self.edge_ns = t0_ns
        self.cycle = 0

    def permit(self) -> bool:
        """Return the update-permit bit: ON once the current edge has passed."""
        return self._now() >= self.edge_ns

    def write(self, value) -> int:
        """Latch *value*; return how many board cycles repeated the previous target meanwhile."""
        now = self._now()
        if self.axes == 1:
            self.latched = value
        else:
            np.copyto(self.latched, value)
        window = (now - self.t0_ns) // self.period_ns
        missed = window - self.cycle
        self.missed_total += missed
        self.writes += 1
        self.cycle = window + 1
        self.edge_ns = self.t0_ns + self.cycle * self.period_ns
        return missed

    def stop(self) -> None:
        """Nothing to release: the virtual board has no hardware."""

    def counters(self) -> Board:
        """Return the board's counters (the summary's ``board``)."""
        return Board(writes=self.writes, missed_updates=self.missed_total)
