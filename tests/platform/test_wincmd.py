"""The captured-output runner (softrt.platform.wincmd): a capture directory is user input (``--root``)."""

from __future__ import annotations

import json

import pytest

from softrt.errors import ConfigError
from softrt.platform.wincmd import INDEX, NOT_FOUND_RC, CapturedRunner

ARGV = ["sc.exe", "qc", "SysMain"]


def _capture(tmp_path, index) -> CapturedRunner:
    (tmp_path / INDEX).write_text(index if isinstance(index, str) else json.dumps(index))
    return CapturedRunner(tmp_path)


def test_a_captured_output_is_read(tmp_path):
    (tmp_path / "qc.txt").write_text("START_TYPE : 4 DISABLED\n")
    res = _capture(tmp_path, {"sc.exe qc SysMain": {"out": "qc.txt", "rc": 0}})(ARGV)
    assert res.ok and "DISABLED" in res.out


@pytest.mark.parametrize("index", ["{", "[]", '"text"'])
def test_a_corrupt_index_is_one_clear_error(tmp_path, index):
    with pytest.raises(ConfigError, match=INDEX):
        _capture(tmp_path, index)


@pytest.mark.parametrize("entry,words", [
    ({"out": "missing.txt", "rc": 0}, "unreadable"),  # the index names a file the capture lacks
    ({"out": "../outside.txt", "rc": 0}, "not a file name"),
    ({"out": "qc.txt", "rc": "0"}, "bad capture entry"),
    ("qc.txt", "bad capture entry"),
])
def test_a_bad_entry_reads_as_a_command_that_could_not_run(tmp_path, entry, words):
    (tmp_path.parent / "outside.txt").write_text("START_TYPE : 4 DISABLED\n")
    (tmp_path / "qc.txt").write_text("START_TYPE : 4 DISABLED\n")
    res = _capture(tmp_path, {"sc.exe qc SysMain": entry})(ARGV)
    assert res.rc == NOT_FOUND_RC and not res.out and words in res.err


def test_an_output_that_is_not_utf8_is_read(tmp_path):
    (tmp_path / "qc.txt").write_bytes(b"START_TYPE : 4 DISABLED \xe9\n")  # a code-page byte
    res = _capture(tmp_path, {"sc.exe qc SysMain": {"out": "qc.txt"}})(ARGV)
    assert res.ok and "DISABLED" in res.out
