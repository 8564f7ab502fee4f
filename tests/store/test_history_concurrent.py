"""The history under concurrency (issue 32.5): 8 processes adding runs at once to a history that does
not exist yet (the first ones create its tables), while ``softrt history`` and the report's reader
(``resolve_run`` and ``load_run``, what ``softrt report last`` does before it draws) read it: every run
is there afterwards, the database passes ``PRAGMA integrity_check``, and no reader failed.

SQLite serializes the writers (one RESERVED lock at a time, each ``add_run`` one transaction, every
connection waiting up to ``History.timeout_s`` for the lock: sqlite.org/lockingv3.html), so nothing
here is softrt's own locking; the test proves the way softrt opens and writes the database keeps it so.
The writers are forked (each a real process with its own connections, without an interpreter's start-up).
"""

from __future__ import annotations

import json
import multiprocessing
import os
import shutil
import sqlite3
import subprocess
import sys
import traceback

import pytest

from softrt.report.load import load_run
from softrt.store.history import History, resolve_run

from ..synthetic import write_synthetic_run

WRITERS = 8
RUNS_EACH = 3

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="the writers are forked processes")


def _runs(tmp_path) -> list[list[str]]:
    """WRITERS x RUNS_EACH run directories: one synthetic run, copied under new run ids."""
    base = write_synthetic_run(tmp_path / "seed", cycles=200)
    summary = json.loads((base / "summary.json").read_text())
    groups = []
    for w in range(WRITERS):
        group = []
        for k in range(RUNS_EACH):
            run_id = f"{summary['run_id'][:-4]}w{w}r{k}"
            target = tmp_path / "runs" / run_id
            shutil.copytree(base, target)
            (target / "summary.json").write_text(json.dumps({**summary, "run_id": run_id}))
            group.append(str(target))
        groups.append(group)
    return groups


def _child(work) -> None:
    """A forked process's body: exit 0 when *work* returns, 1 with the traceback on stderr otherwise."""
    try:
        work()
    except BaseException:  # noqa: BLE001 - reported through the exit status
        traceback.print_exc()
        os._exit(1)
    os._exit(0)


def _write(db, paths) -> None:
    for path in paths:  # one transaction each, as `softrt history add DIR...` does
        History(db).add_run(path)


def _read(db, done, reads) -> None:
    """Read as `softrt history` and `softrt report last` do until the writers are done; a run once listed
    stays listed."""
    seen = 0
    while not done.is_set() or reads.value < 3:
        runs = History(db).list_runs()
        assert len(runs) >= seen
        seen = len(runs)
        if runs:
            view = load_run(resolve_run("last", db))
            assert view.stats is not None and view.stats.counters["cycles"] > 0
        with reads.get_lock():
            reads.value += 1


def test_eight_writers_while_history_and_report_read(tmp_path, softrt_home):
    groups = _runs(tmp_path)
    db = softrt_home / "history.sqlite"
    ctx = multiprocessing.get_context("fork")
    done, reads = ctx.Event(), ctx.Value("i", 0)
    readers = [ctx.Process(target=_child, args=(lambda: _read(db, done, reads),)) for _ in range(2)]
    writers = [ctx.Process(target=_child, args=(lambda g=g: _write(db, g),)) for g in groups]
    for proc in readers + writers:
        proc.start()
    listing = subprocess.Popen(
        [sys.executable, "-m", "softrt", "history", "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    for proc in writers:
        proc.join(120)
    done.set()
    for proc in readers:
        proc.join(120)
    out, err = listing.communicate(timeout=120)
    assert [p.exitcode for p in writers + readers] == [0] * (WRITERS + 2)
    assert listing.returncode == 0 and isinstance(json.loads(out), list), err
    assert reads.value >= 3
    listed = {r.run_id for r in History(db).list_runs()}
    assert listed == {os.path.basename(p) for group in groups for p in group}  # nothing lost
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
