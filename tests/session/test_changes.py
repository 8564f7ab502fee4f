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
