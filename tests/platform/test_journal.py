"""The one journal: checked on the way in and out, its own files only, set aside when it cannot be used."""

from __future__ import annotations

import json
import os

import pytest

from softrt.errors import ConfigError
from softrt.platform import journal

RT = "/proc/sys/kernel/sched_rt_runtime_us"
FMT = "softrt-test-journal"


@pytest.fixture
def root(tmp_path):
    r = tmp_path / "root"
    f = r / RT.lstrip("/")
    f.parent.mkdir(parents=True)
    f.write_text("950000\n")
    return r


def entry(**kw):
    return {"kind": "file", "target": RT, "before": "950000\n", "restore": "950000", "after": "-1", **kw}


def test_entries_are_checked_before_they_are_written(root, tmp_path):
    path = tmp_path / "state" / "j.jsonl"
    j = journal.Journal(path, FMT, str(root), boot_id="b")
    j.append(entry())
    with pytest.raises(ConfigError, match="not a kernel file softrt writes"):
        j.append(entry(target="/etc/passwd"))
    with pytest.raises(ConfigError, match="takes an integer"):
        j.append(entry(restore="950000; reboot"))
    j.close()
    header, entries = journal.load(path, FMT, "test journal", str(root))
    assert header["root"] == str(root) and header["pid"] == os.getpid() and entries == [entry()]
    assert oct(path.stat().st_mode & 0o777) == oct(0o600) and oct(path.parent.stat().st_mode & 0o777) == oct(0o700)


def test_an_existing_name_is_never_opened(root, tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    (tmp_path / "state").mkdir(mode=0o700)
    (tmp_path / "state" / "j.jsonl").symlink_to(victim)
    with pytest.raises(FileExistsError):
        journal.Journal(tmp_path / "state" / "j.jsonl", FMT, str(root))
    with pytest.raises(journal.JournalError, match="cannot read"):
        journal.load(tmp_path / "state" / "j.jsonl", FMT, "test journal")
    assert victim.read_text() == "precious\n"


def _write(path, *records, tail=""):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records) + tail)


HEADER = {"format": FMT, "version": 1, "pid": 1, "boot_id": "b", "root": "R"}


@pytest.mark.parametrize(
    "records,tail,words",
    [
        ([HEADER, entry()], '{"kind": "file", "tar', None),  # cut short while written: ignored
        ([HEADER, entry()], "[" * 100_000 + "\n", "corrupt"),  # nesting deeper than the parser's recursion
        ([{**HEADER, "format": "other"}], "", "not a softrt test journal"),
        ([{**HEADER, "pid": "1"}], "", "corrupt"),
        ([{**HEADER, "root": 5}], "", "corrupt"),
        ([HEADER, entry(target="/proc/self/root/etc/passwd")], "", "forged"),
        ([HEADER, {"kind": "affinity", "target": "12", "tid": True, "before": "0"}], "", "forged"),
        ([HEADER, {"kind": "service", "target": "x.service", "before": "inactive"}], "", "forged"),
    ],
)
def test_load(root, tmp_path, records, tail, words):
    path = tmp_path / "j.jsonl"
    _write(path, *[{**r, "root": str(root)} if r.get("root") == "R" else r for r in records], tail=tail)
    if words is None:
        assert journal.load(path, FMT, "test journal")[1] == [entry()]
        return
    with pytest.raises(journal.JournalError, match=words):
        journal.load(path, FMT, "test journal")


def test_a_journal_too_large_or_of_another_user_is_refused(root, tmp_path):
    path = tmp_path / "j.jsonl"
    _write(path, {**HEADER, "root": str(root)}, tail=" " * (journal.MAX_JOURNAL_BYTES + 1))
    with pytest.raises(journal.JournalError, match="under 4 MiB"):
        journal.load(path, FMT, "test journal")
    if os.geteuid() == 0:
        _write(path, {**HEADER, "root": str(root)})
        os.chown(path, 65534, 65534)
        with pytest.raises(journal.JournalError, match="of this user's"):
            journal.load(path, FMT, "test journal")


def test_set_aside_moves_it_with_the_reason(tmp_path):
    d = tmp_path / "restore"
    d.mkdir()
    path = d / "7.jsonl"
    path.write_text("x\n")
    first = journal.set_aside(path, "the kernel refused it")
    path.write_text("y\n")
    second = journal.set_aside(path, "again")
    assert first != second and first.parent == d / "failed" and not path.exists()
    assert (
        first.read_text() == "x\n"
        and (first.parent / (first.name + ".reason")).read_text() == "the kernel refused it\n"
    )


def test_restore_file(root):
    f = root / RT.lstrip("/")
    f.write_text("-1\n")
    assert journal.restore_file(str(root), entry(), only_if_after=True).status == "restored"
    assert f.read_text() == "950000\n"
    f.write_text("900000\n")
    kept = journal.restore_file(str(root), entry(), only_if_after=True)
    assert kept.status == "kept" and f.read_text() == "900000\n"
    f.unlink()
    f.mkdir()
    failed = journal.restore_file(str(root), entry())
    assert failed.status == "failed" and failed.fix == f"echo 950000 > {RT}"
