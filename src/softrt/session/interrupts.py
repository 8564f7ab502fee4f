"""Ctrl-C as a request to stop, never an exception in the middle of a cleanup (session layer).

Python's default SIGINT handler raises KeyboardInterrupt wherever the main thread happens to
be (Python docs, ``signal``: "Execution of Python signal handlers"): in a ``finally`` that is
restoring a kernel setting, in the write of summary.json, in the history write. A burst of
SIGINTs (Ctrl-C held down) then cuts those short. While :func:`deferred` is active, SIGINT only
counts; the run polls :func:`requested` and stops cleanly, and the command finishes storing and
printing what it has.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_depth = 0
_count = 0
_previous = None
_then_ignore = False


def _handler(signum, frame) -> None:
    global _count
    _count += 1


def requested() -> int:
    """How many SIGINTs arrived since the outermost :func:`deferred` began (0: none)."""
    return _count


@contextmanager
def deferred(then_ignore: bool = False) -> Iterator[None]:
    """Count SIGINT instead of raising KeyboardInterrupt, for the time of the block (nests).

    Only the main thread can change signal handlers; elsewhere this does nothing. With
    *then_ignore* (the command line, which exits right after) an outermost block that saw a
    SIGINT leaves SIGINT ignored: the process is only exiting, and one more Ctrl-C from the same
    burst must not turn that into a traceback. Otherwise the previous handler is restored.
    """
    global _depth, _count, _previous, _then_ignore
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    if _depth == 0:
        _count = 0
        _then_ignore = then_ignore
        _previous = signal.signal(signal.SIGINT, _handler)
    _depth += 1
    try:
        yield
    finally:
        _depth -= 1
        if _depth == 0:
            signal.signal(signal.SIGINT, signal.SIG_IGN if _count and _then_ignore else _previous)
