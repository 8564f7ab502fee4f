"""Reading what softrt did not write itself: bounded JSON, checked summaries, safe names (store layer).

A run directory, an imported cyclictest/oslat result or a copied history can come from anywhere,
so every file is read the same way: at most :data:`MAX_JSON_BYTES`, nested at most
:data:`MAX_JSON_DEPTH` deep, no NaN/Infinity (RFC 8259 section 6: "Numeric values that cannot be
represented ... (such as Infinity and NaN) are not permitted"), every integer inside SQLite's
signed 64-bit INTEGER (sqlite.org/datatype3.html) and every float finite. A file that breaks one
of these rules, or whose fields have the wrong type, is one ConfigError naming the file and the
field (exit status 2), never a traceback.

Two helpers for what is shown or used as a name: :func:`printable` drops control characters
(terminal escape sequences in a nodename must not reach the terminal), :func:`safe_name` maps a
name onto ``[A-Za-z0-9._-]`` before it becomes part of a path (a nodename with ``/`` must not
become a directory).
"""

from __future__ import annotations

import json
import math
import os
import re
import stat
import unicodedata
from pathlib import Path

from ..errors import ConfigError
from ..platform import O_PRIVATE_BINARY

#: The largest JSON file softrt reads (a cyclictest histogram of 64 threads x 10,000 buckets is ~10 MB).
MAX_JSON_BYTES = 64 * 1024 * 1024
#: The deepest nesting softrt reads; its own files nest 4 levels, rt-tests' 4.
MAX_JSON_DEPTH = 32
#: SQLite INTEGER is a signed 64-bit number (and so is every numpy count softrt computes).
INT64_MAX = 2**63 - 1
#: The longest name softrt accepts in a run id or a directory name (NAME_MAX is 255).
MAX_NAME = 64

_SAFE_RE = re.compile(r"[^A-Za-z0-9._-]+")
_HINT = "the file is corrupt or was not written by softrt"


# -- names and text ---------------------------------------------------------------------------------
def printable(text: object) -> str:
    """Return ``str(text)`` without control characters: tab, CR and LF become spaces, the rest ``?``.

    Unicode category C* (Cc controls incl. ESC and the C1 CSI, Cf format characters such as the
    bidirectional overrides of CVE-2021-42574, Cs/Co/Cn) are what a terminal may act on.
    """
    text = str(text)
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else " " if c in "\t\r\n" else "?" for c in text)


def safe_name(text: object, fallback: str = "unknown", max_len: int = MAX_NAME) -> str:
    """Return *text* reduced to ``[A-Za-z0-9._-]`` (runs of others become ``_``), safe in a path.

    No leading dot (no hidden file, no ``..``), at most *max_len* characters, *fallback* when
    nothing is left. ``safe_name("evil/../x") == "evil_.._x"``.
    """
    name = _SAFE_RE.sub("_", unicodedata.normalize("NFKC", str(text)))[:max_len].lstrip(".")
    return name or fallback


def is_safe_name(text: object) -> bool:
    """True when *text* is a string that :func:`safe_name` leaves as it is."""
    return isinstance(text, str) and bool(text) and safe_name(text, fallback="") == text


# -- JSON ---------------------------------------------------------------------------------------------
def _where(path: object) -> str:
    return printable(path)


def _reject_constant(name: str) -> None:
    raise ValueError(f"{name} is not a number JSON allows")


def parse_json(raw: bytes | str, where: object, *, max_depth: int = MAX_JSON_DEPTH) -> object:
    """Parse *raw* as strict JSON (bounded, see the module docstring); ConfigError naming *where*."""
    try:
        doc = json.loads(raw, parse_constant=_reject_constant)
    except RecursionError:
        raise ConfigError(f"{_where(where)}: JSON nested too deeply (more than {max_depth} levels)",
                          hint=_HINT) from None
    except ValueError as err:  # JSONDecodeError, UnicodeDecodeError, an integer of > 4300 digits, NaN
        raise ConfigError(f"{_where(where)} is not valid JSON ({printable(err)})", hint=_HINT) from None
    check_values(doc, where, max_depth=max_depth)
    return doc


def read_bounded(path: Path | str, what: str = "file", *, max_bytes: int = MAX_JSON_BYTES,
                 hint: str | None = None) -> bytes:
    """Return the bytes of the regular file *path*, at most *max_bytes*; ConfigError otherwise.

    Opened with O_NONBLOCK and checked with fstat(2): a FIFO or a device named like a result file
    (``summary.json -> /dev/zero``) is refused instead of blocking or reading forever.
    """
    path = Path(path)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | O_PRIVATE_BINARY)
    except OSError as err:
        raise ConfigError(f"cannot read {what} {_where(path)}: {err.strerror or err}", hint=hint) from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ConfigError(f"{what} {_where(path)} is not a regular file", hint=hint)
        with os.fdopen(fd, "rb", closefd=False) as f:
            raw = f.read(max_bytes + 1)
    except OSError as err:
        raise ConfigError(f"cannot read {what} {_where(path)}: {err.strerror or err}", hint=hint) from None
    finally:
        os.close(fd)
    if len(raw) > max_bytes:
        size = f"{max_bytes // (1024 * 1024)} MiB" if max_bytes >= 1024 * 1024 else f"{max_bytes // 1024} KiB"
        raise ConfigError(f"{what} {_where(path)} is larger than {size}",
                          hint=hint or "softrt does not read files this large")
    return raw


def load_json(path: Path | str, what: str = "file", *, max_bytes: int = MAX_JSON_BYTES,
              max_depth: int = MAX_JSON_DEPTH) -> object:
    """Read and parse the JSON file *path* (bounded); ConfigError for anything wrong with it."""
    return parse_json(read_bounded(path, what, max_bytes=max_bytes), path, max_depth=max_depth)


def check_values(doc: object, where: object, *, max_depth: int = MAX_JSON_DEPTH) -> None:
    """Raise ConfigError if *doc* nests deeper than *max_depth*, or holds an integer outside
    64 bits or a float that is not finite (``1e999`` parses as infinity)."""
    stack: list[tuple[object, int, str]] = [(doc, 1, "")]
    while stack:
        value, depth, key = stack.pop()
        if isinstance(value, (dict, list)):
            if depth > max_depth:
                raise ConfigError(f"{_where(where)}: JSON nested too deeply (more than {max_depth} levels)",
                                  hint=_HINT)
            items = value.items() if isinstance(value, dict) else enumerate(value)
            stack.extend((v, depth + 1, f"{key}.{k}" if isinstance(value, dict) else f"{key}[{k}]")
                         for k, v in items)
        elif isinstance(value, bool) or value is None or isinstance(value, str):
            continue
        elif isinstance(value, int):
            if not -INT64_MAX - 1 <= value <= INT64_MAX:
                raise ConfigError(f"{_where(where)}: {_key(key)} is out of range ({_num(value)})", hint=_HINT)
        elif isinstance(value, float) and not math.isfinite(value):
            raise ConfigError(f"{_where(where)}: {_key(key)} is not a finite number ({value})", hint=_HINT)


def _key(key: str) -> str:
    return printable(key.lstrip(".") or "the document")[:80]


def _num(value: object) -> str:
    text = repr(value) if not isinstance(value, int) or abs(value) < 10**30 else f"a {len(str(abs(value)))}-digit number"
    return printable(text)[:60]


# -- summary.json ---------------------------------------------------------------------------------
_STR_FIELDS = ("scenario", "partial_reason", "started_at", "finished_at", "checkpoint_at")
_COUNT_FIELDS = ("cycles", "records_expected", "records_missing")
_DICT_FIELDS = ("config", "host", "tuning", "misses", "ring", "board", "motion", "check", "import", "rtt_us")
_STAT_FIELDS = ("period_us", "process_us", "latency_us", "slack_us", "rtt_us")
_LIST_OF_DICT_FIELDS = ("threads", "loads")
_CHOICES = {"source": ("softrt", "cyclictest", "oslat"), "status": ("complete", "partial", "failed", "running"),
            "mode": ("real-time", "not real-time", "untuned")}
_COUNT_BLOCKS = {"misses": ("missed_updates", "cycles_with_miss", "longest_miss_run", "overruns", "device_errors"),
                 "ring": ("capacity", "overflows"), "board": ("writes", "missed_updates"),
                 "config": ("period_ns", "duration_ns", "axes")}
_TUNING_LISTS = ("applied", "not_applied", "system_changes", "recovered_from_earlier_runs")


def check_summary(summary: object, where: object) -> dict:
    """Return *summary* (a parsed summary.json) with every string made :func:`printable`.

    Raises ConfigError naming the field when a field softrt reads has the wrong type or range:
    ``config`` a list, ``host`` a string, ``cycles`` negative, a bool or a float, a run id that
    is not a safe name, a statistic that is not a number.
    """
    if not isinstance(summary, dict):
        raise ConfigError(f"{_where(where)} is not a softrt summary (a JSON {type(summary).__name__}, "
                          "not an object)", hint=_HINT)

    def bad(field: str, problem: str) -> ConfigError:
        return ConfigError(f"{_where(where)}: {printable(field)[:80]} {problem}", hint=_HINT)  # keys come from the file

    run_id = summary.get("run_id")
    if not is_safe_name(run_id) or len(run_id) > 2 * MAX_NAME:
        raise bad("run_id", f"must be a name of letters, digits, '.', '_' and '-', got {_num(run_id)}")
    for field in _STR_FIELDS:
        if not isinstance(summary.get(field), (str, type(None))):
            raise bad(field, f"must be text, got {_num(summary[field])}")
    for field, choices in _CHOICES.items():
        if summary.get(field) not in (*choices, None):
            raise bad(field, f"must be one of {', '.join(choices)}, got {_num(summary[field])}")
    for field in _COUNT_FIELDS:
        _count(summary.get(field), field, bad)
    for field in _DICT_FIELDS + _STAT_FIELDS:
        if not isinstance(summary.get(field), (dict, type(None))):
            raise bad(field, f"must be an object, got a {_type(summary[field])}")
    for field in _STAT_FIELDS:
        for name, value in (summary.get(field) or {}).items():
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
                raise bad(f"{field}.{name}", f"must be a number or null, got {_num(value)}")
    for block, fields in _COUNT_BLOCKS.items():
        for name in fields:
            _count((summary.get(block) or {}).get(name), f"{block}.{name}", bad)
    hostname = (summary.get("host") or {}).get("hostname")
    if not isinstance(hostname, (str, type(None))):
        raise bad("host.hostname", f"must be text, got {_num(hostname)}")
    for name in _TUNING_LISTS:
        _list_of_dicts((summary.get("tuning") or {}).get(name), f"tuning.{name}", bad)
    for field in _LIST_OF_DICT_FIELDS:
        _list_of_dicts(summary.get(field), field, bad)
    notes = summary.get("notes")
    if notes is not None and not (isinstance(notes, list) and all(isinstance(n, str) for n in notes)):
        raise bad("notes", "must be a list of text")
    return _printable_strings(summary)


def _type(value: object) -> str:
    return {dict: "object", list: "list", str: "string", bool: "boolean"}.get(type(value), type(value).__name__)


def _count(value: object, field: str, bad) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise bad(field, f"must be a whole number, got {_num(value)}")
    if value < 0:
        raise bad(field, f"cannot be negative, got {_num(value)}")


def _list_of_dicts(value: object, field: str, bad) -> None:
    if value is not None and not (isinstance(value, list) and all(isinstance(v, dict) for v in value)):
        raise bad(field, "must be a list of objects")


def _printable_strings(doc: object) -> object:
    """A copy of *doc* with every string (keys too) passed through :func:`printable` (depth is
    bounded by :func:`check_values`, so recursion is safe)."""
    if isinstance(doc, str):
        return printable(doc)
    if isinstance(doc, dict):
        return {printable(k): _printable_strings(v) for k, v in doc.items()}
    if isinstance(doc, list):
        return [_printable_strings(v) for v in doc]
    return doc
