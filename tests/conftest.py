"""Shared test helpers: a softrt command runner, the RT-loop fixtures, and the machine's state.

The suite passes whatever state the machine is in: tuned (``softrt tune --apply``, RT throttling
already off) or not, and while another softrt run holds the RT CPU. Tests that run a real-time
loop or change the system (markers ``rt`` and ``root``) first take the machine's real-time lock,
the one ``softrt run`` and ``softrt tune`` take, waiting for a run in progress to end
(``SOFTRT_TEST_LOCK_WAIT``, 120 s) and skipping with the reason when it does not; their own runs
use a lock of their own (``SOFTRT_STATE_DIR``), so they never refuse each other.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import HealthCheck, settings

from .labdb import engines

# The fuzz suites (tests/fuzz.py) run each reader's small CI count of examples under Hypothesis's
# default (and its "ci") profile; ``pytest --hypothesis-profile deep`` runs their deep counts, for release checks.
settings.register_profile("deep", max_examples=5000, deadline=None, suppress_health_check=[HealthCheck.too_slow])

RT_RUNTIME = Path("/proc/sys/kernel/sched_rt_runtime_us")
RT_RUNTIME_DEFAULT = "950000"  # the kernel's default (Documentation/scheduler/sched-rt-group.rst)
LOCK_WAIT_S = float(os.environ.get("SOFTRT_TEST_LOCK_WAIT", "120"))
_lock_waits = {"timed_out": False}  # after one wait in vain, later tests skip at once


def _real_lock_path() -> Path:
    """The machine's real-time lock as softrt run takes it (never a test's SOFTRT_STATE_DIR one)."""
    from softrt.platform import get_platform

    saved = os.environ.pop("SOFTRT_STATE_DIR", None)
    try:
        return get_platform().machine_lock_path("rt-loop")
    finally:
        if saved is not None:
            os.environ["SOFTRT_STATE_DIR"] = saved


@contextlib.contextmanager
def held_machine_lock():
    """Hold the machine's real-time lock (waiting for a run in progress); skip the test when it stays taken."""
    from softrt.errors import SoftRTError
    from softrt.platform import get_platform

    plat, path = get_platform(), _real_lock_path()
    end = time.monotonic() + (0 if _lock_waits["timed_out"] else LOCK_WAIT_S)
    try:
        while (fd := plat.try_lock(path)) is None and time.monotonic() < end:
            time.sleep(0.2)
    except SoftRTError as err:
        pytest.skip(f"cannot take the machine's real-time lock: {err}")
    if fd is None:
        _lock_waits["timed_out"] = True
        pytest.skip(
            f"another softrt run (pid {plat.lock_holder(path)}) holds this machine's RT CPU "
            f"(waited {LOCK_WAIT_S:g} s; SOFTRT_TEST_LOCK_WAIT)"
        )
    try:
        yield path
    finally:
        os.close(fd)


@pytest.fixture(autouse=True)
def machine_lock(request, tmp_path, monkeypatch):
    """Hold the machine's real-time lock during a test that runs a real-time loop or changes the system."""
    if request.node.get_closest_marker("rt") is None and request.node.get_closest_marker("root") is None:
        yield None
        return
    if getattr(request.config.option, "loadgroup", False) and "@" not in request.node.nodeid:
        # pytest-xdist tells its controller a test's group by a suffix on its id; where the suffix is
        # lost the rt tests spread over every worker, each waiting for the others' machine lock.
        pytest.fail(
            "pytest-xdist did not keep the rt tests on one worker: this pytest and pytest-xdist lose "
            "test groups (pytest-xdist issue #1386); install the versions pyproject.toml's test extras "
            "name (bash scripts/setup --test), or run the rt tests with -n 0",
            pytrace=False,
        )
    with held_machine_lock() as path:
        monkeypatch.setenv("SOFTRT_STATE_DIR", str(tmp_path / "state"))  # the test's own runs: their own lock
        yield path


@contextlib.contextmanager
def _throttling_on():
    before = RT_RUNTIME.read_text()
    if before.strip() == "-1" and os.geteuid() == 0:
        RT_RUNTIME.write_text(RT_RUNTIME_DEFAULT)
    try:
        yield
    finally:
        RT_RUNTIME.write_text(before)


def _housekeeping_kind(item) -> str | None:
    """ "load" (marker ``housekeeping("load")``), "quiet" (``housekeeping``) or None."""
    mark = item.get_closest_marker("housekeeping")
    return None if mark is None else ("load" if "load" in mark.args else "quiet")


@pytest.fixture(autouse=True)
def housekeeping_cpu(request, machine_lock, tmp_path_factory):
    """Run the tests that load the housekeeping CPU or need it responsive one at a time.

    Under pytest-xdist a test that starts loads (marker ``housekeeping("load")``: stress-ng, a
    compare's load scenarios) would run beside one whose timing lives on that CPU (``housekeeping``:
    a master against the simulator, whose bring-up reads a stalled reply as a silent bus or a
    missing drive), and two masters against two simulators disturbed each other the same way. They
    take one lock of this session's (flock(2) LOCK_EX); the collection orders them so that they
    rarely wait (``pytest_collection_modifyitems``). Requested after ``machine_lock``, so an rt
    test waits here only for a test that holds no machine lock.
    """
    if _housekeeping_kind(request.node) is None or not os.environ.get("PYTEST_XDIST_WORKER"):
        yield
        return
    import fcntl  # (here: Windows has none, and runs these tests without pytest-xdist: scripts/ci-wine)

    with open(
        tmp_path_factory.getbasetemp().parent / "housekeeping.lock", "a"
    ) as fh:  # (the workers' common directory)
        fcntl.flock(fh, fcntl.LOCK_EX)
        yield


@pytest.fixture
def rt_throttling_on(machine_lock):
    """RT throttling as an untuned machine has it, for tests of a run switching it off and back.

    On a tuned machine (``sched_rt_runtime_us`` already -1) it is turned on for the test and off
    again afterwards; under the machine lock no softrt run can be relying on it meanwhile. A user
    who is not root can change nothing here (and a run of theirs changes nothing either).
    """
    with _throttling_on():
        yield


@pytest.fixture(scope="session")
def real_run(tmp_path_factory):
    """One real ``softrt run --duration 2s --check --json`` for the tests that read what a run leaves.

    A run costs seconds beyond its duration (the worker, the trace, the results), so the tests of
    its structure (tests/cli/test_run.py), of its check (idem) and of the history, report and show
    of a real run (tests/cli/test_report.py) read this one. It runs as those tests' own runs did:
    under the machine's lock, in its own state and data directories, with RT throttling as an
    untuned machine has it, from the RT CPU's first user (only ``rt`` tests may use it: they run
    one at a time on one pytest-xdist worker). Returns the process, its summary, and the
    directories, with the RT throttling setting read before and after the run.
    """
    base = tmp_path_factory.mktemp("real-run")
    env = {**os.environ, "SOFTRT_STATE_DIR": str(base / "state"), "SOFTRT_HOME": str(base / "home"), "COLUMNS": "120"}
    with held_machine_lock(), _throttling_on():
        before = RT_RUNTIME.read_text()
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "softrt",
                "run",
                "--duration",
                "2s",
                "--check",
                "--json",
                "--out-dir",
                str(base / "runs"),
            ],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
        after = RT_RUNTIME.read_text()
    summary = json.loads(proc.stdout) if proc.returncode == 0 else None
    return SimpleNamespace(
        proc=proc,
        summary=summary,
        runs=base / "runs",
        home=base / "home",
        state_dir=base / "state",
        rt_runtime_before=before,
        rt_runtime_after=after,
    )


def restore_what_killed_sessions_left(base: Path) -> list[str]:
    """Restore what the softrt runs of an earlier test session left changed; return what was said.

    The tests' runs journal their system changes in a state directory under pytest's ``tmp_path``
    (``machine_lock``, ``state_dir``), never the machine's own: a test session killed while one of
    its runs had RT throttling off left the journal there, where no later softrt command looks,
    and pytest deletes such directories three sessions later. sched_rt_runtime_us stayed -1 on
    this VM that way. Each leftover journal's directory gets a ``softrt history`` of its own, the
    recovery every softrt command runs (``session.changes.recover``: a journal of a process still
    alive is left alone). *base* holds pytest's numbered session directories.
    """
    journals = [j for depth in ("*", "*/*") for j in base.glob(f"pytest-*/{depth}/state/restore/*.jsonl")]
    said = []
    for state in sorted({journal.parent.parent for journal in journals if not _alive(_journal_pid(journal))}):
        env = {**os.environ, "SOFTRT_STATE_DIR": str(state), "SOFTRT_HOME": str(state / "recovery-home")}
        proc = subprocess.run(
            [sys.executable, "-m", "softrt", "history"], capture_output=True, text=True, env=env, timeout=60
        )
        said += [line for line in proc.stderr.splitlines() if line.startswith("softrt: ")]
    return said


def _journal_pid(journal: Path) -> int | None:
    try:
        with open(journal) as fh:
            return int(json.loads(fh.readline())["pid"])
    except (OSError, ValueError, KeyError, TypeError):
        return None  # unreadable: recover() sets it aside and says why


def _alive(pid: int | None) -> bool:
    import psutil  # (os.kill(pid, 0) would end the process on Windows)

    return pid is not None and psutil.pid_exists(pid)


def pytest_sessionstart(session):
    """Before any test (once, in pytest-xdist's controller): restore_what_killed_sessions_left."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return
    for line in restore_what_killed_sessions_left(session.config._tmp_path_factory.getbasetemp().parent):
        print(f"conftest: a killed test session's run: {line}", file=sys.stderr)


#: Session- and module-scoped fixtures that take seconds to make, by the group of their tests: with
#: ``--dist loadgroup`` a module's tests are otherwise shared out one by one, and every worker that
#: got one made its own (the shared report: 7 s on one worker, 3.8 s again on the other).
SHARED_FIXTURES = {
    "shared_report": "shared-report",
    "cyclictest_json": "real-tools",
    "oslat_json": "real-tools",
    "compare_runs": "compare-runs",
}


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's own hook, which reads the groups (its nodeid suffix)
def pytest_collection_modifyitems(config, items):
    """The real-time and system-changing tests (markers ``rt``, ``root``) form one pytest-xdist group.

    They run one at a time on the last CPU, so with ``-n`` (``--dist loadgroup``) they all go to one
    worker, in order, while the other workers share the rest of the suite. The group is the largest
    scope, so xdist hands it out first (``--loadscope-reorder``, its default): the longest chain of
    the suite starts at once. A test with a master against the simulator (fixture ``ecat_ns``) is
    marked ``housekeeping`` (see ``housekeeping_cpu``). Those take turns, so they are placed where
    the other worker runs none: among the rest (one worker) first, in the rt group last, the masters
    and then the loads; the rest is last there, so both workers share it once the rt group is done
    (a stable sort: modules keep their order otherwise). The tests of an expensive shared fixture
    (``SHARED_FIXTURES``) form a group of their own.
    """
    for item in items:
        if item.get_closest_marker("rt") is not None or item.get_closest_marker("root") is not None:
            item.add_marker(pytest.mark.xdist_group("rt"))
        else:
            shared = sorted(SHARED_FIXTURES.keys() & set(getattr(item, "fixturenames", ())))
            if shared:  # one worker makes it (it costs seconds), not each worker one of its own
                item.add_marker(pytest.mark.xdist_group(SHARED_FIXTURES[shared[0]]))
        if "ecat_ns" in getattr(item, "fixturenames", ()) and item.get_closest_marker("housekeeping") is None:
            item.add_marker(pytest.mark.housekeeping)  # a master against the simulator: see housekeeping_cpu
        if item.get_closest_marker("rt") is None and "real_run" in getattr(item, "fixturenames", ()):
            raise pytest.UsageError(
                f"{item.nodeid} reads the shared real run (real_run): mark it rt, so that "
                "the run is made on the rt tests' worker, one at a time"
            )
    in_rt = {None: 0, "quiet": 1, "load": 2}
    elsewhere = {"quiet": 0, "load": 1, None: 2}
    items.sort(
        key=lambda item: (in_rt if item.get_closest_marker("rt") or item.get_closest_marker("root") else elsewhere)[
            _housekeeping_kind(item)
        ]
    )


@pytest.fixture(autouse=True)
def stop_signal_handlers():
    """Every test starts with the stop signals' handlers as pytest has them.

    The command line leaves SIGINT, SIGTERM and SIGHUP ignored once one came (the process only
    exits then: session.interrupts), and an in-process run (``run_cli``) is followed by more tests
    in this process: a process they start inherits SIG_IGN (execve(2)), so a load stopped before
    it set its own handler ignored the SIGTERM and ran out the 5 s grace.
    """
    from softrt.platform import STOP_SIGNALS  # (the ones the command line changes: no SIGHUP on Windows)

    saved = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}
    yield
    for sig, handler in saved.items():
        signal.signal(sig, handler)


@pytest.fixture(autouse=True)
def softrt_home(tmp_path, monkeypatch):
    """Every test gets its own softrt data directory (SOFTRT_HOME: history, imports), never the user's."""
    home = tmp_path / "softrt-home"
    monkeypatch.setenv("SOFTRT_HOME", str(home))
    for name in ("SOFTRT_DB", "SOFTRT_ARCHIVE"):  # a lab's database or archive in the user's environment
        monkeypatch.delenv(name, raising=False)
    return home


@pytest.fixture(params=engines())
def history_db(request, tmp_path, monkeypatch):
    """The history of a test that runs on every engine (tests/labdb.py): a SQLite file, or a fresh
    schema on the PostgreSQL server of SOFTRT_TEST_PG; also SOFTRT_DB, so History() opens it."""
    if request.param == "sqlite":
        target = str(tmp_path / "lab-index" / "history.sqlite")
        monkeypatch.setenv("SOFTRT_DB", target)
        yield target
        return
    from .labdb import pg_schema

    with pg_schema() as url:
        monkeypatch.setenv("SOFTRT_DB", url)
        yield url


@pytest.fixture
def state_dir(tmp_path, monkeypatch):
    """An isolated softrt state directory (restore journals, tune state)."""
    d = tmp_path / "state"
    monkeypatch.setenv("SOFTRT_STATE_DIR", str(d))
    return d


def _softrt_cmd(*args: str, prefix: tuple[str, ...] = (), **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*prefix, sys.executable, "-m", "softrt", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "120"},
        **kwargs,
    )


@pytest.fixture
def run_cli(capsys):
    """Run the softrt command line in this process: return (exit status, stdout, stderr)."""
    from softrt.cli import main

    def run(*args: str):
        with pytest.raises(SystemExit) as exit_info:
            main(list(args))
        captured = capsys.readouterr()
        return exit_info.value.code, captured.out, captured.err

    return run


@pytest.fixture
def softrt_cmd():
    """Run ``python -m softrt ARGS`` as a user would, capturing its output."""
    return _softrt_cmd


@pytest.fixture
def rt_settings_restored():
    """Assert that a test leaves RT throttling as it found it."""
    before = RT_RUNTIME.read_text()
    yield
    assert RT_RUNTIME.read_text() == before
