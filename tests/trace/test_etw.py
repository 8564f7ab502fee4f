"""ETW kernel events into the Linux culprits table (trace.etw): a late cycle held by an ISR, a DPC and a
higher-priority thread, recorded as the NT kernel logger's payloads (tests/platform/windows/test_etwevents.py's
layouts, from Microsoft Learn's "CSwitch class", "DPC class" and "ISR class")."""

from __future__ import annotations

from softrt.analysis.attribution import Attributor
from softrt.platform.windows import etwevents as E
from softrt.trace.etw import kernel_prio, qpc_to_ns, to_trace_events

from ..analysis.test_attribution import T0, P, edge, records
from ..platform.windows.test_etwevents import cswitch, dpc, isr

CPU, WORKER, SYSTEM = 13, 1000, 4
FREQ = 10_000_000  # QueryPerformanceFrequency: 10 MHz, 100 ns ticks on Windows 10 and later


def tick(ns: int) -> int:
    return ns // 100


def test_a_late_cycle_credits_the_isr_the_dpc_and_the_thread_that_held_the_rt_core():
    e5 = edge(5)
    recs = [
        isr(tick(e5 + 5_000), tick(e5 + 15_000), CPU, 0xFFFFF80700001000, 0x91),
        dpc(tick(e5 + 15_000), tick(e5 + 40_000), CPU, 0xFFFFF80712345678),
        cswitch(tick(e5 + 40_000), CPU, SYSTEM, WORKER, 31, 28, 1),  # preempted (Ready) by a priority-31 thread
        cswitch(tick(e5 + 100_000), CPU, WORKER, SYSTEM, 28, 31, 5),
        cswitch(tick(e5), 2, 77, 78, 8, 8, 5),
    ]  # another CPU's: not the RT core's
    switches, routines, bad = E.parse(recs)
    events = to_trace_events(switches, routines, {WORKER: "python.exe", SYSTEM: "System"}, qpc_to_ns(FREQ), {CPU})
    assert bad == 0 and len(events) == 6 and [e.ts_ns for e in events] == sorted(e.ts_ns for e in events)
    att = Attributor(period_ns=P, rt_cpu=CPU, worker_pid=WORKER)
    att.add_events(events)
    late = records(10, late={5: 100_000})
    att.add_records(late)
    att.advance(int(late["detect_ns"][-1]) + P)
    out = att.finish().to_dict()
    rows = {(c["kind"], c["name"]): c for c in out["culprits"]}
    assert rows[("thread", "System")]["detail"] == "FIFO/RR 31" and rows[("thread", "System")]["total_us"] == 60
    assert rows[("softirq", "DPC 0xfffff80712345678")]["total_us"] == 25
    assert rows[("irq", "ISR 0xfffff80700001000")]["total_us"] == 10
    assert events[0].ts_ns > T0


def test_windows_priorities_as_kernel_prios():
    assert [kernel_prio(p) for p in (31, 16, 15, 8)] == [68, 83, 120, 120]
