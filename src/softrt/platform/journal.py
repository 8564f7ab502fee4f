"""One journal for every system setting softrt changes, run-scoped or by ``softrt tune`` (platform layer).

A journal is JSON lines: a header, then one entry per change, each appended and fsync'd *before*
the change is made, so a change interrupted half-way (Ctrl-C, SIGKILL, power loss after the
fsync) can still be undone exactly. A last line cut short by the interruption is ignored: its
change was never made. ``session/changes.py`` keeps one per run (``<state_dir>/restore/<pid>.jsonl``),
``audit/tune`` one per applied tune (``<state_dir>/tune-state.jsonl``).

A journal is read back as root, so it is treated as untrusted input:

* every file softrt creates here is opened ``O_NOFOLLOW | O_EXCL | O_CLOEXEC``, mode 0600, in a
  directory :func:`.owned.secure_dir` accepts (not a symlink, owned by this user, 0700 when created,
  on a way no other user can change);
* every entry passes :func:`check_entry` when it is written *and* when it is read; its kernel
  file target and value are :mod:`.linux.writable`'s allow-list, so a journal naming anything else
  was not written by softrt and nothing in it is acted on;
* :func:`restore_file` verifies by reading back, byte for byte; what cannot be restored is given
  back with the command that restores it by hand, and :func:`set_aside` moves that journal to
  ``failed/`` with the reason, so it is reported once and never blocks a later command.
"""

from __future__ import annotations

import json
import os
import re
import socket
import stat
import sys
import time
from collections.abc import Callable
from pathlib import Path

from ..errors import ConfigError
from ..schema.doc import Doc, opt
from .kfiles import read_raw, read_text
from .linux import writable
from .owned import secure_dir  # (re-exported: journals live in such a directory)

VERSION = 1
FILE, AFFINITY, SERVICE = "file", "affinity", "service"
#: The keys each kind of entry must have.
REQUIRED = {FILE: {"target", "before", "restore"}, AFFINITY: {"target", "tid", "before"}, SERVICE: {"target", "before"}}
MAX_JOURNAL_BYTES = 4 << 20  # a tune of every IRQ, thread and state of a large machine fits many times
MAX_TEXT_CHARS = 4096
_UNIT = re.compile(r"[A-Za-z0-9@_.:-]{1,200}\.(service|timer)")
# Windows has no O_NOFOLLOW or O_CLOEXEC (its handles are not inherited unless asked) and no
# POSIX owner or mode bits: there the per-user profile directory's ACL keeps the journal private.
_POSIX = sys.platform != "win32"
_NOFOLLOW_CLOEXEC = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW_CLOEXEC

Writer = Callable[[Path, str], None]


class JournalError(ConfigError):
    """A journal that softrt did not write, or that is cut or damaged: nothing in it is acted on."""


class Outcome(Doc):
    """What happened to one change or one restore (an outcome of ``softrt tune --json``)."""

    target: str
    status: str  # applied | skipped | failed | restored | unchanged | gone | mismatch | kept
    detail: str = ""
    fix: str | None = opt()  # how to do it by hand, when softrt could not


def boot_id(root: str | os.PathLike[str] = "/") -> str | None:
    """Return this boot's random id (proc(5) /proc/sys/kernel/random/boot_id): a journal from another boot is void."""
    return read_text(root, "/proc/sys/kernel/random/boot_id", fallback=None)


def create_private(path: Path, text: str) -> None:
    """Create *path* mode 0600 holding *text*, fsync'd; O_EXCL | O_NOFOLLOW: an existing name or a link is never opened."""
    fd = os.open(path, _CREATE, 0o600)
    try:
        os.write(fd, text.encode())
        os.fsync(fd)
    finally:
        os.close(fd)


class Journal:
    """An append-only journal; every entry is checked and reaches the disk before the caller goes on."""

    def __init__(self, path: Path, fmt: str, root: str, **header) -> None:
        """Create the journal *path* (O_EXCL: an existing one raises FileExistsError) and write its header."""
        secure_dir(path.parent)
        self.path = path
        self.root = os.path.realpath(str(root))
        self._fd = os.open(path, _CREATE | os.O_APPEND, 0o600)
        self._write(
            {
                "format": fmt,
                "version": VERSION,
                "created": time.time(),
                "host": socket.gethostname(),
                "pid": os.getpid(),
                **header,
                "root": self.root,
            }
        )

    def append(self, entry: dict) -> None:
        """Check *entry* (a hostile or malformed one is never written), then write it and fsync.

        Raises:
            ConfigError: the entry names a file or value softrt does not write.
        """
        check_entry(entry, self.root)
        self._write(entry)

    def _write(self, record: dict) -> None:
        os.write(self._fd, (json.dumps(record, sort_keys=True) + "\n").encode())
        os.fsync(self._fd)

    def close(self) -> None:
        """Close the file (it stays: it is what a restore reads)."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def check_entry(entry: object, root: str) -> None:
    """Raise ConfigError unless *entry* is one softrt could have written for *root*.

    A file entry names an allow-listed kernel file and a value it takes (:func:`writable.check`);
    an affinity entry a thread and a CPU list; a service entry a systemd unit and "active".
    """
    if not isinstance(entry, dict) or not isinstance(entry.get("kind"), str):
        raise ConfigError("not an entry")
    from .windows import winsettings  # the Windows settings' allow-list (imported here: one separate hook)

    if entry["kind"] in winsettings.KINDS:
        return winsettings.check_entry(entry)
    needed = REQUIRED.get(entry["kind"])
    if needed is None:
        raise ConfigError(f"unknown entry kind {entry['kind'][:20]!r}")
    if not needed <= entry.keys():
        raise ConfigError(f"a {entry['kind']} entry without {', '.join(sorted(needed - entry.keys()))}")
    target, before = entry["target"], entry["before"]
    if not isinstance(before, str) or len(before) > MAX_TEXT_CHARS:
        raise ConfigError("its previous value is not text")
    if entry["kind"] == FILE:
        writable.check(root, target, entry["restore"])
        if not isinstance(entry.get("after", ""), str):
            raise ConfigError(f"{target}: its new value is not text")
    elif entry["kind"] == AFFINITY:
        tid = entry["tid"]
        if not (
            isinstance(target, str)
            and target.isascii()
            and target.isdigit()
            and len(target) <= 10
            and type(tid) is int
            and 0 < tid < 2**31
            and writable.is_cpulist(before)
        ):
            raise ConfigError("an affinity entry must name a process, a thread and a CPU list")
    elif not (isinstance(target, str) and _UNIT.fullmatch(target) and before == "active"):
        raise ConfigError("a service entry must name an active systemd .service or .timer")


def read_own(path: Path, what: str) -> bytes:
    """Return the bytes of *path*, a regular file of this user's of at most MAX_JOURNAL_BYTES (O_NOFOLLOW).

    Raises:
        FileNotFoundError: there is none.
        JournalError: a symlink, another user's file, not a regular file, or too large.
    """
    try:
        fd = os.open(path, os.O_RDONLY | _NOFOLLOW_CLOEXEC)
    except FileNotFoundError:
        raise
    except OSError as err:
        raise JournalError(
            f"cannot read the {what} {path}: {err.strerror}", hint="delete it if it is a symlink"
        ) from None
    try:
        info = os.fstat(fd)
        foreign = _POSIX and info.st_uid != os.geteuid()
        if not stat.S_ISREG(info.st_mode) or foreign or info.st_size > MAX_JOURNAL_BYTES:
            raise JournalError(
                f"the {what} {path} is not a regular file of this user's under {MAX_JOURNAL_BYTES >> 20} MiB",
                hint="delete it if you do not know where it came from",
            )
        return os.read(fd, MAX_JOURNAL_BYTES + 1)
    finally:
        os.close(fd)


def load(path: Path, fmt: str, what: str, root: str | None = None) -> tuple[dict, list[dict]]:
    """Read the journal *path*; return (header, entries) in the order they were written.

    *what* names it in messages ("tune state"). With *root*, the journal must have been written
    for that root. Raises FileNotFoundError when there is none.

    Raises:
        JournalError: not a regular file of this user's, too large, cut or damaged, foreign, or
            an entry softrt would never write (nothing in it is acted on).
    """
    hint = "restore the values it names by hand, then delete it"
    raw = read_own(path, what)
    lines = raw.decode("utf-8", errors="replace").split("\n")
    records = []
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except (ValueError, RecursionError):
            if i == len(lines) - 1:  # no newline yet: cut short while being written; its change never ran
                continue
            raise JournalError(f"the {what} {path} is corrupt (line {i + 1})", hint=hint) from None
    header = records[0] if records else {}
    if not isinstance(header, dict) or header.get("format") != fmt:
        raise JournalError(f"{path} is not a softrt {what} file", hint="delete it if it is stray")
    if header.get("version") != VERSION:
        raise JournalError(
            f"{path} has {what} format version {str(header.get('version'))[:20]}, this softrt reads {VERSION}",
            hint=hint,
        )
    saved_root = header.get("root")
    if not isinstance(saved_root, str) or not os.path.isabs(saved_root) or "\0" in saved_root:
        raise JournalError(f"the {what} {path} is corrupt (no root)", hint=hint)
    if root is not None and os.path.realpath(saved_root) != os.path.realpath(str(root)):
        raise JournalError(f"{path} was saved for root {saved_root[:200]!r}, not {os.path.realpath(str(root))!r}")
    if (
        not isinstance(header.get("boot_id"), (str, type(None)))
        or type(header.get("pid", 0)) is not int
        or not isinstance(header.get("identity"), (str, type(None)))
    ):
        raise JournalError(f"the {what} {path} is corrupt (header)", hint=hint)
    entries = records[1:]
    for i, entry in enumerate(entries, start=2):
        try:
            check_entry(entry, saved_root)
        except ConfigError as err:
            raise JournalError(f"the {what} {path} is corrupt or forged (record {i}: {err.msg})", hint=hint) from None
    return header, entries


def set_aside(path: Path, reason: str) -> Path:
    """Move the journal *path* to ``failed/`` next to it, with a ``.reason`` file; return where it went."""
    failed = secure_dir(path.parent / "failed")
    stamp = time.strftime("%Y%m%dT%H%M%S")
    dest = failed / f"{path.name}.{stamp}"
    n = 1
    while os.path.lexists(dest):
        dest, n = failed / f"{path.name}.{stamp}.{n}", n + 1
    os.rename(path, dest)
    create_private(dest.with_name(dest.name + ".reason"), reason + "\n")
    return dest


def restore_file(
    root: str, entry: dict, writer: Writer = writable.write_line, *, only_if_after: bool = False
) -> Outcome:
    """Write a file entry's previous value back and read it again; return what happened.

    With *only_if_after* the value is restored only while the file still holds the value the
    change wrote: one that someone else changed since (a tune applied during a run) is kept.
    """
    target, before = entry["target"], entry["before"]
    fix = writable.manual_fix(target, entry["restore"])
    try:
        path = writable.check(root, target, entry["restore"])
    except ConfigError as err:
        return Outcome(target=target, status="failed", detail=err.msg)
    if not os.path.lexists(path):
        return Outcome(target=target, status="gone", detail="no longer exists (the IRQ or CPU went away)")
    try:
        now = read_raw(path)
        if now == before:
            # Holds its value from before: the write was refused (no root), a kill came between the
            # journal entry and the write, or someone set it back. Nothing to write, nothing restored.
            return Outcome(target=target, status="unchanged", detail=before.strip())
        if only_if_after and now.strip() != str(entry.get("after", "")).strip():
            return Outcome(
                target=target, status="kept", detail=f"now {now.strip()!r}, set by someone else since; left as it is"
            )
        writer(path, entry["restore"])
        readback = read_raw(path)
    except OSError as err:
        return Outcome(
            target=target,
            status="failed",
            detail=f"the kernel refused {entry['restore']!r}: {err.strerror or err}",
            fix=fix,
        )
    if readback != before:
        return Outcome(
            target=target, status="mismatch", detail=f"reads {readback.strip()!r}, saved {before.strip()!r}", fix=fix
        )
    return Outcome(target=target, status="restored", detail=before.strip())
