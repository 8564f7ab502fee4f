"""Distributed clocks, the protocol side: registers, the 0x092C code, phase and the host's phase lock.

Pure arithmetic (no I/O): both sides of the wire use it, the master (:mod:`.dcmonitor`) and the
simulated ESCs (:mod:`softrt.ecatsim.dc`).

Registers (ETG.1000.4 §6.8, ESC datasheet section II "Distributed Clocks 0x0900:0x09FF")::

    0x0910  u64  system time: a read returns the local copy of the system time; a write (the
                 master distributing the reference clock's time with ARMW/FRMW) is compared with it
    0x0920  i64  system time offset (local time + offset = local copy of the system time)
    0x0928  u32  system time delay (propagation delay from the reference clock)
    0x092C  u32  system time difference: the mean of (local copy - delay) - received, bits 0-30
                 its magnitude, bit 31 set when the local copy is *behind* the received time
    0x0930  u16  speed counter start (bandwidth of the time control loop; a write resets its filters)
    0x0934  u8   system time difference filter depth
    0x0981  u8   sync activation (bit 0 cyclic operation, bit 1 SYNC0)
    0x0990  u64  write: start time of cyclic operation; read: system time of the next SYNC0 pulse
    0x09A0  u32  SYNC0 cycle time

The host's phase against DC (SOEM's examples call the idea ``ec_sync``): SYNC0 fires at system
times ``start + k * cycle``; the system time the reference clock put into the cyclic frame (FRMW
0x0910) says where in that cycle the frame passed it. :func:`phase_error` measures that against a
target (the shift), wrapped to half a cycle either way; :class:`PhaseLock` is a PI controller
that moves the host's next cycle edge so the error goes to zero, a bounded step per cycle.
"""

from __future__ import annotations

REG_SYSTEM_TIME = 0x0910
REG_SYSTEM_OFFSET = 0x0920
REG_SYSTEM_DELAY = 0x0928
REG_SYSTEM_DIFF = 0x092C
REG_SPEED_START = 0x0930
REG_DIFF_FILTER_DEPTH = 0x0934
REG_SYNC_ACTIVATION = 0x0981
REG_SYNC0_START = 0x0990
REG_SYNC0_CYCLE = 0x09A0

#: 0x0981: cyclic operation and SYNC0 both on.
SYNC0_ACTIVE = 0x03

_SIGN = 0x8000_0000
_MAGNITUDE = 0x7FFF_FFFF


def decode_diff(raw: int) -> int:
    """Return the signed ns of a 0x092C value (sign and magnitude, not two's complement).

    Negative: the slave's copy of the system time is behind the reference clock's.
    """
    magnitude = raw & _MAGNITUDE
    return -magnitude if raw & _SIGN else magnitude


def encode_diff(diff_ns: int) -> int:
    """Return the 0x092C value of *diff_ns* (the magnitude saturates at 2^31 - 1 ns)."""
    magnitude = min(abs(int(diff_ns)), _MAGNITUDE)
    return (_SIGN | magnitude) if diff_ns < 0 else magnitude


def phase_error(system_time_ns: int, sync0_ns: int, period_ns: int, shift_ns: int = 0) -> int:
    """Return where *system_time_ns* lies in its SYNC0 cycle relative to ``SYNC0 + shift``, in ns,
    wrapped to ``[-period/2, period/2)``: positive when the frame came after the target point."""
    half = period_ns // 2
    return (system_time_ns - sync0_ns - shift_ns + half) % period_ns - half


class PhaseLock:
    """PI controller moving the host's cycle edge onto a point of the DC cycle.

    Each cycle with a measurement: ``u = -(kp * error + integral)``, clamped to ``max_step_ns``
    (a drive sees the host's period change by at most that much from one cycle to the next); the
    integral, which settles at the host-vs-DC drift per cycle, grows by ``ki * error`` only when
    the step was not clamped (no wind-up while a large initial error is slewed off). A cycle
    without a measurement (lost frame) keeps following the drift: ``u = -integral``.

    The default ``ki = kp^2 / 4`` is critical damping of ``e' = (1 - kp) e - I + drift``,
    ``I' = I + ki e``: a double pole at ``1 - kp/2`` (kp 0.05: time constant 40 cycles, no
    overshoot), slow enough that one late wake-up moves the next edge by only ``kp`` of it.
    """

    def __init__(
        self, period_ns: int, kp: float = 0.05, ki: float | None = None, max_step_ns: int | None = None
    ) -> None:
        if period_ns <= 0:
            raise ValueError(f"period must be positive, got {period_ns} ns")
        if not 0 < kp < 1:
            raise ValueError(f"kp must be in (0, 1), got {kp}")
        self.period_ns = period_ns
        self.kp = kp
        self.ki = kp * kp / 4 if ki is None else ki
        #: Largest edge move per cycle: 1 % of the period by default.
        self.max_step_ns = max(1, period_ns // 100) if max_step_ns is None else max_step_ns
        self.integral_ns = 0.0

    def update(self, error_ns: int) -> int:
        """Return the move of the next edge (ns; negative: earlier) for this cycle's *error_ns*."""
        u = -(self.kp * error_ns + self.integral_ns)
        limit = self.max_step_ns
        if u > limit:
            return limit
        if u < -limit:
            return -limit
        self.integral_ns += self.ki * error_ns
        return int(round(u))

    def hold(self) -> int:
        """Return the move of the next edge for a cycle without a measurement."""
        u = -self.integral_ns
        return int(round(max(-self.max_step_ns, min(self.max_step_ns, u))))
