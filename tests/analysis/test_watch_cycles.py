"""A watched thread's cycles from its trace events (analysis.watch, analysis.watch_why), on known answers.

The events are written as the kernel prints them in ``trace_pipe`` (the lines of a real
cyclictest trace on the benchmark VM, 6.18) and read by the trace layer's parser, so the field
names and formats are the kernel's.
"""

from __future__ import annotations

import numpy as np
import pytest

from softrt.analysis.attribution import Attributor
from softrt.analysis.cycles import CycleStream, LateRule, cycle_view
from softrt.analysis.watch import RecordMaker, ThreadCycles, infer_period_ns
from softrt.analysis.watch_why import RecentEvents, ThreadAttribution, merge, split_by_cpu
from softrt.schema.why_late import WhyLate
from softrt.trace.parse import LineParser
from softrt.trace.watch import WATCH_FIELDS

T = 500  # the watched thread
US = 1_000


class Trace:
    """Builds trace_pipe lines at µs times and parses them."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def add(self, us: int, cpu: int, comm: str, pid: int, event: str, fields: str) -> Trace:
        self.lines.append(f"{comm:>16}-{pid:<7} [{cpu:03d}] {us // 1_000_000}.{us % 1_000_000:06d}: {event}: {fields}")
        return self

    def switch(self, us, cpu, prev, prev_pid, prev_prio, state, nxt, next_pid, next_prio):
        return self.add(
            us,
            cpu,
            prev,
            prev_pid,
            "sched_switch",
            f"prev_comm={prev} prev_pid={prev_pid} prev_prio={prev_prio} prev_state={state} ==> "
            f"next_comm={nxt} next_pid={next_pid} next_prio={next_prio}",
        )

    def wakeup(self, us, cpu, waker="swapper/1", waker_pid=0, target=None):
        return self.add(
            us,
            cpu,
            waker,
            waker_pid,
            "sched_wakeup",
            f"comm=ct pid={T} prio=19 target_cpu={cpu if target is None else target:03d}",
        )

    def start(self, us, cpu, expires_ns, ptr="00000000aa", function="hrtimer_wakeup", pid=T):
        return self.add(
            us,
            cpu,
            "ct",
            pid,
            "hrtimer_start",
            f"hrtimer={ptr} function={function} expires={expires_ns} softexpires={expires_ns} mode=ABS was_armed=0",
        )

    def events(self):
        return LineParser(WATCH_FIELDS).parse_text("\n".join(self.lines))


def sleep_cycle(tr: Trace, cpu: int, expiry_us: int, latency_us: int, run_us: int, ptr: str = "00000000aa") -> None:
    """A clock_nanosleep cycle as cyclictest makes it: woken by its timer, back in user space
    *latency_us* after *expiry_us*, blocked again *run_us* later (arming the next expiry)."""
    wake = expiry_us + latency_us - 3
    tr.add(wake - 5, cpu, "swapper/1", 0, "local_timer_entry", "vector=236")
    tr.wakeup(wake, cpu)
    tr.add(wake + 1, cpu, "swapper/1", 0, "local_timer_exit", "vector=236")
    tr.switch(wake + 2, cpu, "swapper/1", 0, 120, "R", "ct", T, 19)
    tr.add(expiry_us + latency_us, cpu, "ct", T, "sys_exit", "NR 230 = 0")
    done = expiry_us + latency_us + run_us
    tr.add(done - 2, cpu, "ct", T, "hrtimer_setup", f"hrtimer={ptr} clockid=CLOCK_MONOTONIC mode=ABS")
    tr.start(done - 1, cpu, (expiry_us + 250) * US, ptr)
    tr.switch(done, cpu, "ct", T, 19, "S", "swapper/1", 0, 120)


def test_sleeping_thread_cycles_have_cyclictests_latency_period_and_run_time():
    tr = Trace()
    tr.start(1_000_000 - 100, 1, 1_000_000 * US)  # the first sleep: armed before the watch saw a cycle
    tr.switch(1_000_000 - 99, 1, "ct", T, 19, "S", "swapper/1", 0, 120)
    for k, (lat, run) in enumerate([(7, 20), (12, 25), (40, 30), (9, 300)]):  # the last overruns its period
        sleep_cycle(tr, 1, 1_000_000 + 250 * k, lat, run)
    th = ThreadCycles(T)
    for ev in tr.events():
        th.add(ev)
    cycles = th.take()
    assert [(c.edge_ns, c.detect_ns - c.edge_ns, c.done_ns - c.detect_ns, c.cpu) for c in cycles] == [
        (1_000_000_000 + 250_000 * k, lat * US, run * US, 1)
        for k, (lat, run) in enumerate([(7, 20), (12, 25), (40, 30), (9, 300)])
    ]
    assert all(c.wake_ns == c.edge_ns + (c.detect_ns - c.edge_ns) - 3 * US for c in cycles)
    assert th.kind == "timer" and th.timers == {"hrtimer_wakeup": 4} and th.woken_early == 0
    records, cpus = RecordMaker(250_000).records(cycles)
    assert records["detect_ns"].tolist() == records["write_ns"].tolist() == [c.detect_ns for c in cycles]
    assert (records["detect_ns"] - records["edge_ns"]).tolist() == [7_000, 12_000, 40_000, 9_000]
    assert records["cycle"].tolist() == [0, 1, 2, 3] and records["missed"].tolist() == [0, 0, 0, 0]
    # slack (the run's definition) is the next expiry minus when it blocked: negative for the overrun
    slack = records["edge_ns"] + 250_000 - records["done_ns"]
    assert slack.tolist()[-1] == (250 - 9 - 300) * US
    assert cpus.tolist() == [1, 1, 1, 1]


def test_an_overrun_that_never_blocks_is_a_cycle_ended_by_its_request_to_sleep():
    tr = Trace()
    tr.start(100, 0, 200 * US)
    tr.switch(101, 0, "ct", T, 19, "S", "swapper/0", 0, 120)
    tr.wakeup(205, 0)
    tr.switch(206, 0, "swapper/0", 0, 120, "R", "ct", T, 19)
    tr.add(208, 0, "ct", T, "sys_exit", "NR 230 = 0")
    # it works past its next expiry (450 µs), then asks to sleep until it: clock_nanosleep returns at once
    tr.start(600, 0, 450 * US)
    tr.add(602, 0, "ct", T, "sys_exit", "NR 230 = 0")
    tr.start(620, 0, 700 * US)
    tr.switch(621, 0, "ct", T, 19, "S", "swapper/0", 0, 120)
    th = ThreadCycles(T)
    for ev in tr.events():
        th.add(ev)
    a, b = th.take()
    assert (a.edge_ns, a.detect_ns, a.done_ns) == (200 * US, 208 * US, 600 * US)
    assert (b.edge_ns, b.detect_ns, b.done_ns, b.wake_ns) == (450 * US, 602 * US, 621 * US, None)


def test_a_sleep_cut_short_is_woken_early_not_a_cycle_and_the_tick_is_not_its_timer():
    tr = Trace()
    tr.start(100, 0, 1_000 * US)
    tr.switch(101, 0, "ct", T, 19, "S", "swapper/0", 0, 120)
    tr.wakeup(300, 0)  # a signal
    tr.switch(301, 0, "swapper/0", 0, 120, "R", "ct", T, 19)
    tr.add(302, 0, "ct", T, "hrtimer_cancel", "hrtimer=00000000aa")  # do_nanosleep cancels its timer
    # the tick rearmed from an interrupt while it is current: logged with its pid, not its sleep
    tr.start(303, 0, 304 * US, ptr="00000000bb", function="tick_nohz_handler")
    tr.add(310, 0, "ct", T, "sys_exit", "NR 230 = -4")
    tr.add(400, 0, "ct", T, "sys_exit", "NR 1 = 8")  # a write(2) after the tick's expiry: not a cycle
    th = ThreadCycles(T)
    for ev in tr.events():
        th.add(ev)
    assert th.take() == [] and th.woken_early == 1 and th.kind == "sleeps"


def test_timerfd_rearms_before_returning_and_each_expiry_is_its_cycle():
    """fs/timerfd.c: a periodic timerfd is rearmed in the read that returns (hrtimer_forward_now),
    so the next expiry is armed before the cycle's own return to user space."""
    tr = Trace()
    tr.start(90, 0, 100 * US, ptr="00000000fd", function="timerfd_tmrproc")
    for k in range(3):
        expiry = 100 + 100 * k
        tr.switch(expiry - 20 if k else 95, 0, "ct", T, 19, "S", "swapper/0", 0, 120)
        tr.wakeup(expiry + 4, 0)
        tr.switch(expiry + 5, 0, "swapper/0", 0, 120, "R", "ct", T, 19)
        tr.start(expiry + 6, 0, (expiry + 100) * US, ptr="00000000fd", function="timerfd_tmrproc")
        tr.add(expiry + 7, 0, "ct", T, "sys_exit", "NR 0 = 8")
    th = ThreadCycles(T)
    for ev in tr.events():
        th.add(ev)
    cycles = th.take()  # the last is still running (its done unknown): not taken
    assert [(c.edge_ns, c.detect_ns) for c in cycles] == [(100 * US, 107 * US), (200 * US, 207 * US)]
    assert th.timers == {"timerfd_tmrproc": 3}


@pytest.mark.parametrize("mode, expiry_offset", [("ABS", True), ("REL", False)])
def test_a_realtime_timer_is_converted_to_the_trace_clock(mode, expiry_offset):
    """An absolute CLOCK_REALTIME expiry is realtime ns; a relative one (glibc's nanosleep, seen on
    6.18: hrtimer_setup says CLOCK_REALTIME mode=REL) runs on the monotonic base."""
    tr = Trace()
    offset = 1_700_000_000 * 10**9  # CLOCK_REALTIME - CLOCK_MONOTONIC
    tr.add(99, 0, "ct", T, "hrtimer_setup", f"hrtimer=00000000aa clockid=CLOCK_REALTIME mode={mode}")
    tr.start(100, 0, (offset if expiry_offset else 0) + 200 * US)
    tr.switch(101, 0, "ct", T, 19, "S", "swapper/0", 0, 120)
    tr.wakeup(210, 0)
    tr.switch(211, 0, "swapper/0", 0, 120, "R", "ct", T, 19)
    tr.add(212, 0, "ct", T, "sys_exit", "NR 230 = 0")
    tr.switch(230, 0, "ct", T, 19, "S", "swapper/0", 0, 120)
    th = ThreadCycles(T, {"CLOCK_REALTIME": offset})
    for ev in tr.events():
        th.add(ev)
    [c] = th.take()
    assert (c.edge_ns, c.detect_ns) == (200 * US, 212 * US)


def test_a_sleeps_clock_is_forgotten_once_it_returns_and_a_timerfds_is_kept():
    """The watch records only the setups of clocks other than MONOTONIC (trace.watch): a sleep's
    on-stack timer set up once on BOOTTIME and then on MONOTONIC at the same address (its setup not
    recorded) runs on MONOTONIC the second time; a timerfd's timer keeps the clock it was set up with."""
    tr = Trace()
    boot = 5_000 * US  # CLOCK_BOOTTIME - CLOCK_MONOTONIC: time suspended
    tr.add(99, 0, "ct", T, "hrtimer_setup", "hrtimer=00000000aa clockid=CLOCK_BOOTTIME mode=ABS")
    tr.start(100, 0, boot + 200 * US)
    tr.switch(101, 0, "ct", T, 19, "S", "swapper/0", 0, 120)
    tr.switch(210, 0, "swapper/0", 0, 120, "R", "ct", T, 19)
    tr.add(212, 0, "ct", T, "sys_exit", "NR 230 = 0")
    tr.start(230, 0, 450 * US)  # the same stack address, MONOTONIC: no setup recorded
    tr.switch(231, 0, "ct", T, 19, "S", "swapper/0", 0, 120)
    tr.switch(455, 0, "swapper/0", 0, 120, "R", "ct", T, 19)
    tr.add(457, 0, "ct", T, "sys_exit", "NR 230 = 0")
    tr.add(470, 0, "ct", T, "hrtimer_setup", "hrtimer=00000000bb clockid=CLOCK_BOOTTIME mode=ABS")
    for k in range(2):  # a timerfd on BOOTTIME, rearmed in the read that returns
        tr.start(480 + 250 * k, 0, boot + (700 + 250 * k) * US, "00000000bb", "timerfd_tmrproc")
        tr.switch(481 + 250 * k, 0, "ct", T, 19, "S", "swapper/0", 0, 120)
        tr.switch(703 + 250 * k, 0, "swapper/0", 0, 120, "R", "ct", T, 19)
        tr.add(704 + 250 * k, 0, "ct", T, "sys_exit", "NR 0 = 8")
    tr.switch(1_000, 0, "ct", T, 19, "S", "swapper/0", 0, 120)
    th = ThreadCycles(T, {"CLOCK_BOOTTIME": boot})
    for ev in tr.events():  # no sched_wakeup: the lean trace's (its cycles need none)
        th.add(ev)
    cycles = th.take()
    assert [(c.edge_ns, c.detect_ns, c.wake_ns) for c in cycles] == [
        (200 * US, 212 * US, None),
        (450 * US, 457 * US, None),
        (700 * US, 704 * US, None),
        (950 * US, 954 * US, None),
    ]


def test_a_polling_thread_has_no_cycle_but_its_preemptions_and_who_took_the_cpu():
    tr = Trace()
    tr.switch(100, 1, "poll", T, 19, "R", "rival", 7, 9)  # preempted by a FIFO 90 task
    tr.switch(150, 1, "rival", 7, 9, "S", "kworker/1:1", 8, 120)
    tr.switch(160, 1, "kworker/1:1", 8, 120, "I", "poll", T, 19)
    tr.switch(500, 1, "poll", T, 19, "R+", "rival", 7, 9)
    tr.switch(530, 1, "rival", 7, 9, "S", "poll", T, 19)
    th = ThreadCycles(T)
    for ev in tr.events():
        th.add(ev)
    assert th.kind == "polls" and th.take() == []
    assert (th.preemptions, th.preempted_ns, th.longest_preemption_ns) == (2, 90 * US, 60 * US)
    rival, kworker = th.preemptors[(7, "rival")], th.preemptors[(8, "kworker/1:1")]
    assert (rival.times, rival.total_ns, rival.worst_ns, rival.prio) == (2, 80 * US, 50 * US, 9)
    assert (kworker.times, kworker.total_ns) == (1, 10 * US)


def test_the_period_and_skipped_expiries():
    assert infer_period_ns([0, 250_000, 500_000, 1_000_000, 1_250_000]) == 250_000
    assert infer_period_ns([5]) is None
    maker = RecordMaker(250_000)
    from softrt.analysis.watch import Cycle

    recs, _ = maker.records([Cycle(0, 10_000, 0, None, 20_000), Cycle(250_000, 260_000, 0, None, 270_000)])
    recs2, _ = maker.records([Cycle(1_000_000, 1_005_000, 0, None, 1_010_000)])  # two expiries skipped
    assert recs["seq"].tolist() + recs2["seq"].tolist() == [0, 1, 2]
    assert recs2["cycle"].tolist() == [4] and recs2["missed"].tolist() == [2]


def test_a_wakeup_goes_to_the_cpu_it_wakes_the_thread_onto():
    tr = Trace().wakeup(10, 0, target=1)
    tr.add(11, 0, "x", 9, "sched_wakeup", "comm=x pid=77 prio=120 target_cpu=001")  # another task's
    by_cpu = split_by_cpu(tr.events(), frozenset({T}))
    assert [e.fields["pid"] for e in by_cpu[1]] == [str(T)] and [e.fields["pid"] for e in by_cpu[0]] == ["77"]


def _disturbed_cycle(tr: Trace, cpu: int, expiry_us: int, hog: str, hog_pid: int, hog_us: int) -> None:
    """A cycle whose wake-up waited *hog_us* behind a FIFO 90 task on *cpu*."""
    tr.switch(expiry_us - 1, cpu, "swapper", 0, 120, "R", hog, hog_pid, 9)
    tr.wakeup(expiry_us + 2, cpu)
    tr.switch(expiry_us + hog_us, cpu, hog, hog_pid, 9, "S", "ct", T, 19)
    tr.add(expiry_us + hog_us + 2, cpu, "ct", T, "sys_exit", "NR 230 = 0")
    tr.start(expiry_us + hog_us + 10, cpu, (expiry_us + 1000) * US)
    tr.switch(expiry_us + hog_us + 11, cpu, "ct", T, 19, "S", "swapper", 0, 120)


def test_each_late_cycle_is_explained_by_the_cpu_it_ran_on_and_the_cpus_add_up():
    """A thread that migrates: its late cycle on CPU 0 is blamed on CPU 0's hog, its late cycle
    on CPU 1 on CPU 1's, each by the run's own Attributor; the table adds them up."""
    tr = Trace()
    tr.start(900, 0, 1000 * US)
    tr.switch(901, 0, "ct", T, 19, "S", "swapper", 0, 120)
    _disturbed_cycle(tr, 0, 1000, "hog-a", 41, 100)
    _disturbed_cycle(tr, 1, 2000, "hog-b", 42, 60)
    _disturbed_cycle(tr, 1, 3000, "hog-b", 42, 5)  # on time
    tr.switch(3500, 1, "swapper", 0, 120, "R", "x", 5, 120)
    events = tr.events()
    th = ThreadCycles(T)
    for ev in events:
        th.add(ev)
    cycles = th.take()
    assert [c.cpu for c in cycles] == [0, 1, 1] and th.migrations == 1
    recent = RecentEvents()
    att = ThreadAttribution(T, 1_000_000, 20_000, 10, recent, rt_throttling=False)
    by_cpu = split_by_cpu(events, frozenset({T}))
    recent.add(by_cpu, [], 3_600 * US)
    records, cpus = RecordMaker(1_000_000).records(cycles)
    att.add_records(cycle_view(records, None, LateRule(1_000_000, 20_000)), cpus)
    att.advance(3_600 * US)
    why = att.finish(lost_events=0, home_cpu=0).to_dict()
    assert why["cycles"] == 3 and why["late_cycles"] == 2 and why["rt_cpu"] == 1
    threads = {c["name"]: c for c in why["culprits"] if c["kind"] == "thread"}
    assert set(threads) == {"hog-a", "hog-b"}
    # hog-a from the thread's wake-up (before it, the thread slept: CPU 0 saw it block); hog-b from
    # the expiry: CPU 1's timeline never saw the thread block (it slept on CPU 0), the documented
    # cost of a migration (docs/watch.md)
    assert (threads["hog-a"]["total_us"], threads["hog-b"]["total_us"]) == (98.0, 60.0)
    assert [w["window"]["duration_us"] for w in why["worst"]] == [102.0, 62.0]


def test_chunks_on_one_cpu_go_as_the_watch_view_and_agree_with_one_chunk():
    """The session's view of each chunk is handed on while the thread stays on a CPU (the late
    rule computed once); chunk by chunk gives what the whole did, late cycles and causes alike."""
    tr = Trace()
    tr.start(900, 1, 1000 * US)
    tr.switch(901, 1, "ct", T, 19, "S", "swapper", 0, 120)
    for i, hog_us in enumerate((5, 100, 5, 60, 5)):
        _disturbed_cycle(tr, 1, 1000 * (i + 1), "hog", 41, hog_us)
    events = tr.events()
    th = ThreadCycles(T)
    for ev in events:
        th.add(ev)
    records, cpus = RecordMaker(1_000_000).records(th.take())
    results = []
    for cuts in ((5,), (1, 2, 4, 5)):
        recent = RecentEvents()
        recent.add(split_by_cpu(events, frozenset({T})), [], 6_000 * US)
        att = ThreadAttribution(T, 1_000_000, 20_000, 10, recent, rt_throttling=False)
        stream = CycleStream(LateRule(1_000_000, 20_000))
        for a, b in zip((0, *cuts), cuts):
            att.add_records(stream.view(records[a:b]), cpus[a:b])
        att.advance(6_000 * US)
        results.append(att.finish(lost_events=0, home_cpu=1).to_dict())
    assert results[0]["late_cycles"] == 2 and results[0] == results[1]


def test_merge_adds_up_per_cpu_results():
    a = Attributor(period_ns=1_000_000, rt_cpu=0, worker_pid=T).finish().to_dict()
    b = Attributor(period_ns=1_000_000, rt_cpu=1, worker_pid=T).finish().to_dict()
    a.update(
        cycles=3,
        late_cycles=1,
        culprits=[
            {"kind": "thread", "name": "x", "id": 1, "detail": "", "cycles": 1, "total_us": 5.0, "worst_us": 5.0}
        ],
    )
    b.update(
        cycles=5,
        late_cycles=2,
        culprits=[
            {"kind": "thread", "name": "x", "id": 1, "detail": "", "cycles": 2, "total_us": 7.0, "worst_us": 6.0}
        ],
    )
    m = merge([WhyLate.from_dict(a), WhyLate.from_dict(b)], keep_worst=10, lost_events=3).to_dict()
    assert (m["cycles"], m["late_cycles"], m["rt_cpu"], m["lost_events"]) == (8, 3, 1, 3)
    assert m["culprits"] == [
        {"kind": "thread", "name": "x", "id": 1, "detail": "", "cycles": 3, "total_us": 12.0, "worst_us": 6.0}
    ]
    assert np.isclose(m["window_us"], 0.0)
