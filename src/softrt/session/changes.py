"""Run-scoped system changes, journalled so they are undone even if softrt itself is killed.

Before each change the previous value is written to a journal file
(``<state_dir>/restore/<pid>.json``); ``restore()`` puts every value back, reads it back to verify,
and deletes the journal. If the supervisor dies, the journal stays behind and the next softrt
command calls :func:`recover`, which restores the changes of every journal whose process is gone.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import psutil

from ..errors import SoftRTError
from ..platform import state_dir
from ..platform._files import read_text, write_text


def _journal_dir() -> Path:
    return state_dir() / "restore"


@dataclass
class Change:
    """One kernel file changed for the duration of a run."""

    path: str
    before: str
    during: str
    why: str
    restored: bool = False
    verified: bool = False

    def to_dict(self) -> dict:
        """Return a JSON-ready dict (for summary.json's ``changes``)."""
        return dict(self.__dict__)


class ChangeJournal:
    """The changes one run made to the system, restored in reverse order."""

    def __init__(self, root: str = "/") -> None:
        self.root = root
        self.changes: list[Change] = []
        self.path = _journal_dir() / f"{os.getpid()}.json"

    def set(self, path: str, value: str, why: str) -> Change | None:
        """Write *value* to kernel file *path*, journalling the old value first.

        Returns None when the file already holds *value* (nothing to change or restore).
        """
        before = read_text(self.root, path)
        if before == value:
            return None
        change = Change(path=path, before=before, during=value, why=why)
        self.changes.append(change)
        self._save()  # journal first: a crash between here and the write restores a no-op
        try:
            write_text(self.root, path, value)
        except SoftRTError:
            self.changes.pop()
            self._save()
            raise
        return change

    def restore(self) -> list[Change]:
        """Restore every change (newest first), verify by reading back, drop the journal."""
        failures = []
        for change in reversed(self.changes):
            if change.restored:
                continue
            try:
                write_text(self.root, change.path, change.before)
                change.restored = True
                change.verified = read_text(self.root, change.path) == change.before
            except SoftRTError as err:
                failures.append(f"{change.path}: {err}")
        if failures:
            self._save()
            raise SoftRTError("could not restore " + "; ".join(failures),
                              hint=f"the journal {self.path} is kept; run any softrt command as root to retry")
        self.path.unlink(missing_ok=True)
        return self.changes

    def _save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        payload = {"pid": os.getpid(), "boot_id": _boot_id(), "root": self.root,
                   "changes": [c.to_dict() for c in self.changes]}
        tmp.write_text(json.dumps(payload, indent=1))
        os.replace(tmp, self.path)


def _boot_id() -> str | None:
    """This boot's random id (proc(5): /proc/sys/kernel/random/boot_id)."""
    return read_text("/", "/proc/sys/kernel/random/boot_id", fallback=None)


def recover() -> list[Change]:
    """Restore the changes left by softrt runs whose process is gone; return what was restored."""
    restored: list[Change] = []
    directory = _journal_dir()
    if not directory.is_dir():
        return restored
    for path in sorted(directory.glob("*.json")):
        try:
            data = json.loads(path.read_text())
            pid = int(data["pid"])
            changes = [Change(**c) for c in data["changes"]]
        except (OSError, ValueError, KeyError, TypeError) as err:
            raise SoftRTError(f"restore journal {path} is unreadable ({err})",
                              hint="check the values it names by hand, then delete it") from None
        if data.get("boot_id") != _boot_id():
            path.unlink(missing_ok=True)  # from before a reboot, which reset every value already
            continue
        if psutil.pid_exists(pid):
            continue  # a run in progress owns it
        journal = ChangeJournal(data.get("root", "/"))
        journal.path = path
        journal.changes = changes
        restored.extend(c for c in journal.restore() if c.restored)
    return restored
