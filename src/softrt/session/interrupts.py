"""Ctrl-C, SIGTERM and SIGHUP as a request to stop, never a death in the middle of a cleanup (session layer).

Python's default SIGINT handler raises KeyboardInterrupt wherever the main thread happens to
be (Python docs, ``signal``: "Execution of Python signal handlers"): in a ``finally`` that is
restoring a kernel setting, in the write of summary.json, in the history write. SIGTERM (what
``kill``, ``timeout``, systemd and ``docker stop`` send) and SIGHUP (a closed terminal or ssh
session) are worse: their default action ends the process at once (signal(7), "Standard
signals": Term), losing everything since the last checkpoint and leaving the system changes to
the next command. While :func:`deferred` is active, each of the three only counts; the run polls
:func:`requested` and stops cleanly, and the command finishes storing and printing what it has.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from ..platform import STOP_SIGNALS

_NAMES = {signal.SIGINT: "Ctrl-C"}

_depth = 0
_count = 0
_first: int | None = None
_previous: dict[int, object] = {}
_then_ignore = False


def _handler(signum, frame) -> None:
    global _count, _first
    _count += 1
    if _first is None:
        _first = signum


def requested() -> int:
    """How many stop signals arrived since the outermost :func:`deferred` began (0: none)."""
    return _count


def reason() -> str:
    """Why the run stopped, in words: "interrupted by Ctrl-C" (or SIGTERM, SIGHUP)."""
    return f"interrupted by {_NAMES.get(_first) or signal.Signals(_first or signal.SIGINT).name}"


def exit_status() -> int:
    """The shell's status for the first stop signal, 128 + its number (130 for Ctrl-C)."""
    return 128 + int(_first or signal.SIGINT)


@contextmanager
def deferred(then_ignore: bool = False) -> Iterator[None]:
    """Count SIGINT, SIGTERM and SIGHUP instead of dying or raising, for the time of the block (nests).

    Only the main thread can change signal handlers; elsewhere this does nothing. With
    *then_ignore* (the command line, which exits right after) an outermost block that saw a
    signal leaves the three ignored: the process is only exiting, and one more signal from the
    same burst must not turn that into a traceback. Otherwise the previous handlers are restored.
    """
    global _depth, _count, _first, _then_ignore
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    if _depth == 0:
        _count, _first = 0, None
        _then_ignore = then_ignore
        for sig in STOP_SIGNALS:
            _previous[sig] = signal.signal(sig, _handler)
    _depth += 1
    try:
        yield
    finally:
        _depth -= 1
        if _depth == 0:
            for sig in STOP_SIGNALS:
                previous = _previous.pop(sig)
                signal.signal(sig, signal.SIG_IGN if _count and _then_ignore else previous)
