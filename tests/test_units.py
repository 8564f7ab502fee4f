import pytest

from softrt.errors import ConfigError
from softrt.units import format_ns, parse_time_ns


@pytest.mark.parametrize("text,unit,ns", [
    ("250us", "us", 250_000), ("250", "us", 250_000), ("1.5ms", "us", 1_500_000),
    ("10s", "s", 10_000_000_000), ("10", "s", 10_000_000_000), ("2m", "s", 120_000_000_000),
    ("250µs", "us", 250_000), (" 7 ns ", "us", 7),
])
def test_parse_time(text, unit, ns):
    assert parse_time_ns(text, default_unit=unit) == ns


@pytest.mark.parametrize("text", ["", "abc", "10 parsecs", "1..2s"])
def test_parse_time_rejects(text):
    with pytest.raises(ConfigError):
        parse_time_ns(text, default_unit="s")


def test_format():
    assert format_ns(249_900) == "249.9 µs"
    assert format_ns(None) == "-"
