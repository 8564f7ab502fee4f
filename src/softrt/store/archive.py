"""The lab archive: each run folder copied once, immutable, to ``rig=<id>/date=<YYYY-MM-DD>/<run id>/`` (store layer).

``--archive PATH`` (or ``SOFTRT_ARCHIVE``) is a directory the lab shares (an NFS or SMB mount). The
layout is Hive partitioning (``key=value`` directories), which DuckDB reads with
``read_parquet('…/rig=*/date=*/*/samples.parquet', hive_partitioning = true)`` (DuckDB docs,
"Hive Partitioning"); what the Phoronix lab manager and rteval's successors kept: an index plus
immutable result files.

A copy is never written in place: the folder is copied to a hidden temporary name beside its final
one, every file and directory fsync(2)ed, then renamed (rename(2) of a directory is atomic, and
fails when the final name is already a non-empty directory: then another rig's push or an earlier
one won, and its copy is kept). A copy left by a softrt that was killed is removed by the next copy
of the same run from the same host, once its process is gone. A run already archived is never
rewritten: the archive keeps what it got first.
"""

from __future__ import annotations

import errno
import os
import secrets
import shutil
import socket
from datetime import datetime, timezone
from pathlib import Path

from ..errors import ConfigError, SoftRTError
from ..platform.rig import rig_id
from ..schema.text import is_safe_name, safe_name
from .dbtarget import is_url
from .rundir import SUMMARY

ARCHIVE_ENV = "SOFTRT_ARCHIVE"
TMP_SUFFIX = ".tmp"
UNKNOWN_RIG = "unknown"


class ArchiveUnreachable(SoftRTError):
    """The archive directory cannot be written now (an unmounted share, a full disk, a lost server)."""


def archive_root(path: str | os.PathLike[str] | None) -> Path | None:
    """The archive directory *path* names (None: ``$SOFTRT_ARCHIVE``, else no archive); bad input refused."""
    if path is None or not str(path).strip():
        path = os.environ.get(ARCHIVE_ENV) or None
        if path is None:
            return None
    text = str(path).strip()
    if is_url(text):
        raise ConfigError(
            f"softrt writes its archive to a directory, not to {text.split('://')[0]}://",
            hint="mount the share or bucket (NFS, SMB, s3fs or rclone mount) and give its path; "
            "DuckDB reads s3:// itself (README, A lab of many machines)",
        )
    return Path(text).expanduser().absolute()


def archive_path(root: Path, run_id: str, started_at: str | None, rig: str) -> Path:
    """Where the run goes: ``root/rig=<rig>/date=<YYYY-MM-DD, UTC>/<run_id>``."""
    if not is_safe_name(run_id):
        raise ConfigError(
            f"the run id {safe_name(run_id)!r} cannot name a folder of the archive",
            hint="a run id is letters, digits, '.', '_' and '-' (softrt's own always are)",
        )
    day = _day(started_at)
    return root / f"rig={safe_name(rig or UNKNOWN_RIG)}" / f"date={day}" / run_id


def _day(started_at: str | None) -> str:
    try:
        when = datetime.fromisoformat(str(started_at).replace("Z", "+00:00"))
    except ValueError:
        when = datetime.now(timezone.utc)  # a summary without a start time: the day it was archived
    if when.tzinfo is not None:
        when = when.astimezone(timezone.utc)
    return when.strftime("%Y-%m-%d")


def archive_run(run_dir: Path, root: Path, run_id: str, started_at: str | None, rig: str | None = None) -> Path:
    """Copy *run_dir* into the archive under *root* once; return the archived folder.

    Raises ArchiveUnreachable when the archive cannot be written (the run stays where it is).
    """
    final = archive_path(root, run_id, started_at, rig if rig is not None else rig_id())
    if (final / SUMMARY).is_file():
        return final  # archived before (by this rig's last push, or the run's own end): never rewritten
    try:
        final.parent.mkdir(parents=True, exist_ok=True)
        _remove_stale(final)
        tmp = final.parent / f".{run_id}.{_host()}.{os.getpid()}.{secrets.token_hex(4)}{TMP_SUFFIX}"
        try:
            _copy_tree(Path(run_dir), tmp)
            _fsync_dir(tmp)
            try:
                os.rename(tmp, final)
            except OSError as err:
                if err.errno not in (errno.EEXIST, errno.ENOTEMPTY) or not (final / SUMMARY).is_file():
                    raise
                shutil.rmtree(tmp, ignore_errors=True)  # another push archived it first: keep that one
            _fsync_dir(final.parent)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    except OSError as err:
        raise ArchiveUnreachable(
            f"cannot write the archive {root}: {err.strerror or err}",
            hint="check the share is mounted and writable; the run stays on this rig and softrt push sends it later",
        ) from None
    return final


def _copy_tree(src: Path, dst: Path) -> None:
    """Copy the regular files and directories of *src* (no link is followed), each file fsync'ed."""
    os.mkdir(dst, 0o755)
    with os.scandir(src) as entries:
        for entry in entries:
            target = dst / entry.name
            if entry.is_dir(follow_symlinks=False):
                _copy_tree(Path(entry.path), target)
                _fsync_dir(target)
            elif entry.is_file(follow_symlinks=False):
                with open(entry.path, "rb") as fin, open(target, "xb") as fout:
                    shutil.copyfileobj(fin, fout, 1 << 20)
                    fout.flush()
                    os.fsync(fout.fileno())
                os.chmod(target, 0o444)  # the archive's files are read-only: a copy is never edited


def _fsync_dir(path: Path) -> None:
    """fsync(2) a directory, so the names in it are on the disk (a no-op where it cannot be opened)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return  # Windows: directories cannot be opened so; NTFS journals the rename
    try:
        os.fsync(fd)
    except OSError:
        pass  # some network file systems refuse fsync on a directory; the rename is theirs to keep
    finally:
        os.close(fd)


def _host() -> str:
    return safe_name(socket.gethostname().split(".")[0], fallback="host", max_len=40)


def _remove_stale(final: Path) -> None:
    """Remove this host's temporary copies of the same run whose softrt is gone (killed mid-copy)."""
    prefix = f".{final.name}.{_host()}."
    for entry in final.parent.iterdir():
        name = entry.name
        if not (name.startswith(prefix) and name.endswith(TMP_SUFFIX)):
            continue
        pid = name[len(prefix) :].split(".", 1)[0]
        if pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(entry, ignore_errors=True)


def _alive(pid: int) -> bool:
    import psutil  # (os.kill(pid, 0) would end the process on Windows)

    return pid == os.getpid() or psutil.pid_exists(pid)
