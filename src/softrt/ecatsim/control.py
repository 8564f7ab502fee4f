"""The simulator's control requests: read bounded, checked field by field (ecatsim layer).

A request is one JSON object in one datagram on the control socket (``softrt ecat-sim
--control PATH``). Anyone who may write to that socket may send anything, so a request is read as
any file softrt did not write (:func:`softrt.store.validate.parse_json`: at most
:data:`MAX_REQUEST_BYTES`, nested at most :data:`MAX_DEPTH` deep, no NaN or infinity) and each
field is checked against what the simulator can take; a request that breaks a rule is answered
``{"ok": false, "error": ...}`` and changes nothing. Requests are listed in docs/ethercat.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import ConfigError
from ..ethercat.al import AlState
from ..store.validate import parse_json
from .faults import CORRUPTIONS, KINDS

#: A request is a few fields: 4 KiB is plenty (and one datagram holds at most 64 KiB anyway).
MAX_REQUEST_BYTES = 4096
#: Requests are flat objects.
MAX_DEPTH = 2
#: When the segment goes silent (a bus that dies), for ``mute`` and ``--mute-at``: at once, or when
#: the master first reaches that point of its bring-up.
MUTE_EVENTS = ("now", "eeprom", "preop", "sii", "mapping", "safeop", "op", "off")
COMMANDS = ("stats", *KINDS, "drive_fault", "al_error", "refuse_state", "dc_drift", "mute")
MAX_FRAMES = 2**31 - 1
MAX_DELAY_US = 10_000_000
MAX_DRIFT_PPM = 1000.0


class RequestError(ValueError):
    """A control request the simulator does not take (answered with the reason, nothing changed)."""


@dataclass(frozen=True)
class Request:
    """One checked control request: its command and the fields it gave (None: not given; what each
    means, and its default, is the command's: docs/ethercat.md)."""

    cmd: str
    frames: int | None = None
    every: int | None = None
    delay_us: int | None = None
    slave: int | None = None
    axis: int | None = None
    code: int | None = None
    state: AlState | None = None
    ppm: float | None = None
    kind: str | None = None
    at: str | None = None


def parse_request(raw: bytes, slaves: int) -> Request:
    """Return the checked request in *raw* for a segment of *slaves* slaves; raise RequestError."""
    if len(raw) > MAX_REQUEST_BYTES:
        raise RequestError(f"request of {len(raw)} bytes; at most {MAX_REQUEST_BYTES}")
    try:
        doc = parse_json(raw, "control request", max_depth=MAX_DEPTH)
    except ConfigError as err:
        raise RequestError(err.msg) from None
    if not isinstance(doc, dict):
        raise RequestError('a request is a JSON object, e.g. {"cmd": "stats"}')
    cmd = doc.get("cmd")
    if cmd not in COMMANDS:
        raise RequestError(f"unknown command {str(cmd)[:40]!r}; known: {', '.join(COMMANDS)}")
    req = {key: _field(cmd, key, value, slaves) for key, value in doc.items() if key != "cmd"}  # known keys only
    if cmd in KINDS and "frames" in req and "every" in req:
        raise RequestError("give either frames or every")
    if cmd == "dc_drift" and "ppm" not in req:
        raise RequestError("dc_drift needs ppm")
    if cmd == "refuse_state" and "state" not in req:
        raise RequestError("refuse_state needs state")
    if cmd == "mute" and "at" not in req:
        raise RequestError(f"mute needs at (one of {', '.join(MUTE_EVENTS)})")
    return Request(cmd, **req)


def _integer(key: str, value, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise RequestError(f"{key} must be an integer from {lo} to {hi}")
    return value


def _field(cmd: str, key: str, value, slaves: int):
    if key in ("frames", "every") and cmd in KINDS:
        return _integer(key, value, 0, MAX_FRAMES)
    if key == "delay_us" and cmd in KINDS:
        return _integer(key, value, 0, MAX_DELAY_US)
    if key == "slave" and cmd != "stats":
        return _integer(key, value, 0, slaves - 1)
    if key == "axis" and cmd == "drive_fault":
        return _integer(key, value, 0, 7)
    if key == "code" and cmd in ("drive_fault", "al_error", "refuse_state"):
        return _integer(key, value, 0, 0xFFFF)
    if key == "state" and cmd in ("al_error", "refuse_state"):
        if not isinstance(value, str) or value.upper() not in AlState.__members__:
            raise RequestError(f"state must be one of {', '.join(AlState.__members__)}")
        return AlState[value.upper()]
    if key == "ppm" and cmd == "dc_drift":
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not math.isfinite(value)
            or abs(value) > MAX_DRIFT_PPM
        ):
            raise RequestError(f"ppm must be a number from -{MAX_DRIFT_PPM:g} to {MAX_DRIFT_PPM:g}")
        return float(value)
    if key == "kind" and cmd == "bad_frame":
        if value not in CORRUPTIONS:
            raise RequestError(f"kind must be one of {', '.join(CORRUPTIONS)}")
        return value
    if key == "at" and cmd == "mute":
        if value not in MUTE_EVENTS:
            raise RequestError(f"at must be one of {', '.join(MUTE_EVENTS)}")
        return value
    raise RequestError(f"{cmd} takes no field {str(key)[:40]!r}")
