"""The history under concurrency (issue 32.5): 8 processes adding runs at once to a history that does
not exist yet (the first ones create its tables), while ``softrt history`` and ``softrt report`` read it:
every run is there afterwards, the database passes ``PRAGMA integrity_check``, and no reader failed.

SQLite serializes the writers (one RESERVED lock at a time, each ``add_run`` one transaction, every
connection waiting up to ``History.timeout_s`` for the lock: sqlite.org/lockingv3.html), so nothing
here is softrt's own locking; the test proves the way softrt opens and writes the database keeps it so.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import time

from softrt.report.synthetic import write_synthetic_run
from softrt.store.history import History

WRITERS = 8
RUNS_EACH = 3


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


def _softrt(*args: str, env: dict) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "softrt", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)


def test_eight_writers_while_history_and_report_read(tmp_path, softrt_home):
    groups = _runs(tmp_path)
    db = softrt_home / "history.sqlite"
    env = {**os.environ, "COLUMNS": "120"}
    # One `history add` per writer, each adding its runs one transaction at a time.
    writers = [_softrt("history", "add", *group, env=env) for group in groups]
    readers: list[subprocess.Popen] = []
    seen = []
    while any(w.poll() is None for w in writers):  # this process reads too, as often as it can
        seen.append(len(History(db).list_runs()))
        if seen[-1] and not readers:  # the commands read while the writers go on
            readers = [_softrt("history", "--json", env=env),
                       _softrt("report", "last", "-o", str(tmp_path / "r.html"), env=env)]
        time.sleep(0.02)
    outputs = []
    for proc in writers + readers:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, (proc.args[3:5], err)
        assert "Traceback" not in err and "locked" not in err
        outputs.append(out)
    assert len(readers) == 2 and len(json.loads(outputs[WRITERS])) >= 1  # history --json listed what was there
    assert seen == sorted(seen)  # a run once listed stays listed
    listed = {r.run_id for r in History(db).list_runs()}
    assert listed == {os.path.basename(p) for group in groups for p in group}  # nothing lost
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    assert (tmp_path / "r.html").stat().st_size > 0
