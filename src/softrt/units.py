"""Time units: parse "250us", "1.5ms", "10s", "2m"; format nanoseconds for people (pure).

softrt keeps every time as an integer number of nanoseconds (names end in ``_ns``), as
CLOCK_MONOTONIC does; floats appear only in what is shown to people.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal

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
#: The longest time softrt reads (100 years; int64 nanoseconds end after 292 years).
MAX_TIME_NS = 100 * 365 * 86400 * NS_PER_S
_TIME_RE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([a-zµ]*)\s*$")


def parse_time_ns(text: str | int | float, *, default_unit: str, what: str = "time") -> int:
    """Parse *text* ("250us", "250", "1.5ms") into integer nanoseconds.

    A bare number takes *default_unit* (cyclictest's ``-i`` is in µs, ``-D`` in seconds). Anything
    else (a list, a bool, NaN, a negative number, more than :data:`MAX_TIME_NS`) is a ConfigError.
    """
    shown = "a huge number" if isinstance(text, int) and abs(text) > 10**30 else repr(text)
    shown = shown if len(shown) <= 40 else shown[:40] + "…"
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        value, unit = float(text) if abs(text) < 1e300 else math.inf, default_unit
    elif isinstance(text, str) and len(text) <= 64 and (m := _TIME_RE.match(text)):
        value, unit = float(m.group(1)), (m.group(2) or default_unit)
    else:
        raise ConfigError(f"{what} {shown} is not a time", hint="write it like 250us, 1ms or 10s")
    if unit not in _SCALE_NS:
        raise ConfigError(f"{what} {shown} has an unknown unit {unit!r}", hint="use ns, us, ms, s, m or h")
    ns = value * _SCALE_NS[unit]
    if not 0 <= ns <= MAX_TIME_NS:  # also NaN, which compares false
        raise ConfigError(f"{what} {shown} is out of range", hint="give a time from 0 to 100 years, e.g. 10s")
    return int(round(ns))


#: The largest magnitude shown in fixed notation ("999,999,999,999.9"); beyond it a figure is shown in
#: scientific notation, "1.00e+308", never the 309 digits of a summary's ``period_us.max = 1e308``.
MAX_FIXED = 1e12


def format_number(value: float | int | None, digits: int = 1, *, sign: bool = False, grouping: bool = True) -> str:
    """A figure for people, every display's one formatter: ``1234.56`` → "1,234.6" (*digits* decimals,
    thousands grouped unless *grouping* is false, "+" on positives with *sign*).

    None → "-"; NaN → "nan"; infinities → "inf", "-inf" ("+inf" with *sign*); beyond ±:data:`MAX_FIXED`
    three significant digits in scientific notation ("1.00e+308"), whatever reader let it through.
    """
    if value is None:
        return "-"
    plus = "+" if sign else ""
    try:
        x = float(value)
    except OverflowError:  # an integer beyond any float
        return f"{Decimal(value):{plus}.2e}"
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return f"{plus}inf" if x > 0 else "-inf"
    if abs(x) >= MAX_FIXED:
        return f"{x:{plus}.2e}"
    return f"{x:{plus}{',' if grouping else ''}.{max(0, int(digits))}f}"


def format_ns(ns: float | int | None, unit: str = "us", digits: int = 1) -> str:
    """Format *ns* in *unit* ("us" → "249.9 µs"; :func:`format_number`'s rules)."""
    if ns is None:
        return "-"
    label = "µs" if unit == "us" else unit
    try:
        value = ns / _SCALE_NS[unit]
    except OverflowError:  # an integer beyond any float: its digits (format_number takes it)
        value = ns // _SCALE_NS[unit]
    return f"{format_number(value, digits)} {label}"


def format_duration_s(seconds: float | int | None, compact: bool = False) -> str:
    """Format a run's length for people, to the minute past an hour: "45 s", "12 min", "3 h 05 min",
    "2 d 04 h"; *compact* for a table cell: "45s", "12m", "3h05m", "2d04h"."""
    if seconds is None or seconds != seconds:  # None or NaN
        return "-"
    if abs(seconds) >= 1e15:  # (int() of infinity raises; nothing runs for 30 million years)
        return format_number(seconds, 0) if seconds > 0 else "0s" if compact else "0 s"
    s = max(0, int(seconds))
    if s < 120:
        return f"{s}s" if compact else f"{s} s"
    if s < 3600:
        return f"{s // 60}m" if compact else f"{s // 60} min"
    if s < 2 * 86400:
        return f"{s // 3600}h{s % 3600 // 60:02d}m" if compact else f"{s // 3600} h {s % 3600 // 60:02d} min"
    return f"{s // 86400}d{s % 86400 // 3600:02d}h" if compact else f"{s // 86400} d {s % 86400 // 3600:02d} h"


#: Units for :func:`format_time_ns`, largest first.
_HUMAN = (
    ("d", 86400 * NS_PER_S),
    ("h", 3600 * NS_PER_S),
    ("min", 60 * NS_PER_S),
    ("s", NS_PER_S),
    ("ms", NS_PER_MS),
    ("µs", NS_PER_US),
    ("ns", 1),
)


def format_time_ns(ns: int | float | None) -> str:
    """A configured time for people, in the largest unit it reaches, to 3 decimals at most:
    604800000000000 → "7 d", 250000 → "250 µs", 1500000 → "1.5 ms", -20000 → "-20 µs", 0 → "0 s"."""
    if ns is None:
        return "-"
    if ns == 0:
        return "0 s"
    if ns != ns or abs(ns) >= MAX_FIXED * 86400 * NS_PER_S:  # (nan, inf, or more than 10¹² days)
        return f"{format_number(ns)} ns"
    unit, scale = next((u, k) for u, k in _HUMAN if abs(ns) >= k or k == 1)
    return f"{round(ns / scale, 3):,g} {unit}"
