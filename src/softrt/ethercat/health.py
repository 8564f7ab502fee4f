"""The EtherCAT master's bus health and report: its lifecycle states, the counters of the run, why the
bus failed, each slave's AL status, and the ``board`` block of the summary (ethercat layer).

:class:`BusHealth` is the half of :class:`~softrt.ethercat.master.EtherCATMaster` that judges and
reports the bus (a mixin, as :class:`~softrt.ethercat.cia402.Cia402Drives` is; split from master.py,
issue 29: no module over 500 lines). AL status: ETG.1000.4 §6.5 (register 0x0130); the frames' fates
and the round trip: :mod:`.cyclic`; distributed clocks: :mod:`.dcmonitor`.
"""

from __future__ import annotations

import enum
import struct
from typing import Any

import numpy as np

from ..schema.device import Board, DistributedClocks, Drive, Emergency, HostGaps, RoundTrip
from . import bringup
from .al import AlState, code_text, state_name
from .cia402 import Axis, cia402_state

REG_AL_STATUS = 0x0130  #: AL status, reserved, AL status code (ETG.1000.4 §6.5)
_AL_STATUS = struct.Struct("<HHH")


class MasterState(enum.Enum):
    """Where the device is in its lifecycle (see :mod:`.master`'s docstring: open, start, stop)."""

    CLOSED = "closed"
    READY = "ready"
    RUNNING = "running"


class BusHealth:
    """The master's run counters, failure verdicts and report (a mixin of the master: see the module docstring)."""

    # Set by the master (EtherCATMaster.__init__, open() and the cycle).
    state: MasterState
    _axes: list[Axis]
    _frame: Any  # the cycle's frame (cyclic.CyclicFrame), None before bring-up
    _sock: Any  # the cyclic frame's link (.transport)
    _m: Any  # pysoem.Master
    _dc: Any  # dcmonitor.DcMonitor, None without distributed clocks
    iface: str
    period_ns: int
    receive_timeout_us: int
    bus_timeout_frames: int
    expected_wkc: int
    dc_active: bool
    dc_absent: str | None
    failure: str | None
    slaves: list[bringup.SlaveInfo]
    warnings: list[str]
    emergencies: list[Emergency]
    start_ns: int

    def _init_counters(self, log_cycles: int) -> None:
        """Zero the run's counters and health (called once, by the master's ``__init__``)."""
        # Per-cycle metrics, preallocated (a ring of log_cycles entries): round trip and WKC.
        self.rtt_ns = np.zeros(log_cycles, dtype=np.int64)
        self.wkc = np.zeros(log_cycles, dtype=np.int16)
        self.writes = self.missed_total = self.lost_frames = self.wkc_errors = self.not_enabled = 0
        self.al_reads = 0
        #: Gaps in the loop's own timeline (a write that came windows after the last one: the host
        #: stalled, no frame was sent in those windows) and the windows they cost.
        self.host_gaps = self.host_gap_cycles = 0
        # Health: the board cycle of the last valid frame (-1: none yet), the frames sent since
        # without a valid answer (from which cycle, how many of them answered late, whether any
        # came back with a wrong WKC), the cycle from which AL status may be read again, and the
        # drives as last confirmed by a valid frame of the run (kept when stop() disables them).
        self.confirmed_cycle = -1
        self.confirmed_ns = 0
        self._unanswered = self._unanswered_since = self._late_before = 0
        self._answered_since_valid = False
        self._next_al_read = 0
        self._final_drives: list[Drive] | None = None

    # --- bus health -------------------------------------------------------------------------------
    def _fail(self, reason: str) -> None:
        if self.failure is None:  # the first reason is the cause; what follows is its consequence
            self.failure = reason

    def _lost_reason(self, wkc: int) -> str:
        """Why the run cannot go on: the link, a bus gone silent, or what came back instead of valid
        frames. Only silence is a lost bus: replies that came late or short-counted show a bus
        that answers (and a host that stalled sent nothing in the windows it missed)."""
        n, since = self._unanswered, self._unanswered_since
        run = f"{n:,} frames sent in a row ({n * self.period_ns / 1e6:,.1f} ms of cycles) since cycle {since:,}"
        link = self._sock.link_problem(self.iface)
        if link is not None:
            return f"link down on {self.iface} ({link}): {run} unanswered"
        late = self._frame.late.n - self._late_before
        if self._answered_since_valid:
            what = (
                f"working counter {wkc} of {self.expected_wkc}"
                if wkc >= 0
                else "frames lost or with a wrong working counter"
            )
            return f"no valid frame ({what}): {run}"
        if late:
            return f"no valid frame: {run}, {late:,} of them answered late (up to {self._frame.late.max / 1e6:,.1f} ms)"
        return f"bus lost: no frame answered: {run}"

    def _check_al(self, window: int, next_in_cycles: int) -> None:
        """Read every slave's AL status (one BRD while all are in OP); fail on a slave out of OP.

        A slave that does not read as OP is read again on its own (FPRD of 0x0130-0x0135, checked
        working counter) before it fails the run: SOEM's ``ecx_readstate`` leaves whatever was on
        its stack as the state when its reads time out (seen as "0xf" on an overloaded segment).
        A slave that does not answer that read gives no verdict; the bus timeout decides then.
        """
        import pysoem

        self._next_al_read = window + next_in_cycles
        self.al_reads += 1
        m = self._m
        m.read_state()
        for position, s in enumerate(m.slaves):
            if s.state == AlState.OP:  # OP, no error indication
                continue
            try:
                status, _reserved, code = _AL_STATUS.unpack(
                    s._fprd(REG_AL_STATUS, _AL_STATUS.size, self.receive_timeout_us)
                )
            except pysoem.WkcError:
                continue
            if status & 0x1F != AlState.OP:
                self._fail(f"slave {position} '{s.name}' left OP: {state_name(status)}, AL status {code_text(code)}")
                return

    # --- reporting --------------------------------------------------------------------------------
    def drive_status(self) -> list[Drive]:
        """Return each axis's slave and axis number, last statusword, position actual (absolute
        counts) and error code.

        After a run, what its last valid frame confirmed (``confirmed_cycle``: that board cycle,
        -1 for none; ``confirmed_at_s``: its time from the run's start), not the disable sequence.
        """
        if self._final_drives is not None:
            return self._final_drives
        running = self.state is MasterState.RUNNING
        at_s = round((self.confirmed_ns - self.start_ns) / 1e9, 6) if running and self.confirmed_cycle >= 0 else None
        confirmed = {"confirmed_cycle": self.confirmed_cycle, "confirmed_at_s": at_s} if running else {}
        return [
            Drive.build(
                name=ax.name,
                slave=ax.info.position,
                axis=ax.axis,
                statusword=ax.statusword,
                state=cia402_state(ax.statusword),
                position_counts=ax.position,
                origin_counts=ax.origin,
                error_code=ax.error_code,
                **confirmed,
            )
            for ax in self._axes
        ]

    def counters(self) -> Board:
        """Return the device's report, the summary's ``board``: writes, missed updates, lost frames, WKC
        errors, the frames' fates, host gaps, the round trip of the frames answered in time, the drives."""
        rtt = self.rtt_ns[: min(self.writes, len(self.rtt_ns))]
        rtt = rtt[rtt > 0]  # only this cycle's own replies, by their deadline
        rtt_us = (
            RoundTrip(min=float(rtt.min()) / 1e3, median=float(np.median(rtt)) / 1e3, max=float(rtt.max()) / 1e3)
            if len(rtt)
            else None
        )
        frames = None if self._frame is None else self._frame.report()
        dc = (
            DistributedClocks(absent=self.dc_absent, nulls=frozenset() if self.dc_absent else {"absent"})
            if self._dc is None
            else self._dc.report()
        )
        return Board(
            writes=self.writes,
            missed_updates=self.missed_total,
            lost_frames=self.lost_frames,
            wkc_errors=self.wkc_errors,
            drive_not_enabled_cycles=self.not_enabled,
            expected_wkc=self.expected_wkc,
            dc=self.dc_active,
            al_reads=self.al_reads,
            receive_timeout_us=self.receive_timeout_us,
            bus_timeout_ms=self.bus_timeout_frames * self.period_ns / 1e6,
            bus_timeout_frames=self.bus_timeout_frames,
            failure=self.failure,
            frames=frames,
            host_gaps=HostGaps(gaps=self.host_gaps, cycles=self.host_gap_cycles),
            distributed_clocks=dc,
            rtt_us=rtt_us,
            drives=self.drive_status(),
            slaves=[s.report() for s in self.slaves],
            warnings=list(self.warnings),
            emergencies=list(self.emergencies),
            # the master has always written these as null when unknown, not left them out
            nulls=frozenset(
                k for k, v in (("failure", self.failure), ("frames", frames), ("rtt_us", rtt_us)) if v is None
            ),
        )
