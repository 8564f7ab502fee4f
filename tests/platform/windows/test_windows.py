"""The Windows backend, on Linux: every Win32 call declared, the exact call sequence of a run (arm →
run → restore, also on a failure), the argument values, and each Windows error mapped to its fix.

The calls go to a recording fake of ``Win32`` (conftest.py); no real Windows machine ran these.
"""

from __future__ import annotations

import ctypes
import gc
import inspect
import multiprocessing
import os
import signal
import sys
import threading
from pathlib import Path

import pytest

import softrt.platform as P
from softrt.cpus import CpuSet
from softrt.errors import InvalidCpu, NoSuchProcess, NotSupported, PermissionDenied, SoftRTError
from softrt.ipc.ring import Ring
from softrt.loop.worker import WorkerSpec, worker_main
from softrt.platform.windows import _win32 as K
from softrt.platform.windows import backend as W

PROCESS, THREAD = -1, -2  # the fake's pseudo handles, as Windows returns them
RT_CPU = 3
RT_MASK = 1 << RT_CPU


class Anything:
    """Equal to any value *check* accepts (addresses and sizes that depend on this process)."""

    def __init__(self, check=lambda v: True, what: str = "any") -> None:
        self.check, self.what = check, what

    def __eq__(self, other) -> bool:
        return self.check(other)

    def __repr__(self) -> str:
        return f"<{self.what}>"


ADDRESS = Anything(lambda v: isinstance(v, int) and v > 0, "address")
#: Tests that need a host other than Windows (scripts/ci-wine runs this file under Wine too).
NOT_ON_WINDOWS = pytest.mark.skipif(sys.platform == "win32", reason="assumes a host that is not Windows")


def calls_without_pseudo_handles(fake) -> list[tuple]:
    """The recorded calls minus GetCurrentProcess/GetCurrentThread (constant pseudo handles, never failing)."""
    return [c for c in fake.calls if c[0] not in ("GetCurrentProcess", "GetCurrentThread")]


# --- the ctypes layer ---------------------------------------------------------------------------------


def test_every_win32_method_is_a_declared_call():
    methods = {name for name, _ in inspect.getmembers(K.Win32, inspect.isfunction) if name[0].isupper()}
    lowercase = {"timeBeginPeriod", "timeEndPeriod"}
    methods |= lowercase
    assert methods <= set(K.SIGNATURES)
    for name, (dll, restype, argtypes, failure) in K.SIGNATURES.items():
        assert dll in ("kernel32", "winmm", "pdh"), name
        assert restype is not None and isinstance(argtypes, list), name
        assert failure in (None, "zero", "mmresult", "wait", "thread_priority", "pdh"), name
    assert set(K.SIGNATURES) == methods


def test_the_fake_has_exactly_the_real_methods(fake_win32):
    def public(cls):
        return {n for n, _ in inspect.getmembers(cls, inspect.isfunction) if not n.startswith("_")}

    assert public(type(fake_win32())) == public(K.Win32)
    for name in public(K.Win32):
        real = list(inspect.signature(getattr(K.Win32, name)).parameters)
        fake = list(inspect.signature(getattr(type(fake_win32()), name)).parameters)
        assert real == fake, name


def test_the_structures_have_the_64_bit_windows_layout():
    assert ctypes.sizeof(K.PDH_FMT_COUNTERVALUE_ITEM_W) == 24 and K.PDH_FMT_COUNTERVALUE.doubleValue.offset == 8
    assert ctypes.sizeof(K.JOBOBJECT_BASIC_LIMIT_INFORMATION) == 64
    assert ctypes.sizeof(K.JOBOBJECT_EXTENDED_LIMIT_INFORMATION) == 144
    assert ctypes.sizeof(K.OVERLAPPED) == 32


@NOT_ON_WINDOWS
def test_the_real_calls_resolve_only_on_windows():
    win32 = K.Win32()  # constructing it loads nothing
    with pytest.raises(NotSupported, match="GetCurrentProcess is a Windows call"):
        win32.GetCurrentProcess()


@pytest.mark.parametrize(
    ("name", "args", "result", "winerror"),
    [
        ("SetPriorityClass", (PROCESS, 0x100), 0, K.ERROR_ACCESS_DENIED),  # BOOL FALSE: GetLastError
        ("OpenProcess", (0x1000, False, 4242), None, K.ERROR_ACCESS_DENIED),  # NULL handle: GetLastError
        ("GetThreadPriority", (THREAD,), K.THREAD_PRIORITY_ERROR_RETURN, K.ERROR_ACCESS_DENIED),
        ("WaitForSingleObject", (0x104, K.INFINITE), K.WAIT_FAILED, K.ERROR_ACCESS_DENIED),
        ("timeBeginPeriod", (1,), 97, K.ERROR_INVALID_PARAMETER),  # TIMERR_NOCANDO
    ],
)
def test_each_failure_convention_becomes_a_win32_error(monkeypatch, name, args, result, winerror):
    """The real Win32 class's checks, with its ctypes functions replaced by ones returning *result*."""
    win32 = K.Win32()
    win32._fns[name] = lambda *a: result
    monkeypatch.setattr(K, "_last_error", lambda fn: K.Win32Failed(fn, K.ERROR_ACCESS_DENIED, "Access is denied."))
    with pytest.raises(K.Win32Failed) as info:
        getattr(win32, name)(*args)
    assert (info.value.function, info.value.winerror) == (name, winerror)


def test_a_successful_call_returns_its_result(monkeypatch):
    win32 = K.Win32()
    win32._fns["GetPriorityClass"] = lambda process: K.HIGH_PRIORITY_CLASS
    win32._fns["SetThreadAffinityMask"] = lambda thread, mask: 0b1111
    assert win32.GetPriorityClass(PROCESS) == K.HIGH_PRIORITY_CLASS
    assert win32.SetThreadAffinityMask(THREAD, RT_MASK) == 0b1111


def test_get_platform_returns_the_windows_backend_on_win32(monkeypatch):
    monkeypatch.setattr(P, "IS_LINUX", False)
    monkeypatch.setattr(P, "IS_WINDOWS", True)
    monkeypatch.setattr(P, "_platform", None)
    assert isinstance(P.get_platform(), W.WindowsPlatform)


# --- error mapping -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("function", "code", "error", "needle"),
    [
        ("SetPriorityClass", K.ERROR_ACCESS_DENIED, PermissionDenied, "Run as Administrator"),
        ("SetProcessWorkingSetSizeEx", K.ERROR_PRIVILEGE_NOT_HELD, PermissionDenied, "Run as Administrator"),
        ("OpenProcess", K.ERROR_INVALID_PARAMETER, NoSuchProcess, "exited"),
        ("VirtualLock", K.ERROR_WORKING_SET_QUOTA, SoftRTError, "working set minimum is too small"),
        ("CreateWaitableTimerExW", K.ERROR_INVALID_PARAMETER, SoftRTError, "Windows error 87"),
    ],
)
def test_windows_errors_become_softrt_errors_with_their_fix(function, code, error, needle):
    err = K.to_softrt_error(K.Win32Failed(function, code, "text"), "this process")
    assert type(err) is error
    assert needle in str(err)


def test_an_affinity_on_a_cpu_windows_lacks_is_a_bad_cpu(fake_win32):
    plat = W.WindowsPlatform(fake_win32(cpus=4))
    with pytest.raises(InvalidCpu, match="CPU 6"):
        plat.set_affinity(CpuSet([6]))
    with pytest.raises(InvalidCpu, match="processor group 0"):
        plat.set_affinity(CpuSet([64]))


def test_a_gone_process_is_no_such_process(fake_win32):
    plat = W.WindowsPlatform(fake_win32(fail={"OpenProcess": K.ERROR_INVALID_PARAMETER}))
    with pytest.raises(NoSuchProcess):
        plat.get_affinity(4242)


# --- CPUs, timer, job, lock, shared memory -------------------------------------------------------------


def test_affinity_of_any_pid_goes_through_masks_and_closes_its_handle(fake_win32):
    fake = fake_win32(cpus=8)
    plat = W.WindowsPlatform(fake)
    assert plat.online_cpus() == CpuSet(range(8)) and plat.allowed_cpus() == CpuSet(range(8))
    fake.calls.clear()
    plat.set_affinity(CpuSet([0, 2]), pid=4242)
    assert calls_without_pseudo_handles(fake) == [
        ("OpenProcess", K.PROCESS_SET_INFORMATION | K.PROCESS_QUERY_LIMITED_INFORMATION, False, 4242),
        ("SetProcessAffinityMask", ADDRESS, 0b101),
        ("CloseHandle", ADDRESS),
    ]
    assert not fake.open_handles


def test_sleep_until_arms_a_high_resolution_timer_relative_to_the_loop_clock(fake_win32):
    fake = fake_win32()
    plat = W.WindowsPlatform(fake)
    sleep_until, close = plat.make_sleep_until()
    ((_, flags, access),) = fake.calls
    assert (flags, access) == (K.CREATE_WAITABLE_TIMER_HIGH_RESOLUTION, K.TIMER_ALL_ACCESS)
    timer = fake._next_handle
    sleep_until(plat.clock_ns() + 2_000_000)
    (_, t, due), (_, t2, timeout) = fake.calls[1:]
    assert t == t2 == timer and timeout == K.INFINITE
    assert -20_000 <= due < -19_000  # 2 ms ahead, relative (negative), in 100 ns units, less the call's own time
    sleep_until(plat.clock_ns() - 1)  # already past: no wait at all
    assert len(fake.calls) == 3
    close()
    assert fake.calls[-1] == ("CloseHandle", timer) and not fake.open_handles


def test_the_worker_is_tied_to_the_supervisor_by_a_kill_on_close_job(fake_win32):
    fake = fake_win32()
    undo = W.WindowsPlatform(fake).adopt_worker(4242)
    job, process = 0x104, 0x108  # the fake's first two handles
    assert fake.calls == [
        ("CreateJobObjectW",),
        ("SetInformationJobObject", job, 0x2000),  # JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE
        ("OpenProcess", 0x100 | 0x1, False, 4242),  # PROCESS_SET_QUOTA | PROCESS_TERMINATE
        ("AssignProcessToJobObject", job, process),
        ("CloseHandle", process),
    ]
    assert fake.open_handles == {job}  # held until the run's cleanup closes it
    undo()
    assert fake.calls[-1] == ("CloseHandle", job) and not fake.open_handles


def test_a_job_that_cannot_take_the_worker_is_closed_and_says_why(fake_win32):
    fake = fake_win32(fail={"AssignProcessToJobObject": K.ERROR_ACCESS_DENIED})
    with pytest.raises(PermissionDenied, match="AssignProcessToJobObject on process 4242"):
        W.WindowsPlatform(fake).adopt_worker(4242)
    assert not fake.open_handles


def test_the_machine_lock_is_a_byte_range_past_the_pid(fake_win32, tmp_path):
    fake = fake_win32()
    plat = W.WindowsPlatform(fake)
    path = tmp_path / "rt-loop.lock"
    fd = plat.try_lock(path)
    try:
        assert fd is not None and plat.lock_holder(path) == str(os.getpid())
        assert (
            "LockFileEx",
            fd,
            K.LOCKFILE_EXCLUSIVE_LOCK | K.LOCKFILE_FAIL_IMMEDIATELY,
            K.LOCK_OFFSET,
            1,
        ) in fake.calls
        assert plat.try_lock(path) is None  # held: a second run is refused
    finally:
        os.close(fd)


def test_shared_memory_is_a_named_section_created_once_and_attached(fake_win32):
    fake = fake_win32()
    plat = W.WindowsPlatform(fake)
    with pytest.raises(SoftRTError, match="does not exist"):
        plat.open_shared_memory("softrt-1-ab", 4096, create=False)
    mine = plat.open_shared_memory("softrt-1-ab", 4096, create=True)
    theirs = plat.open_shared_memory("softrt-1-ab", 4096, create=False)
    mine[:5] = b"hello"
    assert theirs[:5] == b"hello"
    with pytest.raises(SoftRTError, match="exists already"):
        plat.open_shared_memory("softrt-1-ab", 4096, create=True)
    mine.close()
    theirs.close()
    assert plat.list_shared_memory("softrt-") == []


# --- a whole worker run: arm → run → restore ------------------------------------------------------------


def _run_worker(monkeypatch, fake, step, wait="sleep") -> tuple[list, list]:
    """Run the real worker (loop.worker.worker_main) in this process on the Windows backend.

    A thread plays the supervisor: it waits for "armed", says "go", collects what follows.
    Returns (messages, the ring's records count).
    """
    plat = W.WindowsPlatform(fake)
    monkeypatch.setattr(P, "_platform", plat)
    ring = Ring.create(capacity=1 << 12)
    fake.calls.clear()  # the supervisor's side: only the worker's calls are the run's
    ours, theirs = multiprocessing.Pipe()
    messages: list = []

    def supervisor():
        msg = ours.recv()
        messages.append(msg)
        ours.send("go")
        try:
            while True:
                messages.append(ours.recv())
        except EOFError:
            pass

    spec = WorkerSpec(period_ns=250_000, duration_ns=20_000_000, wait=wait, cpu=RT_CPU, priority=80, step=step)
    helper = threading.Thread(target=supervisor)
    helper.start()
    sigint = signal.getsignal(signal.SIGINT)
    try:
        worker_main(spec, ring.name, theirs)
    except SystemExit:
        pass
    finally:
        signal.signal(signal.SIGINT, sigint)
        gc.enable()
        gc.unfreeze()
        theirs.close()
        helper.join(5)
        ours.close()
        records = ring.reader().drain()
        ring.close()
    return messages, records


def _step(seq):
    return float(seq)


def _phases(fake) -> tuple[list, list, list]:
    """Split the calls into arming (to "armed"), the loop's timer calls, and the restore after them."""
    calls = calls_without_pseudo_handles(fake)
    loop = [i for i, c in enumerate(calls) if c[0] in ("SetWaitableTimer", "WaitForSingleObject")]
    first, last = (loop[0], loop[-1]) if loop else (len(calls), len(calls) - 1)
    return calls[:first], calls[first : last + 1], calls[last + 1 :]


ARMED_AS_ADMINISTRATOR = [
    ("OpenFileMappingW", K.FILE_MAP_READ, Anything(lambda v: v.startswith("softrt-"), "ring name")),
    ("CloseHandle", ADDRESS),
    ("map_pagefile", Anything(what="ring name"), Anything(what="header size")),
    ("OpenFileMappingW", K.FILE_MAP_READ, Anything(what="ring name")),
    ("CloseHandle", ADDRESS),
    ("map_pagefile", Anything(what="ring name"), Anything(what="ring size")),
    # Memory first, before the device opens (platform.base.Control.before_device) ...
    ("GetProcessWorkingSetSizeEx", PROCESS),
    (
        "SetProcessWorkingSetSizeEx",
        PROCESS,
        Anything(lambda v: v > K.WORKING_SET_MARGIN_BYTES, "rss + ring + margin"),
        Anything(lambda v: v > 2 * K.WORKING_SET_MARGIN_BYTES, "minimum + margin"),
        0x1 | 0x8,
    ),  # QUOTA_LIMITS_HARDWS_MIN_ENABLE | QUOTA_LIMITS_HARDWS_MAX_DISABLE
    ("VirtualLock", ADDRESS, Anything(lambda v: v > 4096 * 8, "ring size")),
    # ... then placement, timer and priorities
    ("GetProcessAffinityMask", PROCESS),
    ("SetProcessAffinityMask", PROCESS, RT_MASK),
    ("SetThreadAffinityMask", THREAD, RT_MASK),
    ("timeBeginPeriod", 1),
    ("GetPriorityClass", PROCESS),
    ("SetPriorityClass", PROCESS, 0x100),  # REALTIME_PRIORITY_CLASS
    ("GetPriorityClass", PROCESS),
    ("GetThreadPriority", THREAD),
    ("GetPriorityClass", PROCESS),  # level 4 exists only in REALTIME_PRIORITY_CLASS: was it granted?
    ("SetThreadPriority", THREAD, 4),  # --priority 80: base priority 28 in REALTIME_PRIORITY_CLASS (24 + 4)
    ("CreateWaitableTimerExW", 0x2, 0x1F0003),  # CREATE_WAITABLE_TIMER_HIGH_RESOLUTION, TIMER_ALL_ACCESS
]

#: Newest first: the timer, then each control's undo back to its value before the run.
RESTORED = [
    ("CloseHandle", ADDRESS),  # the waitable timer
    ("SetThreadPriority", THREAD, 0),
    ("SetPriorityClass", PROCESS, K.NORMAL_PRIORITY_CLASS),
    ("timeEndPeriod", 1),
    ("SetThreadAffinityMask", THREAD, 0b1111),
    ("SetProcessAffinityMask", PROCESS, 0b1111),
    ("VirtualUnlock", ADDRESS, Anything(lambda v: v > 4096 * 8, "ring size")),
    ("SetProcessWorkingSetSizeEx", PROCESS, 200 << 10, 1380 << 10, 0x2 | 0x8),  # no hard limits, as before
]


def test_a_run_arms_loops_and_restores_every_control(monkeypatch, fake_win32):
    fake = fake_win32(cpus=4)
    messages, records = _run_worker(monkeypatch, fake, _step)
    armed, loop, restored = _phases(fake)
    assert armed == ARMED_AS_ADMINISTRATOR
    assert restored == RESTORED
    # The loop sleeps on the timer every cycle, relative and ahead of the edge.
    assert loop and all(c[0] == "SetWaitableTimer" and c[2] < 0 for c in loop[0::2])
    assert all(c == ("WaitForSingleObject", c[1], K.INFINITE) for c in loop[1::2])
    payload, report = messages
    assert payload.kind == "armed" and not payload.not_applied and report.kind == "done"
    assert [a["what"] for a in payload.applied] == [
        "working_set",
        "virtual_lock",
        "process_affinity",
        "cpu_affinity",
        "timer_resolution",
        "realtime_priority_class",
        "thread_priority",
    ]
    assert "base priority 28 (SetThreadPriority 4 in REALTIME_PRIORITY_CLASS" in payload.applied[-1]["detail"]
    assert report.cycles == len(records) > 0
    assert fake.priority_class == K.NORMAL_PRIORITY_CLASS and fake.timer_periods == []
    assert fake.process_mask == fake.thread_mask == 0b1111
    assert fake.open_handles == set()


def _fails_at_cycle_5(seq):
    if seq == 5:
        raise RuntimeError("the user's step broke")
    return 0.0


def test_a_failing_run_still_restores_every_control(monkeypatch, fake_win32):
    fake = fake_win32(cpus=4)
    messages, _ = _run_worker(monkeypatch, fake, _fails_at_cycle_5)
    armed, _, restored = _phases(fake)
    assert armed == ARMED_AS_ADMINISTRATOR
    assert restored == RESTORED
    assert (messages[-1].kind, messages[-1].error) == ("failed", "RuntimeError: the user's step broke")
    assert fake.priority_class == K.NORMAL_PRIORITY_CLASS and fake.timer_periods == [] and not fake.open_handles


def test_without_administrator_the_run_goes_on_not_real_time_with_what_was_not_applied(monkeypatch, fake_win32):
    fake = fake_win32(cpus=4, admin=False)
    messages, records = _run_worker(monkeypatch, fake, _step, wait="spin")
    armed, done = messages
    assert done.kind == "done" and len(records) > 0
    missing = {n["what"]: n["why"] for n in armed.not_applied}
    assert set(missing) == {"realtime_priority_class"}
    assert ("SetThreadPriority", THREAD, 2) in fake.calls  # THREAD_PRIORITY_HIGHEST: 4 exists in REALTIME only
    assert all("Run as Administrator" in why for why in missing.values())
    assert "got 0x80" in missing["realtime_priority_class"]  # Windows granted HIGH_PRIORITY_CLASS instead
    # HIGH was handed back at once; the rest was applied and restored.
    calls = calls_without_pseudo_handles(fake)
    at = calls.index(("SetPriorityClass", PROCESS, K.REALTIME_PRIORITY_CLASS))
    assert calls[at + 1 : at + 3] == [
        ("GetPriorityClass", PROCESS),
        ("SetPriorityClass", PROCESS, K.NORMAL_PRIORITY_CLASS),
    ]
    assert fake.priority_class == K.NORMAL_PRIORITY_CLASS and fake.timer_periods == []
    assert not any(c[0] == "CreateWaitableTimerExW" for c in calls)  # --wait spin needs no timer


# --- the supervisor's side ------------------------------------------------------------------------------


def test_the_supervisor_moves_off_the_rt_cpu_and_leaves_rt_throttling_alone(monkeypatch, fake_win32, tmp_path):
    """Windows has no RT throttling (caps.rt_throttling False): a spin run writes no kernel file."""
    from contextlib import ExitStack

    from softrt.cpus import CpuSet
    from softrt.schema.config import RunConfig
    from softrt.session import changes
    from softrt.session import run as session_run
    from softrt.session.config import RunPlan

    monkeypatch.setenv("SOFTRT_STATE_DIR", str(tmp_path / "state"))
    fake = fake_win32(cpus=4)
    plat = W.WindowsPlatform(fake)
    out = session_run.Outcome()
    journal = changes.ChangeJournal()
    with ExitStack() as cleanup:
        plan = RunPlan(RunConfig(cpu=RT_CPU, wait="spin"), RT_CPU, CpuSet.parse("0-2"), {})
        session_run._apply_system_changes(plan, plat, journal, out, cleanup)
        assert fake.process_mask == 0b0111  # the housekeeping CPUs
    assert fake.process_mask == 0b1111  # put back
    assert journal.changes == [] and out.not_applied == []
    assert [a["what"] for a in out.applied] == ["supervisor_affinity"]
    assert not (tmp_path / "state").exists()  # no journal was even opened


def test_tracing_says_it_is_unavailable_and_touches_nothing(monkeypatch, fake_win32):
    """caps.kernel_trace is False: no tracefs is looked for, the run's "why late" says why."""
    from softrt.schema.config import RunConfig
    from softrt.trace import TraceSession, sweep_orphans

    monkeypatch.setattr(P, "_platform", W.WindowsPlatform(fake_win32()))
    monkeypatch.setattr("softrt.trace.tracefs.find", lambda: pytest.fail("tracefs looked for"))
    monkeypatch.setattr("softrt.trace.session.find_or_mount", lambda: pytest.fail("tracefs mounted"))
    with TraceSession(RunConfig(cpu=RT_CPU)) as session:
        session.start(4242)
        assert session.why_late().to_dict() == {
            "tracing": "unavailable: softrt reads the Linux kernel's trace (tracefs), which this OS does not have; no "
            "ETW kernel session is started (record one with wpr -start CPU and open it in WPA)"
        }
    assert sweep_orphans() == []


@NOT_ON_WINDOWS
def test_host_facts_have_the_linux_keys_with_none_where_windows_has_none(fake_win32):
    from softrt.platform.linux.backend import LinuxPlatform

    facts = W.WindowsPlatform(fake_win32(cpus=4)).host_facts()
    linux = list(LinuxPlatform().host_facts().to_dict())
    assert [k for k in facts.to_dict() if k in linux] == linux  # the same keys in the same order, and the build's
    assert facts.os == "windows" and facts.cpu_count == 4 and facts.clocksource == "QueryPerformanceCounter"
    assert facts.preemption is None and facts.rt_runtime_us is None and facts.to_dict()["rt_runtime_us"] is None


# --- what running under Wine showed (issue 19) --------------------------------------------------------------


@pytest.mark.parametrize("priority,level,base", [(1, -15, 16), (50, 0, 24), (80, 4, 28), (95, 6, 30), (99, 15, 31)])
def test_priority_is_spread_over_the_realtime_class(priority, level, base):
    """--priority had no effect on Windows (always 31), and ThreadBasePriority 16 failed under Wine."""
    assert W.realtime_level(priority) == level and W.base_priority(level) == base


def test_every_priority_gives_a_level_the_realtime_class_accepts():
    levels = {W.realtime_level(p) for p in range(1, 100)}
    assert levels == {-15, *range(-7, 7), 15} and len({W.base_priority(v) for v in levels}) == 16


def test_a_failing_timer_wait_is_a_softrt_error_not_a_raw_win32_one(fake_win32):
    fake = fake_win32(fail={"WaitForSingleObject": K.ERROR_ACCESS_DENIED})
    sleep_until, close = W.WindowsPlatform(fake).make_sleep_until()
    with pytest.raises(PermissionDenied, match="the waitable timer"):
        sleep_until(W.WindowsPlatform.clock_ns() + 1_000_000)
    close()


def test_host_facts_name_the_build_and_the_cpu_brand(fake_win32):
    """platform.release() says "10" on Windows 11; PROCESSOR_IDENTIFIER is family/model/stepping."""
    facts = W.WindowsPlatform(fake_win32()).host_facts()
    assert facts.kernel == "Windows 11 23H2 (build 22631.4460)" and facts.windows_build == 22631
    assert facts.cpu_model == "Intel(R) Core(TM) i7-8700 CPU @ 3.20GHz"


def test_host_facts_without_the_registry_values_fall_back(fake_win32):
    fake = fake_win32()
    fake.registry.clear()
    facts = W.WindowsPlatform(fake).host_facts()
    assert facts.windows_build is None and facts.kernel  # platform.release()
    assert "windows_build" in facts.to_dict()  # written as null, as before


@pytest.mark.skipif(not hasattr(os, "setuid") or os.geteuid() != 0, reason="needs root to become another user")
def test_another_user_takes_the_lock_through_a_read_handle(fake_win32):
    """A lock file another user created is read-only to this one: it is locked through a read handle,
    not a PermissionError traceback. (Here: a root-owned 0644 file, and a child that became nobody.)"""
    import codecs
    import shutil
    import tempfile

    folder = tempfile.mkdtemp(prefix="softrt-lock-")  # under /tmp: a path nobody can walk
    os.chmod(folder, 0o755)
    path = Path(folder) / "softrt-rt-loop.lock"
    path.write_text("999999999")  # the pid of a run of the user who created it, long gone
    path.chmod(0o644)
    codecs.lookup("ascii")  # cached before the fork: this interpreter's files may be unreadable to nobody
    pid = os.fork()
    if pid == 0:  # the child: another user
        code = 1
        try:
            os.setgid(65534)
            os.setuid(65534)
            plat = W.WindowsPlatform(fake_win32())
            fd = plat.try_lock(path)
            code = 0 if fd is not None and path.read_text() == "999999999" and plat.lock_holder(path) == "?" else 3
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    shutil.rmtree(folder)
    assert os.waitstatus_to_exitcode(status) == 0


def test_a_lock_folder_nobody_may_create_is_one_clear_error(fake_win32, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(SoftRTError, match="cannot be opened") as info:
        W.WindowsPlatform(fake_win32()).try_lock(blocker / "softrt" / "rt-loop.lock")
    assert "SOFTRT_STATE_DIR" in info.value.hint


def test_counters_are_asked_by_their_english_names_and_each_instance_is_named(fake_win32):
    """typeperf wants a localized Windows' translated counter names: the live DPC sample failed there."""
    fake = fake_win32()
    fake.counter_values = {
        "\\Processor(3)\\% DPC Time": [("3", 1.5)],
        "\\Process(*)\\% Processor Time": [("svchost", 2.0), ("svchost", 3.0), ("MsMpEng", 4.0)],
    }
    values = W.WindowsPlatform(fake).sample_counters(list(fake.counter_values), 0.01)
    assert values == {
        "\\Processor(3)\\% DPC Time": 1.5,
        "\\Process(svchost)\\% Processor Time": 2.0,
        "\\Process(svchost#1)\\% Processor Time": 3.0,
        "\\Process(MsMpEng)\\% Processor Time": 4.0,
    }
    assert [c[0] for c in fake.calls if c[0].startswith("PdhAdd")] == ["PdhAddEnglishCounterW"] * 2
    assert not fake.open_handles  # the query closed


def test_a_counter_the_machine_lacks_is_a_softrt_error_and_the_query_is_closed(fake_win32):
    fake = fake_win32()
    with pytest.raises(SoftRTError, match="0xC0000BB9"):
        W.WindowsPlatform(fake).sample_counters(["\\Processor(3)\\% DPC Time"], 0.01)
    assert fake.calls[-1][0] == "PdhCloseQuery" and not fake.open_handles


def test_only_memory_locking_comes_before_the_device_opens(fake_win32):
    """As on Linux (tests/platform/linux/test_linux.py): the working set and the ring's VirtualLock first."""
    controls = W.WindowsPlatform(fake_win32(cpus=4)).worker_controls(1, 80, memoryview(bytearray(4096)))
    assert [c.what for c in controls if c.before_device] == ["working_set", "virtual_lock"]
