"""The suite's own clean-up: what a killed test session's softrt runs left changed is restored."""

from __future__ import annotations

import os
import subprocess
import sys

from .conftest import restore_what_killed_sessions_left

RT = "/proc/sys/kernel/sched_rt_runtime_us"


def test_a_killed_sessions_journal_is_restored_by_the_next_session(tmp_path):
    # An earlier session's test directory, its run killed after switching RT throttling off (in a
    # tree: root=), as a stopped test session leaves it; and a session without journals.
    root = tmp_path / "root"
    f = root / RT.lstrip("/")
    f.parent.mkdir(parents=True)
    f.write_text("950000\n")
    state = tmp_path / "pytest-7" / "popen-gw0" / "test_some_run0" / "state"
    (tmp_path / "pytest-8" / "popen-gw1").mkdir(parents=True)
    code = f"from softrt.session.changes import ChangeJournal\nChangeJournal({str(root)!r}).set({RT!r}, '-1', 'test')\n"
    subprocess.run([sys.executable, "-c", code], check=True, env={**os.environ, "SOFTRT_STATE_DIR": str(state)})
    assert f.read_text() == "-1\n" and list(state.glob("restore/*.jsonl"))
    said = restore_what_killed_sessions_left(tmp_path)
    assert f.read_text() == "950000\n" and not list(state.glob("restore/*.jsonl"))
    assert any("restored /proc/sys/kernel/sched_rt_runtime_us" in line for line in said), said
    assert restore_what_killed_sessions_left(tmp_path) == []  # nothing left: nothing said
