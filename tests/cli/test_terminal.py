"""Nothing a command shows can drive the terminal (issue 32): every C0 and C1 control, and CSI, OSC and
DCS sequences, in a run directory's name, an argument, a host name or an error message, reaches the
output as a visible ``?`` (cli.render.emit, cli.render.one_line), for every command with ``--json`` off."""

from __future__ import annotations

import ast
import io
import json
import os
import re
from pathlib import Path

import pytest
from rich.console import Console

from softrt.cli.render import clean, emit, render_summary
from softrt.cli.watch import render_thread
from softrt.schema.summary import RunSummary

from ..synthetic import write_synthetic_run

#: Every C0 control but NUL (no path holds one), DEL and every C1 control, then the sequences that a
#: terminal acts on: CSI (colour, cursor), OSC (title; 52 writes the clipboard), DCS, in 7 and 8 bits.
CONTROLS = "".join(chr(c) for c in (*range(1, 0x20), 0x7F, *range(0x80, 0xA0)))
SEQUENCES = (
    "\x1b[31m",
    "\x1b]0;PWNED\x1b\\",
    "\x1b]52;c;cHduZWQ=\x07",
    "\x1bP1$r0m\x1b\\",
    "\x9b2J",
    "\x9d0;PWNED\x9c",
    "\x90q\x9c",
    "\x1b[2J\x1b[H",
)
HOSTILE = "x" + "".join(SEQUENCES) + CONTROLS.replace("\n", "")


def _dirname(text: str) -> str:
    return text.replace("/", "?")  # (a file name holds anything but / and NUL)


def assert_clean(text: str, where: str = "") -> None:
    bad = sorted({f"{ord(c):#04x}" for c in text if (ord(c) < 0x20 and c != "\n") or 0x7F <= ord(c) < 0xA0})
    assert not bad, f"{where}: control characters reach the terminal: {bad}\n{text!r}"


@pytest.fixture
def hostile_run(tmp_path):
    """A synthetic run whose directory is named HOSTILE (as one copied from another PC may be)."""
    run = write_synthetic_run(tmp_path / "runs", cycles=1_000, seed=5)
    target = run.parent / _dirname("r" + HOSTILE)
    os.rename(run, target)
    return target


def test_the_cleaner_leaves_no_control_and_keeps_line_breaks():
    out = clean("a\nb" + HOSTILE)
    assert_clean(out, "clean")
    assert out.startswith("a\nbx?[31m?]0;PWNED?\\") and out.count("\n") == 1


def test_every_command_shows_a_hostile_run_directory_cleanly(run_cli, home, hostile_run, tmp_path):
    runs = str(hostile_run.parent)
    out_dir = tmp_path / _dirname("out" + HOSTILE)
    out_dir.mkdir()
    for args in (
        ["show", str(hostile_run)],
        ["history", "add", runs],
        ["history"],
        ["history", "--host", HOSTILE],
        ["report", str(hostile_run), "-o", str(out_dir)],
    ):
        code, out, err = run_cli(*args)
        assert code in (0, 1) or (args[0] == "report" and "is a directory" in err), (args, err)
        assert_clean(out + err, " ".join(args[:2]))
    assert "Run stored in" in run_cli("show", str(hostile_run))[1]


@pytest.mark.parametrize(
    "args",
    [
        ["show", HOSTILE],  # not a run: the error quotes the argument
        ["report", HOSTILE],  # an unknown run id
        ["report", "last", "-o", "/no/such/" + _dirname(HOSTILE)],
        [_dirname(HOSTILE)],  # click's own error: no such command
        ["history", "--limit", HOSTILE],  # click's own error: not an integer
        ["import", "/no/" + _dirname(HOSTILE)],
        ["run", "--duration", HOSTILE],
    ],
    ids=["show", "report-id", "report-o", "command", "option", "import", "run"],
)
def test_error_messages_are_one_clean_line(run_cli, home, args):
    code, out, err = run_cli(*args)
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert_clean(out + err, args[0])


def _summary(tmp_path) -> RunSummary:
    run = write_synthetic_run(tmp_path / "s", cycles=500, seed=6)
    doc = json.loads((run / "summary.json").read_text())
    doc["watch"] = {"thread": {"tid": 42, "pid": 42, "comm": "servo" + HOSTILE}, "waits": "timer"}
    doc["host"]["nodename"] = HOSTILE
    return RunSummary.read(doc, run)


@pytest.mark.parametrize("render", [render_summary, render_thread], ids=["run", "watch"])
def test_run_and_watch_print_run_stored_in_cleanly(tmp_path, render):
    """``softrt run``'s and ``softrt watch``'s last line, "Run stored in {path}", through the emit they print with."""
    buf = io.StringIO()
    emit(Console(file=buf, width=100), render(_summary(tmp_path), str(tmp_path / _dirname(HOSTILE))))
    assert "Run stored in" in buf.getvalue()
    assert_clean(buf.getvalue(), render.__name__)


def test_a_styled_terminal_gets_only_richs_own_sequences(tmp_path):
    """On a terminal rich adds its colours (SGR): those are the only escape sequences left."""
    buf = io.StringIO()
    emit(
        Console(file=buf, width=100, force_terminal=True, color_system="standard"),
        f"[bold]softrt[/]: {HOSTILE}",
        markup=True,
    )
    text = buf.getvalue()
    assert "PWNED" in text and "\x1b[1m" in text  # rich's bold
    assert_clean(re.sub("\x1b\\[[0-9;]*m", "", text), "styled")


CLI = Path(__file__).resolve().parents[2] / "src" / "softrt" / "cli"


def test_the_cli_prints_only_through_emit():
    """No ``.print(`` and no ``click.echo`` of text but in render.emit and the one-line _echo (else a new
    line of output could skip the cleaning)."""
    bad = []
    for path in sorted(CLI.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
                continue
            name, owner = node.func.attr, ast.unparse(node.func.value)
            where = f"{path.name}:{node.lineno}"
            if name == "print" and where not in _EMITTERS:
                bad.append(where)
            elif name == "echo" and owner == "click":
                arg = node.args[0] if node.args else None
                cleaned = isinstance(arg, ast.Call) and ast.unparse(arg.func) in ("one_line", "printable", "json.dumps")
                if not cleaned:
                    bad.append(where)
    assert not bad, bad


_EMITTERS = {
    f"render.py:{i + 1}"
    for i, line in enumerate((CLI / "render.py").read_text().splitlines())
    if "con.print(*(cleaned(" in line
}


def test_a_huge_figure_is_shown_in_scientific_form_with_the_run_id(run_cli, home, tmp_path):
    """A summary's ``period_us.max = 1e308`` made ``softrt history`` one 309-digit number and no run id.

    Such a figure is now refused by the reader (past int64 ns: tests/store/test_readers_fuzz.py);
    the largest accepted figures (9e15 µs) are shown in scientific form, never as 16 digits."""
    run = write_synthetic_run(tmp_path / "big", cycles=500, seed=7)
    doc = json.loads((run / "summary.json").read_text())
    doc["period_us"]["max"], doc["latency_us"]["max"], doc["process_us"]["mean"] = 9e15, -9e15, 8.5e15
    (run / "summary.json").write_text(json.dumps(doc))
    assert run_cli("history", "add", str(run))[0] == 0
    for args in (["history"], ["show", "last"]):
        code, out, err = run_cli(*args)
        assert code == 0 and "9.00e+15" in out and not re.search(r"[0-9,]{16}", out), out
    assert doc["run_id"][:15] in run_cli("history")[1]


def test_a_hostile_scenario_file_is_one_clean_line(run_cli, home, tmp_path):
    """Its path and its values (a name, a description) are quoted in the error."""
    scenario = tmp_path / (_dirname(HOSTILE) + ".toml")
    scenario.write_text('name = "x\\u001b]0;PWNED\\u0007"\ndescription = "\\u009b31m"\n', encoding="utf-8")
    for args in (["compare", str(scenario)], ["compare", str(tmp_path / "missing" / scenario.name)]):
        code, out, err = run_cli(*args)
        assert code == 2 and len(err.strip().splitlines()) == 1, err
        assert_clean(out + err, "compare")
