"""Run-scoped system changes, journalled so they are undone even if softrt itself is killed (session layer).

Before each change the previous value goes to the run's journal (a :mod:`softrt.platform.journal`,
``<state_dir>/restore/<pid>.jsonl``); ``restore()`` puts every value back, reads it back to verify,
and deletes the journal. If the supervisor dies, the journal stays behind and the next softrt
command calls :func:`recover`, which restores the changes of every journal whose process is gone
(named by boot id, pid and start time, so a reused pid is no process of ours).

A value is put back only while the file still holds what the run wrote: one that someone else
set during the run is theirs and is kept. A journal that cannot be restored (the kernel refuses
the value) or that softrt did not write (a file or value it never writes) is set aside in
``restore/failed/`` with the reason and reported once, with the command that fixes it by hand;
nothing in a forged journal is written.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from ..errors import ConfigError
from ..platform import get_platform, journal, maker_alive, state_dir
from ..platform.kfiles import read_raw, translate_error
from ..platform.linux import writable
from ..schema.summary import SystemChange

FORMAT = "softrt-run-journal"
WHAT = "restore journal"
SET_ASIDE = "restore journal set aside"  # the ``why`` of a change that stands for a whole journal


def _journal_dir() -> Path:
    return state_dir() / "restore"


def _change(
    path: str,
    before: str,
    during: str,
    why: str,
    *,
    restored: bool = False,
    verified: bool = False,
    note: str | None = None,
) -> SystemChange:
    """One kernel file changed for the duration of a run (or a journal set aside, with *note*), as the
    summary's ``tuning.system_changes`` entry: ``note`` (why it was not restored, and the fix) only when said."""
    return SystemChange(
        path=path, before=before, during=during, why=why, restored=restored, verified=verified, note=note or None
    )


class ChangeJournal:
    """The changes one run made to the system, restored in reverse order."""

    def __init__(self, root: str = "/") -> None:
        self.root = root
        self.changes: list[SystemChange] = []
        self.path = _journal_dir() / f"{os.getpid()}.jsonl"
        self._entries: list[dict] = []
        self._file: journal.Journal | None = None

    def set(self, path: str, value: str, why: str) -> SystemChange | None:
        """Write *value* to kernel file *path*, journalling the old value first.

        Returns None when the file already holds *value* (nothing to change or restore).
        """
        target = writable.check(self.root, path, value)
        try:
            raw = read_raw(target)
        except OSError as err:
            raise translate_error(err, "read", path) from err
        if raw.strip() == value:
            return None
        entry = {
            "kind": journal.FILE,
            "target": path,
            "before": raw,
            "restore": raw.strip(),
            "after": value,
            "why": why,
        }
        if self._file is None:
            journal.secure_dir(state_dir())
            self._file = journal.Journal(
                self.path, FORMAT, self.root, boot_id=journal.boot_id(), identity=get_platform().process_identity()
            )
        self._file.append(entry)  # journal first: a crash between here and the write restores a no-op
        try:
            writable.write_line(target, value)
        except OSError as err:
            raise translate_error(err, "write", path) from err
        change = _change(path, raw.strip(), value, why)
        self.changes.append(change)
        self._entries.append(entry)
        return change

    def restore(self) -> list[SystemChange]:
        """Restore every change (newest first), verify by reading back, drop the journal.

        A change that cannot be restored is marked so (``note`` says how to by hand) and the
        journal is set aside, so no later command trips over it.
        """
        failures = []
        for i in reversed(range(len(self.changes))):
            if self.changes[i].restored:
                continue
            self.changes[i], failure, _ = _apply(self.root, self._entries[i], self.changes[i])
            if failure:
                failures.append(failure)
        if self._file is not None:
            self._file.close()
            self._file = None  # a later set() starts a new journal (bench/run_bench.py reuses one)
        if failures:
            if os.path.lexists(self.path):  # not already set aside by an earlier call
                journal.set_aside(self.path, "; ".join(failures))
        else:
            self.path.unlink(missing_ok=True)
        return self.changes


def _apply(root: str, entry: dict, change: SystemChange) -> tuple[SystemChange, str | None, bool]:
    """Restore one entry: *change* as it now stands, the failure (with its fix) or None, and whether
    the file held another value than its one from before (False: there was nothing to restore)."""
    outcome = journal.restore_file(root, entry, only_if_after=True)
    if outcome.status == "unchanged":
        return change.replace(restored=True, verified=True, note=None), None, False
    restored, verified = outcome.status in ("restored", "mismatch"), outcome.status == "restored"
    if outcome.status in ("restored", "gone", "kept"):
        note = None if outcome.status == "restored" else outcome.detail
        return change.replace(restored=restored, verified=verified, note=note or None), None, True
    note = f"{outcome.detail}; by hand: {outcome.fix}" if outcome.fix else outcome.detail
    return change.replace(restored=restored, verified=verified, note=note or None), f"{entry['target']}: {note}", True


def _recover_legacy(path: Path, this_boot: str | None) -> list[SystemChange]:
    """A journal of softrt before the one journal (``restore/<pid>.json``): set aside, with the fix by hand.

    Nothing in it is written: its format had no checks. When every change it names is one softrt
    makes, the commands that restore them are given; otherwise none is (it was not softrt's).
    """
    try:
        data = json.loads(journal.read_own(path, WHAT))
        if data.get("boot_id") != this_boot:
            path.unlink(missing_ok=True)  # from before a reboot, which reset every value already
            return []
        if maker_alive(int(data["pid"]), None):
            return []  # an older softrt's run in progress owns it
        fixes = [
            writable.manual_fix(c["path"], c["before"])
            for c in data["changes"][:64]
            if writable.check(data["root"], c["path"], c["before"])
        ]
        fix = "restore by hand: " + " && ".join(fixes) if fixes else "nothing to restore"
    except FileNotFoundError:
        return []
    except (ConfigError, ValueError, RecursionError, KeyError, TypeError, AttributeError, IndexError) as err:
        fix = f"it names something softrt never writes ({str(err)[:200]}); check it by hand"
    dest = journal.set_aside(path, f"an older softrt's restore journal; {fix}")
    return [
        _change(
            str(dest),
            "",
            "",
            SET_ASIDE,
            note=f"an older softrt's restore journal {path}: nothing in it was written; set aside as {dest}; {fix}",
        )
    ]


def _alive(header: dict) -> bool:
    """True while the process that wrote the journal *header* runs (:func:`~softrt.platform.maker_alive`)."""
    pid = header.get("pid", 0)
    return pid != os.getpid() and maker_alive(pid, header.get("identity"))


def recover() -> list[SystemChange]:
    """Restore the changes left by softrt runs whose process is gone; return what was done.

    A journal that cannot be used or restored is set aside and returned as a change with
    ``restored`` False and a ``note`` saying why and how to fix it by hand (reported once).

    Raises:
        ConfigError: softrt's state directory is not its own (a symlink, another user's).
    """
    done: list[SystemChange] = []
    directory = _journal_dir()
    if not os.path.lexists(directory.parent) or not os.path.lexists(directory):
        return done
    journal.secure_dir(directory.parent)
    journal.secure_dir(directory)
    this_boot = journal.boot_id()
    for path in sorted(p for p in directory.iterdir() if p.suffix in (".jsonl", ".json")):
        if path.suffix == ".json":
            done.extend(_recover_legacy(path, this_boot))
            continue
        try:
            header, entries = journal.load(path, FORMAT, WHAT)
        except FileNotFoundError:
            continue  # its run ended and removed it while we looked
        except ConfigError as err:
            dest = journal.set_aside(path, str(err))
            done.append(
                _change(
                    str(dest),
                    "",
                    "",
                    SET_ASIDE,
                    note=f"{err.msg}; nothing in it was written; set aside as {dest}; check the "
                    "settings it names by hand",
                )
            )
            continue
        if header.get("boot_id") != this_boot:
            path.unlink(missing_ok=True)  # from before a reboot, which reset every value already
            continue
        if _alive(header):
            continue  # a run in progress owns it
        failures, failed = [], []
        for entry in reversed(entries):
            change, failure, changed = _apply(
                header["root"],
                entry,
                _change(
                    entry["target"],
                    entry["before"].strip(),
                    str(entry.get("after", "")),
                    str(entry.get("why", ""))[:200],
                ),
            )
            if failure:
                failures.append(failure)
                failed.append(len(done))
            if (change.restored and changed) or failure:  # (a write refused or never made: nothing to say)
                done.append(change)
        if failures:
            dest = journal.set_aside(path, "; ".join(failures))
            for i in failed:
                done[i] = done[i].replace(note=f"{done[i].note} (its journal is set aside as {dest})")
        else:
            path.unlink(missing_ok=True)
    return done
