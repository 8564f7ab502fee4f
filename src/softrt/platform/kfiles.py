"""Reading and writing kernel files under a root directory (platform layer, public).

The one home of kernel-file access for every layer above: every /proc and /sys access in softrt goes through these helpers with a ``root`` argument, so tests
feed captured trees (``tests/fixtures/sysfs/<machine>/``) instead of patching ``open`` (psutil's
``cat(fname, fallback=…)``, with the procfs root passed in rather than held in a global).
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from ..errors import PermissionDenied, SoftRTError

_MISSING = object()


def kpath(root: str | os.PathLike[str], rel: str) -> Path:
    """Join *root* and an absolute kernel path such as ``/proc/cmdline``."""
    return Path(root) / rel.lstrip("/")


def read_text(root: str | os.PathLike[str], rel: str, fallback: object = _MISSING) -> str:
    """Return the stripped text of *rel* under *root*.

    With *fallback*, a missing or unreadable file returns it instead of raising.
    """
    try:
        return kpath(root, rel).read_text(errors="replace").strip()
    except OSError as err:
        if fallback is not _MISSING:
            return fallback  # type: ignore[return-value]
        raise translate_error(err, "read", rel) from err


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
    """Return the exact text of the kernel file *path* (newline kept, for a byte-exact compare); OSError as raised."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        return os.read(fd, 1 << 16).decode("ascii", errors="surrogateescape")
    finally:
        os.close(fd)


def write_raw(path: str | os.PathLike[str], value: str) -> None:
    """Write *value* to the kernel file *path* exactly as given, in one write(2); OSError as raised.

    One write(2), as sysctl(8) and ``echo >`` do (a kernel file takes one value per write); O_TRUNC
    is a no-op on procfs/sysfs and keeps captured trees (regular files) in tests byte-exact.
    O_NOFOLLOW: a kernel file is never a symlink, so one planted in its place is refused (ELOOP).
    """
    fd = os.open(path, os.O_WRONLY | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
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
