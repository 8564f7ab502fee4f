"""Run directories whose supervisor may die before they hold a run (store layer).

A run's directory is made, with its space reserve (store.rundir, ~2 MB) and its empty samples
file, before the worker arms; the run's first checkpoint writes its summary.json once the loop
is released. A supervisor killed in between (SIGKILL, the OOM killer) leaves a directory that is
no run: nothing reads it, ``softrt history add`` refuses it, and its reserve takes the space.

So a supervisor names its run directory here, ``<state dir>/rundirs/<pid>-<random>.json`` with
its process identity (``BOOT_ID/PID/START``, platform ``process_identity``), for as long as the
directory is open. The next softrt command calls :func:`sweep`, as it sweeps the trace instances
and shared-memory rings a killed softrt left: the directory of a dead supervisor that never got
its summary.json is removed, and the reserve of one that did (a run killed later: its
checkpoints are its results) is deleted. Only softrt's own file names are ever deleted, one by
one, never a tree: an entry naming another directory removes nothing of anyone else's.
"""

from __future__ import annotations

import json
import os
import secrets
import stat
from pathlib import Path

from ..errors import ConfigError
from ..platform import get_platform, state_dir
from ..platform.journal import create_private, read_own
from ..platform.owned import secure_dir

FORMAT = "softrt-run-directory"
WHAT = "run directory entry"


def _entries() -> Path:
    return state_dir() / "rundirs"


def register(run_dir: Path) -> Path | None:
    """Name *run_dir* as this process's open run directory; return the entry (None: it could not
    be written, which costs the run nothing but the sweep). Raises ConfigError for a state
    directory that is not this user's (as every softrt command does: session.changes)."""
    directory = _entries()
    secure_dir(directory.parent)
    secure_dir(directory)
    entry = directory / f"{os.getpid()}-{secrets.token_hex(4)}.json"
    doc = {"format": FORMAT, "identity": get_platform().process_identity(), "path": str(Path(run_dir).absolute())}
    try:
        create_private(entry, json.dumps(doc))
    except OSError:
        return None
    return entry


def unregister(entry: Path | None) -> None:
    """The run directory is closed (its run ended, or it was removed): forget the entry."""
    if entry is not None:
        try:
            os.unlink(entry)
        except OSError:
            pass


def sweep() -> list[str]:
    """Clean the run directories of supervisors that are gone; return the directories removed."""
    directory = _entries()
    if not os.path.lexists(directory):
        return []
    secure_dir(directory.parent)
    secure_dir(directory)
    plat = get_platform()
    mine = (plat.process_identity() or "").split("/", 1)[0]
    removed = []
    for entry in sorted(directory.glob("*.json")):
        try:
            doc = json.loads(read_own(entry, WHAT))
            identity, path = doc["identity"], doc["path"]
            if doc.get("format") != FORMAT or not isinstance(identity, str) or not isinstance(path, str):
                raise ValueError("not a run directory entry")
            pid = int(identity.split("/")[1])
        except FileNotFoundError:
            continue  # its run ended while we looked
        except (ConfigError, ValueError, KeyError, TypeError, RecursionError):
            unregister(entry)  # unreadable: it names nothing we may clean
            continue
        if identity.split("/", 1)[0] == mine and plat.process_identity(pid) == identity:
            continue  # its supervisor runs: the directory is its own
        if _clean(Path(path)):
            removed.append(path)
        unregister(entry)
    return removed


def _clean(run_dir: Path) -> bool:
    """Remove a dead supervisor's directory if it never got its summary (True), else its reserve."""
    # Here, not at the top: every softrt command sweeps, and the run writer's module loads pyarrow.
    from .late import AGGREGATES
    from .rundir import RESERVE, SAMPLES, SUMMARY

    # What a run directory holds before its first checkpoint (and the temporaries of its JSON files).
    arming_files = {RESERVE, SAMPLES, AGGREGATES, "config.json", "host.json", "check.json"}
    try:
        info = os.lstat(run_dir)
    except OSError:
        return False  # gone already
    if not stat.S_ISDIR(info.st_mode) or (hasattr(os, "geteuid") and info.st_uid != os.geteuid()):
        return False  # not a directory of ours (any more): nothing of it is softrt's to delete
    if os.path.lexists(run_dir / SUMMARY):
        _unlink(run_dir / RESERVE)  # a run killed after it started: its results stay, the reserve goes
        return False
    try:
        names = os.listdir(run_dir)
    except OSError:
        return False
    if not all(n in arming_files or n.endswith(".tmp") for n in names):
        return False  # something else was put there: leave it
    for name in names:
        _unlink(run_dir / name)
    try:
        os.rmdir(run_dir)
    except OSError:
        return False
    return True


def _unlink(path: Path) -> None:
    try:
        if not os.path.isdir(path) or os.path.islink(path):
            os.unlink(path)
    except OSError:
        pass
