"""store.validate: bounded JSON, printable() and safe_name(); Hypothesis fuzz of read_summary with any bytes.
(The summary's fields, and the fuzz of hostile summary.json files, are tests/schema/test_summary.py.)"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from softrt.errors import ConfigError
from softrt.schema.text import is_safe_name, printable, safe_name
from softrt.store.rundir import read_summary
from softrt.store.validate import INT64_MAX, MAX_JSON_DEPTH, load_json, parse_json

from ..fuzz import FUZZ, JSON_VALUES
from ..fuzz import one_line as _one_line


# -- helpers ------------------------------------------------------------------------------------------
def test_printable_drops_control_characters():
    assert printable("pc\x1b[31mRED\x1b[0m") == "pc?[31mRED?[0m"
    assert printable("a\tb\nc") == "a b c"
    assert printable("\u202eevil") == "?evil"  # a bidirectional override (CVE-2021-42574)
    assert printable("250 µs – ok") == "250 µs – ok"


def test_safe_name_keeps_a_path_component():
    assert safe_name("evil/../../x") == "evil_.._.._x"
    assert safe_name("../..") == "_.."
    assert safe_name("") == "unknown" and safe_name("...", fallback="host") == "host"
    assert safe_name("pc\x1b[31m") == "pc_31m"
    assert len(safe_name("x" * 500)) == 64
    assert is_safe_name("20261130-071502-pc-1a2b") and not is_safe_name("a/b") and not is_safe_name(3)


@pytest.mark.parametrize(
    "raw,match",
    [
        ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
        ("[" * (MAX_JSON_DEPTH + 1) + "]" * (MAX_JSON_DEPTH + 1), "nested too deeply"),
        ('{"cycles": NaN}', "not valid JSON"),
        ('{"cycles": Infinity}', "not valid JSON"),
        ('{"cycles": 1e999}', "not a finite number"),
        ('{"cycles": ' + "9" * 30 + "}", "out of range"),
        ('{"cycles": ' + "9" * 5000 + "}", "not valid JSON"),
        (b"\xff\xfe\x00", "not valid JSON"),
    ],
    ids=["deep", "depth-limit", "nan", "infinity", "1e999", "int-30-digits", "int-5000-digits", "binary"],
)
def test_parse_json_bounds(raw, match):
    with pytest.raises(ConfigError, match=match) as info:
        parse_json(raw, "f.json")
    _one_line(info.value)


def test_parse_json_accepts_the_limits():
    assert parse_json(f'{{"a": {INT64_MAX}, "b": {-INT64_MAX - 1}, "c": 1e308}}', "f")["a"] == INT64_MAX
    deep = "[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH
    assert parse_json(deep, "f") == json.loads(deep)


def test_load_json_refuses_a_huge_file(tmp_path):
    f = tmp_path / "big.json"
    f.write_text("[" + "0," * 600 + "0]")
    with pytest.raises(ConfigError, match="larger than"):
        load_json(f, max_bytes=1000)
    with pytest.raises(ConfigError, match="cannot read"):
        load_json(tmp_path / "missing.json")


@FUZZ
@given(raw=st.binary(max_size=200) | JSON_VALUES.map(lambda v: json.dumps(v).encode()))
def test_fuzz_summary_bytes(raw):
    """Any bytes as summary.json: one ConfigError line (never a parse traceback)."""
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "summary.json").write_bytes(raw)
        try:
            read_summary(Path(tmp))
        except Exception as err:  # noqa: BLE001
            _one_line(err)
        assert os.listdir(tmp) == ["summary.json"]


def test_read_bounded_refuses_fifos_and_devices(tmp_path):
    """A summary.json that is a FIFO or a link to /dev/zero must not block or read forever."""
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    zero = tmp_path / "zero.json"
    zero.symlink_to("/dev/zero")
    for path in (fifo, zero):
        with pytest.raises(ConfigError, match="not a regular file"):
            load_json(path)
