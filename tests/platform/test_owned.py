"""The state directory, the data directory (SOFTRT_HOME) and --db get one check (issue 22.4): this
user's directory on a way no other user can change, and the database a regular file of this user's."""

from __future__ import annotations

import json
import os

import pytest

from softrt.errors import ConfigError
from softrt.platform.owned import secure_dir
from softrt.store.history import History
from softrt.store.importers import import_file

from ..child import need_root, nobody
from ..store.conftest import cyclictest_doc
from ..synthetic import write_synthetic_run


@pytest.fixture
def run(tmp_path):
    return write_synthetic_run(tmp_path / "runs", cycles=500)


@pytest.fixture
def theirs(tmp_path):
    """A directory of another user's, and what root must never write to: a directory of root's."""
    need_root()
    d = tmp_path / "theirs"
    d.mkdir()
    os.chown(d, *nobody())
    victim = tmp_path / "victim"
    victim.mkdir()
    return d, victim


def test_a_data_directory_reached_through_another_users_link_is_refused_and_nothing_written(
    theirs, run, monkeypatch, tmp_path
):
    """The issue's probe: SOFTRT_HOME in a directory another user owns, their link pointing at root's."""
    d, victim = theirs
    (d / "home").symlink_to(victim)
    os.lchown(d / "home", *nobody())
    for home in ("home", "real"):  # their link, or a directory root would make there: theirs to swap for a link
        monkeypatch.setenv("SOFTRT_HOME", str(d / home))
        with pytest.raises(
            ConfigError, match=f"lies in {d}, which belongs to uid {nobody()[0]}, not root or this user"
        ):
            History().add_run(run)
    assert not (d / "real").exists()  # nothing was made on their way
    (tmp_path / "link").symlink_to(victim)  # a link of root's own is not followed either
    monkeypatch.setenv("SOFTRT_HOME", str(tmp_path / "link"))
    with pytest.raises(ConfigError, match=r"directory .*/link is a symlink"):
        History().add_run(run)
    result = tmp_path / "result.json"
    result.write_text(
        json.dumps(
            cyclictest_doc({"0": {"histogram": {"8": 1}, "cycles": 1, "min": 8, "max": 8, "avg": 8.0, "cpu": 1}})
        )
    )
    with pytest.raises(ConfigError, match="softrt's data directory"):
        import_file(result)
    assert list(victim.iterdir()) == []


@pytest.mark.parametrize("where", ["world_writable", "their_dir", "sticky_but_theirs", "link_db", "fifo_db"])
def test_a_db_path_another_user_could_redirect_is_refused(tmp_path, run, where):
    if where in ("their_dir", "sticky_but_theirs"):
        need_root()
    d = tmp_path / "d"
    d.mkdir()
    db = d / "h.sqlite"
    if where == "world_writable":
        d.chmod(0o777)
    elif where == "their_dir":
        os.chown(d, *nobody())
    elif where == "sticky_but_theirs":  # /tmp-like: sticky, but the directory in it is another user's
        d.chmod(0o1777)
        (d / "sub").mkdir()
        os.chown(d / "sub", *nobody())
        db = d / "sub" / "h.sqlite"
    elif where == "link_db":
        (tmp_path / "elsewhere.sqlite").write_bytes(b"")
        db.symlink_to(tmp_path / "elsewhere.sqlite")
    else:
        os.mkfifo(db)
    with pytest.raises(ConfigError) as info:
        History(db).add_run(run)
    assert "\n" not in str(info.value)
    if where == "link_db":
        assert (tmp_path / "elsewhere.sqlite").read_bytes() == b""


def test_a_sticky_directory_on_the_way_is_fine_when_what_lies_in_it_is_ours(tmp_path, run):
    d = tmp_path / "sticky"
    d.mkdir()
    d.chmod(0o1777)
    History(d / "mine" / "h.sqlite").add_run(run)  # like ~/…/softrt under /tmp: only we may rename "mine"
    assert len(History(d / "mine" / "h.sqlite")) == 1
    with pytest.raises(ConfigError, match="may be written by other users"):
        secure_dir(d, "softrt's data directory")  # the directory itself must be ours alone
