"""Standard output that never drops what it was given, is whole in a pipe and never fails to encode (CLI layer).

CPython's buffered stdout loses data when a signal arrives during a blocking write to a full
pipe: write(2) returns the part it wrote (signal(7): a write on a pipe interrupted after some
data was transferred "returns the number of bytes transferred"), and the BufferedWriter does not
finish the rest (seen here: 64 KiB of a 200 KiB ``--json`` summary reached the reader when one
SIGINT came while the reader was not yet reading). softrt defers Ctrl-C during a run and prints
the summary after it, so a burst of Ctrl-C hits exactly that write. After a hang-up (SIGHUP) the
terminal itself is gone: :func:`unless_gone` stops printing without a traceback. :func:`install` puts a
stream over fd 1 whose every write loops until all bytes are out (os.write retries EINTR itself,
PEP 475).

Encoded for where it goes: a console writes UTF-8 (PEP 528 on Windows), a pipe or a file the
encoding Python chose for it (the locale's, Windows' ANSI code page, or ``PYTHONIOENCODING``). A
character that encoding lacks (``≤`` in cp1252, ``µ`` in cp932 or ASCII) is written as
:data:`FALLBACKS` says (``µs`` → ``us``, ``≤`` → ``<=``), else ``?``: output never raises
UnicodeEncodeError (an explicit ``PYTHONIOENCODING=enc:errors`` keeps its own errors handler).

Laid out for where it goes (:func:`make_console`): on a terminal, rich's own layout at its width
(``COLUMNS`` where set); in a pipe or a file (CI logs, ``| tee``, the journal, ``> log``), no width
to wrap or cut at: ``COLUMNS`` where set, else :data:`PIPE_WIDTH`, so every line is as long as
its content. Colours on a terminal only, unless asked: ``--color always|never`` first, then
``NO_COLOR`` (https://no-color.org), then ``FORCE_COLOR`` (https://force-color.org).
"""

from __future__ import annotations

import codecs
import errno
import io
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console

#: The width of output that is not a terminal's and has no ``COLUMNS``: no line of softrt's is
#: this long, so nothing wraps and no cell is cut with "…".
PIPE_WIDTH = 10_000
COLOR_CHOICES = ("auto", "always", "never")
_color = {"choice": "auto"}  # --color (cli.cli sets it for the command)


def set_color(choice: str) -> None:
    """``--color``: auto (colours on a terminal, unless NO_COLOR / FORCE_COLOR say otherwise), always, never."""
    _color["choice"] = choice


def _isatty(stream) -> bool:
    try:
        return stream is not None and stream.isatty()
    except (OSError, ValueError):
        return False


def wants_color(tty: bool, environ=os.environ) -> bool:
    """Colours or not: ``--color always|never`` decides; on auto, a non-empty ``NO_COLOR`` says no,
    a non-empty ``FORCE_COLOR`` yes, else colours go to a terminal only."""
    choice = _color["choice"]
    if choice != "auto":
        return choice == "always"
    if environ.get("NO_COLOR", ""):
        return False
    if environ.get("FORCE_COLOR", ""):
        return True
    return tty


def pipe_width(environ=os.environ) -> int:
    """The width of output that is not a terminal's: ``COLUMNS`` where set (a positive number), else
    :data:`PIPE_WIDTH`."""
    columns = environ.get("COLUMNS", "")
    return int(columns) if columns.isdigit() and int(columns) > 0 else PIPE_WIDTH


class _TrimmedLines:
    """A text stream that drops the spaces at the end of every line before passing the text on: in a
    pipe a table's cells are padded to their column's width, hundreds of blanks in a log line.
    Spaces at the end of one write are held until the next shows whether a line ends there."""

    def __init__(self, stream) -> None:
        self._stream, self._held = stream, ""

    def write(self, text: str) -> int:
        whole = self._held + text
        body = whole.rstrip(" ")
        self._held = whole[len(body) :]
        self._stream.write("\n".join(line.rstrip(" ") for line in body.split("\n")))
        return len(text)

    def flush(self) -> None:
        self._stream.flush()

    def __getattr__(self, name: str):  # encoding, isatty, fileno: the stream's own
        return getattr(self._stream, name)


def make_console(stderr: bool = False) -> Console:
    """The console of standard output (or of stderr: progress, warnings), as :mod:`this module's
    <softrt.cli.output>` docstring says: a terminal's layout on a terminal, whole lines elsewhere.

    Only a real terminal is one (``force_terminal`` says so either way): ``FORCE_COLOR`` brings
    colours to a pipe, never the live view or a spinner, which would write cursor moves into a log.
    """
    from rich.console import Console  # (here: ecat-sim and the worker start without rich)

    stream = sys.stderr if stderr else sys.stdout
    tty = _isatty(stream)
    color = wants_color(tty)
    # On a terminal without colours (NO_COLOR), bold and the like stay, as rich does it; elsewhere plain text.
    return Console(
        stderr=stderr,
        highlight=False,
        force_terminal=tty,
        width=None if tty else pipe_width(),
        color_system="auto" if tty else "standard" if color else None,
        no_color=not color,
        file=None if tty or color else _TrimmedLines(stream),
    )


def unbounded(console: Console) -> bool:
    """True when *console* has no real width (a pipe without ``COLUMNS``): lay tables out for their
    content, never stretched to it."""
    return console.width >= PIPE_WIDTH


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
            view = view[os.write(self._fd, view) :]
        return total


#: What a character becomes in an encoding that lacks it (ASCII, so every code page has it).
FALLBACKS = {
    "µ": "u",
    "≤": "<=",
    "≥": ">=",
    "×": "x",
    "–": "-",
    "—": "-",
    "…": "...",
    "·": "-",
    "→": "->",
    "←": "<-",
    "█": "#",
    "²": "^2",
    "³": "^3",
    "±": "+-",
    "≈": "~",
    "°": " deg",
    "’": "'",
    "‘": "'",
    "“": '"',
    "”": '"',
    "━": "-",
    "─": "-",
    "┃": "|",
    "│": "|",
    "\u00a0": " ",
}
FALLBACK_ERRORS = "softrt-fallback"


def _fallback(err: UnicodeError) -> tuple[str, int]:
    """The codecs error handler (codecs.register_error) of :data:`FALLBACKS`: box drawing becomes
    ``+``, anything else unknown ``?``."""
    if not isinstance(err, UnicodeEncodeError):
        raise err
    chunk = err.object[err.start : err.end]
    return "".join(FALLBACKS.get(ch) or ("+" if "\u2500" <= ch <= "\u257f" else "?") for ch in chunk), err.end


codecs.register_error(FALLBACK_ERRORS, _fallback)


def _errors_for(stream, environ=os.environ) -> str:
    """The errors handler for *stream*: its own for UTF-8 (every character fits) or for an explicit
    ``PYTHONIOENCODING=enc:errors``, else :data:`FALLBACK_ERRORS`."""
    if codecs.lookup(stream.encoding or "ascii").name == "utf-8" or ":" in environ.get("PYTHONIOENCODING", ""):
        return stream.errors
    return FALLBACK_ERRORS


def install() -> None:
    """Replace the process's own stdout (not a test's capture) with one that writes whole, and give
    stdout and stderr the fallback of characters their encoding lacks."""
    stderr = sys.stderr
    if stderr is not None and stderr is sys.__stderr__ and isinstance(stderr, io.TextIOWrapper):
        stderr.reconfigure(errors=_errors_for(stderr))
    stdout = sys.stdout
    if stdout is None or stdout is not sys.__stdout__:
        return
    try:
        fd = stdout.fileno()
    except (OSError, ValueError):
        return
    stdout.flush()
    sys.stdout = io.TextIOWrapper(
        _WholeWrites(fd),
        encoding=stdout.encoding,
        errors=_errors_for(stdout),
        line_buffering=stdout.line_buffering,
        write_through=True,
    )


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
