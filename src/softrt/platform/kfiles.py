"""Reading and writing kernel files under a root directory (platform layer, public).

The one home of kernel-file access for every layer above: every /proc and /sys access in softrt goes through these helpers with a ``root`` argument, so tests
feed captured trees (``tests/fixtures/sysfs/<machine>/``) instead of patching ``open`` (psutil's
``cat(fname, fallback=…)``, with the procfs root passed in rather than held in a global).

A tree given with ``--root`` (and the files of a capture directory) is not trusted:

* every file is opened ``O_NONBLOCK`` and must be a regular file (fstat(2)), of at most
  :data:`MAX_KFILE_BYTES`: ``proc/cmdline`` linked to /dev/zero or made a FIFO (fifo(7): an open
  for reading blocks until a writer appears, without O_NONBLOCK) is an unreadable file, not a hang
  or an exhausted memory;
* a file under a root other than ``/`` is opened beneath it: its real path must lie in the tree,
  and is then opened one component at a time from the root's directory fd with ``O_NOFOLLOW``
  (openat(2); the effect of openat2(2)'s ``RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS``), so a directory
  swapped for a link between the check and the open is refused (ELOOP) instead of followed out;
* a kernel file softrt writes (:func:`write_raw`, after :mod:`.linux.writable` resolved and checked it)
  is opened the same way, with no link anywhere on its path.
"""

from __future__ import annotations

import errno
import os
import stat
import zlib
from pathlib import Path

from ..errors import PermissionDenied, SoftRTError

_MISSING = object()
#: The largest kernel or captured file softrt reads (/proc/interrupts of 8192 CPUs is ~90 MB at the
#: very most; every file softrt reads on real machines is far below).
MAX_KFILE_BYTES = 64 << 20
#: The largest kernel file that softrt reads back byte for byte (a value it wrote or restores).
MAX_RAW_BYTES = 1 << 16
_CHUNK = 1 << 16
_WALK = os.open in os.supports_dir_fd and hasattr(os, "O_PATH")  # POSIX; Windows opens by name
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)


def file_kind(mode: int) -> str:
    """What a file of st_mode *mode* is, for a message ("a directory", "a FIFO", …; inode(7))."""
    for test, kind in (
        (stat.S_ISREG, "a regular file"),
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISLNK, "a symbolic link"),
    ):
        if test(mode):
            return kind
    return "a special file"


def kpath(root: str | os.PathLike[str], rel: str) -> Path:
    """Join *root* and an absolute kernel path such as ``/proc/cmdline``."""
    return Path(root) / rel.lstrip("/")


def open_no_links(path: str | os.PathLike[str], flags: int, mode: int = 0o600) -> int:
    """Open the absolute *path* following no symbolic link on the way (ELOOP if one is there).

    Each directory is opened from the one before it with O_PATH | O_NOFOLLOW | O_DIRECTORY
    (openat(2)), so what is opened is what the path names now, even if a directory on it is
    replaced by a link after a check.
    """
    path = os.path.abspath(path)
    if not _WALK:
        return os.open(path, flags | _NOFOLLOW | _CLOEXEC, mode)
    parts = [p for p in path.split("/") if p]
    fd = os.open("/", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for name in parts[:-1]:
            try:
                nxt = os.open(name, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
            except NotADirectoryError:  # a symbolic link (O_NOFOLLOW) or a file where a directory should be
                raise OSError(errno.ELOOP, "a symbolic link or a file on the path", path) from None
            os.close(fd)
            fd = nxt
        return os.open(parts[-1] if parts else ".", flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=fd)
    finally:
        os.close(fd)


def _beneath(root: str | os.PathLike[str], rel: str) -> str:
    """The real path of *rel* under the tree *root*; OSError when it leads out of the tree."""
    base = os.path.realpath(root)
    real = os.path.realpath(os.path.join(base, rel.lstrip("/")))
    if base != os.sep and os.path.commonpath([base, real]) != base:
        raise OSError(errno.EXDEV, "a link that leads out of the tree", str(kpath(root, rel)))
    return real


def read_bytes(
    root: str | os.PathLike[str], rel: str, max_bytes: int = MAX_KFILE_BYTES, *, special_ok: bool = False
) -> bytes:
    """Return the bytes of *rel* under *root* (bounded, see the module docstring); OSError as raised.

    With *special_ok* a device or FIFO is read too (at most *max_bytes*, without waiting):
    /dev/cpu_dma_latency is a character device.
    """
    if os.path.realpath(root) == os.sep or not _WALK:
        fd = os.open(kpath(root, rel), os.O_RDONLY | _NONBLOCK | _CLOEXEC)
    else:
        fd = open_no_links(_beneath(root, rel), os.O_RDONLY | _NONBLOCK)
    try:
        info = os.fstat(fd)
        if not special_ok and not stat.S_ISREG(info.st_mode):
            raise OSError(errno.EINVAL, "not a regular file (a device, FIFO or socket)", str(kpath(root, rel)))
        if info.st_size > max_bytes:  # (procfs and sysfs give 0 or 4096: they are read and counted)
            raise OSError(errno.EFBIG, f"larger than {_size(max_bytes)}", str(kpath(root, rel)))
        chunks, total = [], 0
        while total <= max_bytes:
            try:
                chunk = os.read(fd, min(_CHUNK, max_bytes + 1 - total))
            except BlockingIOError:  # a FIFO or device with nothing to read now
                break
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if special_ok and total >= max_bytes:
                break
        if total > max_bytes:
            raise OSError(errno.EFBIG, f"larger than {_size(max_bytes)}", str(kpath(root, rel)))
        return b"".join(chunks)
    finally:
        os.close(fd)


def _size(n_bytes: int) -> str:
    return f"{n_bytes >> 20} MiB" if n_bytes >= 1 << 20 else f"{n_bytes >> 10} KiB"


def read_text(root: str | os.PathLike[str], rel: str, fallback: object = _MISSING) -> str:
    """Return the stripped text of *rel* under *root*.

    With *fallback*, a missing or unreadable file (also one that is not a regular file, or too
    large) returns it instead of raising.
    """
    try:
        return read_bytes(root, rel).decode(errors="replace").strip()
    except OSError as err:
        if fallback is not _MISSING:
            return fallback  # type: ignore[return-value]
        raise translate_error(err, "read", rel) from err


def read_gzip_text(root: str | os.PathLike[str], rel: str, max_bytes: int = MAX_KFILE_BYTES) -> str:
    """Return the text of the gzip file *rel* under *root* (/proc/config.gz), at most *max_bytes*
    decompressed (a small file may inflate a thousandfold); OSError when it cannot be read."""
    raw = read_bytes(root, rel)
    inflate = zlib.decompressobj(16 + zlib.MAX_WBITS)  # 16 +: a gzip header and trailer (zlib manual)
    try:
        out = inflate.decompress(raw, max_bytes + 1)
    except zlib.error as err:
        raise OSError(errno.EINVAL, f"not gzip data ({err})", str(kpath(root, rel))) from None
    if len(out) > max_bytes:
        raise OSError(errno.EFBIG, f"larger than {_size(max_bytes)} once decompressed", str(kpath(root, rel)))
    return out.decode(errors="replace")


def read_int(root: str | os.PathLike[str], rel: str, fallback: object = _MISSING) -> int:
    """Return the integer in *rel* under *root* (fallback as in :func:`read_text`)."""
    text = read_text(root, rel, fallback)
    if text is fallback:
        return text  # type: ignore[return-value]
    try:
        return int(str(text).split()[0])
    except (ValueError, IndexError):
        if fallback is not _MISSING:
            return fallback  # type: ignore[return-value]
        raise SoftRTError(f"{rel} does not hold a number: {text!r}") from None


def read_raw(path: str | os.PathLike[str]) -> str:
    """Return the exact text of the kernel file *path* (newline kept, for a byte-exact compare); OSError as raised.

    Opened with no link on the path (:func:`open_no_links`); a file that is not a regular one is refused.
    """
    fd = open_no_links(path, os.O_RDONLY | _NONBLOCK)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file (a device, FIFO or socket)", str(path))
        return os.read(fd, MAX_RAW_BYTES).decode("ascii", errors="surrogateescape")
    finally:
        os.close(fd)


def write_raw(path: str | os.PathLike[str], value: str) -> None:
    """Write *value* to the kernel file *path* exactly as given, in one write(2); OSError as raised.

    One write(2), as sysctl(8) and ``echo >`` do (a kernel file takes one value per write); O_TRUNC
    is a no-op on procfs/sysfs and keeps captured trees (regular files) in tests byte-exact.
    No link is followed anywhere on the path (:func:`open_no_links`): a kernel file is never a
    symlink, nor is any directory above one once resolved, so one planted there is refused
    (ELOOP), also one planted after the path was checked. A FIFO or device is never written.
    """
    fd = open_no_links(path, os.O_WRONLY | os.O_TRUNC | _NONBLOCK)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file (a device, FIFO or socket)", str(path))
        os.write(fd, value.encode())
    finally:
        os.close(fd)


def write_text(root: str | os.PathLike[str], rel: str, value: str) -> None:
    """Write *value* to the kernel file *rel* under *root* (one write, as sysctl does)."""
    try:
        write_raw(kpath(root, rel), value)
    except OSError as err:
        raise translate_error(err, "write", rel) from err


def translate_error(err: OSError, op: str, rel: str) -> SoftRTError:
    """Return the softrt error for an OSError of *op* ("read"/"write") on the kernel file *rel*, with its fix."""
    if err.errno in (errno.EACCES, errno.EPERM):
        return PermissionDenied(f"{op} {rel}", hint="run as root")
    return SoftRTError(f"cannot {op} {rel}: {err.strerror or err}")
