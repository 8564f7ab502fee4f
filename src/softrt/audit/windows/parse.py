"""Parsers for what the Windows tools print (audit layer, pure).

Formats, as the tools document and print them:

* ``powercfg /qh <scheme> <subgroup> <setting>`` (powercfg command-line options,
  learn.microsoft.com/windows-hardware/design/device-experiences/powercfg-command-line-options):
  ``Power Scheme GUID: <guid>  (<name>)`` then ``Current AC Power Setting Index: 0x00000001`` and the
  DC one. The labels are translated on a localized Windows, so they are read by shape: the first
  GUID is the scheme's, the last two ``: 0x`` + 8 hex digits values are the AC and DC indexes;
* ``sc qc <name>`` / ``sc query <name>`` (sc.exe config, sc.exe query): ``KEY : <number> <WORD>``
  lines (``START_TYPE : 4 DISABLED``, ``STATE : 1 STOPPED``), ``[SC] … FAILED 1060:`` when the
  service is not installed;
* ``reg query <key>`` (reg query): ``    <name>    <REG_TYPE>    <data>`` lines, REG_DWORD as
  ``0x…``, REG_BINARY as hex digits;
* PowerShell ``… | ConvertTo-Json``: one object, or a list of them;
* ``typeperf -sc N`` (typeperf): PDH CSV, a header row of counter paths then rows of values.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Mapping
from typing import NamedTuple

from ...cpus import CpuSet

_SCHEME = re.compile(
    r"([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})[ \t]*(?:\((.*)\))?"
)
_INDEX = re.compile(r":\s*(0x[0-9a-fA-F]{8})\s*$", re.MULTILINE)
_SC_FIELD = re.compile(r"^\s*([A-Z_0-9]+)\s*:\s*(\d+)\s+([A-Z_]+)(.*)$")
_REG_VALUE = re.compile(r"^\s{2,}(\S.*?)\s{2,}(REG_[A-Z_0-9]+)(?:\s{2,}(.*))?$")

#: sc.exe START_TYPE words → the ``sc config start=`` word that sets them.
START_WORDS = {
    "AUTO_START": "auto",
    "DEMAND_START": "demand",
    "DISABLED": "disabled",
    "BOOT_START": "boot",
    "SYSTEM_START": "system",
}
SERVICE_NOT_INSTALLED = 1060  # ERROR_SERVICE_DOES_NOT_EXIST


class PowerSetting(NamedTuple):
    """One setting of the active power scheme as ``powercfg /qh`` shows it: the scheme's GUID and
    name, and the setting's index on AC and on DC power."""

    scheme: str
    scheme_name: str
    ac: int
    dc: int


def powercfg_setting(text: str) -> PowerSetting | None:
    """The active scheme's setting from ``powercfg /qh`` (its last two indexes: AC, DC), or None."""
    scheme = _SCHEME.search(text)
    indexes = [int(v, 16) for v in _INDEX.findall(text)][-2:]
    if not scheme or len(indexes) < 2:
        return None
    return PowerSetting(scheme[1].lower(), (scheme[2] or "").strip(), indexes[0], indexes[1])


def sc_fields(text: str) -> dict[str, tuple[int, str, str]]:
    """``{FIELD: (number, WORD, rest)}`` from ``sc qc``/``sc query`` output."""
    out = {}
    for line in text.splitlines():
        m = _SC_FIELD.match(line)
        if m:
            out[m[1]] = (int(m[2]), m[3], m[4].strip())
    return out


def start_type(qc_text: str) -> str | None:
    """The ``sc config start=`` word of a service (``delayed-auto`` for AUTO_START (DELAYED))."""
    field = sc_fields(qc_text).get("START_TYPE")
    if field is None:
        return None
    word = START_WORDS.get(field[1])
    return "delayed-auto" if word == "auto" and "DELAYED" in field[2] else word


def state(query_text: str) -> str | None:
    """``running``, ``stopped``, or the lower-cased pending state, from ``sc query``."""
    field = sc_fields(query_text).get("STATE")
    return field[1].lower() if field else None


def reg_values(text: str) -> dict[str, tuple[str, str]]:
    """``{name: (REG_TYPE, data)}`` of the values directly under the queried key."""
    out, header_seen = {}, False
    for line in text.splitlines():
        if line.startswith("HKEY_"):
            if header_seen:
                break  # a subkey follows: its values are not this key's
            header_seen = True
            continue
        m = _REG_VALUE.match(line)
        if m:
            out[m[1]] = (m[2], (m[3] or "").strip())
    return out


def reg_dword(values: Mapping[str, tuple[str, str]], name: str) -> int | None:
    """A REG_DWORD value (``0x1``) as an int, or None when absent or of another type."""
    kind, data = values.get(name, ("", ""))
    if kind != "REG_DWORD":
        return None
    try:
        return int(data, 16)
    except ValueError:
        return None


def reserved_cpus(data: str) -> CpuSet:
    """The CPUs of a ReservedCpuSets REG_BINARY value: a little-endian bit mask (``FE0F0000…``: 1-11)."""
    raw = bytes.fromhex(data.strip())
    mask = int.from_bytes(raw, "little")
    return CpuSet(i for i in range(len(raw) * 8) if mask >> i & 1)


def json_list(text: str) -> list[dict]:
    """PowerShell JSON as a list of objects (ConvertTo-Json prints a single object bare); [] when empty.

    Raises:
        ValueError: not JSON.
    """
    text = text.strip().lstrip("\ufeff")
    if not text:
        return []
    data = json.loads(text)
    if data is None:
        return []
    return [d for d in (data if isinstance(data, list) else [data]) if isinstance(d, dict)]


def typeperf(text: str) -> dict[str, float]:
    """``{counter path without the \\\\host prefix: value}`` from the last row of typeperf's CSV.

    Values typeperf could not read (blank, or a process that exited) are left out.
    """
    rows = list(csv.reader(io.StringIO(text)))
    header = next((r for r in rows if r and r[0].startswith("(PDH-CSV")), None)
    # Data rows have one value per counter; typeperf's own messages ("Exiting, please wait...") do not.
    data = [r for r in rows if header and r is not header and len(r) == len(header)]
    if not data:
        return {}
    last = data[-1]
    out = {}
    for path, value in zip(header[1:], last[1:]):
        name = re.sub(r"^\\\\[^\\]+", "", path)
        try:
            out[name] = float(value)
        except ValueError:
            continue
    return out
