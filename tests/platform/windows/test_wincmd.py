"""The captured-output runner (softrt.platform.windows.wincmd): a capture directory is user input (``--root``)."""

from __future__ import annotations

import json
import os
import sys

import pytest

from softrt.errors import ConfigError
from softrt.platform.windows.wincmd import INDEX, NOT_FOUND_RC, CapturedRunner

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


@pytest.mark.parametrize(
    "entry,words",
    [
        ({"out": "missing.txt", "rc": 0}, "unreadable"),  # the index names a file the capture lacks
        ({"out": "../outside.txt", "rc": 0}, "not a file name"),
        ({"out": "qc.txt", "rc": "0"}, "bad capture entry"),
        ("qc.txt", "bad capture entry"),
    ],
)
def test_a_bad_entry_reads_as_a_command_that_could_not_run(tmp_path, entry, words):
    (tmp_path.parent / "outside.txt").write_text("START_TYPE : 4 DISABLED\n")
    (tmp_path / "qc.txt").write_text("START_TYPE : 4 DISABLED\n")
    res = _capture(tmp_path, {"sc.exe qc SysMain": entry})(ARGV)
    assert res.rc == NOT_FOUND_RC and not res.out and words in res.err


def test_an_output_that_is_not_utf8_is_read(tmp_path):
    (tmp_path / "qc.txt").write_bytes(b"START_TYPE : 4 DISABLED \xe9\n")  # a code-page byte
    res = _capture(tmp_path, {"sc.exe qc SysMain": {"out": "qc.txt"}})(ARGV)
    assert res.ok and "DISABLED" in res.out


# --- running the tools: exit status, encodings ------------------------------------------------------------


def _tool(tmp_path, monkeypatch, name: str, body: str) -> None:
    """A program *name* on PATH (a shell script standing in for a Windows tool's output bytes)."""
    path = tmp_path / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")


@pytest.mark.skipif(sys.platform == "win32", reason="stands in for the tools with shell scripts")
def test_console_tools_are_decoded_from_the_oem_code_page(tmp_path, monkeypatch):
    """reg, sc and powercfg write the OEM code page to a pipe: cp850's 0x84 is "ä", not cp1252's "„"."""
    from softrt.platform.windows import wincmd

    _tool(tmp_path, monkeypatch, "sc.exe", "printf 'Dienst l\\204uft\\n'; exit 5\n")
    monkeypatch.setattr(wincmd, "oem_codec", lambda: "cp850")
    res = wincmd.run(["sc.exe", "qc", "SysMain"])
    assert res.rc == 5 and res.out == "Dienst läuft\n"


@pytest.mark.skipif(sys.platform == "win32", reason="stands in for PowerShell with a shell script")
def test_powershell_is_asked_for_utf8_and_read_as_utf8(tmp_path, monkeypatch):
    from softrt.platform.windows import wincmd

    _tool(
        tmp_path,
        monkeypatch,
        "powershell.exe",
        'printf "%s" "$4" > "$0.args"; printf \'\\357\\273\\277[{"Name":"Ethernet \\303\\244"}]\'\n',
    )
    res = wincmd.run(wincmd.powershell("Get-NetAdapterRss | ConvertTo-Json"))
    assert res.ok and res.out == '[{"Name":"Ethernet ä"}]'  # UTF-8, byte-order mark dropped
    script = (tmp_path / "powershell.exe.args").read_text()
    assert script == wincmd.UTF8_OUTPUT + "Get-NetAdapterRss | ConvertTo-Json"
    assert res.argv == tuple(wincmd.powershell("Get-NetAdapterRss | ConvertTo-Json"))  # the capture key stays


def test_a_missing_tool_and_a_silent_one_are_told_apart(tmp_path, monkeypatch):
    from softrt.audit.windows.facts import said
    from softrt.platform.windows import wincmd

    missing = wincmd.run(["no-such-tool.exe", "/qh"])
    assert missing.rc == NOT_FOUND_RC and said(missing).startswith("no-such-tool.exe: not found")
    assert said(wincmd.CmdResult(("powershell.exe",), 0, "")) == "powershell.exe printed nothing"
    assert said(wincmd.CmdResult(("reg.exe",), 1, "", "ERROR: no key\n")) == "exit status 1: ERROR: no key"
