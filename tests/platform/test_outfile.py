"""platform.outfile: the one writer of files the user names (issue 32): what is at the name decides
how it is written, a link is never followed to a file, a device is never replaced."""

from __future__ import annotations

import errno
import os
import socket
import stat
import threading

import pytest

from softrt.errors import ConfigError, DiskFull
from softrt.platform import outfile
from softrt.platform.outfile import check_dir, check_target, write_file

from ..child import need_root, nobody
from ..devices import device


def _listing(folder) -> list[str]:
    return sorted(os.listdir(folder))


def test_a_new_file_gets_the_umask_mode_and_no_temporary_is_left(tmp_path):
    target = tmp_path / "r.html"
    assert write_file(target, "<html>é</html>") == str(target)
    assert target.read_text(encoding="utf-8") == "<html>é</html>"
    mask = os.umask(0o022)
    os.umask(mask)
    assert stat.S_IMODE(target.stat().st_mode) == 0o666 & ~mask
    assert _listing(tmp_path) == ["r.html"]


def test_an_existing_file_is_replaced_keeping_its_mode_and_owner(tmp_path):
    need_root()
    target = tmp_path / "r.html"
    target.write_text("old")
    os.chmod(target, 0o640)
    uid, gid = nobody()
    os.chown(target, uid, gid)
    before = target.stat().st_ino
    write_file(target, b"new")
    info = target.stat()
    assert target.read_bytes() == b"new" and info.st_ino != before  # a new file, renamed over the old
    assert stat.S_IMODE(info.st_mode) == 0o640 and (info.st_uid, info.st_gid) == (uid, gid)
    assert _listing(tmp_path) == ["r.html"]


@pytest.mark.parametrize("real", ["/dev/null", "/dev/zero"])
def test_a_character_device_is_written_in_place_never_replaced(tmp_path, real):
    node = device(tmp_path, real)
    before = os.stat(node)
    assert write_file(node, b"x" * 100_000) == str(node)
    after = os.stat(node)
    assert stat.S_ISCHR(after.st_mode) and after.st_rdev == before.st_rdev and after.st_ino == before.st_ino


def test_no_space_is_one_line_and_the_device_stays(tmp_path):
    full = device(tmp_path, "/dev/full")
    with pytest.raises(DiskFull) as info:
        write_file(full, "<html></html>", what="the report")
    assert str(info.value).startswith(f"no space left on {full}") and "\n" not in str(info.value)
    assert isinstance(info.value, ConfigError)  # exit status 2
    assert stat.S_ISCHR(os.stat(full).st_mode)


def test_no_space_while_replacing_leaves_the_old_file_and_no_temporary(tmp_path, monkeypatch):
    target = tmp_path / "r.html"
    target.write_text("old")

    def full(fd, data):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(outfile.os, "write", full)
    with pytest.raises(DiskFull, match=f"no space left on {target}"):
        write_file(target, "new")
    monkeypatch.undo()
    assert target.read_text() == "old" and _listing(tmp_path) == ["r.html"]


def test_a_fifo_is_written_in_place(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    write_file(fifo, b"report")
    reader.join(10)
    assert got == [b"report"] and stat.S_ISFIFO(os.lstat(fifo).st_mode)


@pytest.mark.parametrize("name", ["-", "/dev/stdout"])
def test_dash_and_dev_stdout_are_standard_output(name, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # (softrt used to write a file named "-")
    assert outfile.is_stdout(name)
    assert write_file(name, "<html>report</html>") == "standard output"
    assert capsys.readouterr().out == "<html>report</html>"


def test_a_directory_and_a_socket_are_refused_in_one_line(tmp_path):
    sock_path = tmp_path / "s"
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(sock_path))
        for target, kind in ((tmp_path, "a directory"), (sock_path, "a socket")):
            for call in (check_target, write_file):
                args = (target,) if call is check_target else (target, b"x")
                with pytest.raises(ConfigError, match=f"it is {kind}") as info:
                    call(*args, what="the report")
                assert "\n" not in str(info.value)
        assert stat.S_ISSOCK(os.lstat(sock_path).st_mode)


@pytest.mark.parametrize("owner", ["mine", "nobody's"])
def test_a_link_to_a_file_is_never_followed(tmp_path, owner):
    victim = tmp_path / "victim"
    victim.write_text("precious")
    link = tmp_path / "r.html"
    link.symlink_to(victim)
    if owner != "mine":
        need_root()
        os.lchown(link, *nobody())
    for call in (lambda: check_target(link), lambda: write_file(link, "<html>")):
        with pytest.raises(ConfigError, match="symbolic link"):
            call()
    assert victim.read_text() == "precious" and link.is_symlink()
    assert _listing(tmp_path) == ["r.html", "victim"]


def test_a_link_to_a_device_is_followed_only_when_root_or_mine(tmp_path):
    link, null = tmp_path / "out", device(tmp_path, "/dev/null")
    link.symlink_to(null)
    write_file(link, b"x")  # (/dev/stderr, a shell's /dev/fd/63)
    assert link.is_symlink() and stat.S_ISCHR(os.stat(null).st_mode)
    need_root()
    os.lchown(link, *nobody())
    with pytest.raises(ConfigError, match="symbolic link of uid"):
        write_file(link, b"x")


def test_links_planted_at_random_names_cannot_be_guessed(tmp_path, monkeypatch):
    """The temporaries are mkstemp's: O_EXCL | O_NOFOLLOW, so even a link at the very name it draws is
    not opened (mkstemp draws another)."""
    victim = tmp_path / "victim"
    victim.write_text("precious")
    names = iter(["planted", "fresh1", "planted", "fresh2"])  # each call meets its planted link first
    monkeypatch.setattr(outfile.tempfile, "_get_candidate_names", lambda: names)
    (tmp_path / ".softrt-planted.tmp").symlink_to(victim)
    (tmp_path / ".softrt-planted.probe").symlink_to(victim)
    check_target(tmp_path / "r.html")
    write_file(tmp_path / "r.html", "<html>")
    assert victim.read_text() == "precious" and (tmp_path / "r.html").read_text() == "<html>"
    assert (tmp_path / ".softrt-planted.tmp").is_symlink()


def test_a_missing_directory_is_one_line(tmp_path):
    with pytest.raises(ConfigError, match=r"cannot write the report to .*No such file or directory"):
        check_target(tmp_path / "no" / "r.html", "the report")


def test_check_dir_makes_the_directory_and_refuses_another_users_link(tmp_path):
    assert check_dir(tmp_path / "a" / "b").is_dir()
    need_root()
    other = tmp_path / "other"
    other.mkdir()
    link = tmp_path / "png"
    link.symlink_to(other)
    check_dir(link)  # mine: followed
    os.lchown(link, *nobody())
    with pytest.raises(ConfigError, match="symbolic link of uid"):
        check_dir(link, "PNGs")
