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
    (tmp_path / "proc/stat").write_text(
        "cpu  1 2 3 4 5 6 7 8 0 0\ncpu0 1 0 0 0 0 0 0 3 0 0\ncpu1 9 9 9 9 9 9 9 42 0 0\n"
    )
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


def test_the_horizon_follows_the_events_read_while_the_pipe_is_busy(tmp_path):
    """A pipe fed faster than it empties (several busy CPUs traced) must still move the horizon on:
    to the last event read, less the commit slack, not only when the pipe was last found empty."""
    fifo = tmp_path / "trace_pipe"
    os.mkfifo(fifo)
    writer = os.open(fifo, os.O_RDWR)  # holds the FIFO open (the reader opens it non-blocking)
    consumer = Consumer(fifo, 0)
    later_s = time.monotonic_ns() // 1_000_000_000 + 3600  # an hour ahead of the clock: never "found empty" yet
    os.write(
        writer,
        "".join(
            f"           x-1     [000] {later_s}.{i:06d}: sched_waking: comm=x pid=1 prio=1 target_cpu=000\n"
            for i in range(100)
        ).encode(),
    )
    consumer.start()
    time.sleep(0.2)
    consumer.stop()
    os.close(writer)
    events, _, horizon = consumer.take()
    assert len(events) == 100 and horizon == events[-1].ts_ns - 1_000_000
