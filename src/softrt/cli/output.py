"""Standard output that never drops what it was given (CLI layer).

CPython's buffered stdout loses data when a signal arrives during a blocking write to a full
pipe: write(2) returns the part it wrote (signal(7): a write on a pipe interrupted after some
data was transferred "returns the number of bytes transferred"), and the BufferedWriter does not
finish the rest (seen here: 64 KiB of a 200 KiB ``--json`` summary reached the reader when one
SIGINT came while the reader was not yet reading). softrt defers Ctrl-C during a run and prints
the summary after it, so a burst of Ctrl-C hits exactly that write. After a hang-up (SIGHUP) the
terminal itself is gone: :func:`unless_gone` stops printing without a traceback. :func:`install` puts a
stream over fd 1 whose every write loops until all bytes are out (os.write retries EINTR itself,
PEP 475).
"""

from __future__ import annotations

import errno
import io
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager


class _WholeWrites(io.RawIOBase):
    """fd 1 as a raw stream whose ``write`` writes everything (or raises)."""

    def __init__(self, fd: int) -> None:
        super().__init__()
        self._fd = fd

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._fd

    def isatty(self) -> bool:
        return os.isatty(self._fd)

    def write(self, data) -> int:
        view = memoryview(data).cast("B")
        total = len(view)
        while view:
            view = view[os.write(self._fd, view):]
        return total


def install() -> None:
    """Replace the process's own stdout (not a test's capture) with one that writes whole."""
    stdout = sys.stdout
    if stdout is None or stdout is not sys.__stdout__:
        return
    try:
        fd = stdout.fileno()
    except (OSError, ValueError):
        return
    stdout.flush()
    sys.stdout = io.TextIOWrapper(_WholeWrites(fd), encoding=stdout.encoding, errors=stdout.errors,
                                  line_buffering=stdout.line_buffering, write_through=True)


@contextmanager
def unless_gone() -> Iterator[None]:
    """Print in the block; if the terminal or the reader has gone (EIO after a hang-up, SIGHUP from a
    closed terminal or ssh session, pty(7); EPIPE from a closed pipe), stop printing quietly.

    What was stored is stored either way; the command still exits with its own status, and fd 1
    and 2 go to /dev/null so that the interpreter's last flush has nowhere to fail.
    """
    try:
        yield
    except OSError as err:
        if err.errno not in (errno.EIO, errno.EPIPE):
            raise
        devnull = os.open(os.devnull, os.O_WRONLY)
        for fd in (1, 2):
            os.dup2(devnull, fd)
        os.close(devnull)
