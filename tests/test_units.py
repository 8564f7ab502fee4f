import pytest

from softrt.errors import ConfigError
from softrt.units import format_duration_s, format_ns, parse_time_ns


@pytest.mark.parametrize(
    "text,unit,ns",
    [
        ("250us", "us", 250_000),
        ("250", "us", 250_000),
        ("1.5ms", "us", 1_500_000),
        ("10s", "s", 10_000_000_000),
        ("10", "s", 10_000_000_000),
        ("2m", "s", 120_000_000_000),
        ("250µs", "us", 250_000),
        (" 7 ns ", "us", 7),
    ],
)
def test_parse_time(text, unit, ns):
    assert parse_time_ns(text, default_unit=unit) == ns


@pytest.mark.parametrize("text", ["", "abc", "10 parsecs", "1..2s"])
def test_parse_time_rejects(text):
    with pytest.raises(ConfigError):
        parse_time_ns(text, default_unit="s")


def test_format():
    assert format_ns(249_900) == "249.9 µs"
    assert format_ns(None) == "-"


# -- bounds (issue 12, defect 9: duration = [1] in a scenario was a TypeError) ------------------------
import math  # noqa: E402

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from softrt.units import MAX_TIME_NS  # noqa: E402


@pytest.mark.parametrize(
    "value", [[1], True, None, {"s": 1}, math.nan, math.inf, -1, 10**400, "1e400s", "9" * 5000, "-5s"]
)
def test_parse_time_refuses_non_times(value):
    with pytest.raises(ConfigError):
        parse_time_ns(value, default_unit="s")


@settings(max_examples=200, deadline=None)
@given(
    st.one_of(
        st.text(max_size=30),
        st.integers(),
        st.floats(),
        st.booleans(),
        st.none(),
        st.lists(st.integers(), max_size=2),
        st.from_regex(r"\A[0-9]{0,25}\.?[0-9]{0,5}(e[-+]?[0-9]{1,4})?\s?(ns|us|µs|ms|s|m|min|h|d|x)?\Z"),
    )
)
def test_parse_time_fuzz(value):
    """Any value: integer nanoseconds from 0 to MAX_TIME_NS, or one ConfigError line."""
    try:
        ns = parse_time_ns(value, default_unit="us")
    except ConfigError as err:
        assert "\n" not in str(err)
    else:
        assert isinstance(ns, int) and 0 <= ns <= MAX_TIME_NS


@pytest.mark.parametrize(
    "seconds,text",
    [
        (None, "-"),
        (0, "0 s"),
        (45.7, "45 s"),
        (119, "119 s"),
        (120, "2 min"),
        (3599, "59 min"),
        (3600 * 3 + 5 * 60 + 59, "3 h 05 min"),
        (72 * 3600, "3 d 00 h"),
        (-3, "0 s"),
    ],
)
def test_format_duration(seconds, text):
    assert format_duration_s(seconds) == text


@pytest.mark.parametrize(
    "seconds,text", [(45.7, "45s"), (600, "10m"), (3600 * 3 + 5 * 60, "3h05m"), (72 * 3600, "3d00h")]
)
def test_format_duration_compact(seconds, text):
    assert format_duration_s(seconds, compact=True) == text


# -- every display's figures (issue 32: a summary's period_us.max = 1e308 was 309 digits in softrt history) --
from softrt.units import MAX_FIXED, format_number, format_time_ns  # noqa: E402


@pytest.mark.parametrize(
    "value,digits,kw,text",
    [
        (1234.56, 1, {}, "1,234.6"),
        (-0.04, 2, {}, "-0.04"),
        (0.4, 1, {"sign": True}, "+0.4"),
        (1234.5, 1, {"grouping": False}, "1234.5"),
        (None, 1, {}, "-"),
        (7, 0, {}, "7"),
        (1e308, 1, {}, "1.00e+308"),
        (-1e308, 1, {}, "-1.00e+308"),
        (1e12, 1, {}, "1.00e+12"),
        (999_999_999_999.9, 1, {}, "999,999,999,999.9"),
        (10**400, 1, {}, "1.00e+400"),
        (math.inf, 1, {}, "inf"),
        (-math.inf, 1, {}, "-inf"),
        (math.inf, 1, {"sign": True}, "+inf"),
        (math.nan, 1, {}, "nan"),
    ],
)
def test_format_number(value, digits, kw, text):
    assert format_number(value, digits, **kw) == text


@given(st.one_of(st.floats(), st.integers(min_value=-(10**500), max_value=10**500)), st.integers(0, 6))
@settings(max_examples=60, deadline=None)
def test_no_figure_is_ever_longer_than_a_table_cell(value, digits):
    """Whatever a reader let through, a figure fits in a table cell (20 characters with 6 decimals)."""
    for text in (
        format_number(value, digits),
        format_number(value, digits, sign=True),
        format_ns(value),
        format_duration_s(value),
        format_time_ns(value),
    ):
        assert len(text) <= 28, text
    assert MAX_FIXED < 1e13


def test_non_finite_durations_do_not_raise():
    assert format_duration_s(math.inf) == "inf" and format_ns(math.nan) == "nan µs"
    assert format_ns(-(10**400)) == "-1.00e+397 µs" and format_time_ns(math.inf) == "inf ns"
