"""store.validate: bounded JSON, summary field checks, printable() and safe_name(); Hypothesis fuzz of the
summary reader (read_summary, History.add_run and the history listing) with hostile summary.json files."""

from __future__ import annotations

import io
import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rich.console import Console

from softrt.errors import ConfigError, SoftRTError
from softrt.report.synthetic import write_synthetic_run
from softrt.store.history import History
from softrt.store.rundir import read_summary
from softrt.store.validate import (INT64_MAX, MAX_JSON_DEPTH, check_summary, is_safe_name, load_json, parse_json,
                                   printable, safe_name)

FUZZ = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                         HealthCheck.too_slow])

#: Any JSON value, including what json.dumps writes but RFC 8259 forbids (NaN, Infinity) and integers
#: far beyond 64 bits.
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(10**40), max_value=10**40) | st.floats()
    | st.text(max_size=12) | st.sampled_from(["\x1b[2J\x1b[31m", "[/x]", "../../etc", "a/b", "\u202eevil"]),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12)


def _one_line(err: BaseException) -> None:
    assert isinstance(err, SoftRTError), repr(err)
    assert "\n" not in str(err) and "\x1b" not in str(err)


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


@pytest.mark.parametrize("raw,match", [
    ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
    ("[" * (MAX_JSON_DEPTH + 1) + "]" * (MAX_JSON_DEPTH + 1), "nested too deeply"),
    ('{"cycles": NaN}', "not valid JSON"), ('{"cycles": Infinity}', "not valid JSON"),
    ('{"cycles": 1e999}', "not a finite number"), ('{"cycles": ' + "9" * 30 + "}", "out of range"),
    ('{"cycles": ' + "9" * 5000 + "}", "not valid JSON"), (b"\xff\xfe\x00", "not valid JSON"),
], ids=["deep", "depth-limit", "nan", "infinity", "1e999", "int-30-digits", "int-5000-digits", "binary"])
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


@pytest.mark.parametrize("field,value,match", [
    ("config", [], "config must be an object"), ("host", "x", "host must be an object"),
    ("cycles", 10**18, None), ("cycles", -1, "cannot be negative"), ("cycles", True, "whole number"),
    ("cycles", 1.5, "whole number"), ("run_id", "../x", "run_id"), ("run_id", None, "run_id"),
    ("misses", {"missed_updates": "3"}, "misses.missed_updates"), ("period_us", {"max": [1]}, "period_us.max"),
    ("mode", "fast", "mode"), ("notes", "x", "notes"), ("tuning", {"applied": [1]}, "tuning.applied"),
    ("threads", {"0": {}}, "threads"),
])
def test_check_summary_types(field, value, match):
    base = {"schema": "softrt.summary/1", "run_id": "r1", "config": {}, "host": {"hostname": "pc\x1b[2J"}}
    doc = {**base, field: value}
    if match is None:
        assert check_summary(doc, "s.json")[field] == value
        return
    with pytest.raises(ConfigError, match=match) as info:
        check_summary(doc, "s.json")
    _one_line(info.value)


def test_check_summary_makes_every_string_printable():
    doc = check_summary({"run_id": "r1", "scenario": "\x1b]0;title\x07x", "host": {"hostname": "a\x1b[2Jb"},
                         "notes": ["n\x9bm"]}, "s.json")
    assert doc["scenario"] == "?]0;title?x" and doc["host"]["hostname"] == "a?[2Jb" and doc["notes"] == ["n?m"]


# -- fuzz: hostile summary.json files through read_summary and History.add_run --------------------------
@pytest.fixture(scope="module")
def good_summary(tmp_path_factory) -> dict:
    run = write_synthetic_run(tmp_path_factory.mktemp("runs"), cycles=300, misses=[(100, 2)])
    return json.loads((run / "summary.json").read_text())


_FIELDS = ["run_id", "scenario", "source", "status", "mode", "started_at", "partial_reason", "config", "host",
           "tuning", "cycles", "records_missing", "period_us", "latency_us", "misses", "ring", "board", "motion",
           "notes", "threads", "loads", "config.period_ns", "config.motion", "host.hostname", "misses.missed_updates",
           "period_us.max", "tuning.applied", "tuning.system_changes", "ring.overflows", "schema"]


def _set(doc: dict, dotted: str, value) -> None:
    *parents, last = dotted.split(".")
    for key in parents:
        if not isinstance(doc.get(key), dict):
            doc[key] = {}
        doc = doc[key]
    doc[last] = value


def _tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


@FUZZ
@given(mutations=st.lists(st.tuples(st.sampled_from(_FIELDS), JSON_VALUES), min_size=1, max_size=3))
def test_fuzz_summary_reader(good_summary, mutations):
    """Any summary.json: added to the history and listed with printable text, or one ConfigError line;
    nothing is written but the history database."""
    doc = json.loads(json.dumps(good_summary))
    for field, value in mutations:
        _set(doc, field, value)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        run = tmp / "run"
        run.mkdir()
        (run / "summary.json").write_text(json.dumps(doc))  # json.dumps writes NaN and huge integers as given
        before = _tree(tmp)
        history = History(tmp / "db" / "history.sqlite")
        try:
            read_summary(run)
            run_id = history.add_run(run)
        except Exception as err:  # noqa: BLE001 - the property: only softrt's own one-line errors
            _one_line(err)
            assert _tree(tmp) - before <= {"db", "db/history.sqlite"}
            return
        record = history.get(run_id)
        for text in (record.run_id, record.host, record.scenario, record.status, record.mode):
            assert text is None or printable(text) == text
        from softrt.cli.history import history_table

        out = io.StringIO()
        Console(file=out, width=100).print(history_table(history.list_runs()))
        assert "\x1b" not in out.getvalue()
        assert _tree(tmp) - before <= {"db", "db/history.sqlite"}


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
