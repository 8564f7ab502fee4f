"""run_as_system: one PowerShell query as SYSTEM through a one-off scheduled task, against a task scheduler
that does what Windows' does with the task it is given (decodes its -EncodedCommand and writes the files the
wrapped script names), so the whole exchange runs here; under Wine, tests/platform/windows/test_windows_live.py."""

from __future__ import annotations

import base64
import re
import xml.etree.ElementTree as ET
from pathlib import Path

from softrt.audit.windows import facts as F
from softrt.audit.windows.runner import run_checks
from softrt.cpus import CpuSet
from softrt.platform.windows.wincmd import CmdResult
from softrt.platform.windows.winsystem import LOCAL_SYSTEM_SID, run_as_system

from ...audit.windows.captures import Captures

NS = {"t": "http://schemas.microsoft.com/windows/2004/02/mit/task"}


class TaskScheduler:
    """schtasks.exe /create /xml, /run, /delete; /run carries out the task's script as SYSTEM would:
    *answer* gives what the query prints, *errors* what it writes to its error stream."""

    def __init__(self, answer: str = "", errors: str = "", fail: str | None = None, finish: bool = True) -> None:
        self.answer, self.errors, self.fail, self.finish = answer, errors, fail, finish
        self.tasks: dict[str, ET.Element] = {}
        self.calls: list[list[str]] = []
        self.script = ""

    def __call__(self, argv, timeout_s=30.0) -> CmdResult:
        argv = list(argv)
        self.calls.append(argv)
        verb, name = argv[1], argv[3]
        if self.fail == verb:
            return CmdResult(tuple(argv), 1, "", "ERROR: The requested operation requires elevation.")
        if verb == "/create":
            self.tasks[name] = ET.fromstring(Path(argv[5]).read_text(encoding="utf-16"))
        elif verb == "/run":
            task = self.tasks[name]
            assert task.find("t:Principals/t:Principal/t:UserId", NS).text == LOCAL_SYSTEM_SID
            args = task.find("t:Actions/t:Exec/t:Arguments", NS).text.split()
            self.script = base64.b64decode(args[args.index("-EncodedCommand") + 1]).decode("utf-16-le")
            if self.finish:
                out, err, done = re.findall(r"'([^']+)'", self.script)[-3:]
                Path(out).write_text(self.answer, encoding="utf-16")  # Windows PowerShell 5.1's > writes UTF-16
                Path(err).write_text(self.errors, encoding="utf-16")
                Path(done).write_text("1" if self.errors else "0", encoding="ascii")
        elif verb == "/delete":
            self.tasks.pop(name)
        return CmdResult(tuple(argv), 0, "SUCCESS")


def test_the_query_runs_as_system_and_the_task_is_deleted():
    sched = TaskScheduler(answer='[{"SetRTCores": 4}]\r\n')
    res = run_as_system(F.CSP, 5.0, runner=sched)
    assert res.ok and res.out.strip() == '[{"SetRTCores": 4}]' and res.err == ""
    assert [c[1] for c in sched.calls] == ["/create", "/run", "/delete"] and not sched.tasks
    assert sched.script.startswith("& { ConvertTo-Json -InputObject @(Get-CimInstance -Namespace root\\cimv2\\mdm")
    assert not any(Path(c[5]).parent.exists() for c in sched.calls if c[1] == "/create")  # its folder removed


def test_a_refused_task_or_one_that_never_ends_is_one_line_and_the_task_is_still_deleted():
    sched = TaskScheduler(fail="/run")
    res = run_as_system(F.CSP, 5.0, runner=sched)
    assert res.rc == 1 and res.err == (
        "as SYSTEM: schtasks.exe /run failed: ERROR: The requested operation requires elevation."
    )
    assert [c[1] for c in sched.calls] == ["/create", "/run", "/delete"] and not sched.tasks
    sched = TaskScheduler(finish=False)
    res = run_as_system(F.CSP, 0.5, runner=sched)
    assert res.rc == 124 and "no answer within 0.5 s" in res.err and not sched.tasks
    res = run_as_system(["reg.exe", "query", "HKLM"], 1.0, runner=sched)
    assert res.rc == 2 and "only a PowerShell -Command query" in res.err


def test_check_as_system_reads_the_csp_only_as_system(tmp_path):
    """The other queries still go to the caller's runner: the user's state never moves."""
    good = Captures.copy("good", tmp_path / "good")
    sched = TaskScheduler(answer='[\r\n    {\r\n        "SetRTCores":  4\r\n    }\r\n]\r\n')
    report = run_checks(
        CpuSet(range(10, 14)),
        str(good),
        sample_s=0,
        as_system=True,
        system_runner=lambda argv, t: run_as_system(argv, 5.0, runner=sched),
    )
    csp = next(f for f in report.findings if f.id == "cores.csp")
    assert csp.status.value == "ok" and csp.summary.startswith("SetRTCores=4: CPUs 10-13 are real-time")
    assert [c[1] for c in sched.calls] == ["/create", "/run", "/delete"]
    sched = TaskScheduler(fail="/create")
    report = run_checks(
        CpuSet(range(10, 14)),
        str(good),
        sample_s=0,
        as_system=True,
        system_runner=lambda argv, t: run_as_system(argv, 5.0, runner=sched),
    )
    csp = next(f for f in report.findings if f.id == "cores.csp")
    assert csp.unreadable and csp.summary.startswith("could not be read as SYSTEM: schtasks.exe /create failed")
    assert csp.reader == F.SYSTEM


def test_a_quote_in_the_folder_cannot_end_the_scripts_strings():
    from softrt.platform.windows.winsystem import wrapped

    assert wrapped("Get-Date", Path("/t/it's")) == (
        "& { Get-Date } > '/t/it''s/out.txt' 2> '/t/it''s/err.txt'; "
        "Set-Content -LiteralPath '/t/it''s/done.txt' "
        "-Value ([int](-not $?)) -Encoding ASCII"
    )


def test_schtasks_output_is_read_from_files_so_a_process_it_leaves_behind_cannot_hang_softrt():
    """Under Wine schtasks started explorer.exe, which inherited its pipes: a pipe reader then waits for ever."""
    import os
    import signal
    import time

    from softrt.platform.windows.winsystem import run_to_files

    t0 = time.monotonic()
    res = run_to_files(["sh", "-c", "sleep 30 & echo $!; echo said >&2"], 20.0)
    took = time.monotonic() - t0
    os.kill(int(res.out.strip()), signal.SIGKILL)  # the process it left behind, holding its output
    assert res.ok and res.err == "said\n" and took < 15  # (with pipes: 30 s, the leftover's life)
    assert run_to_files(["/nonexistent/schtasks.exe"], 5.0).rc == 127
