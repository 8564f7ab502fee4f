"""platform.linux.threads: every thread of the process is moved, one by one, and put back."""

from __future__ import annotations

import os
import sys
import threading

import pytest

if not sys.platform.startswith("linux"):
    pytest.skip("per-thread affinity by thread id is Linux's (sched_setaffinity(2))", allow_module_level=True)

from softrt.cpus import CpuSet
from softrt.platform.linux.threads import masks, pin_threads


@pytest.fixture
def sleeper():
    """A thread started before the walk (as pyarrow's jemalloc_bg_thd is), and its id."""
    started, stop = threading.Event(), threading.Event()
    tid = []

    def main():
        tid.append(threading.get_native_id())
        started.set()
        stop.wait(30)

    t = threading.Thread(target=main, daemon=True)
    t.start()
    started.wait(5)
    yield tid[0]
    stop.set()
    t.join(5)


def test_a_thread_started_before_is_moved_and_put_back(sleeper):
    allowed = sorted(os.sched_getaffinity(0))
    if len(allowed) < 2:
        pytest.skip("needs two CPUs")
    before = masks()
    one = CpuSet([allowed[0]])
    pins = pin_threads(one)
    try:
        now = masks()
        assert pins.failed == [] and pins.threads == len(now)
        assert all(set(cpus) == {allowed[0]} for _name, cpus in now.values()), now
        # A thread started now inherits its creator's mask (sched_setaffinity(2) NOTES).
        seen = []
        t = threading.Thread(target=lambda: seen.append(os.sched_getaffinity(0)))
        t.start()
        t.join()
        assert seen == [{allowed[0]}]
    finally:
        pins.undo()
    after = masks()
    assert all(after[tid][1] == before[tid][1] for tid in before if tid in after)


def test_a_kept_thread_is_left_alone_and_a_refusal_is_named(sleeper, monkeypatch):
    allowed = sorted(os.sched_getaffinity(0))
    if len(allowed) < 2:
        pytest.skip("needs two CPUs")
    me = threading.get_native_id()
    real = os.sched_setaffinity

    def refuse(tid, cpus):
        if tid == sleeper:
            raise PermissionError(1, "Operation not permitted")
        return real(tid, cpus)

    monkeypatch.setattr(os, "sched_setaffinity", refuse)
    pins = pin_threads(CpuSet([allowed[0]]), keep=(me,))
    try:
        assert set(os.sched_getaffinity(0)) == set(allowed)  # kept
        assert len(pins.failed) == 1 and f"thread {sleeper} " in pins.failed[0]
        assert "CAP_SYS_NICE" in pins.failed[0]
    finally:
        monkeypatch.setattr(os, "sched_setaffinity", real)
        pins.undo()
