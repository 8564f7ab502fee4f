"""Run-scoped changes and their journal, on a captured /proc tree under tmp_path."""

import json
import subprocess
import sys

import pytest

from softrt.errors import SoftRTError
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
    assert f.read_text() == "-1"
    saved = json.loads(journal.path.read_text())
    assert saved["changes"][0]["before"] == "950000"
    journal.restore()
    assert f.read_text() == "950000"
    assert change.restored and change.verified
    assert not journal.path.exists()


def test_set_to_the_current_value_changes_nothing(tree):
    root, f = tree
    journal = changes.ChangeJournal(str(root))
    assert journal.set(RT, "950000", "test") is None
    assert journal.changes == [] and not journal.path.exists()


def test_recover_restores_the_journal_of_a_dead_process(tree, tmp_path):
    root, f = tree
    # A process that changes the value and dies without restoring (as a SIGKILLed supervisor would).
    code = (
        "from softrt.session.changes import ChangeJournal\n"
        f"ChangeJournal({str(root)!r}).set({RT!r}, '-1', 'test')\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
    assert f.read_text() == "-1"
    restored = changes.recover()
    assert [c.path for c in restored] == [RT]
    assert f.read_text() == "950000"
    assert list((tmp_path / "state" / "restore").glob("*.json")) == []


def test_recover_leaves_a_live_run_alone(tree):
    root, f = tree
    journal = changes.ChangeJournal(str(root))
    journal.set(RT, "-1", "test")  # owned by this (live) process ...
    journal.path = journal.path.with_name("1.json")  # ... and by pid 1, which is alive
    journal._save()
    assert changes.recover() == []
    assert f.read_text() == "-1"
    assert journal.path.exists()


def test_corrupt_journal_is_one_clear_error(tree, tmp_path):
    d = tmp_path / "state" / "restore"
    d.mkdir(parents=True)
    (d / "123.json").write_text("{not json")
    with pytest.raises(SoftRTError, match="unreadable"):
        changes.recover()


def test_a_journal_from_an_earlier_boot_is_dropped_not_replayed(tree, tmp_path):
    root, f = tree
    d = tmp_path / "state" / "restore"
    d.mkdir(parents=True)
    stale = {"pid": 999999, "boot_id": "an-earlier-boot", "root": str(root),
             "changes": [{"path": RT, "before": "123", "during": "-1", "why": "test"}]}
    (d / "999999.json").write_text(json.dumps(stale))
    assert changes.recover() == []
    assert f.read_text() == "950000\n"  # the reboot already reset it; nothing is written
    assert list(d.glob("*.json")) == []


# --- hostile and unrestorable journals (issue 12, defect 2) ---------------------------------------

def _boot_id():
    return open("/proc/sys/kernel/random/boot_id").read().strip()


DEAD_PID = 4_000_000  # above any pid this VM hands out (pid_max 4194304 and nothing runs that long)


def _legacy_journal(state, target, before, root="/"):
    """A journal in the format softrt wrote before the one journal (restore/<pid>.json)."""
    d = state / "restore"
    d.mkdir(parents=True, exist_ok=True)
    path = d / f"{DEAD_PID}.json"
    path.write_text(json.dumps({"pid": DEAD_PID, "boot_id": _boot_id(), "root": root,
                                "changes": [{"path": target, "before": before, "during": "x", "why": "t"}]}))
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
        tmp_path, state_dir, softrt_cmd, fmt):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    journal = (_legacy_journal if fmt == "legacy" else _jsonl_journal)(state_dir, str(victim), "PWNED")
    first = softrt_cmd("history")
    assert first.returncode == 0, first.stderr
    assert victim.read_text() == "precious\n"
    assert "restored" not in first.stderr
    assert first.stderr.count(str(journal.name)) == 1 and "set aside" in first.stderr
    assert not journal.exists()
    assert list((state_dir / "restore" / "failed").glob(journal.stem + "*"))
    second = softrt_cmd("history")
    assert second.returncode == 0 and second.stderr == ""  # reported once
    assert victim.read_text() == "precious\n"


@pytest.mark.parametrize("fmt", ["legacy", "jsonl"])
def test_a_value_the_kernel_refuses_is_reported_once_and_never_blocks_later_commands(
        tmp_path, state_dir, softrt_cmd, fmt):
    root = tmp_path / "root"
    (root / RT.lstrip("/")).mkdir(parents=True)  # a write there fails, as the kernel refusing it would
    (root / "proc/sys/kernel/sched_rt_period_us").write_text("1000000\n")
    journal = (_legacy_journal if fmt == "legacy" else _jsonl_journal)(state_dir, RT, "950000", root=str(root))
    first = softrt_cmd("history")
    assert first.returncode == 0, first.stderr
    assert "set aside" in first.stderr and first.stderr.count(journal.name) == 1
    assert "echo 950000 > /proc/sys/kernel/sched_rt_runtime_us" in first.stderr or fmt == "legacy"
    second = softrt_cmd("history")
    assert second.returncode == 0 and second.stderr == ""
