"""What the Hypothesis fuzz suites share: one settings profile, any JSON value, and the one-line
error every hostile input must end in."""

from __future__ import annotations

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from softrt.errors import SoftRTError

FUZZ = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                         HealthCheck.too_slow])

#: Any JSON value, including what json.dumps writes but RFC 8259 forbids (NaN, Infinity) and integers
#: far beyond 64 bits.
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(10**40), max_value=10**40) | st.floats()
    | st.text(max_size=12) | st.sampled_from(["\x1b[2J\x1b[31m", "[/x]", "../../etc", "a/b", "\u202eevil"]),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12)


def one_line(err: BaseException) -> None:
    assert isinstance(err, SoftRTError), repr(err)
    assert "\n" not in str(err) and "\x1b" not in str(err)
