"""Scenario files (TOML): built-ins shipped in ``builtin/``, user files accepted.

Every mistake is reported as one line naming the file, the line and the key, e.g.
``scenario my.toml, line 7, key load[1].name: unknown load 'gpu2' (known loads: disk, …)``.
"""

from __future__ import annotations

import dataclasses
import os
import re
import sys
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

from ..board import check_device_spec
from ..cpus import CpuSet
from ..errors import ConfigError
from ..load import LOAD_NAMES
from ..loop.cyclic import WAITS
from ..schema.config import PROFILES, TRACE_MODES
from ..schema.text import printable
from ..session.config import SAMPLE_MODES
from ..store.validate import path_kind, read_bounded
from ..units import parse_time_ns
from .model import PLACEMENTS, LoadSpec, Scenario

#: The largest scenario file read (the built-ins are a few hundred bytes).
MAX_SCENARIO_BYTES = 256 * 1024
BUILTIN_NAMES = ("untuned", "tuned", "tuned+load", "tuned+load-on-rt-cpus")
_TOP_KEYS = {
    "name",
    "description",
    "profile",
    "wait",
    "device",
    "ecat_drives",
    "duration",
    "loads_on_rt_cpus",
    "trace",
    "trace_mode",
    "samples",
    "load",
    "dc_lock",
    "dc_shift",
}
_LOAD_KEYS = {"name", "cpus"}


def load_scenario(name_or_path: str) -> Scenario:
    """Return the built-in scenario *name_or_path*, or the one in that TOML file."""
    if name_or_path in BUILTIN_NAMES:
        text = resources.files(__package__).joinpath("builtin", f"{name_or_path}.toml").read_text()
        return parse_scenario(text, source="built-in")
    path = Path(name_or_path)
    hint = f"use a built-in ({', '.join(BUILTIN_NAMES)}) or the path of a .toml file"
    # What the path really is, from stat(2): it neither blocks on a FIFO nor reads a device, and
    # read_bounded checks the file it opens again (O_NONBLOCK, fstat), so nothing swapped in between is read.
    kind = path_kind(path)
    if kind is None:
        if path.suffix == ".toml" or os.sep in name_or_path:
            raise ConfigError(f"no scenario file {printable(name_or_path)!r}", hint=hint)
        raise ConfigError(f"unknown scenario {printable(name_or_path)!r}", hint=hint)
    if kind != "a regular file":
        raise ConfigError(f"scenario {printable(name_or_path)!r} is {kind}, not a file", hint=hint)
    if path.suffix != ".toml":
        raise ConfigError(f"scenario {printable(name_or_path)!r} is not a .toml file", hint=hint)
    raw = read_bounded(
        path,
        "scenario",
        max_bytes=MAX_SCENARIO_BYTES,
        hint="a scenario file is a few lines of TOML (see docs/scenarios.md)",
    )
    try:
        text = raw.decode("utf-8")  # TOML is UTF-8 (toml.io, "Spec")
    except UnicodeDecodeError as err:
        raise ConfigError(
            f"scenario {printable(path)} is not UTF-8 text (byte {err.start})",
            hint="a scenario file is TOML text (see docs/scenarios.md)",
        ) from None
    scenario = parse_scenario(text, source=printable(path))
    if scenario.ecat_drives is not None:  # a drive description beside the scenario file
        scenario = dataclasses.replace(scenario, ecat_drives=str(path.parent / scenario.ecat_drives))
    return scenario


def parse_scenario(text: str, source: str = "<string>") -> Scenario:
    """Parse and validate a scenario's TOML *text*; *source* names it in error messages."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(f"scenario {source}: malformed TOML: {printable(err)}") from None
    except RecursionError:  # tomllib recurses once per nested array or inline table
        raise ConfigError(f"scenario {source}: malformed TOML: nested too deeply") from None
    except ValueError as err:  # an integer of more than 4300 digits (sys.int_info)
        raise ConfigError(f"scenario {source}: malformed TOML: {printable(err)[:80]}") from None

    def fail(key: str, problem: str, hint: str | None = None) -> ConfigError:
        line = _line_of(text, key.split(".")[-1].split("[")[0], key)
        where = f", line {line}" if line else ""
        return ConfigError(f"scenario {source}{where}, key {key}: {problem}", hint=hint)

    for key in data:
        if key not in _TOP_KEYS:
            raise fail(printable(key)[:40], "unknown key", f"known keys: {', '.join(sorted(_TOP_KEYS))}")
    name = data.get("name")
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9_.+-]+", name or ""):
        raise fail("name", f"must be a short name (letters, digits, _ . + -), got {_shown(name)}")
    profile = data.get("profile", "rt")
    if not isinstance(profile, str) or profile not in PROFILES:
        raise fail("profile", f"unknown profile {_shown(profile)}", f"use one of {', '.join(PROFILES)}")
    wait = data.get("wait", "spin")
    if not isinstance(wait, str) or wait not in WAITS:
        raise fail("wait", f"unknown wait strategy {_shown(wait)}", f"use one of {', '.join(WAITS)}")
    device, ecat_drives = _device(data, fail)
    description = data.get("description", "")
    if not isinstance(description, str):
        raise fail("description", f"must be text, got {_shown(description)}")
    duration_ns = None
    if "duration" in data:
        try:
            duration_ns = parse_time_ns(data["duration"], default_unit="s", what="duration")
        except ConfigError as err:
            raise fail("duration", err.msg, err.hint) from None
        if duration_ns <= 0:
            raise fail("duration", "must be positive", 'e.g. duration = "10s"')
    on_rt = data.get("loads_on_rt_cpus", False)
    if not isinstance(on_rt, bool):
        raise fail("loads_on_rt_cpus", f"must be true or false, got {_shown(on_rt)}")
    trace = data.get("trace")
    if trace is not None and not isinstance(trace, bool):
        raise fail("trace", f"must be true or false, got {_shown(trace)}")
    trace_mode = data.get("trace_mode")
    if trace_mode is not None and trace_mode not in TRACE_MODES:
        raise fail("trace_mode", f"unknown value {_shown(trace_mode)}", f"use one of {', '.join(TRACE_MODES)}")
    samples = data.get("samples")
    if samples is not None and samples not in SAMPLE_MODES:
        raise fail("samples", f"unknown value {_shown(samples)}", f"use one of {', '.join(SAMPLE_MODES)}")
    dc_lock, dc_shift_ns = _dc(data, device, fail)
    return Scenario(
        name=name,
        description=printable(description),
        profile=profile,
        wait=wait,
        device=device,
        duration_ns=duration_ns,
        loads=_loads(data, fail),
        loads_on_rt_cpus=on_rt,
        trace=trace,
        trace_mode=trace_mode,
        samples=samples,
        ecat_drives=ecat_drives,
        source=source,
        dc_lock=dc_lock,
        dc_shift_ns=dc_shift_ns,
    )


_Fail = Callable[..., ConfigError]  # fail(key, problem, hint=None): the error, with the key's line


def _device(data: dict[str, Any], fail: _Fail) -> tuple[str, str | None]:
    """The scenario's device and its EtherCAT drive description, checked together."""
    device = data.get("device", "virtual")
    if not isinstance(device, str):
        raise fail("device", f'must be text such as "virtual" or "ethercat:eth1", got {_shown(device)}')
    try:
        check_device_spec(device)
    except ConfigError as err:
        raise fail("device", printable(err.msg), err.hint) from None
    ecat_drives = data.get("ecat_drives")
    if ecat_drives is not None and (not isinstance(ecat_drives, str) or not ecat_drives):
        raise fail("ecat_drives", f"must be the path of a drive description (TOML), got {_shown(ecat_drives)}")
    if ecat_drives is not None and not device.startswith("ethercat:"):
        raise fail(
            "ecat_drives",
            "describes EtherCAT drives, but the device is " + _shown(device),
            'set device = "ethercat:IFACE", or leave out ecat_drives',
        )
    return device, ecat_drives


def _dc(data: dict[str, Any], device: str, fail: _Fail) -> tuple[bool, int]:
    """Distributed-clock lock and the frame's shift from SYNC0 (negative: before it), in ns."""
    dc_lock = data.get("dc_lock", False)
    if not isinstance(dc_lock, bool):
        raise fail("dc_lock", f"must be true or false, got {_shown(dc_lock)}")
    if dc_lock and not device.startswith("ethercat:"):
        raise fail("dc_lock", "needs an EtherCAT device (distributed clocks)", 'set device = "ethercat:IFACE"')
    if "dc_shift" not in data:
        return dc_lock, 0
    raw = data["dc_shift"]
    shift = raw.strip() if isinstance(raw, str) else raw
    negative = isinstance(shift, str) and shift.startswith("-")
    try:
        dc_shift_ns = parse_time_ns(shift[1:] if negative else shift, default_unit="us", what="dc_shift")
    except ConfigError as err:
        raise fail("dc_shift", err.msg, 'e.g. dc_shift = "-200us" (the frame 200 µs before SYNC0)') from None
    return dc_lock, -dc_shift_ns if negative else dc_shift_ns


def _loads(data: dict[str, Any], fail: _Fail) -> tuple[LoadSpec, ...]:
    """The scenario's [[load]] tables, each a known load kind with a valid placement."""
    raw_loads = data.get("load", [])
    if not isinstance(raw_loads, list):
        raise fail("load", "must be an array of tables ([[load]])")
    loads = []
    for i, entry in enumerate(raw_loads):
        if not isinstance(entry, dict):
            raise fail(f"load[{i}]", f"must be a table ([[load]] with name = ...), got {_shown(entry)}")
        for key in entry:
            if key not in _LOAD_KEYS:
                raise fail(
                    f"load[{i}].{printable(key)[:40]}", "unknown key", f"known keys: {', '.join(sorted(_LOAD_KEYS))}"
                )
        lname = entry.get("name")
        if not isinstance(lname, str) or lname not in LOAD_NAMES:
            raise fail(f"load[{i}].name", f"unknown load {_shown(lname)}", f"known loads: {', '.join(LOAD_NAMES)}")
        cpus = entry.get("cpus", "housekeeping")
        if not isinstance(cpus, str) or (cpus not in PLACEMENTS and not re.fullmatch(r"[0-9,\- ]+", cpus)):
            raise fail(
                f"load[{i}].cpus",
                f"invalid placement {_shown(cpus)}",
                'use housekeeping, all, or a CPU list like "0-2"',
            )
        if cpus not in PLACEMENTS:
            try:
                CpuSet.parse(cpus)  # bounded (cpus.MAX_CPUS): "0-99999999999" is refused here
            except ConfigError as err:
                raise fail(f"load[{i}].cpus", err.msg, err.hint) from None
        loads.append(LoadSpec(name=lname, cpus=cpus))
    return tuple(loads)


def _shown(value: object) -> str:
    """*value* for an error message: printable, at most 40 characters."""
    text = "a huge number" if isinstance(value, int) and abs(value) > 10**30 else printable(repr(value))
    return text if len(text) <= 40 else text[:40] + "…"


def _line_of(text: str, key: str, full_key: str) -> int | None:
    """Return the line of *key* in *text* (for ``load[i].k``, its i-th occurrence after [[load]])."""
    lines = text.splitlines()
    m = re.match(r"load\[(\d+)\]", full_key)
    start = 0
    if m:
        headers = [n for n, ln in enumerate(lines) if ln.strip() == "[[load]]"]
        index = int(m.group(1))
        if index >= len(headers):
            return None
        start = headers[index]
        if full_key.endswith("]"):
            return start + 1
    pattern = re.compile(rf"^\s*{re.escape(key)}\s*=")
    for n in range(start, len(lines)):
        if pattern.match(lines[n]):
            return n + 1
    return None
