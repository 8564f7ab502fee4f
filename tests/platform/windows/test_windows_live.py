"""softrt on Windows for real: the commands a user types, under Wine with Microsoft's Windows CPython
(``scripts/ci-wine`` runs this file; elsewhere it is skipped).

What this proves is the Win32 calls, their types, the error paths and the process model (the
machine lock, the worker's kill-on-close job, the checkpoints); Wine's timers are ~1 ms grained and it
does not enforce REALTIME_PRIORITY_CLASS, so no timing is asserted. Each softrt command takes 15-30 s
to start under Wine (numpy, pyarrow and matplotlib load slowly there), so one module fixture runs the
commands once, side by side where they do not exclude each other, and the tests read its results.
"""

from __future__ import annotations

import json
import locale
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(sys.platform != "win32", reason="runs softrt on Windows (bash scripts/ci-wine)")

START_S = 120.0  # the longest a command may take to get going under Wine
#: What Python writes into a pipe here: the ANSI code page (Wine takes it from the locale: cp1252 for
#: en_US.UTF-8, cp932 for ja_JP.UTF-8). Read strictly: output in any other encoding fails the test.
CODE_PAGE = locale.getpreferredencoding(False)


_STARTING = threading.Lock()


class Softrt:
    """``python -m softrt`` with this session's data and state directories."""

    def __init__(self, base: Path) -> None:
        self.out = base / "runs"
        # No PYTHONIOENCODING: a command writes into its pipe in the ANSI code page, as a scheduled task's
        # or CI's pipe gets it (cp1252, cp932: scripts/ci-wine runs this under both), and is read so.
        env = {k: v for k, v in os.environ.items() if k.upper() != "PYTHONIOENCODING"}
        self.env = {**env, "SOFTRT_HOME": str(base / "home"), "SOFTRT_STATE_DIR": str(base / "state"), "COLUMNS": "120"}
        self.lock = base / "state" / "rt-loop.lock"

    def start(self, *args: str, cwd: Path | None = None) -> subprocess.Popen:
        # The two lanes start processes one at a time, and a start Wine failed with its
        # ERROR_INTERNAL_ERROR (1359, from CreateProcess; once in a clean-clone CI run, with both
        # lanes starting at once) is tried again: it is Wine's, before softrt runs at all.
        for attempt in range(3):
            try:
                with _STARTING:
                    return subprocess.Popen(
                        [sys.executable, "-m", "softrt", *args],
                        stdout=subprocess.PIPE,
                        stderr=subprocess.STDOUT,
                        stdin=subprocess.DEVNULL,
                        env=self.env,
                        cwd=cwd,
                        text=True,
                        encoding=CODE_PAGE,
                    )
            except OSError as err:
                if getattr(err, "winerror", None) != 1359 or attempt == 2:
                    raise
                time.sleep(1)

    def run(self, *args: str, cwd: Path | None = None) -> tuple[int, str]:
        return self.finish(self.start(*args, cwd=cwd))

    @staticmethod
    def finish(proc: subprocess.Popen, timeout_s: float = 3 * START_S) -> tuple[int, str]:
        try:
            out, _ = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:  # one command that hangs fails its own test, not every test
            proc.kill()
            out, _ = proc.communicate()
            return None, f"{out}\n(killed after {timeout_s:g} s)"
        return proc.returncode, out

    def wait_for_lock(self, proc: subprocess.Popen) -> None:
        """Until *proc* (a run) holds the machine lock: its pid written in the lock file."""
        deadline = time.monotonic() + START_S
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                if self.lock.read_text(encoding="ascii", errors="replace").strip() == str(proc.pid):
                    return
            except OSError:
                pass
            time.sleep(0.2)
        raise AssertionError(f"the run (pid {proc.pid}) never held the machine lock")


def _stored(out: str) -> str:
    """The run id from a run's last line, ``Run stored in …\\<run id>``."""
    line = next((ln for ln in reversed(out.splitlines()) if ln.startswith("Run stored in ")), "")
    return line.replace("\\", "/").rsplit("/", 1)[-1].strip() or "none"


#: The seed's scenario 3 (an SSD benchmark beside the loop), reduced: the disk load must really write
#: (issue 34: on Windows its worker died on os.pwrite and compare showed "disk: 0.0 MB/s"), and the GPU
#: load says in one line why it cannot run (no ffmpeg under Wine).
DISK_SCENARIO = 'name = "disk-beside"\nprofile = "rt"\n[[load]]\nname = "disk"\n[[load]]\nname = "gpu"\n'
DISK_MIN_MB_PER_S = 1.0  # 16 MiB written with an fsync per MiB, in 5 s: far below any disk, far above none


@pytest.fixture(scope="module")
def wine(tmp_path_factory) -> dict:
    """Every command once, in two lanes side by side; ``{name: (exit status, output)}`` and facts.

    Lane 1 holds the machine's real-time lock in turn (spin, sleep, hybrid), then reads a run back.
    Lane 2, while the spin run holds it: a second run (refused), check, tune apply and revert, a
    supervisor killed mid-run (``--profile none`` takes no lock), and the history.
    """
    s = Softrt(tmp_path_factory.mktemp("softrt-windows"))
    out = str(s.out)
    got: dict = {}
    # Long enough for the second run to start (15-30 s under Wine) while it holds the machine.
    first = s.start("run", "--duration", "40s", "--wait", "spin", "-q", "--out-dir", out)

    def lane1() -> None:
        got["spin"] = s.finish(first)
        got["sleep"] = s.run("run", "--duration", "2s", "--wait", "sleep", "-q", "--out-dir", out)
        got["hybrid"] = s.run("run", "--duration", "2s", "--wait", "hybrid", "-q", "--out-dir", out)
        rid = _stored(got["spin"][1])
        got["show"] = s.run("show", rid)
        got["report"] = s.run("report", rid, "-o", str(s.out / "report.html"))
        scenario = s.out.parent / "disk.toml"
        scenario.write_text(DISK_SCENARIO, encoding="utf-8")
        got["compare"] = s.run(
            "compare",
            str(scenario),
            "--duration",
            "3s",
            "--settle",
            "2s",
            "--load-backend",
            "builtin",
            "--json",
            "--out-dir",
            out,
        )
        got["elsewhere"] = s.out.parent / "elsewhere"  # the working directory of a run without --out-dir
        got["elsewhere"].mkdir()
        got["default_out"] = s.run("run", "--duration", "1s", "-q", cwd=got["elsewhere"])
        got["home"] = Path(s.env["SOFTRT_HOME"])

    thread = threading.Thread(target=lane1)
    s.wait_for_lock(first)
    thread.start()
    got["second"] = s.run("run", "--duration", "2s", "-q", "--out-dir", out)
    got["check"] = s.run("check", "--sample", "1", "--json")
    got["apply"] = s.run("tune", "--rt-cpus", "1", "--apply")
    got["revert"] = s.run("tune", "--revert")
    got["plan"] = s.run("tune", "--rt-cpus", "1")
    got.update(_kill_a_supervisor(s))
    got["history"] = s.run("history", "--json")
    got["runs"] = json.loads(got["history"][1]) if got["history"][0] == 0 else []
    thread.join()
    # Alone: its task's 60 s wait, and Wine's scheduler service, beside nothing else.
    got["as_system"] = s.run("check", "--as-system", "--sample", "0", "--json")
    got["report_file"] = s.out / "report.html"
    return got


@pytest.fixture(scope="module")
def code_page(tmp_path_factory) -> dict:
    """``run --help``, a 1 s run and ``show last``, each through a pipe in this code page (issue 34):
    ``scripts/ci-wine`` runs this again under cp932, on its own."""
    s = Softrt(tmp_path_factory.mktemp("softrt-code-page"))
    return {
        "help": s.run("run", "--help"),
        "run": s.run("run", "--duration", "1s", "-q", "--out-dir", str(s.out)),
        "show": s.run("show", "last"),
    }


def test_the_commands_write_their_code_page_into_a_pipe(code_page):
    """cp1252 lacks "≤" (written "<="), cp932 "µ" (written "u"); neither ever raises."""

    def fits(text: str) -> bool:
        try:
            text.encode(CODE_PAGE)
        except UnicodeEncodeError:
            return False
        return True

    us = "µs" if fits("µ") else "us"
    for name in ("help", "run", "show"):
        code, out = code_page[name]
        assert code == 0 and "Traceback" not in out, (CODE_PAGE, name, out[-3000:])
    assert f"250 {us}" in code_page["help"][1]
    for name in ("run", "show"):
        verdict = code_page[name][1].splitlines()[0]
        assert (
            verdict.startswith(("MEETS", "FAILS"))
            and f"every period {'≤' if fits('≤') else '<='} 270.0 {us}" in verdict
        ), (CODE_PAGE, verdict)


def _kill_a_supervisor(s: Softrt) -> dict:
    """Kill a run's supervisor (TerminateProcess: no cleanup of its own) once it measures; its worker's
    kill-on-close job must end the worker with it."""
    import psutil

    out = s.out.parent / "killed"  # its own: the other lane's runs are stored meanwhile
    proc = s.start("run", "--duration", "60s", "--profile", "none", "-q", "--out-dir", str(out))
    deadline = time.monotonic() + START_S
    while time.monotonic() < deadline and proc.poll() is None:  # its first checkpoint: measuring
        if any(out.glob("*/summary.json")):
            time.sleep(3)  # the same checkpoint's history row is written right after, by a thread
            break
        time.sleep(0.2)
    workers = [c.pid for c in psutil.Process(proc.pid).children()]
    proc.kill()
    proc.wait()
    time.sleep(2)
    return {"workers": workers, "worker_left": [pid for pid in workers if psutil.pid_exists(pid)]}


@pytest.mark.parametrize("wait", ["spin", "sleep", "hybrid"])
def test_a_run_completes_real_time_in_each_wait(wine, wait):
    code, out = wine[wait]
    assert code == 0, out
    assert "Mode: real-time" in out and "Run stored in" in out and "Traceback" not in out


def test_a_second_run_is_refused_while_the_first_holds_the_machine(wine):
    code, out = wine["second"]
    assert code != 0 and "holds this machine" in out and "Traceback" not in out, out


def test_check_is_never_ready_when_windows_tells_it_nothing(wine):
    """Under Wine PowerShell prints nothing and powercfg/typeperf are missing: UNKNOWN, exit 1."""
    code, out = wine["check"]
    report = json.loads(out[out.index("{") :])
    assert code == 1 and not report["ready"] and report["verdict"].startswith("UNKNOWN"), report["verdict"]
    rt = next(f for f in report["findings"] if f["id"] == "cores.rt_cpus")
    assert rt["status"] == "ok" and "GetProcessAffinityMask" in rt["evidence"][0]  # the platform's count
    assert report["rt_cpus"] != "0"


def test_tune_applies_and_reverts_without_a_traceback(wine):
    for step in ("apply", "revert"):
        code, out = wine[step]
        assert code in (0, 1, 2) and "Traceback" not in out, out


def test_tune_on_a_blind_machine_lists_what_it_could_not_read_as_administrator(wine):
    """Wine's PowerShell prints nothing and powercfg is missing: the plan never says no change is needed."""
    code, out = wine["plan"]
    assert code == 0 and "Traceback" not in out, out
    assert "No run-time change needed" not in out and "Could not be read, so nothing is planned for them" in out
    assert "idle.idle_disable (high)" in out and "powercfg.exe" in out
    assert "(as Administrator)" in out and "as root" not in out


def test_check_as_system_says_in_one_finding_what_wine_lacks(wine):
    """Wine's schtasks registers the task and runs none: the wait for its answer ends, and the CSP finding
    says so, naming the fix; the other checks ran as the user. A real Windows runs the task
    (tests/platform/windows/test_winsystem.py runs the exchange against a scheduler that does)."""
    code, out = wine["as_system"]
    assert code in (1, 2) and "Traceback" not in out, out
    if code == 2:  # not elevated: the one line, nothing read
        assert "needs Administrator" in out, out
        return
    report = json.loads(out[out.index("{") :])
    csp = next(f for f in report["findings"] if f["id"] == "cores.csp")
    assert csp["unreadable"] and csp["summary"].startswith("could not be read as SYSTEM"), csp
    assert csp["reader"].startswith("SYSTEM: softrt check --as-system")


def test_a_run_without_out_dir_goes_to_the_data_directory_not_the_working_one(wine):
    """An elevated prompt starts in C:\\Windows\\System32: the default is <data dir>\\runs, absolute, and said."""
    code, out = wine["default_out"]
    assert code == 0 and "Traceback" not in out, out
    line = next(ln for ln in out.splitlines() if ln.startswith("Run stored in "))
    stored = Path(line.removeprefix("Run stored in ").strip())
    assert stored.is_absolute() and stored.parent == wine["home"] / "runs" and (stored / "summary.json").is_file()
    assert list(wine["elsewhere"].iterdir()) == []


def test_a_killed_supervisor_takes_its_worker_with_it(wine):
    assert wine["workers"], "the supervisor had no worker to watch"
    assert wine["worker_left"] == [], "the job object did not end the worker"
    died = [r for r in wine["runs"] if r.get("status") == "running" and not r["running"]["alive"]]
    assert died, [r.get("status") for r in wine["runs"]]  # `softrt history` lists it as died


def test_history_show_and_report_read_the_runs_back(wine):
    assert wine["history"][0] == 0 and len(wine["runs"]) >= 2  # the spin run and the killed one, at least
    code, out = wine["show"]
    assert code == 0 and "Timer int. period" in out, out
    code, out = wine["report"]
    assert code == 0 and wine["report_file"].stat().st_size > 10_000, out


def test_compare_runs_the_disk_load_beside_the_loop_at_a_real_rate(wine):
    code, out = wine["compare"]
    assert code in (0, 1) and "Traceback" not in out, out  # 1: the verdict (Wine's ~1 ms timers)
    result = json.loads(out[out.index("{") :])
    loads = {load["name"]: load for load in result["pooled"]["disk-beside"]["loads"]}
    disk = loads["disk"]
    assert not disk.get("problems") and disk["achieved"]["write_MB_per_s"] >= DISK_MIN_MB_PER_S, disk
    assert disk["achieved"]["read_MB_per_s"] > 0 and disk["achieved"]["fsyncs_per_s"] > 0, disk
    print(f"disk load under Wine: {disk['achieved']}")  # (-s shows it: the figure the note quotes)
    assert loads["gpu"]["skipped_reason"].startswith("the GPU load here is ffmpeg decoding video on the GPU (d3d11va)")


def test_the_disk_worker_writes_at_offsets_where_os_has_no_pwrite(tmp_path):
    """Windows' os has neither pwrite nor pread: the worker's lseek + write/read, one whole pass."""
    from softrt.load import _worker

    assert not hasattr(os, "pwrite") and not hasattr(os, "pread")
    counters = _worker.disk({"dir": str(tmp_path), "passes": 1, "file_bytes": 2 << 20}, time.monotonic() + 60)
    assert counters._asdict() == {  # the worker's counters (a NamedTuple, printed as this JSON object)
        "bytes_written": (2 << 20) + 256 * 4096,
        "bytes_read": 2 << 20,
        "fsyncs": 18,
        "uncached_reads": 0,
    }
    assert list(tmp_path.iterdir()) == []


def test_a_run_directory_reserves_its_space_where_os_has_no_posix_fallocate(tmp_path):
    """The crash every Windows run had (issue 19): here os really lacks posix_fallocate."""
    from softrt.store.rundir import RESERVE, RunDir, reserve_bytes

    assert not hasattr(os, "posix_fallocate")
    run = RunDir(tmp_path, "r1", expected_rows=1000)
    try:
        assert (run.path / RESERVE).stat().st_size == reserve_bytes(1000)
    finally:
        run.close()  # as a run that never started: closed, then discarded
        run.discard()
    assert not (tmp_path / "r1").exists()  # Windows deletes no file a handle still holds: none is left open
