"""Keeping the run history honest (store layer): rows a failed update left behind, trees of runs
with bad ones among them.

A run's row is written at its first checkpoint and at its end (session.run); when the last write
fails (the disk under ``SOFTRT_HOME`` full, the database held by another softrt for too long) the
run directory holds the final summary while the row still says ``running``. :func:`catch_up`,
which every reader of the history calls, brings such rows up to date from their summary.json
(the directory is the source of truth: store.history). :func:`add_each` adds every good run of
a tree and names each bad one, instead of stopping at the first; :func:`refuse_running` keeps a
run that still goes from being forgotten (its next checkpoint would add it again).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Protocol

from ..errors import ConfigError, SoftRTError
from .record import HistoryRow, RunRecord
from .rundir import RESERVE, SAMPLES, SUMMARY, find_run_dirs, read_summary
from .running import run_state
from .validate import check_path


class History(Protocol):
    """What upkeep needs of store.history.History, which calls it (so upkeep imports nothing of it)."""

    def running_rows(self) -> list[tuple[str, str]]: ...
    def add_run(self, run_dir: Path | str) -> str: ...
    def _prepare(self, run_dir: Path | str) -> HistoryRow: ...
    def _store(self, row: HistoryRow) -> str: ...


def catch_up(history: History) -> list[str]:
    """Bring up to date the runs the history lists as running whose summary.json is final: their
    final history update failed (a full disk under SOFTRT_HOME, a database held too long).
    Called by every reader; returns the ids refreshed. Never raises (a read-only database, a
    run directory gone: the row stays as it is)."""
    try:
        rows = history.running_rows()
    except SoftRTError:
        return []
    done = []
    for run_id, path in rows:
        try:
            summary = read_summary(Path(path))
            if summary.running or summary.run_id != run_id:
                continue  # still going, or killed (store.running tells which), or another run now
            done.append(history.add_run(path))
        except (SoftRTError, OSError):
            continue
    return done


def refuse_running(record: RunRecord) -> None:
    """Raise ConfigError when *record*'s run still goes: forgotten, its next checkpoint would put it
    back (a row whose summary cannot be read may be forgotten)."""
    if record.status != "running":
        return
    try:
        running = run_state(record.summary, run_dir=record.path).running
    except ConfigError:
        return
    if running:
        pid = record.summary.supervisor.pid if record.summary.supervisor is not None else None
        raise ConfigError(
            f"run {record.run_id} is still running{f' (softrt pid {pid})' if pid else ''}; "
            "its next checkpoint would put it back",
            hint="forget it once it has ended, or stop it first (Ctrl-C where it runs)",
        )


def add_each(history: History, paths: Iterable[Path | str]) -> tuple[list[str], list[tuple[Path, str]]]:
    """Add every good run in *paths*; return their ids and each bad run with its reason.

    What is named is checked before anything is added: a path that is no run and holds none, and a
    run directory named itself whose summary cannot be read, are bad input (ConfigError, nothing
    added). Inside a directory of runs a run that cannot be read (a corrupt summary, a directory
    with the files of a run but no summary.json) is reported and the others are added all the same.
    """
    found: list[tuple[Sequence[HistoryRow | Path], list[Path]]] = []  # named runs are read at once
    for p in paths:
        path = Path(p)
        check_path(path, "run")  # a name too long for the system is one line (is_file() raises ENAMETOOLONG)
        if (path / SUMMARY).is_file():
            found.append(([history._prepare(path)], []))  # named itself: its error is the user's input
        else:
            found.append(_scan(path))
    ids, bad = [], []
    for runs, junk in found:
        bad.extend((d, f"no {SUMMARY}: a run that failed to start, or was killed before it started") for d in junk)
        for run in runs:
            if isinstance(run, HistoryRow):
                row = run
            else:
                try:
                    row = history._prepare(run)
                except SoftRTError as err:  # the run's files: this run is bad, the next may be good
                    bad.append((run, err.msg))
                    continue
            ids.append(history._store(row))  # the database's errors stop it: they are every run's
    return ids, bad


def _scan(path: Path) -> tuple[list[Path], list[Path]]:
    """The run directories :func:`find_run_dirs` finds in the directory of runs *path*, and beside
    them the directories that hold a run's files but no summary.json (ConfigError as
    find_run_dirs: no run at all)."""
    junk = []
    if path.is_dir():
        junk = sorted(
            p
            for p in path.iterdir()
            if p.is_dir()
            and not (p / SUMMARY).is_file()
            and any(os.path.lexists(p / name) for name in (SAMPLES, RESERVE, "config.json"))
        )
    try:
        return find_run_dirs(path), junk
    except ConfigError:
        if not junk:
            raise
        return [], junk
