"""Drive descriptions: which PDOs the master assigns and maps by SDO in PRE-OP (a small TOML file).

Pure (no pysoem): parsed before the run starts, so a bad file is bad input (exit status 2, one
line) and nothing is started. The objects are those of CiA 402-2 CSP; each entry is written as
``0xINDEX[:SUB]/BITS`` (``pad/BITS`` for a gap), the mapping-object value of ETG.1000.6
§5.6.7.4.7 (``index << 16 | subindex << 8 | bits``). Objects are given for axis 0; axis *n* of a
multi-axis drive uses them at + n·0x800 and PDOs 0x1600/0x1A00 + n·0x10 (ETG.6010 §6)::

    [defaults]                 # every CiA 402 drive that no [[drive]] table matches
    assign = "auto"            # auto: by SDO when the drive allows it, else its own mapping;
                               # always: refuse a drive that does not allow it; never: its own
    rx = ["0x6040/16", "0x607A/32", "0x6060/8", "pad/8"]
    tx = ["0x6041/16", "0x6064/32", "0x6061/8", "pad/8", "0x60F4/32", "0x603F/16"]

    [[drive]]
    position = 1               # bus position, or vendor_id = 0x..., product_code = 0x...
    axes = 2                   # CiA 402 axes in this drive (default: as many as answer by SDO)

Without a file (or for keys a table leaves out) the built-in CSP defaults above apply.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

import tomllib

from ..errors import ConfigError
from .description import CSP_RX_ENTRIES, CSP_TX_ENTRIES, MAX_AXES_PER_DEVICE, PROFILE_OBJECTS, PdoEntry
from .mapping import REQUIRED_INPUTS, REQUIRED_OUTPUTS

ASSIGN_MODES = ("auto", "always", "never")
MAX_FILE_BYTES = 64 * 1024
MAX_ENTRIES = 32  #: per PDO (what drives commonly accept, and the simulator's limit)
MAX_PDO_BITS = 8 * 64
_ENTRY = re.compile(r"^(?:0x([0-9a-fA-F]{1,4})(?::(?:0x)?([0-9a-fA-F]{1,2}))?|pad)/([0-9]{1,2})$")
_REQUIRED_BITS = {0x6040: 16, 0x607A: 32, 0x6041: 16, 0x6064: 32}
_PLAN_KEYS = {"assign", "axes", "rx", "tx"}
_MATCH_KEYS = {"position", "vendor_id", "product_code"}


@dataclass(frozen=True)
class DrivePlan:
    """What to do with one drive: assign mode, axes (None: ask the drive) and axis-0 PDO entries."""

    assign: str = "auto"
    axes: int | None = None
    rx: tuple[PdoEntry, ...] = CSP_RX_ENTRIES
    tx: tuple[PdoEntry, ...] = CSP_TX_ENTRIES


@dataclass(frozen=True)
class DriveMatch:
    """A ``[[drive]]`` table: which drive(s) it is for, and its plan."""

    plan: DrivePlan
    position: int | None = None
    vendor_id: int | None = None
    product_code: int | None = None

    def matches(self, position: int, vendor_id: int, product_code: int) -> bool:
        return (
            (self.position is None or self.position == position)
            and (self.vendor_id is None or self.vendor_id == vendor_id)
            and (self.product_code is None or self.product_code == product_code)
        )


@dataclass(frozen=True)
class DriveConfig:
    """A parsed drive description (``source``: the file, or the built-in defaults)."""

    source: str = "built-in CiA 402 CSP defaults"
    defaults: DrivePlan = DrivePlan()
    drives: tuple[DriveMatch, ...] = field(default=())

    def plan_for(self, position: int, vendor_id: int, product_code: int) -> DrivePlan:
        """The plan of the first ``[[drive]]`` that matches, else the defaults."""
        return next((d.plan for d in self.drives if d.matches(position, vendor_id, product_code)), self.defaults)


def entry_text(e: PdoEntry) -> str:
    """``"0x607A:00/32"`` (``"pad/8"`` for a gap)."""
    return f"pad/{e.bits}" if e.index == 0 else f"0x{e.index:04X}:{e.subindex:02X}/{e.bits}"


def load_drives(raw: bytes, name: str) -> DriveConfig:
    """Check the bytes of a drive description (read by the caller, bounded to ``MAX_FILE_BYTES``);
    raise ConfigError (one line, with the fix) otherwise. *name* names it in messages."""
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise ConfigError(f"drive description {_shown(name)} is not UTF-8 text", hint="save it as UTF-8 TOML") from None
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(
            f"drive description {_shown(name)} is not valid TOML: {_shown(str(err))}",
            hint="see docs/ethercat.md, 'Drive descriptions'",
        ) from None
    except (RecursionError, ValueError):  # nested too deeply; an integer of thousands of digits
        raise ConfigError(
            f"drive description {_shown(name)} is not valid TOML (nested too deeply or a huge number)",
            hint="see docs/ethercat.md, 'Drive descriptions'",
        ) from None
    return parse_drives(data, name)


def parse_drives(data: dict, source: str) -> DriveConfig:
    """Check a decoded drive description (see the module docstring)."""

    def fail(where: str, msg: str) -> ConfigError:
        return ConfigError(
            f"drive description {_shown(source)}: {where}: {msg}", hint="see docs/ethercat.md, 'Drive descriptions'"
        )

    unknown = set(data) - {"defaults", "drive"}
    if unknown:
        raise fail(_shown(sorted(unknown)[0]), "unknown key (known: defaults, drive)")
    defaults = DrivePlan()
    if "defaults" in data:
        table = data["defaults"]
        if not isinstance(table, dict):
            raise fail("defaults", "must be a table ([defaults])")
        _no_unknown(table, _PLAN_KEYS, "[defaults]", fail)
        defaults = _plan(table, defaults, "[defaults]", fail)
    drives = []
    tables = data.get("drive", [])
    if not isinstance(tables, list) or not all(isinstance(t, dict) for t in tables):
        raise fail("drive", "must be an array of tables ([[drive]])")
    positions = set()
    for n, table in enumerate(tables, start=1):
        where = f"[[drive]] {n}"
        _no_unknown(table, _PLAN_KEYS | _MATCH_KEYS, where, fail)
        if not _MATCH_KEYS & set(table):
            raise fail(where, "says which drive it is for with position, vendor_id or product_code")
        match = {
            k: _int(table[k], f"{where}: {k}", 0, 0xFFFF if k == "position" else 0xFFFF_FFFF, fail)
            for k in _MATCH_KEYS & set(table)
        }
        if "position" in match:
            if match["position"] in positions:
                raise fail(where, f"position {match['position']} is described twice")
            positions.add(match["position"])
        drives.append(DriveMatch(_plan(table, defaults, where, fail), **match))
    return DriveConfig(source, defaults, tuple(drives))


def _plan(table: dict, base: DrivePlan, where: str, fail) -> DrivePlan:
    plan = base
    if "assign" in table:
        if table["assign"] not in ASSIGN_MODES:
            raise fail(f"{where}: assign", f"must be one of {', '.join(ASSIGN_MODES)}, got {_shown(table['assign'])}")
        plan = replace(plan, assign=table["assign"])
    if "axes" in table:
        plan = replace(plan, axes=_int(table["axes"], f"{where}: axes", 1, MAX_AXES_PER_DEVICE, fail))
    for key, required in (("rx", REQUIRED_OUTPUTS), ("tx", REQUIRED_INPUTS)):
        if key in table:
            plan = replace(plan, **{key: _entries(table[key], f"{where}: {key}", required, fail)})
    return plan


def _entries(value, where: str, required: tuple[int, ...], fail) -> tuple[PdoEntry, ...]:
    if not isinstance(value, list) or not value or len(value) > MAX_ENTRIES:
        raise fail(where, f'must be a list of 1 to {MAX_ENTRIES} entries such as "0x6040/16"')
    entries = []
    for k, text in enumerate(value):
        m = _ENTRY.match(text) if isinstance(text, str) else None
        if m is None:
            raise fail(f"{where}[{k}]", f"{_shown(text)} is not of the form 0xINDEX[:SUB]/BITS or pad/BITS")
        index, sub, bits = int(m.group(1) or "0", 16), int(m.group(2) or "0", 16), int(m.group(3))
        if not 1 <= bits <= 32 or (index and bits not in (8, 16, 32)):
            raise fail(f"{where}[{k}]", f"{_shown(text)}: an object has 8, 16 or 32 bits, a gap 1 to 32")
        if index >= PROFILE_OBJECTS.stop and index < 0xA000:
            raise fail(f"{where}[{k}]", f"{_shown(text)}: give axis 0's object (axis n adds n x 0x800 itself)")
        entries.append(PdoEntry(index, sub, bits, 0))
    if sum(e.bits for e in entries) > MAX_PDO_BITS:
        raise fail(where, f"more than {MAX_PDO_BITS // 8} bytes in one PDO")
    seen = {(e.index, e.subindex) for e in entries if e.index}
    if len(seen) != sum(1 for e in entries if e.index):
        raise fail(where, "maps an object twice")
    for index in required:
        if not any(e.index == index and e.subindex == 0 and e.bits == _REQUIRED_BITS[index] for e in entries):
            raise fail(where, f"lacks 0x{index:04X}/{_REQUIRED_BITS[index]}, which the CSP cycle needs")
    return tuple(entries)


def _int(value, where: str, lo: int, hi: int, fail) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise fail(
            where,
            f"must be a whole number from {lo} to {hi:#x}" if hi > 255 else f"must be a whole number from {lo} to {hi}",
        )
    return value


def _no_unknown(table: dict, known: set[str], where: str, fail) -> None:
    unknown = sorted(set(table) - known)
    if unknown:
        raise fail(where, f"unknown key {_shown(unknown[0])} (known: {', '.join(sorted(known))})")


def _shown(value: object, limit: int = 80) -> str:
    """*value* for a one-line message: printable characters only, cut at *limit*."""
    text = "".join(c if c.isprintable() else "?" for c in str(value))
    return text if len(text) <= limit else text[:limit] + "..."
