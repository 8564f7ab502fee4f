"""The Windows settings ``softrt tune`` changes, the values each takes, and the commands that set them (platform layer).

The Windows counterpart of :mod:`..linux.writable`: every Windows entry of a tune journal passes
:func:`check_entry` when it is written and when it is read back (a journal is untrusted input),
and the commands that apply or restore it are built here only, from checked values, never from
free text. The reversible subset of Microsoft's Soft Real-Time steps
(learn.microsoft.com/windows/iot/iot-enterprise/soft-real-time/soft-real-time-device):

* ``win-power``: the processor idle-disable setting of a power scheme (the target is the scheme's
  GUID), AC index 0 or 1 (``powercfg /setacvalueindex <scheme> SUB_PROCESSOR IDLEDISABLE <0|1>``,
  then ``powercfg /setactive <scheme>``);
* ``win-service``: the start type and state of SysMain, DPS, Audiosrv and wuauserv
  (``sc config <name> start= <type>``, ``sc stop``/``sc start``);
* ``win-rss``: a network adapter's RSS processor range in group 0
  (``Set-NetAdapterRss -Name <adapter> -BaseProcessorNumber <n> -MaxProcessorNumber <m>``).

The WindowsIoT CSP (SetRTCores) and the kernel registry values are never written: the doc warns
that the CSP cannot be undone without reimaging, and both take effect only after a restart.
"""

from __future__ import annotations

import re

from ...errors import ConfigError
from .wincmd import powershell

WIN_POWER, WIN_SERVICE, WIN_RSS = "win-power", "win-service", "win-rss"
KINDS = (WIN_POWER, WIN_SERVICE, WIN_RSS)
#: The services Microsoft's guide stops (SysMain, DPS, Audiosrv) and Windows Update's agent.
SERVICES = ("SysMain", "DPS", "Audiosrv", "wuauserv")
#: ``sc config … start=`` words (sc.exe config /?); boot and system are drivers', never set here.
START_TYPES = ("auto", "delayed-auto", "demand", "disabled")
STATES = ("running", "stopped")
IDLE_SETTING = ("SUB_PROCESSOR", "IDLEDISABLE")

_GUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_RANGE = re.compile(r"([0-9]{1,4})-([0-9]{1,4})")
# An interface alias, quoted in single quotes for PowerShell: no quote characters, no controls.
_ADAPTER = re.compile(r"[^'\"`\x00-\x1f\u2018\u2019\u201a\u201b]{1,128}")


def service_value(start: str, state: str) -> str:
    """A service entry's value: ``auto/running``."""
    return f"{start}/{state}"


def _service_parts(value: object) -> tuple[str, str]:
    start, _, state = str(value).partition("/")
    if start not in START_TYPES or state not in STATES:
        raise ConfigError(f"{str(value)[:40]!r} is not a service start type/state softrt sets")
    return start, state


def rss_range(value: object) -> tuple[int, int]:
    """``0-5`` → (0, 5): an RSS base and max processor number."""
    m = _RANGE.fullmatch(str(value))
    if not m or int(m[1]) > int(m[2]):
        raise ConfigError(f"{str(value)[:40]!r} is not an RSS processor range base-max")
    return int(m[1]), int(m[2])


def check_value(kind: str, target: object, value: object) -> None:
    """Raise ConfigError unless *value* is one softrt sets for *target* of *kind*."""
    if kind == WIN_POWER:
        if not (isinstance(target, str) and _GUID.fullmatch(target)):
            raise ConfigError("a power entry must name a power scheme GUID")
        if value not in ("0", "1"):
            raise ConfigError(f"IDLEDISABLE takes 0 or 1, not {str(value)[:20]!r}")
    elif kind == WIN_SERVICE:
        if target not in SERVICES:
            raise ConfigError(f"{str(target)[:40]!r} is not a service softrt tune changes ({', '.join(SERVICES)})")
        _service_parts(value)
    elif kind == WIN_RSS:
        if not (isinstance(target, str) and _ADAPTER.fullmatch(target)):
            raise ConfigError("an RSS entry must name a network adapter (no quotes)")
        rss_range(value)
    else:
        raise ConfigError(f"unknown Windows setting {str(kind)[:20]!r}")


def check_entry(entry: dict) -> None:
    """Raise ConfigError unless a journal *entry* is a Windows change softrt could have made."""
    for name in ("target", "before"):
        if name not in entry:
            raise ConfigError(f"a {entry['kind']} entry without {name}")
    check_value(entry["kind"], entry["target"], entry["before"])
    if "after" in entry:
        check_value(entry["kind"], entry["target"], entry["after"])


def commands(kind: str, target: str, now: str, value: str) -> list[list[str]]:
    """The commands that take *target* from *now* to *value* (apply and restore alike), checked first.

    A service is stopped before it is disabled and started after its start type allows it.

    Raises:
        ConfigError: a target or value softrt does not set.
    """
    check_value(kind, target, value)
    if kind == WIN_POWER:
        return [
            ["powercfg.exe", "/setacvalueindex", target, *IDLE_SETTING, value],
            ["powercfg.exe", "/setactive", target],
        ]
    if kind == WIN_SERVICE:
        start, state = _service_parts(value)
        was = now.partition("/")[2]  # what it is now may be anything sc printed (start_pending): only compared
        config = ["sc.exe", "config", target, "start=", start]
        if state == "stopped":
            return ([["sc.exe", "stop", target]] if was != "stopped" else []) + [config]
        return [config] + ([["sc.exe", "start", target]] if was != "running" else [])
    base, top = rss_range(value)
    return [powershell(f"Set-NetAdapterRss -Name '{target}' -BaseProcessorNumber {base} -MaxProcessorNumber {top}")]


def command_line(cmds: list[list[str]]) -> str:
    """Commands as one line to type (``a & b``), arguments with spaces quoted."""
    return " & ".join(" ".join(f'"{a}"' if " " in a else a for a in cmd) for cmd in cmds)


def manual_fix(entry: dict) -> str:
    """The commands that put a journal entry's previous value back by hand, as one line."""
    try:
        return command_line(commands(entry["kind"], entry["target"], str(entry.get("after", "")), entry["before"]))
    except ConfigError:
        return ""
