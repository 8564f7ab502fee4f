"""The tune state file: a journal of every previous value, written before each change (audit layer).

JSON lines under ``platform.state_dir()`` (``SOFTRT_STATE_DIR`` overrides it): a header, then one
entry per change, each appended and fsync'd *before* the change is made, so a tune interrupted
half-way can still be reverted exactly. A last line cut short by the interruption is ignored: its
change was never made. Revert deletes the file once every value reads back as it was.
"""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path

from ...cpus import CpuSet
from ...errors import ConfigError
from ...platform import state_dir
from ...platform._files import read_text

FORMAT = "softrt-tune-state"
VERSION = 1
FILENAME = "tune-state.jsonl"
#: The keys each kind of entry must have.
REQUIRED = {"file": {"target", "before", "restore"}, "affinity": {"target", "tid", "before"},
            "service": {"target", "before"}}


def default_path() -> Path:
    """Return where the tune state lives (``<state_dir>/tune-state.jsonl``)."""
    return state_dir() / FILENAME


def boot_id(root: str) -> str | None:
    """Return this boot's id (random per boot, proc(5) /proc/sys/kernel/random/boot_id)."""
    return read_text(root, "/proc/sys/kernel/random/boot_id", fallback=None)


class StateWriter:
    """Append-only writer; every record reaches the disk before the caller goes on."""

    def __init__(self, path: Path, header: dict) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            # O_EXCL: two applies at once, or an apply over an unreverted one, must not mix.
            self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            raise ConfigError(f"a tune is already applied (state file {path})",
                              hint="run softrt tune --revert first") from None
        self.append({"format": FORMAT, "version": VERSION, "created": time.time(), "host": socket.gethostname(),
                     "pid": os.getpid(), **header})

    def append(self, record: dict) -> None:
        """Write one JSON line and fsync it."""
        os.write(self._fd, (json.dumps(record, sort_keys=True) + "\n").encode())
        os.fsync(self._fd)

    def close(self) -> None:
        """Close the file (it stays: it is what --revert reads)."""
        os.close(self._fd)


def load(path: Path, root: str) -> tuple[dict, list[dict]]:
    """Read a state file; return (header, entries) in the order they were written.

    Raises:
        ConfigError: no file, a corrupt or foreign file, or one from an earlier boot.
    """
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"nothing to revert: no saved tune state at {path}",
                          hint="softrt tune --apply saves one; SOFTRT_STATE_DIR changes where") from None
    except OSError as err:
        raise ConfigError(f"cannot read the tune state {path}: {err.strerror}") from None
    lines = raw.decode("utf-8", errors="replace").split("\n")
    records = []
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except ValueError:
            if i == len(lines) - 1:  # no newline yet: cut short while being written; its change never ran
                continue
            raise ConfigError(f"the tune state {path} is corrupt (line {i + 1})",
                              hint="restore the values it names by hand, then delete it") from None
    header = records[0] if records else {}
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise ConfigError(f"{path} is not a softrt tune state file", hint="delete it if it is stray")
    if header.get("version") != VERSION:
        raise ConfigError(f"{path} has state format version {header.get('version')}, this softrt reads {VERSION}")
    saved_root = header.get("root")
    if not isinstance(saved_root, str) or os.path.realpath(saved_root) != os.path.realpath(str(root)):
        raise ConfigError(f"{path} was saved for root {saved_root!r}, not {os.path.realpath(str(root))!r}")
    now = boot_id(root)
    if header.get("boot_id") and now and header["boot_id"] != now:
        raise ConfigError(f"the tune state {path} is from an earlier boot: the reboot already undid every change",
                          hint=f"delete {path}")
    entries = records[1:]
    for i, entry in enumerate(entries, start=2):
        if not _valid_entry(entry):
            raise ConfigError(f"the tune state {path} is corrupt (record {i} is not a known entry)",
                              hint="restore the values it names by hand, then delete it")
    return header, entries


def _valid_entry(entry: object) -> bool:
    """Return True for an entry apply could have written (revert writes where it says, as root).

    A file entry must name a kernel file under /proc or /sys (no ``..``), an affinity entry a
    thread and a CPU list, a service entry a systemd unit: a crafted state file cannot make
    revert write anywhere else.
    """
    if not isinstance(entry, dict) or not isinstance(entry.get("kind"), str):
        return False
    needed = REQUIRED.get(entry["kind"])
    if needed is None or not needed <= entry.keys():
        return False
    target = entry["target"]
    if not isinstance(target, str):
        return False
    if entry["kind"] == "file":
        return (target.startswith(("/proc/", "/sys/")) and ".." not in target.split("/")
                and isinstance(entry["before"], str) and isinstance(entry["restore"], str))
    if entry["kind"] == "affinity":
        if not (target.isdigit() and isinstance(entry["tid"], int) and isinstance(entry["before"], str)):
            return False
        try:
            CpuSet.parse(entry["before"])
        except ConfigError:
            return False
        return True
    return target.endswith((".service", ".timer")) and "/" not in target
