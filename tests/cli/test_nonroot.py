"""Every command as a user without privileges, after root has run (issue 22.1 and 22.5): "not
real-time" with the reasons, never a traceback. The tests of tracefs ran only as root, so the
suite could not see that every command crashed for anyone else."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import textwrap
from pathlib import Path

import pytest

from softrt.platform import get_platform

from ..child import nobody, python_as
from ..store.conftest import cyclictest_doc

# One interpreter as the user runs every command in turn (an interpreter start per command would cost
# seconds): each prints [args, exit status, stdout, stderr] as one JSON line.
SCRIPT = textwrap.dedent("""
    import contextlib, io, json, sys
    from softrt.cli import main
    last = ""
    for args in json.loads(sys.argv[1]):
        if args[:1] == ["show"]:  # the run just stored, by its id
            args = ["show", json.loads(last)["run_id"] if last.startswith("{") else "none"]
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                main(args)
                code = 0
            except SystemExit as exit:
                code = exit.code
        if args[:1] == ["run"]:
            last = out.getvalue()
        print(json.dumps([args, code, out.getvalue(), err.getvalue()]), flush=True)
""")


@pytest.fixture
def away():
    """A directory the unprivileged user can reach (pytest's own tmp directory is root's alone)."""
    d = Path(tempfile.mkdtemp(prefix="softrt-test-"))
    d.chmod(0o755)
    yield d
    shutil.rmtree(d)


@pytest.mark.rt
def test_every_command_works_for_a_user_without_privileges_after_root_ran(away):
    plat = get_platform()
    if not plat.caps.kernel_trace:
        pytest.skip("Linux only")
    # The test holds the machine's lock (conftest): the user's runs take the lock of their own state
    # directory, which root's run took first, and released.
    home = away / "home"
    state = home / "state"
    held = plat.try_lock(state / "rt-loop.lock")
    assert held is not None
    os.close(held)
    uid, gid = nobody()
    result = away / "ct.json"
    result.write_text(
        json.dumps(
            cyclictest_doc({"0": {"histogram": {"8": 3}, "cycles": 3, "min": 8, "max": 8, "avg": 8.0, "cpu": 1}})
        )
    )
    result.chmod(0o644)
    commands = [
        ["run", "--duration", "1s", "--json", "--out-dir", str(home / "runs")],
        ["history"],
        ["show"],
        ["check", "--sample", "0.2"],
        ["import", str(result)],
        ["tune", "--rt-cpus", "1"],
        ["tune", "--rt-cpus", "1", "--apply"],
        ["tune", "--revert"],
    ]
    env = {"SOFTRT_STATE_DIR": str(state)}
    proc = python_as(uid, gid, home, "-c", SCRIPT, json.dumps(commands), env=env, timeout=120)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    said = [(code, out, err) for _, code, out, err in map(json.loads, proc.stdout.splitlines())]
    assert len(said) == len(commands)
    for args, (_code, out, err) in zip(commands, said, strict=True):
        assert "Traceback" not in out + err and "PermissionError" not in out + err, (args, err)
    run, history, show, check, imported, plan, apply, revert = said
    code, out, err = run
    assert code == 0, err
    summary = json.loads(out)
    assert summary["status"] == "complete" and summary["mode"] == "not real-time", err
    reasons = {item["what"]: item["why"] for item in summary["tuning"]["not_applied"]}
    assert "sched_fifo" in reasons and "root" in reasons["sched_fifo"]
    assert summary["why_late"]["tracing"].startswith("unavailable: ")
    assert history[0] == 0 and summary["run_id"][:15] in history[1]
    assert show[0] == 0 and "not real-time" in show[1]
    assert (check[0] in (0, 1) and "Fix first" in check[1] + check[2]) or check[0] == 0
    assert imported[0] == 0 and "imported" in imported[1]
    assert plan[0] == 0 and "Nothing was changed" in plan[1]
    for code, _, err in (apply, revert):  # bad input: one line, exit 2
        assert code == 2 and err.startswith("softrt: error: ") and err.count("\n") == 1
    assert "needs root" in apply[2] and "nothing to revert" in revert[2]
