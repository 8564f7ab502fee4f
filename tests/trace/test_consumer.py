"""The pipe consumer: steal from /proc/stat (captured), and on the real kernel: every event
written into an instance is read, in order, with a horizon that only moves forward."""

from __future__ import annotations

import os
import time

import pytest

from softrt.cpus import CpuSet
from softrt.trace import tracefs
from softrt.trace.consumer import Consumer, read_steal_ns


def test_steal_is_the_eighth_value_in_user_hz_ticks(tmp_path):
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc/stat").write_text("cpu  1 2 3 4 5 6 7 8 0 0\ncpu0 1 0 0 0 0 0 0 3 0 0\ncpu1 9 9 9 9 9 9 9 42 0 0\n")
    tick_ns = 1_000_000_000 // os.sysconf("SC_CLK_TCK")
    assert read_steal_ns(1, str(tmp_path)) == 42 * tick_ns
    assert read_steal_ns(5, str(tmp_path)) is None


@pytest.mark.skipif(os.geteuid() != 0, reason="tracefs needs root")
@pytest.mark.root
def test_every_marker_written_is_read_in_order(state_dir):
    path, mounted = tracefs.find_or_mount()
    cpu = max(os.sched_getaffinity(0))
    inst = tracefs.Instance.create(path, f"softrt-test-{os.getpid()}", CpuSet([cpu]), 1024)
    previous = os.sched_getaffinity(0)
    try:
        consumer = Consumer(inst.path / "trace_pipe", cpu)
        consumer.start()
        inst.write("tracing_on", "1")
        os.sched_setaffinity(0, {cpu})  # trace_marker events are recorded on the writer's CPU
        t0 = time.monotonic_ns()
        fd = os.open(inst.path / "trace_marker", os.O_WRONLY)
        for i in range(3000):
            os.write(fd, f"softrt-{i}".encode())
        os.close(fd)
        os.sched_setaffinity(0, previous)
        time.sleep(0.2)
        events, _, horizon = consumer.take()
        inst.write("tracing_on", "0")
        consumer.stop()
        events += consumer.take()[0]
        marks = [e for e in events if e.name == "tracing_mark_write"]
        assert len(marks) + consumer.parser.lost == 3000 and consumer.parser.unparsed == 0
        assert all(a.ts_ns <= b.ts_ns for a, b in zip(events, events[1:]))
        assert t0 - 1_000 <= marks[0].ts_ns  # the mono trace clock is CLOCK_MONOTONIC (µs printed)
        assert horizon > marks[0].ts_ns and consumer.horizon_ns >= horizon
        assert consumer.cpu_s > 0 and not consumer.is_alive()
    finally:
        os.sched_setaffinity(0, previous)
        inst.remove()
        if mounted is not None:
            mounted.undo()
