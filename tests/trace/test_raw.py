"""The binary reader: ring-buffer pages laid out by hand as the kernel writes them (header_page,
header_event, the events' format files of Linux 6.18) decode into the events and fields the text
pipe gives; on the real kernel, every marker written is read in order."""

from __future__ import annotations

import os
import struct
import time

import pytest

from softrt.cpus import CpuSet
from softrt.trace import tracefs
from softrt.trace.consumer import RawConsumer, open_reader
from softrt.trace.raw import RawDecoder, page_size, parse_format

COMMON = """\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;
"""
SWITCH = f"""name: sched_switch
ID: 330
format:
{COMMON}
\tfield:char prev_comm[16];\toffset:8;\tsize:16;\tsigned:0;
\tfield:pid_t prev_pid;\toffset:24;\tsize:4;\tsigned:1;
\tfield:int prev_prio;\toffset:28;\tsize:4;\tsigned:1;
\tfield:long prev_state;\toffset:32;\tsize:8;\tsigned:1;
\tfield:char next_comm[16];\toffset:40;\tsize:16;\tsigned:0;
\tfield:pid_t next_pid;\toffset:56;\tsize:4;\tsigned:1;
\tfield:int next_prio;\toffset:60;\tsize:4;\tsigned:1;

print fmt: "prev_comm=%s prev_pid=%d prev_prio=%d prev_state=%s%s ==> next_comm=%s next_pid=%d next_prio=%d", \
REC->prev_comm, REC->prev_pid, REC->prev_prio, (REC->prev_state & ((((0x00000000 | 0x00000001 | 0x00000002 | \
0x00000004 | 0x00000008 | 0x00000010 | 0x00000020 | 0x00000040) + 1) << 1) - 1)) ? __print_flags(REC->prev_state & \
((((0x00000000 | 0x00000001 | 0x00000002 | 0x00000004 | 0x00000008 | 0x00000010 | 0x00000020 | 0x00000040) + 1) << \
1) - 1), "|", {{ 0x00000001, "S" }}, {{ 0x00000002, "D" }}, {{ 0x00000004, "T" }}, {{ 0x00000008, "t" }}, \
{{ 0x00000010, "X" }}, {{ 0x00000020, "Z" }}, {{ 0x00000040, "P" }}, {{ 0x00000080, "I" }}) : "R", REC->prev_state & \
(((0x00000000 | 0x00000001 | 0x00000002 | 0x00000004 | 0x00000008 | 0x00000010 | 0x00000020 | 0x00000040) + 1) << 1) \
? "+" : "", REC->next_comm, REC->next_pid, REC->next_prio
"""
RUNTIME = f"""name: sched_stat_runtime
ID: 320
format:
{COMMON}
\tfield:__data_loc char[] comm;\toffset:8;\tsize:4;\tsigned:0;
\tfield:pid_t pid;\toffset:12;\tsize:4;\tsigned:1;
\tfield:u64 runtime;\toffset:16;\tsize:8;\tsigned:0;

print fmt: "comm=%s pid=%d runtime=%Lu [ns]", __get_str(comm), REC->pid, (unsigned long long)REC->runtime
"""
SOFTIRQ = f"""name: softirq_entry
ID: 150
format:
{COMMON}
\tfield:unsigned int vec;\toffset:8;\tsize:4;\tsigned:0;

print fmt: "vec=%u [action=%s]", REC->vec, __print_symbolic(REC->vec, {{ 9, "RCU" }})
"""
TIMER = f"""name: local_timer_entry
ID: 90
format:
{COMMON}
\tfield:int vector;\toffset:8;\tsize:4;\tsigned:1;

print fmt: "vector=%d", REC->vector
"""
HEADER_PAGE = """\tfield: u64 timestamp;\toffset:0;\tsize:8;\tsigned:0;
\tfield: local_t commit;\toffset:8;\tsize:8;\tsigned:1;
\tfield: int overwrite;\toffset:8;\tsize:1;\tsigned:1;
\tfield: char data;\toffset:16;\tsize:4080;\tsigned:0;
"""
FIELDS = frozenset({"sched_switch", "sched_stat_runtime", "softirq_entry"})


def _event(delta: int, payload: bytes) -> bytes:
    assert len(payload) % 4 == 0 and len(payload) <= 112
    return struct.pack("<I", (delta << 5) | len(payload) // 4) + payload


def _switch(pid: int, prev: tuple, nxt: tuple, state: int) -> bytes:
    return struct.pack(
        "<H2xi16siiq16sii", 330, pid, prev[0].encode(), prev[1], prev[2], state, nxt[0].encode(), nxt[1], nxt[2]
    )


def _runtime(pid: int, comm: str, runtime: int) -> bytes:
    name = comm.encode() + b"\0"
    body = struct.pack("<H2xiIiQ", 320, pid, (len(name) << 16) | 24, pid, runtime) + name
    return body + b"\0" * (-len(body) % 4)


def _page(ts: int, data: bytes, missed: int | None = None) -> bytes:
    commit = len(data)
    tail = b""
    if missed is not None:
        commit |= 1 << 31 | 1 << 30
        tail = struct.pack("<Q", missed)
    return (struct.pack("<QQ", ts, commit) + data + tail).ljust(4096, b"\0")


def _decoder() -> RawDecoder:
    formats = [parse_format(t) for t in (SWITCH, RUNTIME, SOFTIRQ, TIMER)]
    return RawDecoder(formats, FIELDS, lambda addr: f"fn{addr:x}", lambda pid: "<...>")


def test_a_page_decodes_into_the_events_and_fields_the_text_pipe_prints():
    data = (
        _event(0, _switch(7, ("loop", 7, 19), ("softrt-disturb", 9, 9), 0x100))  # preempted: R+
        + _event(1_000, _runtime(9, "softrt-disturb", 450_000))
        + struct.pack("<II", (3 << 5) | 30, 1)  # a time extend: 1 << 27 ns plus 3 more
        + _event(0, struct.pack("<H2xiI", 150, 9, 9))  # softirq RCU
        + _event(499, struct.pack("<H2xii", 90, 9, 236))  # a local timer: no fields read
        + struct.pack("<II", (1 << 5) | 29, 40)
        + b"\0" * 40  # a discarded event: its delta is not read
        + _event(2, _switch(9, ("softrt-disturb", 9, 9), ("loop", 7, 19), 1))
    )  # slept: S
    events = _decoder().decode_page(_page(5_000_000_000, data), 1)
    t0 = 5_000_000_000
    assert [(e.ts_ns, e.name, e.pid, e.comm) for e in events] == [
        (t0, "sched_switch", 7, "loop"),
        (t0 + 1_000, "sched_stat_runtime", 9, "softrt-disturb"),
        ((t0 + 1_000 + (1 << 27) + 3 + 500) // 1000 * 1000, "softirq_entry", 9, "softrt-disturb"),  # µs, rounded
        ((t0 + 1_000 + (1 << 27) + 3 + 499 + 500) // 1000 * 1000, "local_timer_entry", 9, "softrt-disturb"),
        ((t0 + 1_000 + (1 << 27) + 3 + 501 + 500) // 1000 * 1000, "sched_switch", 9, "softrt-disturb"),
    ]
    assert events[0].fields == {
        "prev_comm": "loop",
        "prev_pid": "7",
        "prev_prio": "19",
        "prev_state": "R+",
        "next_comm": "softrt-disturb",
        "next_pid": "9",
        "next_prio": "9",
    }
    assert events[1].fields == {"comm": "softrt-disturb", "pid": "9", "runtime": "450000"}
    assert events[2].fields == {"vec": "9", "action": "RCU"} and events[3].fields == {}
    assert events[4].fields["prev_state"] == "S"


def test_a_recurring_payload_is_rendered_once_and_still_names_its_tasks():
    """A sleeping loop's switches to and from idle are the same bytes every cycle: their fields are
    kept by payload (the same read-only dict), and a comm a later event changed is learned again
    from the kept payload, as a fresh decode would."""
    dec = _decoder()
    to_idle = _event(0, _switch(7, ("loop", 7, 19), ("swapper/1", 0, 120), 1))
    back = _event(250, _switch(0, ("swapper/1", 0, 120), ("loop", 7, 19), 0))
    rename = _event(1, _switch(7, ("renamed", 7, 19), ("swapper/1", 0, 120), 1))
    first = dec.decode_page(_page(1_000_000, to_idle + back + to_idle + back), 1)
    assert [e.fields for e in first[2:]] == [e.fields for e in first[:2]]
    assert first[2].fields is first[0].fields and first[3].fields is first[1].fields
    assert first[0].fields["prev_state"] == "S" and first[1].fields["prev_state"] == "R"
    dec.decode_page(_page(2_000_000, rename), 1)
    assert dec.comms[7] == "renamed"
    [ev] = dec.decode_page(_page(3_000_000, to_idle), 1)  # kept: the comm in it is learned again
    assert ev.comm == "loop" and dec.comms[7] == "loop" and dec.comms[0] == "<idle>"
    other = _decoder()  # a fresh decoder (nothing kept yet) renders the same fields
    assert [e.fields for e in other.decode_page(_page(1_000_000, to_idle + back), 1)] == [e.fields for e in first[:2]]


def test_lost_events_and_unknown_event_types_are_counted():
    dec = _decoder()
    data = _event(0, struct.pack("<H2xii", 77, 1, 0)) + _event(5, struct.pack("<H2xii", 90, 1, 236))
    events = dec.decode_page(_page(1_000, data, missed=12), 0)
    assert [e.name for e in events] == ["local_timer_entry"] and events[0].comm == "<...>"
    assert dec.lost == 12 and dec.unparsed == 1
    dec.decode_page((struct.pack("<QQ", 0, 1 << 31)).ljust(4096, b"\0"), 0)  # missed, count not stored
    assert dec.lost == 13
    assert dec._state(0x2) == "D" and dec._state(0x81) == "S|I" and dec._state(0) == "R"


def test_the_page_size_is_read_from_header_page():
    assert page_size(HEADER_PAGE) == 4096
    with pytest.raises(ValueError):
        parse_format("no format here")


@pytest.mark.skipif(os.geteuid() != 0, reason="tracefs needs root")
@pytest.mark.root
def test_every_marker_written_is_read_in_order_from_the_binary_pages(state_dir):
    path, mounted = tracefs.find_or_mount()
    cpu = max(os.sched_getaffinity(0))
    inst = tracefs.Instance.create(path, f"softrt-test-{os.getpid()}", CpuSet([cpu]), 1024)
    previous = os.sched_getaffinity(0)
    try:
        consumer = open_reader(inst.path, ["ftrace:print"], [cpu])
        assert isinstance(consumer, RawConsumer)
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
        marks = [e for e in events if e.name == "print"]
        assert len(marks) + consumer.parser.lost == 3000 and consumer.parser.unparsed == 0
        assert all(a.ts_ns <= b.ts_ns for a, b in zip(events, events[1:], strict=False))
        assert t0 - 1_000 <= marks[0].ts_ns  # the mono trace clock is CLOCK_MONOTONIC
        assert horizon > marks[0].ts_ns and consumer.horizon_ns >= horizon
        assert consumer.events_read == len(events) and not consumer.is_alive()
    finally:
        os.sched_setaffinity(0, previous)
        inst.remove()
        if mounted is not None:
            mounted.undo()


def test_a_kernel_with_another_event_header_is_read_as_text(tmp_path):
    """Another ring-buffer layout than the one decoded: the text pipe, which the kernel formats itself."""
    (tmp_path / "events").mkdir()
    (tmp_path / "events/header_event").write_text("# compressed entry header\n\ttype_len    :    6 bits\n")
    inst = tmp_path / "instances/softrt-1"
    inst.mkdir(parents=True)
    (inst / "trace_pipe").write_text("")
    reader = open_reader(inst, ["sched:sched_switch"], [1])
    assert type(reader).__name__ == "Consumer" and reader.pipe == inst / "trace_pipe"
    reader._close()
