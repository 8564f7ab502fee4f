"""The EtherCAT error types, with structured fields (like ethercrab's ``Error``).

    softrt.errors.SoftRTError
    └── EcatError                  the bus or a drive failed: exit status 1 (a runtime failure)
        ├── EcatInputError         also a ConfigError: bad input, exit status 2 (no such
        │                          interface, interface down, more axes asked than drives found)
        └── MappingRefused         a slave refused SAFE-OP for its SyncManager configuration
                                   (the bring-up is tried once more)

A drive that faults, a bus that does not answer or a slave that refuses a state is not the
user's input: it is the run that failed, and scripts must be able to tell the two apart.
``reason`` is one of :data:`REASONS`; ``seen`` holds what the master observed (slave states and
AL status codes, working counters) so the message can say it in one line.
"""

from __future__ import annotations

from ..errors import ConfigError, SoftRTError

REASONS = (
    "no_interface",  # the interface does not exist (bad input)
    "interface_down",  # it exists but is not up (bad input)
    "permission",  # raw sockets need CAP_NET_RAW
    "no_slaves",  # nothing answered
    "state_timeout",  # a slave did not reach the requested AL state
    "unsupported_drive",  # a slave lacks the CSP objects (bad input when fewer drives than --axes)
    "drive_fault",  # the CiA 402 enable sequence failed
    "bus_lost",  # during the run: no valid frame for too long, a slave left OP, a drive faulted
    "config",  # anything else in bus configuration
)


class EcatError(SoftRTError):
    """An EtherCAT bus that cannot be used as asked (the bus has been left in a safe state)."""

    def __init__(self, reason: str, iface: str, msg: str, *, seen: dict | None = None, hint: str | None = None) -> None:
        self.reason = reason
        self.iface = iface
        self.seen = dict(seen or {})
        super().__init__(f"EtherCAT on {iface}: {msg}", hint=hint)


class EcatInputError(EcatError, ConfigError):
    """Bad input naming an EtherCAT bus: no such interface, a link that is down, too few drives."""


class MappingRefused(EcatError):
    """A slave refused SAFE-OP for the process data SyncManagers SOEM configured (AL status 0x001D/
    0x001E, invalid output/input configuration; ETG.1000.6 Table 11).

    SOEM sizes the SyncManagers from its own single read of each slave's SII or PDO assignment,
    where a read the slave did not answer in time reads as zeros, and it does not check its writes
    of them (``ecx_config_map_group``). Either leaves a slave with a configuration it refuses, once:
    the bring-up is worth one more try (``EtherCATMaster.open``); a slave that refuses again fails
    the run with the same message.
    """
