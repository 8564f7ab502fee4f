"""A simulated ESC's distributed clock: a drifting crystal, the time control loop, SYNC0.

What a real ESC does (ESC datasheet section I §9.1 "Distributed Clocks", ETG.1000.4 §9.1):

* its **local time** runs on its own quartz, off by some ppm (``drift_ppm``, configurable per slave);
  the local copy of the system time is local time + offset (0x0920, set by the master);
* when the master distributes the reference clock's system time (ARMW/FRMW of 0x0910), the ESC
  compares it with its own copy, minus the propagation delay (0x0928), on the lower 32 bits::

      dt = (local + offset - delay) - received

  and its **time control loop** speeds its copy up (dt < 0) or slows it down (dt > 0); 0x092C
  shows the mean of dt (:func:`softrt.ethercat.dc.encode_diff`), filter depth 0x0934;
* **SYNC0** fires at ``start + k * cycle`` of its system time (0x0990, 0x09A0, active with 0x0981
  bits 0-1); a read of 0x0990 returns the next pulse.

The loop here is a model with the same outcome, not the ESC's circuit (which the datasheet does not
give): a critically damped PI on dt with time constant ``tau = speed counter start (0x0930) x 100 µs``
(the reset value 0x1000: 0.41 s; larger values are "smoother", as the datasheet says), its
correction bounded to ±787 ppm (one 1 ns step every 0x7F ticks of 10 ns, the fastest the speed
counter allows). Like a real ESC without the master's static drift compensation (SOEM does none),
a slave whose quartz is 100 ppm off shows tens of µs in 0x092C for the first seconds.

Each SYNC0-synchronised slave also counts, per process-data frame, where it arrived in its SYNC0
cycle and the cycles in which no frame (or two) arrived: what a drive's "SM event missed" counter
(0x1C32:0B, ETG.6010) would see.
"""

from __future__ import annotations

import struct

from ..ethercat.dc import (
    REG_DIFF_FILTER_DEPTH,
    REG_SPEED_START,
    REG_SYNC0_CYCLE,
    REG_SYNC0_START,
    REG_SYNC_ACTIVATION,
    REG_SYSTEM_DELAY,
    REG_SYSTEM_DIFF,
    REG_SYSTEM_OFFSET,
    REG_SYSTEM_TIME,
    SYNC0_ACTIVE,
    encode_diff,
)
from ..ethercat.nsstat import NsStat

#: The fastest correction the speed counter allows (1 ns per 0x7F x 10 ns), ppb.
MAX_CORRECTION_PPB = 1_000_000_000 // (0x7F * 10)
#: Reset values (ESC datasheet section II, 0x0930 and 0x0934).
SPEED_COUNTER_START = 0x1000
DIFF_FILTER_DEPTH = 4
TAU_NS_PER_SPEED_UNIT = 100_000


class DcClock:
    """One ESC's local clock and time control loop (see the module docstring); times in ns."""

    def __init__(self, start_local_ns: int, now_ns: int, drift_ppm: float = 0.0) -> None:
        self._t0 = now_ns
        self._l0 = start_local_ns
        self.drift_ppb = int(round(drift_ppm * 1000))
        self.correction_ppb = 0
        self._integral_ppb = 0.0
        self.diff_mean_ns = 0.0
        self.filter_depth = DIFF_FILTER_DEPTH
        self.tau_ns = SPEED_COUNTER_START * TAU_NS_PER_SPEED_UNIT
        self._last_compare_ns: int | None = None
        self.compares = 0

    def local(self, now_ns: int) -> int:
        """The local time at host time *now_ns*."""
        dt = now_ns - self._t0
        return self._l0 + dt + dt * (self.drift_ppb + self.correction_ppb) // 1_000_000_000

    def _rebase(self, now_ns: int) -> None:
        self._l0 = self.local(now_ns)
        self._t0 = now_ns

    def set_drift(self, drift_ppm: float, now_ns: int) -> None:
        """Change the quartz's error (a temperature change)."""
        self._rebase(now_ns)
        self.drift_ppb = int(round(drift_ppm * 1000))

    def reset_filters(self, speed_counter_start: int, now_ns: int) -> None:
        """A write of 0x0930: new bandwidth; filters, 0x092C and the correction (0x0932) cleared."""
        self.tau_ns = max(speed_counter_start & 0x7FFF, 0x80) * TAU_NS_PER_SPEED_UNIT
        self.diff_mean_ns = 0.0
        self._integral_ppb = 0.0
        self._last_compare_ns = None
        self._rebase(now_ns)  # the speed counter diff (the correction) is cleared too
        self.correction_ppb = 0

    def compare(self, received: int, now_ns: int, offset_ns: int, delay_ns: int) -> int:
        """The master wrote the reference's system time *received* (lower 32 bits compared);
        update the loop; return dt (ns)."""
        mine = self.local(now_ns) + offset_ns - delay_ns
        dt = (mine - received + (1 << 31)) % (1 << 32) - (1 << 31)
        self.compares += 1
        self.diff_mean_ns += (dt - self.diff_mean_ns) / (1 << self.filter_depth)
        # Critically damped PI: correction = I - dt / tau, I' = -dt / (2 tau)^2 (rates in ppb).
        last, self._last_compare_ns = self._last_compare_ns, now_ns
        if last is not None:
            elapsed = min(max(now_ns - last, 0), self.tau_ns)
            self._integral_ppb -= dt * elapsed / (2 * self.tau_ns) ** 2 * 1e9
            self._integral_ppb = max(-MAX_CORRECTION_PPB, min(MAX_CORRECTION_PPB, self._integral_ppb))
        correction = self._integral_ppb - dt / self.tau_ns * 1e9
        self._rebase(now_ns)
        self.correction_ppb = int(max(-MAX_CORRECTION_PPB, min(MAX_CORRECTION_PPB, correction)))
        return dt

    @property
    def diff_register(self) -> int:
        """0x092C as the master reads it."""
        return encode_diff(int(round(self.diff_mean_ns)))


class Sync0Watch:
    """Where process-data frames arrive in the SYNC0 cycle, and the cycles without (or with two)."""

    def __init__(self) -> None:
        self.cycles_without_frame = self.frames_in_same_cycle = 0
        self.phase = NsStat()  # each frame's place in its SYNC0 cycle (ns)
        self._last_cycle: int | None = None

    @property
    def frames(self) -> int:
        """The process-data frames counted."""
        return self.phase.n

    def frame(self, system_ns: int, start_ns: int, cycle_ns: int) -> None:
        """A process-data frame arrived at *system_ns* (SYNC0 at ``start + k * cycle``)."""
        if cycle_ns <= 0 or system_ns < start_ns:
            return
        k, phase = divmod(system_ns - start_ns, cycle_ns)
        last = self._last_cycle
        if last is not None:
            if k == last:
                self.frames_in_same_cycle += 1
            elif k > last + 1:
                self.cycles_without_frame += k - last - 1
        self._last_cycle = k
        self.phase.add(phase)

    def reset(self) -> None:
        """Forget the counts (a new start time)."""
        self.__init__()


_U16, _U32, _U64, _I64 = struct.Struct("<H"), struct.Struct("<I"), struct.Struct("<Q"), struct.Struct("<q")


def _touches(ado: int, end: int, reg: int, size: int) -> bool:
    return ado < reg + size and end > reg


class EscDc:
    """The DC unit of one ESC on its register memory: what a read sees, what a write starts."""

    def __init__(self, mem: bytearray, start_local_ns: int, now_ns: int, drift_ppm: float = 0.0) -> None:
        self.mem = mem
        self.clock = DcClock(start_local_ns, now_ns, drift_ppm)
        self.sync0 = Sync0Watch()
        self._start_ns = 0  # SYNC0 start time as written (a read of 0x0990 shows the next pulse)
        self._pending: tuple[int, int, int, int] | None = None  # a comparison waiting for settle()
        _U16.pack_into(mem, REG_SPEED_START, SPEED_COUNTER_START)
        mem[REG_DIFF_FILTER_DEPTH] = DIFF_FILTER_DEPTH

    def system_time(self, now_ns: int) -> int:
        """The local copy of the system time (local time + offset), 64 bits."""
        return (self.clock.local(now_ns) + _I64.unpack_from(self.mem, REG_SYSTEM_OFFSET)[0]) & 0xFFFF_FFFF_FFFF_FFFF

    def _sync0(self) -> tuple[int, int] | None:
        if self.mem[REG_SYNC_ACTIVATION] & SYNC0_ACTIVE != SYNC0_ACTIVE:
            return None
        return self._start_ns, _U32.unpack_from(self.mem, REG_SYNC0_CYCLE)[0]

    def before_read(self, ado: int, end: int, now_ns: int) -> None:
        """Refresh the registers a read of [ado, end) returns."""
        m = self.mem
        if ado < REG_SYSTEM_TIME + 8 and end > REG_SYSTEM_TIME:  # (the DC time: every cycle, inline)
            _U64.pack_into(m, REG_SYSTEM_TIME, self.system_time(now_ns))
            if end <= REG_SYSTEM_TIME + 8:
                return
        if _touches(ado, end, REG_SYSTEM_DIFF, 4):
            _U32.pack_into(m, REG_SYSTEM_DIFF, self.clock.diff_register)
        if _touches(ado, end, REG_SYNC0_START, 8):
            sync = self._sync0()
            if sync is not None and sync[1]:  # running: the next pulse
                start, cycle = sync
                now = self.system_time(now_ns)
                k = max(0, -(-(now - start) // cycle))
                _U64.pack_into(m, REG_SYNC0_START, start + k * cycle)

    def after_write(self, ado: int, end: int, now_ns: int, defer: bool = False) -> None:
        """React to a write of [ado, end) (already stored in the memory). With *defer* the time
        control loop takes a distributed time at :meth:`settle` (after the frame's reply: it
        changes nothing in that frame)."""
        m = self.mem
        if ado <= REG_SYSTEM_TIME and end >= REG_SYSTEM_TIME + 4:  # distribution: lower 32 bits compared
            self._pending = (
                _U32.unpack_from(m, REG_SYSTEM_TIME)[0],
                now_ns,
                _I64.unpack_from(m, REG_SYSTEM_OFFSET)[0],
                _U32.unpack_from(m, REG_SYSTEM_DELAY)[0],
            )
            if not defer:
                self.settle()
        if _touches(ado, end, REG_SPEED_START, 2):
            self.clock.reset_filters(_U16.unpack_from(m, REG_SPEED_START)[0], now_ns)
        if _touches(ado, end, REG_DIFF_FILTER_DEPTH, 1):
            self.clock.filter_depth = m[REG_DIFF_FILTER_DEPTH] & 0x0F
        if _touches(ado, end, REG_SYNC0_START, 8):
            self._start_ns = _U64.unpack_from(m, REG_SYNC0_START)[0]
            self.sync0.reset()

    def settle(self) -> None:
        """Let the time control loop take the time distributed last (see :meth:`after_write`)."""
        if self._pending is not None:
            pending, self._pending = self._pending, None
            self.clock.compare(*pending)

    def outputs_arrived(self, now_ns: int) -> None:
        """A frame wrote the process data: note where in the SYNC0 cycle."""
        sync = self._sync0()
        if sync is not None:
            self.sync0.frame(self.system_time(now_ns), *sync)
