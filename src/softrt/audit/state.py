"""The tune state file: the journal of every value ``softrt tune --apply`` replaced (audit layer).

It is a :mod:`softrt.platform.journal` (``<state_dir>/tune-state.jsonl``; ``SOFTRT_STATE_DIR``
moves it): every entry is checked and fsync'd *before* its change, the file is created
O_EXCL|O_NOFOLLOW in softrt's own 0700 directory, and on revert every entry is checked again, so a
crafted state file cannot make revert write anywhere but the kernel files tune itself writes.
Revert deletes the file once every value reads back as it was.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import ConfigError
from ..platform import journal, state_dir

FORMAT = "softrt-tune-state"
FILENAME = "tune-state.jsonl"
WHAT = "tune state"

boot_id = journal.boot_id


def default_path() -> Path:
    """Return where the tune state lives (``<state_dir>/tune-state.jsonl``)."""
    return state_dir() / FILENAME


def create(path: Path, root: str, **header) -> journal.Journal:
    """Start the state file of one apply.

    Raises:
        ConfigError: a tune is already applied (O_EXCL: two applies at once must not mix), or
            the state directory is not softrt's own.
    """
    try:
        return journal.Journal(path, FORMAT, root, **header)
    except FileExistsError:
        raise ConfigError(
            f"a tune is already applied (state file {path})", hint="run softrt tune --revert first"
        ) from None


def load(path: Path, root: str) -> tuple[dict, list[dict]]:
    """Read a state file; return (header, entries) in the order they were written.

    Raises:
        ConfigError: no file, a corrupt, forged or foreign file, or one from an earlier boot.
    """
    try:
        header, entries = journal.load(path, FORMAT, WHAT, root)
    except FileNotFoundError:
        raise ConfigError(
            f"nothing to revert: no saved tune state at {path}",
            hint="softrt tune --apply saves one; SOFTRT_STATE_DIR changes where",
        ) from None
    now = boot_id(root)
    if header.get("boot_id") and now and header["boot_id"] != now:
        raise ConfigError(
            f"the tune state {path} is from an earlier boot: the reboot already undid every change",
            hint=f"delete {path}",
        )
    return header, entries


def in_force(path: Path | None = None, root: str = "/") -> list[str] | None:
    """What ``softrt tune --apply`` has changed and not reverted, for a run's provenance: each kernel
    file with its new value, each stopped service, and how many threads it moved (their ids change
    with every boot, so they are counted, not named). None when no tune is applied, or its state
    file cannot be read (a run records what it knows; ``softrt tune --revert`` reports the problem)."""
    try:
        _header, entries = load(path or default_path(), root)
    except ConfigError:
        return None
    out, moved = [], 0
    for entry in entries:
        if entry.get("kind") == journal.AFFINITY:
            moved += 1
        elif "after" in entry:
            out.append(f"{entry.get('target')}={entry.get('after')}")
        else:
            out.append(f"{entry.get('kind')}: {entry.get('target')}")
    return sorted(set(out)) + ([f"affinity of {moved} thread(s)"] if moved else [])
