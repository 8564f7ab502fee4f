"""Run a Windows command, or read what it printed on a captured machine (platform layer).

Every Windows check and tune step of ``softrt check``/``softrt tune`` asks the system through
the stock tools Microsoft documents for the Soft Real-Time set-up (powercfg, sc, reg,
PowerShell's Get-NetAdapterRss/Get-CimInstance/Get-MpPreference, typeperf): one runner runs
them with a timeout. :class:`CapturedRunner` answers from a directory of outputs captured on a
real machine (or written from the commands' documented output formats), so the same checks run
on Linux in tests and with ``softrt check --root DIR``.

A capture directory holds ``commands.json``, ``{"<command line>": {"out": "file", "rc": 0}}``,
and the output files it names.

Encodings: console tools (reg, sc, powercfg, typeperf) write the OEM code page when their output
is a pipe (cp437, cp850, …: GetOEMCP), not the ANSI one Python would assume; Windows PowerShell
5.1 writes ``[Console]::OutputEncoding``, which :func:`run` sets to UTF-8 before the script runs.
Parsers read shapes and exit statuses, never translated words.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ...errors import ConfigError
from .. import IS_WINDOWS
from ..kfiles import read_bytes

INDEX = "commands.json"
DEFAULT_TIMEOUT_S = 30.0
NOT_FOUND_RC = 127  # as a POSIX shell reports a command it cannot find
TIMEOUT_RC = 124  # as timeout(1) reports one that ran out of time


@dataclass(frozen=True)
class CmdResult:
    """What one command did: its exit status and what it printed."""

    argv: tuple[str, ...]
    rc: int
    out: str
    err: str = ""

    @property
    def ok(self) -> bool:
        """True when the command exited 0."""
        return self.rc == 0


Runner = Callable[[Sequence[str], float], CmdResult]


def key(argv: Sequence[str]) -> str:
    """The command line as one string: the key of a captured output."""
    return " ".join(argv)


POWERSHELL = "powershell.exe"
#: Makes Windows PowerShell print UTF-8 (its default for a pipe is the console's OEM code page).
UTF8_OUTPUT = "[Console]::OutputEncoding = [System.Text.Encoding]::UTF8; "


def powershell(script: str) -> list[str]:
    """The argv that runs *script* in Windows PowerShell without a profile or prompts (the command line
    captures are keyed by; :func:`run` adds the UTF-8 output setting)."""
    return [POWERSHELL, "-NoProfile", "-NonInteractive", "-Command", script]


def oem_codec() -> str:
    """The OEM code page console tools write to a pipe (kernel32 GetOEMCP), as a Python codec name."""
    if not IS_WINDOWS:
        return "utf-8"
    import ctypes

    return f"cp{ctypes.WinDLL('kernel32').GetOEMCP()}"  # type: ignore[attr-defined]


def decode(argv: Sequence[str], raw: bytes, oem: str) -> str:
    """What a command printed, as text: UTF-8 for PowerShell (asked for by :func:`run`), else *oem*."""
    codec = "utf-8-sig" if argv and argv[0] == POWERSHELL else oem
    try:
        return raw.decode(codec, errors="replace")
    except LookupError:  # a code page Python has no codec for
        return raw.decode("latin-1")


def run(argv: Sequence[str], timeout_s: float = DEFAULT_TIMEOUT_S) -> CmdResult:
    """Run *argv* (no shell); return its exit status and output, never raise.

    A missing program gives exit status 127 and one that runs out of time 124, with the reason
    in ``err``, so a check can say what it could not read.
    """
    real = list(argv)
    if real[:1] == [POWERSHELL] and real[-2:-1] == ["-Command"]:
        real[-1] = UTF8_OUTPUT + real[-1]
    try:
        done = subprocess.run(real, capture_output=True, timeout=timeout_s, check=False)
    except FileNotFoundError as err:
        return CmdResult(tuple(argv), NOT_FOUND_RC, "", f"{argv[0]}: not found ({err.strerror})")
    except subprocess.TimeoutExpired:
        return CmdResult(tuple(argv), TIMEOUT_RC, "", f"{argv[0]}: no answer within {timeout_s:g} s")
    except OSError as err:
        return CmdResult(tuple(argv), NOT_FOUND_RC, "", f"{argv[0]}: {err.strerror or err}")
    oem = oem_codec()
    return CmdResult(tuple(argv), done.returncode, decode(argv, done.stdout, oem), decode(argv, done.stderr, oem))


def is_capture(directory: str | Path) -> bool:
    """True when *directory* holds captured Windows command outputs (a ``commands.json``)."""
    return (Path(directory) / INDEX).is_file()


class CapturedRunner:
    """A runner that answers from a capture directory and records every command asked of it.

    A command not in the index gets exit status 127 ("not captured"), as a missing tool would.
    """

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)
        index = self.directory / INDEX
        try:  # bounded, regular files only, never waited on (kfiles): a capture is not trusted
            self.index: dict = json.loads(read_bytes(self.directory, INDEX).decode("utf-8"))
        except (OSError, ValueError, RecursionError) as err:  # ValueError: not JSON, or not UTF-8
            raise ConfigError(
                f"cannot read the capture index {index}: {err}",
                hint=f'{INDEX} maps each command line to {{"out": FILE, "rc": N}}',
            ) from None
        if not isinstance(self.index, dict):
            raise ConfigError(
                f"{index} must be a JSON object (command line -> captured output)",
                hint=f'{INDEX} maps each command line to {{"out": FILE, "rc": N}}',
            )
        self.calls: list[str] = []

    def __call__(self, argv: Sequence[str], timeout_s: float = DEFAULT_TIMEOUT_S) -> CmdResult:
        line = key(argv)
        self.calls.append(line)
        entry = self.index.get(line)
        if entry is None:
            return CmdResult(tuple(argv), NOT_FOUND_RC, "", f"not captured: {line}")
        # A capture is bad input, not a bug: an entry or output file it lacks reads as a command
        # that could not run (a finding that says why), never as a traceback.
        rc = entry.get("rc", 0) if isinstance(entry, dict) else None
        name = entry.get("out") if isinstance(entry, dict) else None
        if not isinstance(rc, int) or isinstance(rc, bool) or not isinstance(name, (str, type(None))):
            return CmdResult(tuple(argv), NOT_FOUND_RC, "", f"bad capture entry in {INDEX} for: {line}")
        if name and Path(name).name != name:  # a file of the capture directory, nothing outside it
            return CmdResult(tuple(argv), NOT_FOUND_RC, "", f"captured output {name!r} is not a file name")
        try:
            out = read_bytes(self.directory, name).decode("utf-8", errors="replace") if name else ""
        except OSError as err:
            return CmdResult(tuple(argv), NOT_FOUND_RC, "", f"captured output {name} unreadable: {err.strerror or err}")
        err_text = entry.get("err", "")
        return CmdResult(tuple(argv), rc, out, err_text if isinstance(err_text, str) else "")


def runner_for(root: str | Path) -> Runner:
    """The runner for *root*: captured outputs when it is a capture directory, else this machine."""
    return CapturedRunner(root) if is_capture(root) else run


def is_admin() -> bool:
    """True when this process runs elevated (Administrator) on Windows (shell32 IsUserAnAdmin)."""
    if not IS_WINDOWS:
        return False
    import ctypes

    shell32 = ctypes.WinDLL("shell32")  # type: ignore[attr-defined]
    shell32.IsUserAnAdmin.argtypes = []
    shell32.IsUserAnAdmin.restype = ctypes.c_int
    return bool(shell32.IsUserAnAdmin())
