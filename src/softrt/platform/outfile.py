"""The one way softrt writes a file the user names: a report, a PNG, a state file (platform layer).

softrt often runs as root, and a user names the output (``report -o``, ``compare --report``,
``--png DIR``), possibly in a folder other users may write (a shared reports folder, ``/tmp`` with
``fs.protected_symlinks=0``). What is there decides how it is written:

* nothing, or a regular file: the data goes to a temporary of a random name created ``O_CREAT |
  O_EXCL | O_NOFOLLOW`` in the same directory (tempfile.mkstemp), is fsync'd, and is renamed over
  the name (rename(2) is atomic: a reader never sees half a file). A link planted at any name
  softrt might use is never opened, and rename(2) replaces a directory entry, never what a link
  points to. An existing file keeps its mode (and, for root, its owner); a new one gets 0666 less
  the umask, as ``>`` would;
* a character device or a FIFO (``/dev/null``, ``/dev/full``, a pipe, a terminal), and ``-`` or
  ``/dev/stdout`` (this process's standard output): written in place, never replaced (renaming a
  file over ``/dev/null`` would delete the device node);
* a symbolic link: followed only when it is root's or this user's *and* leads to a character
  device or a FIFO (``/dev/stderr``, ``/dev/fd/63`` of a shell's process substitution); a link to a
  file or to nothing is refused with the real path to give instead (open(2) ``O_NOFOLLOW``);
* a directory, a socket, a block device: refused with one line.

A full disk (write(2): ENOSPC, as ``/dev/full`` always answers) is :class:`~softrt.errors.DiskFull`,
one line and exit status 2, with the temporary removed: nothing half-written is left.
"""

from __future__ import annotations

import errno
import os
import stat
import sys
import tempfile
from pathlib import Path

from ..errors import ConfigError, DiskFull
from .kfiles import file_kind

#: The names that mean this process's standard output (``-`` as most tools take it).
STDOUT_NAMES = ("-", "/dev/stdout")
_POSIX = sys.platform != "win32"
_CLOEXEC = getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOINHERIT", 0) | getattr(os, "O_BINARY", 0)
_IN_PLACE = os.O_WRONLY | getattr(os, "O_NOCTTY", 0) | _CLOEXEC  # a terminal named must not become ours
_TEMP_PREFIX = ".softrt-"


def is_stdout(path: str | os.PathLike[str]) -> bool:
    """True when *path* names standard output (``-`` or ``/dev/stdout``): say "written" on stderr then."""
    return os.fspath(path) in STDOUT_NAMES


def _ours(uid: int) -> bool:
    return not _POSIX or uid in (0, os.geteuid())


def _plan(path: str, what: str, hint: str) -> tuple[str, os.stat_result | None]:
    """How *path* is written: ("stdout" | "in place" | "replace", the lstat of a regular file)."""
    if path in STDOUT_NAMES:
        return "stdout", None
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return "replace", None
    except OSError as err:
        raise ConfigError(f"cannot write {what} to {path}: {err.strerror or err}", hint=hint) from None
    if stat.S_ISREG(info.st_mode):
        return "replace", info
    if stat.S_ISCHR(info.st_mode) or stat.S_ISFIFO(info.st_mode):
        return "in place", None
    if stat.S_ISLNK(info.st_mode):
        if not _ours(info.st_uid):
            raise ConfigError(
                f"cannot write {what} to {path}: it is a symbolic link of uid {info.st_uid}, "
                "not root's or this user's; softrt never follows it",
                hint=hint,
            )
        try:
            target = os.stat(path)
        except OSError:
            target = None
        if target is not None and (stat.S_ISCHR(target.st_mode) or stat.S_ISFIFO(target.st_mode)):
            return "in place", None
        real = os.path.realpath(path)
        raise ConfigError(
            f"cannot write {what} to {path}: it is a symbolic link (to {real}); softrt writes a "
            "file only at its real path",
            hint=f"give {real} itself" if target is not None else hint,
        )
    raise ConfigError(f"cannot write {what} to {path}: it is {file_kind(info.st_mode)}", hint=hint)


def check_target(path: str | os.PathLike[str], what: str = "the file", hint: str = "choose another file") -> None:
    """Raise ConfigError unless :func:`write_file` could write *path*: called before a long job
    (a run, a report's reading) so that bad output is refused before anything is done.

    A file to create or replace: a temporary is created and removed in its directory (a random
    name, ``O_EXCL``), which proves the directory takes a new file. A device or FIFO is not opened
    (opening a FIFO waits for its reader).
    """
    name = os.fspath(path)
    how, _info = _plan(name, what, hint)
    if how != "replace":
        return
    try:
        fd, tmp = tempfile.mkstemp(prefix=_TEMP_PREFIX, suffix=".probe", dir=os.path.dirname(name) or ".")
        os.close(fd)
        os.unlink(tmp)
    except OSError as err:
        raise ConfigError(f"cannot write {what} to {name}: {err.strerror or err}", hint=hint) from None


def check_dir(path: str | os.PathLike[str], what: str = "files", hint: str = "choose another directory") -> Path:
    """Make the directory *path* (``mkdir -p``) and raise ConfigError unless new files can be made
    in it; a symbolic link in its place is refused unless it is root's or this user's. Returns it."""
    name = Path(path)
    try:
        info = os.lstat(name)
        if stat.S_ISLNK(info.st_mode) and not _ours(info.st_uid):
            raise ConfigError(
                f"cannot write {what} to {name}: it is a symbolic link of uid {info.st_uid}, "
                "not root's or this user's; softrt never follows it",
                hint=hint,
            )
    except FileNotFoundError:
        pass
    except OSError as err:
        raise ConfigError(f"cannot write {what} to {name}: {err.strerror or err}", hint=hint) from None
    try:
        name.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=_TEMP_PREFIX, suffix=".probe", dir=name)
        os.close(fd)
        os.unlink(tmp)
    except OSError as err:
        raise ConfigError(f"cannot write {what} to {name}: {err.strerror or err}", hint=hint) from None
    return name


def write_file(
    path: str | os.PathLike[str], data: bytes | str, *, what: str = "the file", hint: str = "choose another file"
) -> str:
    """Write *data* (str: UTF-8) to the file the user named *path*, as the module docstring says.

    Returns where it went, for a message: the path, or ``"standard output"``.

    Raises:
        DiskFull: no space left (ENOSPC); nothing half-written remains.
        ConfigError: a directory, socket, block device or link softrt does not follow, or any other
            error of the write (with its strerror); nothing half-written remains.
    """
    name = os.fspath(path)
    raw = data.encode("utf-8") if isinstance(data, str) else bytes(data)
    how, info = _plan(name, what, hint)
    try:
        if how == "stdout":
            _to_stdout(raw)
            return "standard output"
        if how == "in place":
            _in_place(name, raw)
        else:
            _replace(name, raw, info)
    except OSError as err:
        shown = "standard output" if how == "stdout" else name
        if err.errno in (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)):  # (a quota: as full)
            raise DiskFull(
                f"no space left on {shown} (writing {what})", hint="free some space, or write to another disk"
            ) from None
        raise ConfigError(f"cannot write {what} to {shown}: {err.strerror or err}", hint=hint) from None
    return name


def _write_all(fd: int, raw: bytes) -> None:
    view = memoryview(raw)
    while view:
        view = view[os.write(fd, view) :]


def _to_stdout(raw: bytes) -> None:
    stream = sys.stdout
    stream.flush()  # what was printed before comes first
    buffer = getattr(stream, "buffer", None)
    if buffer is not None:
        buffer.write(raw)
        buffer.flush()
    else:  # a text-only stream (a test's capture): the bytes are UTF-8 text
        stream.write(raw.decode("utf-8", errors="replace"))
        stream.flush()


def _in_place(name: str, raw: bytes) -> None:
    # O_NOFOLLOW unless the name is a link already judged (root's or ours, to a device or FIFO).
    nofollow = 0 if os.path.islink(name) else getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(name, _IN_PLACE | nofollow)
    try:
        mode = os.fstat(fd).st_mode
        if not (stat.S_ISCHR(mode) or stat.S_ISFIFO(mode)):  # swapped since it was looked at
            raise OSError(errno.EEXIST, "it changed while being opened")
        _write_all(fd, raw)
    finally:
        os.close(fd)


def _replace(name: str, raw: bytes, info: os.stat_result | None) -> None:
    folder = os.path.dirname(name) or "."
    fd, tmp = tempfile.mkstemp(prefix=_TEMP_PREFIX, suffix=".tmp", dir=folder)  # O_EXCL | O_NOFOLLOW, 0600
    try:
        try:
            _write_all(fd, raw)
            os.fsync(fd)  # the data before the rename: a power cut leaves the old file or the new one
            if info is not None:
                _keep_owner(fd, info)
            # By its descriptor: the name could be swapped for a link in a directory others may write.
            chmod_open(fd, tmp, stat.S_IMODE(info.st_mode) & 0o777 if info is not None else 0o666 & ~_umask())
        finally:
            os.close(fd)
        now = os.lstat(name) if os.path.lexists(name) else None
        if now is not None and not stat.S_ISREG(now.st_mode):  # changed since it was looked at
            raise OSError(errno.EEXIST, f"it became {file_kind(now.st_mode)} while being written")
        os.replace(tmp, name)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def chmod_open(fd: int, path: str | os.PathLike[str], mode: int) -> None:
    """Set *mode* on the open file *fd* (fchmod(2): never through a name someone swapped for a link);
    by *path* where the OS has no fchmod (Windows: only the read-only bit anyway)."""
    if os.chmod in os.supports_fd:
        os.chmod(fd, mode)
    else:
        os.chmod(path, mode)


def _keep_owner(fd: int, info: os.stat_result) -> None:
    """Root replacing another user's file gives the new file that user's owner, as writing in place would."""
    if _POSIX and os.geteuid() == 0 and (info.st_uid, info.st_gid) != (0, 0):
        try:
            os.fchown(fd, info.st_uid, info.st_gid)
        except OSError:
            pass


def _umask() -> int:
    mask = os.umask(0o022)  # (the only way to read it; set back at once)
    os.umask(mask)
    return mask
