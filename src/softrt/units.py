"""Time units: parse "250us", "1.5ms", "10s", "2m"; format nanoseconds for people (pure).

softrt keeps every time as an integer number of nanoseconds (names end in ``_ns``), as
CLOCK_MONOTONIC does; floats appear only in what is shown to people.
"""

from __future__ import annotations

import re

from .errors import ConfigError

NS_PER_US = 1_000
NS_PER_MS = 1_000_000
NS_PER_S = 1_000_000_000

_SCALE_NS = {
    "ns": 1,
    "us": NS_PER_US,
    "µs": NS_PER_US,
    "ms": NS_PER_MS,
    "s": NS_PER_S,
    "m": 60 * NS_PER_S,
    "min": 60 * NS_PER_S,
    "h": 3600 * NS_PER_S,
    "d": 86400 * NS_PER_S,
}
_TIME_RE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([a-zµ]*)\s*$")


def parse_time_ns(text: str | int | float, *, default_unit: str, what: str = "time") -> int:
    """Parse *text* ("250us", "250", "1.5ms") into integer nanoseconds.

    A bare number takes *default_unit* (cyclictest's ``-i`` is in µs, ``-D`` in seconds).
    """
    if isinstance(text, (int, float)):
        value, unit = float(text), default_unit
    else:
        m = _TIME_RE.match(text)
        if not m:
            raise ConfigError(f"{what} {text!r} is not a time", hint="write it like 250us, 1ms or 10s")
        value, unit = float(m.group(1)), (m.group(2) or default_unit)
    if unit not in _SCALE_NS:
        raise ConfigError(f"{what} {text!r} has an unknown unit {unit!r}", hint="use ns, us, ms, s, m or h")
    return int(round(value * _SCALE_NS[unit]))


def format_ns(ns: float | int | None, unit: str = "us", digits: int = 1) -> str:
    """Format *ns* in *unit* ("us" → "249.9 µs")."""
    if ns is None:
        return "-"
    label = "µs" if unit == "us" else unit
    return f"{ns / _SCALE_NS[unit]:,.{digits}f} {label}"
