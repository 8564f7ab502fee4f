"""What the Hypothesis fuzz suites share: their settings under the CI and the deep profile, any JSON
value, and the property every reader must keep: accept the input or raise softrt's one-line error,
within bounded time and memory.

Each fuzz test names its example count for CI (the whole fuzz suite stays within ~8 s of the
3-minute suite); ``pytest --hypothesis-profile deep`` (registered in tests/conftest.py) runs
:data:`DEEP_FACTOR` times as many, for release checks.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from typing import TypeVar

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from softrt.errors import SoftRTError

try:  # Unix: the process's peak resident size (ru_maxrss, KiB on Linux); Windows runs without the memory bound
    import resource
except ImportError:  # pragma: no cover - Windows
    resource = None  # type: ignore[assignment]

T = TypeVar("T")

#: How many times a fuzz test's CI count the deep profile runs.
DEEP_FACTOR = 50
#: The bounds every reader keeps on one hostile input: generous for this VM's stalls, far below what
#: reading /dev/zero, a FIFO, or a file that claims a billion rows would take.
MAX_SECONDS = 20.0
MAX_GROWTH_MB = 400


def fuzz(examples: int) -> settings:
    """The settings of a fuzz test: *examples* examples in CI, DEEP_FACTOR times as many under
    ``--hypothesis-profile deep``; no deadline (the VM stalls for milliseconds; :func:`reads`
    bounds the time instead)."""
    deep = settings.get_current_profile_name() == "deep"
    return settings(
        max_examples=examples * DEEP_FACTOR if deep else examples,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )


FUZZ = fuzz(100)

#: Any JSON value, including what json.dumps writes but RFC 8259 forbids (NaN, Infinity) and integers
#: far beyond 64 bits.
JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**40), max_value=10**40)
    | st.floats()
    | st.text(max_size=12)
    | st.sampled_from(["\x1b[2J\x1b[31m", "[/x]", "../../etc", "a/b", "\u202eevil"]),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12,
)


def one_line(err: BaseException) -> None:
    assert isinstance(err, SoftRTError), repr(err)
    assert "\n" not in str(err) and "\x1b" not in str(err)


@contextlib.contextmanager
def bounded(seconds: float = MAX_SECONDS, growth_mb: float = MAX_GROWTH_MB) -> Iterator[None]:
    """Fail when the block takes longer than *seconds* or raises the process's peak memory by more
    than *growth_mb* (a reader that allocates what a small file claims, not what it holds)."""
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss if resource else 0
    start = time.monotonic()
    yield
    took = time.monotonic() - start
    assert took < seconds, f"the reader took {took:.1f} s"
    if resource:
        grew_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak_kb) / 1024
        assert grew_mb < growth_mb, f"the reader's peak memory grew by {grew_mb:.0f} MB"


def reads(call: Callable[[], T]) -> T | SoftRTError:
    """Run the reader *call* within :func:`bounded`: its result, or the one-line SoftRTError it
    raised; any other exception (a traceback) fails the test."""
    with bounded():
        try:
            return call()
        except Exception as err:  # noqa: BLE001 - the property: only softrt's one-line errors
            one_line(err)
            return err  # type: ignore[return-value]


def one_error_line(code: int, out: str, err: str) -> str:
    """The command line's side of the property: exit status 2 and one ``softrt: error:`` line on
    stderr, no traceback and no escape byte; returns the line. (A ``softrt:`` notice may come first:
    each command sweeps what killed softrt processes left, e.g. another test's ring.)"""
    assert code == 2, (code, out[-400:], err[-400:])
    lines = err.strip().splitlines()
    assert lines and lines[-1].startswith("softrt: error: "), err[-800:]
    assert all(line.startswith("softrt: ") and not line.startswith("softrt: error: ") for line in lines[:-1]), err
    assert "Traceback" not in err and "\x1b" not in err
    return lines[-1]
