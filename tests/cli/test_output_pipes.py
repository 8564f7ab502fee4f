"""Output in a pipe or a log is whole (issue 31, item 3) and never fails to encode (issue 34, item 1).

A command's piped output (no ``COLUMNS``) must hold exactly the words of its output on a real
terminal (a pty) at 200 columns, in the same units, with no colour codes, no line cut with "…" and
no table row wrapped; the verdict comes first and once. The stored fixtures serve ``show``,
``history`` and ``check``; ``run``, ``compare`` and ``watch`` are short real runs, the first and the
last compared with ``show`` of what they stored (the same renderer), compare with its own printer.
"""

from __future__ import annotations

import collections
import contextlib
import fcntl
import os
import pty
import re
import shutil
import struct
import subprocess
import sys
import termios
import threading
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent.parent / "fixtures"
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
BOX = re.compile("[\u2500-\u257f]")
WIDE = 200


def _env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "NO_COLOR", "FORCE_COLOR", "PYTHONIOENCODING")}
    env.update(extra)
    return env


def piped(*args: str, **env) -> subprocess.CompletedProcess:
    """``python -m softrt ARGS`` with stdout and stderr pipes and no COLUMNS."""
    return subprocess.run(
        [sys.executable, "-m", "softrt", *args], capture_output=True, text=True, env=_env(**env), timeout=120
    )


def _read_all(fd: int, into: bytearray) -> None:
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # EIO: the other side closed (pty(7))
            return
        if not chunk:
            return
        into.extend(chunk)


@contextlib.contextmanager
def terminal(monkeypatch, columns: int = WIDE):
    """sys.stdout on a real terminal (a pty) of *columns* columns, COLUMNS set: yields a list that
    holds, after the block, what was written (colour codes left out)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    attrs = termios.tcgetattr(slave)
    attrs[1] &= ~termios.ONLCR  # "\n" as written, not "\r\n"
    termios.tcsetattr(slave, termios.TCSANOW, attrs)
    got, text = bytearray(), []
    reader = threading.Thread(target=_read_all, args=(master, got))
    reader.start()
    try:
        with monkeypatch.context() as m, open(slave, "w", encoding="utf-8") as tty:
            m.setenv("COLUMNS", str(columns))
            m.setattr(sys, "stdout", tty)
            yield text
            tty.flush()
    finally:
        reader.join(30)
        os.close(master)
    text.append(ANSI.sub("", got.decode()))


def cli(*args: str) -> int:
    """The command line in this process (stdout as the caller arranged it); its exit status."""
    from softrt.cli import main

    with pytest.raises(SystemExit) as exit_info:
        main(list(args))
    return exit_info.value.code


@pytest.fixture
def both(monkeypatch, capsys):
    """``both(*args)``: a command's output in a pipe (no COLUMNS) and on a terminal of 200 columns."""

    def run(*args: str) -> tuple[str, str]:
        monkeypatch.delenv("COLUMNS", raising=False)
        assert cli(*args) in (0, 1)
        pipe_out = capsys.readouterr().out
        with terminal(monkeypatch) as wide:
            assert cli(*args) in (0, 1)
        return pipe_out, wide[0]

    return run


def words(text: str) -> collections.Counter:
    """The words of *text*, table rules left out: equal when nothing was cut and nothing added."""
    return collections.Counter(BOX.sub(" ", text).split())


def assert_whole(pipe_out: str, wide_out: str) -> None:
    assert "\x1b" not in pipe_out  # no colours in a pipe
    assert words(pipe_out) == words(wide_out), (words(pipe_out) - words(wide_out), words(wide_out) - words(pipe_out))
    first = pipe_out.lstrip("\n").splitlines()[0].rstrip()
    assert first == wide_out.lstrip("\n").splitlines()[0].rstrip()  # the verdict (or title) first
    assert pipe_out.count(first) == 1


@pytest.fixture
def stored_run(tmp_path) -> Path:
    run = tmp_path / "runs" / "20261130-071502-vm-e760"
    run.mkdir(parents=True)
    shutil.copy(FIXTURES / "summaries" / "run.json", run / "summary.json")
    return run


def test_show_and_history_in_a_pipe_hold_what_a_wide_terminal_shows(stored_run, both, run_cli):
    pipe_out, wide_out = both("show", str(stored_run))
    assert pipe_out.startswith(("MEETS", "FAILS")) and "Culprits" in pipe_out
    assert_whole(pipe_out, wide_out)
    assert run_cli("history", "add", str(stored_run))[0] == 0
    pipe_out, wide_out = both("history")
    assert "…" not in pipe_out
    assert_whole(pipe_out, wide_out)


def test_check_in_a_pipe_holds_every_finding_whole(both):
    pipe_out, wide_out = both("check", "--root", str(FIXTURES / "sysfs" / "debian12-vm-2cpu"), "--sample", "0")
    assert_whole(pipe_out, wide_out)
    # A finding's fix is one line, however long (at 80 columns one was cut into five).
    fix = next(line for line in pipe_out.splitlines() if "fix: kernel parameter isolcpus=" in line)
    assert "cpuset.cpus.partition" in fix


def test_columns_and_colours_are_honoured_in_a_pipe(stored_run, monkeypatch, run_cli):
    monkeypatch.setenv("COLUMNS", "100")
    narrow = run_cli("show", str(stored_run))[1]
    assert max(len(line) for line in narrow.splitlines()) <= 100
    monkeypatch.delenv("COLUMNS")
    plain = run_cli("show", str(stored_run))[1]
    assert all(line == line.rstrip() for line in plain.splitlines())  # no cell padding at the ends of lines
    for env, args, coloured in (
        ({}, ("--color", "always"), True),
        ({"FORCE_COLOR": "1"}, (), True),
        ({"NO_COLOR": "1", "FORCE_COLOR": "1"}, (), False),
        ({"FORCE_COLOR": "1"}, ("--color", "never"), False),
    ):
        with monkeypatch.context() as m:
            for k, v in env.items():
                m.setenv(k, v)
            code, out, _ = run_cli(*args, "show", str(stored_run))
        assert code == 0 and ("\x1b[" in out) == coloured, (env, args)
        assert [line.rstrip() for line in ANSI.sub("", out).splitlines()] == plain.splitlines()
    run_cli("--color", "auto", "--help")  # (the choice is the process's: back to the default)


@pytest.mark.parametrize(
    "env,encoding",
    [
        ({"PYTHONIOENCODING": "cp1252"}, "cp1252"),
        ({"PYTHONIOENCODING": "cp932"}, "cp932"),
        ({"LC_ALL": "C", "PYTHONCOERCECLOCALE": "0", "PYTHONUTF8": "0"}, "ascii"),
        ({"LC_ALL": "C"}, "utf-8"),
    ],
)
def test_no_encoding_makes_a_command_fail(stored_run, env, encoding):
    """cp1252 lacks "≤", cp932 and ASCII lack "µ": written "<=" and "us", never a traceback (LC_ALL=C:
    Python coerces the C locale to C.UTF-8, PEP 538, unless told not to)."""
    proc = subprocess.run(
        [sys.executable, "-m", "softrt", "show", str(stored_run)], capture_output=True, env=_env(**env), timeout=120
    )
    assert proc.returncode == 0 and b"Traceback" not in proc.stderr, proc.stderr[-2000:]
    text = proc.stdout.decode(encoding)
    unit = "µs" if encoding in ("utf-8", "cp1252") else "us"
    assert f"every period {'≤' if encoding == 'utf-8' else '<='} 270.0 {unit}" in text
    assert "Culprits" in text and "Run stored in" in text
    if encoding == "cp932":  # "µ" is in click's help too, which crashed every command's --help
        proc = subprocess.run(
            [sys.executable, "-m", "softrt", "run", "--help"], capture_output=True, env=_env(**env), timeout=120
        )
        assert proc.returncode == 0 and b"Traceback" not in proc.stderr and b"250 us" in proc.stdout


@pytest.mark.rt
def test_a_run_and_a_watch_in_a_pipe_hold_what_show_prints_on_a_wide_terminal(
    tmp_path, state_dir, monkeypatch, rt_settings_restored
):
    out = piped("run", "--duration", "0.3s", "--out-dir", str(tmp_path / "runs"))
    assert out.returncode == 0, out.stderr
    [path] = (tmp_path / "runs").iterdir()
    with terminal(monkeypatch) as wide:
        cli("show", str(path))
    assert_whole(out.stdout, wide[0])
    # stderr's last line (the plain progress) says the run ended, after the tables, without the verdict's figures
    assert out.stderr.splitlines()[-1].startswith("softrt run: complete, ") and " µs" not in out.stderr.splitlines()[-1]
    sleeper = subprocess.Popen(
        [sys.executable, "-c", "import time\nprint('ready', flush=True)\nfor _ in range(4000): time.sleep(0.0005)\n"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert sleeper.stdout.readline().strip() == "ready"
        out = piped("watch", "--pid", str(sleeper.pid), "--duration", "0.5s", "--out-dir", str(tmp_path / "watch"))
    finally:
        sleeper.kill()
        sleeper.wait()
    assert out.returncode == 0, out.stderr
    [path] = (tmp_path / "watch").iterdir()
    with terminal(monkeypatch) as wide:
        cli("show", str(path))
    assert_whole(out.stdout, wide[0])


@pytest.mark.rt
def test_compare_in_a_pipe_holds_what_a_wide_terminal_shows(
    tmp_path, state_dir, rt_settings_restored, monkeypatch, run_cli
):
    from softrt.cli import compare as cli_compare

    printed = []
    real_print = cli_compare._print
    monkeypatch.setattr(cli_compare, "_print", lambda *args: (printed.append(args), real_print(*args)))
    monkeypatch.delenv("COLUMNS", raising=False)
    code, pipe_out, err = run_cli("compare", "tuned", "untuned", "--duration", "0.3s", "--out-dir", str(tmp_path))
    assert code in (0, 1) and printed, err
    with terminal(monkeypatch) as wide:
        real_print(*printed[0])  # the same comparison, on a terminal
    assert_whole(pipe_out, wide[0])
