"""Run-scoped changes and their journal, on a captured /proc tree under tmp_path."""

import json
import subprocess
import sys

import pytest

from softrt.errors import SoftRTError
from softrt.platform import get_platform
from softrt.session import changes

RT = "/proc/sys/kernel/sched_rt_runtime_us"


@pytest.fixture
def tree(tmp_path, monkeypatch):
    monkeypatch.setenv("SOFTRT_STATE_DIR", str(tmp_path / "state"))
    f = tmp_path / "root" / RT.lstrip("/")
    f.parent.mkdir(parents=True)
    f.write_text("950000\n")
    return tmp_path / "root", f


def test_set_journals_then_restore_verifies_and_drops_journal(tree):
    root, f = tree
    journal = changes.ChangeJournal(str(root))
    change = journal.set(RT, "-1", "test")
    assert f.read_text() == "-1\n"  # as echo writes it
    header, entry = [json.loads(line) for line in journal.path.read_text().splitlines()]
    assert header["format"] == "softrt-run-journal" and entry["before"] == "950000\n" and entry["after"] == "-1"
    assert oct(journal.path.stat().st_mode & 0o777) == oct(0o600)
    assert oct(journal.path.parent.stat().st_mode & 0o777) == oct(0o700)
    assert not change.restored  # the document of the change as made; restore() returns it as it ends
    (change,) = journal.restore()
    assert f.read_text() == "950000\n"  # byte for byte
    assert change.restored and change.verified
    assert not journal.path.exists()


def test_a_journal_restored_once_can_journal_again(tree):
    """bench/run_bench.py switches RT throttling off around each reference run with one journal: the
    second change wrote to the closed journal (OSError: [Errno 9] Bad file descriptor)."""
    root, f = tree
    journal = changes.ChangeJournal(str(root))
    for _ in range(2):
        journal.set(RT, "-1", "test")
        assert f.read_text() == "-1\n" and journal.path.exists()
        journal.restore()
        assert f.read_text() == "950000\n" and not journal.path.exists()
    assert [c.verified for c in journal.changes] == [True, True]


def test_set_to_the_current_value_changes_nothing(tree):
    root, f = tree
    journal = changes.ChangeJournal(str(root))
    assert journal.set(RT, "950000", "test") is None
    assert journal.changes == [] and not journal.path.exists()


def test_recover_restores_the_journal_of_a_dead_process(tree, tmp_path):
    root, f = tree
    # A process that changes the value and dies without restoring (as a SIGKILLed supervisor would).
    code = f"from softrt.session.changes import ChangeJournal\nChangeJournal({str(root)!r}).set({RT!r}, '-1', 'test')\n"
    subprocess.run([sys.executable, "-c", code], check=True)
    assert f.read_text() == "-1\n"
    restored = changes.recover()
    assert [c.path for c in restored] == [RT] and restored[0].restored and restored[0].verified
    assert f.read_text() == "950000\n"
    assert list((tmp_path / "state" / "restore").glob("*.json*")) == []


def test_a_journalled_write_the_kernel_refused_is_never_reported_as_restored(tree, tmp_path):
    """A run without root journals RT throttling, is refused the write, and is killed: the next command
    has nothing to restore and must not say it restored anything (it said so, of a value never changed)."""
    root, f = tree
    code = (
        "import os\nfrom softrt.errors import SoftRTError\nfrom softrt.session import changes\n"
        "def refuse(path, value):\n    raise PermissionError(13, 'Permission denied')\n"
        "changes.writable.write_line = refuse\n"
        f"try:\n    changes.ChangeJournal({str(root)!r}).set({RT!r}, '-1', 'test')\n"
        "except SoftRTError:\n    pass\nos._exit(9)\n"  # killed: nothing restored, the journal left
    )
    subprocess.run([sys.executable, "-c", code], check=False)
    assert len(list((tmp_path / "state" / "restore").glob("*.jsonl"))) == 1
    assert changes.recover() == []
    assert f.read_text() == "950000\n" and list((tmp_path / "state" / "restore").glob("*.json*")) == []


def test_recover_leaves_a_live_run_alone(tree):
    root, f = tree
    journal = changes.ChangeJournal(str(root))
    journal.set(RT, "-1", "test")  # owned by this (live) process ...
    lines = journal.path.read_text().splitlines()
    header = json.loads(lines[0])
    header["pid"], header["identity"] = 1, get_platform().process_identity(1)  # ... and by pid 1, which is alive
    owned = journal.path.with_name("1.jsonl")
    owned.write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n")
    journal.path.unlink()
    assert changes.recover() == []
    assert f.read_text() == "-1\n"
    assert owned.exists()


def test_a_journal_whose_pid_another_process_reuses_is_restored_and_reported(tree):
    """Issue 22.4: the pid alone said "a run in progress owns it", so it was never restored."""
    root, f = tree
    journal = changes.ChangeJournal(str(root))
    journal.set(RT, "-1", "test")
    lines = journal.path.read_text().splitlines()
    header = json.loads(lines[0])
    boot, _, start = header["identity"].split("/")
    assert header["identity"] == get_platform().process_identity()  # boot id, pid and start time
    # Its process died, and pid 1 (alive, started at another time) now has its number.
    header["pid"], header["identity"] = 1, f"{boot}/1/{int(start) + 12345}"
    reused = journal.path.with_name("1.jsonl")
    reused.write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n")
    journal.path.unlink()
    restored = changes.recover()
    assert [(c.path, c.restored) for c in restored] == [(RT, True)]
    assert f.read_text() == "950000\n" and not reused.exists()


def test_a_corrupt_journal_is_set_aside_once_with_the_reason(tree, tmp_path):
    d = tmp_path / "state" / "restore"
    d.mkdir(parents=True)
    (d / "123.jsonl").write_text("{not json\n")
    first = changes.recover()
    assert len(first) == 1 and not first[0].restored and "corrupt" in first[0].note and "set aside" in first[0].note
    assert not (d / "123.jsonl").exists()
    reason = next((d / "failed").glob("123.jsonl.*.reason"))
    assert "corrupt" in reason.read_text()
    assert changes.recover() == []  # reported once


def test_a_value_changed_by_someone_else_during_the_run_is_kept(tree):
    root, f = tree
    journal = changes.ChangeJournal(str(root))
    change = journal.set(RT, "-1", "test")
    f.write_text("900000\n")  # e.g. the administrator, during the run
    (change,) = journal.restore()
    assert f.read_text() == "900000\n"
    assert not change.restored and "someone else" in change.note
    assert not journal.path.exists()  # nothing left to retry


def test_a_restore_the_kernel_refuses_is_noted_and_set_aside(tree, tmp_path):
    root, f = tree
    journal = changes.ChangeJournal(str(root))
    change = journal.set(RT, "-1", "test")
    f.unlink()
    f.mkdir()  # a write fails now, as a kernel refusing the value would make it
    journal.restore()
    (change,) = journal.restore()  # a second call (a second cleanup) neither fails nor sets it aside twice
    assert not change.restored and "echo 950000 > /proc/sys/kernel/sched_rt_runtime_us" in change.note
    assert not journal.path.exists()
    assert len(list((tmp_path / "state" / "restore" / "failed").glob("*.jsonl.*[0-9]"))) == 1
    assert changes.recover() == []  # it never blocks a later command


def test_a_write_softrt_never_makes_is_refused_before_anything_is_journalled(tree):
    root, f = tree
    journal = changes.ChangeJournal(str(root))
    with pytest.raises(SoftRTError, match="takes an integer"):
        journal.set(RT, "5000000", "test")  # above sched_rt_period_us (1000000 when not there)
    with pytest.raises(SoftRTError, match="not a kernel file softrt writes"):
        journal.set("/proc/sys/kernel/core_pattern", "x", "test")
    assert f.read_text() == "950000\n" and not journal.path.exists()


@pytest.mark.parametrize("kind", ["symlink", "world-writable", "other-owner"])
def test_a_state_directory_that_is_not_softrts_own_is_refused_with_the_fix(tmp_path, monkeypatch, kind):
    import os

    state = tmp_path / "state"
    if kind == "symlink":
        (tmp_path / "elsewhere" / "restore").mkdir(parents=True)
        state.symlink_to(tmp_path / "elsewhere")
    else:
        state.mkdir()
    restore = state / "restore"
    if kind == "world-writable":
        restore.mkdir()
        restore.chmod(0o777)
    if kind == "other-owner":
        if os.geteuid() != 0:
            pytest.skip("giving a directory to another user needs root")
        restore.mkdir()
        os.chown(restore, 65534, 65534)
    monkeypatch.setenv("SOFTRT_STATE_DIR", str(state))
    fix = {"symlink": f"rm {state}", "world-writable": f"chmod 700 {restore}", "other-owner": f"rm -r {restore}"}[kind]
    with pytest.raises(SoftRTError, match=fix):
        changes.recover()


def test_a_journal_from_an_earlier_boot_is_dropped_not_replayed(tree, tmp_path):
    root, f = tree
    d = tmp_path / "state" / "restore"
    d.mkdir(parents=True)
    stale = {
        "format": "softrt-run-journal",
        "version": 1,
        "pid": 999999,
        "boot_id": "an-earlier-boot",
        "root": str(root),
    }
    entry = {"kind": "file", "target": RT, "before": "123\n", "restore": "123", "after": "-1"}
    (d / "999999.jsonl").write_text(json.dumps(stale) + "\n" + json.dumps(entry) + "\n")
    assert changes.recover() == []
    assert f.read_text() == "950000\n"  # the reboot already reset it; nothing is written
    assert list(d.glob("*.json*")) == []


# --- hostile and unrestorable journals (issue 12, defect 2) ---------------------------------------


def _boot_id():
    return open("/proc/sys/kernel/random/boot_id").read().strip()


DEAD_PID = 4_000_000  # above any pid this VM hands out (pid_max 4194304 and nothing runs that long)


def _legacy_journal(state, target, before, root="/"):
    """A journal in the format softrt wrote before the one journal (restore/<pid>.json)."""
    d = state / "restore"
    d.mkdir(parents=True, exist_ok=True)
    path = d / f"{DEAD_PID}.json"
    path.write_text(
        json.dumps(
            {
                "pid": DEAD_PID,
                "boot_id": _boot_id(),
                "root": root,
                "changes": [{"path": target, "before": before, "during": "x", "why": "t"}],
            }
        )
    )
    return path


def _jsonl_journal(state, target, restore, root="/"):
    """A journal in the one journal's format (restore/<pid>.jsonl), forged or left by a killed run."""
    d = state / "restore"
    d.mkdir(parents=True, exist_ok=True)
    path = d / f"{DEAD_PID}.jsonl"
    header = {"format": "softrt-run-journal", "version": 1, "pid": DEAD_PID, "boot_id": _boot_id(), "root": root}
    entry = {"kind": "file", "target": target, "before": restore + "\n", "restore": restore, "after": "-1", "why": "t"}
    path.write_text(json.dumps(header) + "\n" + json.dumps(entry) + "\n")
    return path


@pytest.mark.parametrize("fmt", ["legacy", "jsonl"])
def test_a_journal_naming_any_other_file_is_never_written_reported_once_and_set_aside(
    tmp_path, state_dir, softrt_cmd, fmt
):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    journal = (_legacy_journal if fmt == "legacy" else _jsonl_journal)(state_dir, str(victim), "PWNED")
    first = softrt_cmd("history")
    assert first.returncode == 0, first.stderr
    assert victim.read_text() == "precious\n"
    assert "restored" not in first.stderr
    assert first.stderr.count("set aside") == 1 and first.stderr.count("softrt: warning") == 1
    assert not journal.exists()
    assert list((state_dir / "restore" / "failed").glob(journal.stem + "*"))
    second = softrt_cmd("history")
    assert second.returncode == 0 and "softrt: warning" not in second.stderr  # reported once
    assert victim.read_text() == "precious\n"


@pytest.mark.parametrize("fmt", ["legacy", "jsonl"])
def test_a_value_the_kernel_refuses_is_reported_once_and_never_blocks_later_commands(
    tmp_path, state_dir, softrt_cmd, fmt
):
    root = tmp_path / "root"
    (root / RT.lstrip("/")).mkdir(parents=True)  # a write there fails, as the kernel refusing it would
    (root / "proc/sys/kernel/sched_rt_period_us").write_text("1000000\n")
    (_legacy_journal if fmt == "legacy" else _jsonl_journal)(state_dir, RT, "950000", root=str(root))
    first = softrt_cmd("history")
    assert first.returncode == 0, first.stderr
    assert first.stderr.count("set aside") == 1 and first.stderr.count("softrt: warning") == 1
    assert "echo 950000 > /proc/sys/kernel/sched_rt_runtime_us" in first.stderr
    second = softrt_cmd("history")
    assert second.returncode == 0 and "softrt: warning" not in second.stderr
