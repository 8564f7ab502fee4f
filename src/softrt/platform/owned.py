"""Directories and files only this user (or root) can change: softrt's state directory, its data
directory (``SOFTRT_HOME``) and the history database (``--db``) (platform layer).

softrt runs as root and writes there, so a path another user can change would let that user
redirect root's writes (a symlink swapped in between a check and a write). The rule is OpenSSH's
``StrictModes`` (auth.c ``auth_secure_path``): the directory itself is this user's and no one else
may write it, and every directory above it, on the path as given and on its real path, belongs to
root or this user and is writable by no one else, unless it is sticky (``/tmp``) and what lies in it
on the way is root's or this user's (sticky: "only the owner of a file may rename or delete it",
inode(7)). Then no other user can change anything on the way at any time, so the check cannot be
raced; files in the directory are still created O_EXCL | O_NOFOLLOW where softrt makes them.

Windows has no POSIX owners or modes: there the per-user profile directory's ACL keeps these private.
"""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

from ..errors import ConfigError

_POSIX = sys.platform != "win32"


def _ours(uid: int) -> bool:
    return uid in (0, os.geteuid())


def _who(uid: int) -> str:
    return f"uid {uid}, not root or this user (uid {os.geteuid()})"


def secure_dir(path: str | os.PathLike[str], what: str = "softrt's state directory") -> Path:
    """Create *path* mode 0700 if missing (its parents as ``mkdir -p`` would); refuse it unless it
    and the way to it are this user's (see the module docstring).

    Raises:
        ConfigError: a symlink, not a directory, another user's, writable by others, or a directory
            on the way that another user may change (with the fix).
    """
    path = Path(os.path.abspath(path))
    check_way(path, what)  # first: nothing is created on a way another user could redirect
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            pass
        info = os.lstat(path)
    except OSError as err:
        raise ConfigError(
            f"cannot create {what} {path}: {err.strerror or err}",
            hint="choose a directory you may write (SOFTRT_STATE_DIR, SOFTRT_HOME or --db)",
        ) from None
    if stat.S_ISLNK(info.st_mode):
        raise ConfigError(
            f"{what} {path} is a symlink", hint=f"remove it (rm {path}); softrt creates its own, mode 0700"
        )
    if not stat.S_ISDIR(info.st_mode):
        raise ConfigError(f"{what} {path} is not a directory", hint=f"remove it (rm {path})")
    if _POSIX and info.st_uid != os.geteuid():
        raise ConfigError(
            f"{what} {path} belongs to uid {info.st_uid}, not to this user (uid {os.geteuid()})",
            hint=f"remove it (rm -r {path}) if you do not know why, or choose another",
        )
    if _POSIX and info.st_mode & 0o022:
        raise ConfigError(
            f"{what} {path} may be written by other users",
            hint=f"chmod 700 {path}, or choose a directory only you may write",
        )
    check_way(path, what)  # again, as made
    return path


def check_way(path: str | os.PathLike[str], what: str) -> None:
    """Raise ConfigError unless every directory above *path* (as given and as resolved) is one that
    only root or this user can change (see the module docstring)."""
    if not _POSIX:
        return
    given = Path(os.path.abspath(path))
    for way in dict.fromkeys((given, Path(os.path.realpath(given)))):
        child = way
        for parent in way.parents:
            if not os.path.lexists(parent):  # not made yet
                child = parent
                continue
            info = os.lstat(parent)
            if not _ours(info.st_uid):
                raise ConfigError(
                    f"{what} {given} lies in {parent}, which belongs to {_who(info.st_uid)}",
                    hint="choose a directory that only you and root can change",
                )
            if not stat.S_ISLNK(info.st_mode) and info.st_mode & 0o022:
                below = os.lstat(child) if os.path.lexists(child) else None
                if not info.st_mode & stat.S_ISVTX or (below is not None and not _ours(below.st_uid)):
                    raise ConfigError(
                        f"{what} {given} lies in {parent}, which other users may change "
                        f"(mode {stat.filemode(info.st_mode)})",
                        hint="choose a directory that only you and root can change",
                    )
            child = parent


def check_own_file(path: str | os.PathLike[str], what: str) -> None:
    """Raise ConfigError if *path* exists and is not a regular file of this user's (a symlink,
    another user's file, a FIFO): softrt opens it by name (SQLite does), and must not follow it."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISREG(info.st_mode):
        raise ConfigError(
            f"{what} {path} is {'a symlink' if stat.S_ISLNK(info.st_mode) else 'not a regular file'}",
            hint="give the file itself, or move it away",
        )
    if _POSIX and info.st_uid != os.geteuid():
        raise ConfigError(
            f"{what} {path} belongs to uid {info.st_uid}, not to this user (uid {os.geteuid()})",
            hint="copy it to a directory of yours and use the copy",
        )
