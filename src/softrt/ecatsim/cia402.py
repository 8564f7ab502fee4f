"""A CiA 402 servo drive in cyclic synchronous position mode (the application behind an ESC).

Device control state machine (CiA 402-2 §6.2 / IEC 61800-7-201 Figure 4; controlword masks and
statusword values as in the table of the feasibility study)::

    NOT_READY ─0▶ SWITCH_ON_DISABLED ─2 shutdown▶ READY_TO_SWITCH_ON ─3 switch on▶ SWITCHED_ON
                        ▲  ▲ ▲                          │ ▲   │7                     │ ▲ │10
                        │  │ └──────────────────────────┼─┼───┘                      4│ │5│
                        │  └──── 9 disable voltage ──── OPERATION_ENABLED ◀──────────┘ │ │
                        │15 fault reset                 │ 8 shutdown ─▶ READY…        │ │
                      FAULT ◀─14─ FAULT_REACTION ◀─13─ (any state, on a fault)       (…)
                                    OPERATION_ENABLED ─11 quick stop▶ QUICK_STOP_ACTIVE ─12▶ SOD

In OPERATION_ENABLED with mode 8 (CSP, CiA 402-2 §13) the drive takes 0x607A as the position
set-point every cycle. The plant is a motor under a PD position loop with velocity and
acceleration feed-forward (a critically damped second-order tracker, bandwidth ``bandwidth_hz``)
with speed and torque (acceleration) limits,
integrated over the drive's cycle time (the DC SYNC0 cycle, else 0x60C2). Faults: following
error beyond 0x6065 for longer than 0x6066 (error code 0x8611), enabling with a target far from
the actual position (the drive would jump: also 0x8611), the process-data watchdog (0x8100),
and injected faults.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable

from ..ethercat.al import AlState, AlStatusCode


class DriveState(enum.Enum):
    """Power drive system states (CiA 402-2 §6.2.1)."""

    NOT_READY = "not ready to switch on"
    SWITCH_ON_DISABLED = "switch on disabled"
    READY_TO_SWITCH_ON = "ready to switch on"
    SWITCHED_ON = "switched on"
    OPERATION_ENABLED = "operation enabled"
    QUICK_STOP_ACTIVE = "quick stop active"
    FAULT_REACTION_ACTIVE = "fault reaction active"
    FAULT = "fault"


#: Statusword bits 0-3, 5, 6 per state (CiA 402-2 Table 30); bit 4 (voltage enabled) is added
#: when the power stage is on.
STATUSWORD = {
    DriveState.NOT_READY: 0x0000,
    DriveState.SWITCH_ON_DISABLED: 0x0040,
    DriveState.READY_TO_SWITCH_ON: 0x0021,
    DriveState.SWITCHED_ON: 0x0023,
    DriveState.OPERATION_ENABLED: 0x0027,
    DriveState.QUICK_STOP_ACTIVE: 0x0007,
    DriveState.FAULT_REACTION_ACTIVE: 0x000F,
    DriveState.FAULT: 0x0008,
}
SW_VOLTAGE_ENABLED, SW_REMOTE, SW_FOLLOWS_COMMAND, SW_FOLLOWING_ERROR = 0x0010, 0x0200, 0x1000, 0x2000
CW_FAULT_RESET = 0x0080
MODE_CSP = 8
ERROR_FOLLOWING = 0x8611  # CiA 402-2 error codes: "following error"
ERROR_COMMUNICATION = 0x8100  # CiA 301 Table 21: "communication" (here: SM watchdog expired)

_POWERED = (
    DriveState.READY_TO_SWITCH_ON,
    DriveState.SWITCHED_ON,
    DriveState.OPERATION_ENABLED,
    DriveState.QUICK_STOP_ACTIVE,
)


def command_of(cw: int) -> str | None:
    """Decode a controlword into a device-control command (CiA 402-2 Table 28)."""
    if cw & 0x82 == 0x00:
        return "disable voltage"
    if cw & 0x86 == 0x02:
        return "quick stop"
    if cw & 0x87 == 0x06:
        return "shutdown"
    if cw & 0x8F == 0x07:
        return "switch on"  # also "disable operation" from OPERATION_ENABLED
    if cw & 0x8F == 0x0F:
        return "enable operation"
    return None


class Drive:
    """State machine, CSP position loop and faults of one axis (see the module docstring)."""

    def __init__(
        self,
        bandwidth_hz: float = 150.0,
        window_counts: int = 20_000,
        window_time_ms: int = 10,
        start_counts: int = 0,
        max_velocity_counts_per_s: float = 2.0e6,
        max_accel_counts_per_s2: float = 5.0e7,
    ) -> None:
        self.state = DriveState.SWITCH_ON_DISABLED  # transition 0 happens at power-up
        self.position = float(start_counts)
        self.velocity = 0.0
        self.target = int(start_counts)
        self.mode = 0
        self.mode_display = 0
        self.error_code = 0
        self.following_error = 0
        self.following_window = window_counts  # 0x6065
        self.following_time_ms = window_time_ms  # 0x6066
        self._over_window_s = 0.0
        self._omega = 2 * math.pi * bandwidth_hz
        #: Plant limits: max motor speed (0x6080) and the torque limit as an acceleration.
        self.max_velocity = max_velocity_counts_per_s
        self.max_accel = max_accel_counts_per_s2
        self._last_cw = 0
        self._prev_target: int | None = None
        self._prev_v_ff = 0.0
        self.faults = 0
        #: Called with the error code when the drive faults (a CoE drive sends an emergency).
        self.on_fault: Callable[[int], None] | None = None

    @property
    def statusword(self) -> int:
        sw = STATUSWORD[self.state] | SW_REMOTE
        if self.state in _POWERED:
            sw |= SW_VOLTAGE_ENABLED
        if self.state is DriveState.OPERATION_ENABLED and self.mode_display == MODE_CSP:
            sw |= SW_FOLLOWS_COMMAND
        if self._over_window_s > 0:
            sw |= SW_FOLLOWING_ERROR
        return sw

    @property
    def position_counts(self) -> int:
        return int(round(self.position))

    def fault(self, code: int) -> None:
        """Enter FAULT through FAULT_REACTION_ACTIVE (transitions 13, 14); the motor stops."""
        self.faults += 1
        self.error_code = code
        self.state = DriveState.FAULT
        self.velocity = 0.0
        self._prev_target = None
        if self.on_fault is not None:
            self.on_fault(code)

    def control(self, cw: int) -> None:
        """Apply a controlword (edge-triggered fault reset, level-triggered commands)."""
        rising_reset = cw & CW_FAULT_RESET and not self._last_cw & CW_FAULT_RESET
        self._last_cw = cw
        s = self.state
        if s is DriveState.FAULT:
            if rising_reset:  # transition 15
                self.state = DriveState.SWITCH_ON_DISABLED
                self.error_code = 0
                self._over_window_s = 0.0
            return
        cmd = command_of(cw)
        if cmd == "disable voltage" and s in _POWERED:  # 7, 9, 10, 12
            self.state = DriveState.SWITCH_ON_DISABLED
        elif cmd == "quick stop":
            if s is DriveState.OPERATION_ENABLED:  # 11
                self.state = DriveState.QUICK_STOP_ACTIVE
                self.velocity = 0.0
            elif s in (DriveState.READY_TO_SWITCH_ON, DriveState.SWITCHED_ON):  # 7, 10
                self.state = DriveState.SWITCH_ON_DISABLED
        elif cmd == "shutdown" and s in (
            DriveState.SWITCH_ON_DISABLED,
            DriveState.SWITCHED_ON,
            DriveState.OPERATION_ENABLED,
        ):  # 2, 6, 8
            self.state = DriveState.READY_TO_SWITCH_ON
        elif cmd == "switch on":
            if s is DriveState.READY_TO_SWITCH_ON or s is DriveState.OPERATION_ENABLED:  # 3, 5
                self.state = DriveState.SWITCHED_ON
        elif cmd == "enable operation":
            if s in (DriveState.SWITCHED_ON, DriveState.READY_TO_SWITCH_ON, DriveState.QUICK_STOP_ACTIVE):
                self._enable()  # 4 (3+4 as many drives accept, 16)

    def _enable(self) -> None:
        # A real drive servos to 0x607A at once: a target far from the actual position is a jump.
        if abs(self.target - self.position) > self.following_window:
            self.fault(ERROR_FOLLOWING)
            return
        self.state = DriveState.OPERATION_ENABLED
        self._prev_target = None

    def step(self, cw: int | None, target: int | None, mode: int | None, dt_s: float) -> None:
        """Run one drive cycle with the new set-points (None: keep the previous ones)."""
        if mode is not None:
            self.mode = mode
            if mode == MODE_CSP:
                self.mode_display = MODE_CSP
        if target is not None:
            self.target = target
        if cw is not None:
            self.control(cw)
        if self.state is DriveState.OPERATION_ENABLED and self.mode_display == MODE_CSP:
            self._follow(dt_s)
        else:
            self.velocity = 0.0
            self._prev_target = None
            self.following_error = 0

    def _follow(self, dt_s: float) -> None:
        target = self.target
        prev = self._prev_target if self._prev_target is not None else target
        v_ff = (target - prev) / dt_s
        a_ff = (v_ff - self._prev_v_ff) / dt_s if self._prev_target is not None else 0.0
        self._prev_target, self._prev_v_ff = target, v_ff
        w = self._omega
        substeps = 4
        h = dt_s / substeps
        max_a, max_v = self.max_accel, self.max_velocity
        position, velocity = self.position, self.velocity
        # Interpolate the set-point linearly inside the cycle (what the drive's fine interpolator does).
        for k in range(1, substeps + 1):
            x_ref = prev + (target - prev) * k / substeps
            acc = w * w * (x_ref - position) + 2 * w * (v_ff - velocity) + a_ff
            acc = -max_a if acc < -max_a else max_a if acc > max_a else acc  # torque limit
            velocity = velocity + acc * h
            velocity = -max_v if velocity < -max_v else max_v if velocity > max_v else velocity
            position += velocity * h
        self.position, self.velocity = position, velocity
        self.following_error = int(round(target - self.position))
        if abs(self.following_error) > self.following_window:
            self._over_window_s += dt_s
            if self._over_window_s * 1000 > self.following_time_ms:
                self.fault(ERROR_FOLLOWING)
        else:
            self._over_window_s = 0.0

    def on_al_change(self, old: AlState, new: AlState, code: int) -> None:
        """Leaving OP stops the drive; the watchdog (AL code 0x001B) faults it (ETG.6010 §6)."""
        if old is AlState.OP and new < AlState.OP:
            if code == AlStatusCode.SM_WATCHDOG:
                self.fault(ERROR_COMMUNICATION)
            elif self.state in _POWERED:
                self.state = DriveState.SWITCH_ON_DISABLED
        self._last_cw = 0
