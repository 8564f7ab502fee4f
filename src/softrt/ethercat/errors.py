"""The one EtherCAT error type, with structured fields (like ethercrab's ``Error``).

    softrt.errors.ConfigError      bad input: exit status 2
    └── EcatError                  what went wrong on the bus, where, and what was seen

``reason`` is one of :data:`REASONS`; ``seen`` holds what the master observed (slave states and
AL status codes, working counters) so the message can say it in one line.
"""

from __future__ import annotations

from ..errors import ConfigError

REASONS = (
    "no_interface",  # the interface does not exist
    "interface_down",  # it exists but is not up
    "permission",  # raw sockets need CAP_NET_RAW
    "no_slaves",  # nothing answered
    "state_timeout",  # a slave did not reach the requested AL state
    "unsupported_drive",  # a slave lacks the CSP objects
    "drive_fault",  # the CiA 402 enable sequence failed
    "config",  # anything else in bus configuration
)


class EcatError(ConfigError):
    """An EtherCAT bus that cannot be used as asked (the bus has been left in a safe state)."""

    def __init__(self, reason: str, iface: str, msg: str, *, seen: dict | None = None,
                 hint: str | None = None) -> None:
        self.reason = reason
        self.iface = iface
        self.seen = dict(seen or {})
        super().__init__(f"EtherCAT on {iface}: {msg}", hint=hint)
