"""The EtherCAT state machine (ESM) of one slave, as the AL control/status registers show it.

ETG.1000.6 §6.4.1 (states and transitions) and ETG.1000.4 §6.5 (registers 0x0120 AL control,
0x0130 AL status, 0x0134 AL status code)::

        INIT ──IP──▶ PREOP ──PS──▶ SAFEOP ──SO──▶ OP
         ▲  ◀──PI───   ▲  ◀──SP───    ▲  ◀──OS───  │
         │             └────────OP────┼────────────┤
         └──────────SI / OI───────────┴────────────┘          (INIT ⇄ BOOT: not supported)

* A request for a valid transition whose configuration checks pass changes the state.
* Anything else keeps the state and sets the error indication (status bit 4) with a code
  (ETG.1000.6 Table 11, also SOES ``esc.h``): 0x0011 invalid transition, 0x0012 unknown state,
  0x0013 bootstrap not supported, or the check's own code (0x0016, 0x001D, 0x001E, ...).
* While the error indication is set, requests without the acknowledge bit (control bit 4) are
  ignored; a request with it clears the indication and code, then is handled as above.
* A local error (the process-data watchdog, 0x001B) drops OP to SAFEOP with the indication set.
"""

from __future__ import annotations

import enum
from collections.abc import Callable


class AlState(enum.IntEnum):
    """AL states (register 0x0130 bits 0-3)."""

    INIT = 0x01
    PREOP = 0x02
    BOOT = 0x03
    SAFEOP = 0x04
    OP = 0x08


ERROR_FLAG = 0x10  # AL status bit 4: error indication; AL control bit 4: error acknowledge


class AlStatusCode(enum.IntEnum):
    """AL status codes used here (ETG.1000.6 §5.3.2 Table 11)."""

    NO_ERROR = 0x0000
    UNSPECIFIED = 0x0001
    INVALID_STATE_CHANGE = 0x0011
    UNKNOWN_STATE = 0x0012
    BOOTSTRAP_NOT_SUPPORTED = 0x0013
    INVALID_MAILBOX_CONFIG = 0x0016
    INVALID_SM_CONFIG = 0x0017
    SM_WATCHDOG = 0x001B
    INVALID_OUTPUT_CONFIG = 0x001D
    INVALID_INPUT_CONFIG = 0x001E
    INVALID_DC_SYNC_CONFIG = 0x0030


#: The transitions a slave accepts (ETG.1000.6, the AL state machine; BOOT aside): up one state at a time,
#: down to any lower state, or staying where it is.
_STEPS = (AlState.INIT, AlState.PREOP, AlState.SAFEOP, AlState.OP)
_VALID = {(old, new) for i, old in enumerate(_STEPS) for j, new in enumerate(_STEPS) if j <= i + 1}

#: ``check(current, requested) -> AL status code`` (0 = the configuration allows the transition).
TransitionCheck = Callable[[AlState, AlState], int]


#: What an AL status code means, in words (ETG.1000.6 Table 11).
CODE_TEXT = {
    0x0000: "no error",
    0x0001: "unspecified error",
    0x0011: "invalid requested state change",
    0x0012: "unknown requested state",
    0x0013: "bootstrap not supported",
    0x0016: "invalid mailbox configuration",
    0x0017: "invalid sync manager configuration",
    0x0018: "no valid inputs available",
    0x0019: "no valid outputs",
    0x001A: "synchronization error",
    0x001B: "sync manager watchdog",
    0x001D: "invalid output configuration",
    0x001E: "invalid input configuration",
    0x0024: "invalid input mapping",
    0x0025: "invalid output mapping",
    0x002C: "fatal sync error",
    0x002D: "no sync error",
    0x0030: "invalid DC SYNC configuration",
    0x0032: "DC PLL synchronization error",
    0x0033: "DC sync IO error",
    0x0034: "DC sync timeout error",
}


def code_text(code: int) -> str:
    """Return e.g. ``"0x001B sync manager watchdog"`` for an AL status code (0x8000 up: vendor's)."""
    return f"0x{code:04X} " + CODE_TEXT.get(code, "vendor specific" if code >= 0x8000 else "unknown code")


def state_name(status: int) -> str:
    """Return e.g. ``"SAFEOP+ERR"`` for an AL status value."""
    try:
        name = AlState(status & 0x0F).name
    except ValueError:
        name = f"0x{status & 0x0F:x}"
    return name + ("+ERR" if status & ERROR_FLAG else "")


class AlStateMachine:
    """AL status and status code of one slave, driven by writes to AL control."""

    def __init__(self, check: TransitionCheck) -> None:
        self.state = AlState.INIT
        self.error = False
        self.code = AlStatusCode.NO_ERROR
        self._check = check

    @property
    def status(self) -> int:
        """Return the AL status register value (0x0130)."""
        return int(self.state) | (ERROR_FLAG if self.error else 0)

    def request(self, control: int) -> tuple[AlState, AlState]:
        """Handle a write of *control* to 0x0120; return ``(old state, new state)``."""
        old = self.state
        if self.error:
            if not control & ERROR_FLAG:
                return old, old
            self.error = False
            self.code = AlStatusCode.NO_ERROR
        raw = control & 0x0F
        try:
            wanted = AlState(raw)
        except ValueError:
            self._fail(AlStatusCode.UNKNOWN_STATE)
            return old, old
        if wanted is AlState.BOOT:
            self._fail(AlStatusCode.BOOTSTRAP_NOT_SUPPORTED)
            return old, old
        if (old, wanted) not in _VALID:
            self._fail(AlStatusCode.INVALID_STATE_CHANGE)
            return old, old
        if wanted > old:  # only upward transitions need a valid configuration
            code = self._check(old, wanted)
            if code:
                self._fail(code)
                return old, old
        self.state = wanted
        return old, wanted

    def local_error(self, state: AlState, code: int) -> None:
        """Enter *state* with the error indication set (the slave's own decision, e.g. watchdog)."""
        self.state = state
        self._fail(code)

    def _fail(self, code: int) -> None:
        self.error = True
        self.code = AlStatusCode(code) if code in AlStatusCode._value2member_map_ else code
