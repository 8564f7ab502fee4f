"""Run one PowerShell query as SYSTEM, from an elevated softrt, through a one-off scheduled task (platform layer).

The WindowsIoT CSP's SetRTCores is read through the MDM Bridge WMI Provider, which answers only to
LocalSystem (Microsoft, "Using PowerShell scripting with the WMI Bridge Provider": "run as SYSTEM",
e.g. ``psexec.exe -s``). A softrt started as SYSTEM, though, keeps its history and state in SYSTEM's
profile, where the user's ``softrt history`` never looks (issue 34). ``softrt check --as-system``
therefore runs only that query as SYSTEM: an Administrator may register a task that runs as
S-1-5-18 (Task Scheduler schema, ``Principal/UserId``; ``schtasks /create /xml``), start it
(``schtasks /run``), read what it wrote, and delete it (``schtasks /delete``), whatever happens.
Everything else, and every file softrt keeps, stays the user's.

The query is handed over as ``-EncodedCommand`` (base64 of UTF-16LE, powershell.exe's documented
form), so no quoting can break it; its output and errors go to files in a private directory of the
caller's, which SYSTEM can write. Windows PowerShell 5.1's ``>`` writes UTF-16 (Out-File's default).
"""

from __future__ import annotations

import base64
import secrets
import shutil
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from xml.sax.saxutils import escape

from .wincmd import DEFAULT_TIMEOUT_S, NOT_FOUND_RC, POWERSHELL, TIMEOUT_RC, CmdResult, Runner, decode, oem_codec

LOCAL_SYSTEM_SID = "S-1-5-18"  # well-known SID of LocalSystem ("Well-known SIDs", Microsoft)
SCHTASKS = "schtasks.exe"
POLL_S = 0.25

TASK_XML = """<?xml version="1.0" encoding="UTF-16"?>
<Task version="1.2" xmlns="http://schemas.microsoft.com/windows/2004/02/mit/task">
  <RegistrationInfo><Description>softrt check --as-system: one query, deleted after it ran</Description></RegistrationInfo>
  <Principals><Principal id="System"><UserId>{sid}</UserId><RunLevel>HighestAvailable</RunLevel></Principal></Principals>
  <Settings>
    <MultipleInstancesPolicy>IgnoreNew</MultipleInstancesPolicy>
    <DisallowStartIfOnBatteries>false</DisallowStartIfOnBatteries>
    <StopIfGoingOnBatteries>false</StopIfGoingOnBatteries>
    <ExecutionTimeLimit>PT{limit_s}S</ExecutionTimeLimit>
    <Enabled>true</Enabled>
  </Settings>
  <Actions Context="System"><Exec><Command>{command}</Command><Arguments>{arguments}</Arguments></Exec></Actions>
</Task>
"""


def wrapped(script: str, folder: Path) -> str:
    """*script* with its output, errors and success written to files in *folder* (read back by the caller)."""
    out, err, done = (str(folder / name).replace("'", "''") for name in ("out.txt", "err.txt", "done.txt"))
    return (
        f"& {{ {script} }} > '{out}' 2> '{err}'; "
        f"Set-Content -LiteralPath '{done}' -Value ([int](-not $?)) -Encoding ASCII"
    )


def task_xml(script: str, folder: Path, limit_s: float) -> str:
    """The task definition: PowerShell running *script* (wrapped) as LocalSystem, stopped after *limit_s*."""
    encoded = base64.b64encode(wrapped(script, folder).encode("utf-16-le")).decode("ascii")
    arguments = f"-NoProfile -NonInteractive -ExecutionPolicy Bypass -EncodedCommand {encoded}"
    return TASK_XML.format(
        sid=LOCAL_SYSTEM_SID, limit_s=max(1, int(limit_s)), command=POWERSHELL, arguments=escape(arguments)
    )


def _text(path: Path) -> str:
    """A file PowerShell wrote: UTF-16 with its BOM (5.1's ``>``), else UTF-8."""
    try:
        raw = path.read_bytes()
    except OSError:
        return ""
    if raw[:2] in (b"\xff\xfe", b"\xfe\xff"):
        return raw.decode("utf-16", errors="replace")
    return raw.decode("utf-8-sig", errors="replace")


def _failed(argv: Sequence[str], step: CmdResult) -> CmdResult:
    said = (step.err or step.out).strip().splitlines()
    why = said[-1] if said else f"exit status {step.rc}"
    return CmdResult(tuple(argv), step.rc or 1, "", f"as SYSTEM: {' '.join(step.argv[:2])} failed: {why}")


def run_to_files(argv: Sequence[str], timeout_s: float = DEFAULT_TIMEOUT_S) -> CmdResult:
    """:func:`softrt.platform.windows.wincmd.run`, with the output in files rather than pipes: a program schtasks
    starts may keep its standard handles, and a pipe held open blocks its reader for ever (measured under
    Wine: the desktop process, explorer.exe, started by the first program that needs it, inherits them, and
    ``softrt check --as-system`` hung in subprocess's read of schtasks' output)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        try:
            done = subprocess.run(
                list(argv), stdin=subprocess.DEVNULL, stdout=out, stderr=err, timeout=timeout_s, check=False
            )
        except subprocess.TimeoutExpired:
            return CmdResult(tuple(argv), TIMEOUT_RC, "", f"{argv[0]}: no answer within {timeout_s:g} s")
        except OSError as err_:
            return CmdResult(tuple(argv), NOT_FOUND_RC, "", f"{argv[0]}: {err_.strerror or err_}")
        oem = oem_codec()
        out.seek(0)
        err.seek(0)
        return CmdResult(tuple(argv), done.returncode, decode(argv, out.read(), oem), decode(argv, err.read(), oem))


def run_as_system(
    argv: Sequence[str], timeout_s: float = DEFAULT_TIMEOUT_S, runner: Runner = run_to_files
) -> CmdResult:
    """Run the PowerShell command *argv* (:func:`softrt.platform.windows.wincmd.powershell`) as LocalSystem; never raise.

    Needs an elevated caller (registering a task for SYSTEM does). *runner* runs schtasks (the tests'
    fake machine); the result reads like :func:`softrt.platform.windows.wincmd.run`'s, with the step that failed
    in ``err``. The task is deleted and the private folder removed whatever happens.
    """
    if list(argv[:1]) != [POWERSHELL] or list(argv[-2:-1]) != ["-Command"]:
        return CmdResult(tuple(argv), 2, "", "as SYSTEM: only a PowerShell -Command query can be run")
    folder = Path(tempfile.mkdtemp(prefix="softrt-as-system-"))
    name = f"softrt-as-system-{secrets.token_hex(4)}"
    try:
        xml = folder / "task.xml"
        xml.write_text(task_xml(argv[-1], folder, timeout_s), encoding="utf-16")  # (with its BOM, as schtasks wants)
        create = runner([SCHTASKS, "/create", "/tn", name, "/xml", str(xml), "/f"], DEFAULT_TIMEOUT_S)
        if not create.ok:
            return _failed(argv, create)
        try:
            started = runner([SCHTASKS, "/run", "/tn", name], DEFAULT_TIMEOUT_S)
            if not started.ok:
                return _failed(argv, started)
            deadline = time.monotonic() + timeout_s
            while not (folder / "done.txt").exists():
                if time.monotonic() >= deadline:
                    return CmdResult(
                        tuple(argv),
                        TIMEOUT_RC,
                        "",
                        f"as SYSTEM: no answer within {timeout_s:g} s (the task did not finish)",
                    )
                time.sleep(POLL_S)
            time.sleep(POLL_S)  # Set-Content has created the file; let it close it
            rc = _text(folder / "done.txt").strip()
            return CmdResult(
                tuple(argv), int(rc) if rc.isdigit() else 1, _text(folder / "out.txt"), _text(folder / "err.txt")
            )
        finally:
            runner([SCHTASKS, "/delete", "/tn", name, "/f"], DEFAULT_TIMEOUT_S)
    except OSError as err:
        return CmdResult(tuple(argv), 1, "", f"as SYSTEM: {err.strerror or err}")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


__all__ = ["LOCAL_SYSTEM_SID", "run_as_system", "run_to_files", "task_xml", "wrapped"]
