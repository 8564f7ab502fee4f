"""A real trace_pipe sample of this kernel → parser → the real Attributor (pure, no tracing needed).

``fixtures/trace_pipe-6.18-cpu1.txt.gz``: the first 2,960 lines (~30 ms) that a softrt instance
(``trace.session.wanted_events`` for a spin loop, before sched_wakeup was filtered to the worker,
``irq-info`` off, ``mono`` clock) printed on
CPU 1 of the benchmark VM (Linux 6.18.44, x86_64, PREEMPT_DYNAMIC in "none" mode), with a shell
loop (``sh``, pid 7043) on that CPU in the worker's place: its ``raw_syscalls`` filtered to its
pid, as a run filters the worker's. Every field the attribution reads must come out of it.
"""

from __future__ import annotations

import gzip
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from softrt.analysis.attribution import Attributor
from softrt.analysis.timeline import FIELDS_READ
from softrt.ipc.layout import RECORD_DTYPE
from softrt.trace.parse import LineParser

SAMPLE = Path(__file__).parent / "fixtures" / "trace_pipe-6.18-cpu1.txt.gz"
WORKER = 7043  # the sh loop standing in for the worker


@pytest.fixture(scope="module")
def events():
    parser = LineParser()
    out = parser.parse_text(gzip.open(SAMPLE, "rt").read())
    assert parser.unparsed == 0 and parser.lost == 0
    return out


def test_every_event_the_attribution_reads_has_its_fields(events):
    names = Counter(e.name for e in events)
    assert len(events) == 2_960
    for name in (
        "sched_switch",
        "sched_wakeup",
        "irq_handler_entry",
        "irq_handler_exit",
        "softirq_entry",
        "softirq_exit",
        "workqueue_execute_start",
        "workqueue_execute_end",
        "sys_enter",
        "sys_exit",
        "local_timer_entry",
        "local_timer_exit",
        "reschedule_entry",
        "call_function_single_entry",
    ):
        assert names[name] > 0, name
    need = {
        "sched_switch": {"prev_comm", "prev_pid", "prev_prio", "prev_state", "next_comm", "next_pid", "next_prio"},
        "sched_wakeup": {"pid"},
        "irq_handler_entry": {"irq", "name"},
        "irq_handler_exit": {"irq"},
        "softirq_entry": {"vec", "action"},
        "workqueue_execute_start": {"function"},
        "sys_enter": {"id"},
    }
    for e in events:
        missing = need.get(e.name, set()) - set(e.fields)
        assert not missing, (e, missing)
        assert e.cpu == 1 and e.ts_ns % 1000 == 0
    ints = [
        int(e.fields[k]) for e in events for k in ("prev_pid", "next_pid", "pid", "irq", "vec", "id") if k in e.fields
    ]
    assert len(ints) > 3_000  # numbers, not text with a bracket or a comma attached
    assert {e.fields["action"] for e in events if e.name == "softirq_entry"} <= {
        "HI",
        "TIMER",
        "NET_TX",
        "NET_RX",
        "BLOCK",
        "IRQ_POLL",
        "TASKLET",
        "SCHED",
        "HRTIMER",
        "RCU",
    }
    assert all(e.fields["function"].isidentifier() for e in events if e.name == "workqueue_execute_start")
    assert [e.ts_ns for e in events] == sorted(e.ts_ns for e in events)


def _attribute(events) -> dict:
    t0, t1 = events[0].ts_ns, events[-1].ts_ns
    period = 1_000_000
    edges = np.arange(t0 + period, t1 - period, period, dtype=np.int64)
    recs = np.zeros(edges.size, dtype=RECORD_DTYPE)
    recs["seq"] = recs["cycle"] = np.arange(edges.size)
    recs["edge_ns"] = edges
    recs["detect_ns"] = edges + 900_000
    recs["write_ns"] = recs["done_ns"] = edges + 901_000
    att = Attributor(period_ns=period, rt_cpu=1, worker_pid=WORKER, keep_worst=1000, rt_throttling=False)
    att.add_events(events)
    att.add_records(recs)
    att.advance(t1)
    return att.finish().to_dict()


def test_the_sample_through_the_attribution(events):
    """Every 1 ms cycle of the sample's span made late (latency 900 µs): every window is explained
    from these events, with the sources named as the kernel printed them."""
    why = _attribute(events)
    edges_size = why["cycles"]
    assert why["late_cycles"] == edges_size >= 20 and len(why["worst"]) == edges_size
    names = {(c["kind"], c["name"]) for c in why["culprits"]}
    functions = {e.fields["function"] for e in events if e.name == "workqueue_execute_start"}
    irq_names = {e.fields["name"] for e in events if e.name == "irq_handler_entry"}
    assert any(k == "thread" and "[" in n and n.split("[")[1].rstrip("]") in functions for k, n in names)
    assert any(k == "irq" and n in irq_names for k, n in names)
    assert ("kernel", "local timer") in names and any(
        k == "softirq" and n in ("TIMER", "RCU", "SCHED") for k, n in names
    )
    assert any(k == "kernel" and n.startswith("system call ") and n.split()[2].isdigit() for k, n in names), names
    assert not any("?" in n or n.startswith("vec ") for _k, n in names), names  # every name was found
    for cyc in why["worst"]:
        total = sum(c["duration_us"] for c in cyc["causes"]) + cyc["unexplained_us"]
        assert total == pytest.approx(cyc["window"]["duration_us"], abs=0.01)


def test_the_consumer_splits_only_the_fields_the_attribution_reads(events):
    """The consumer's parser (fields of FIELDS_READ only) gives the very same attribution."""
    parser = LineParser(FIELDS_READ)
    lean = parser.parse_text(gzip.open(SAMPLE, "rt").read())
    assert sum(1 for e in lean if e.fields) < len(events) * 0.9  # lines were left unsplit
    assert [(e.ts_ns, e.name, e.pid) for e in lean] == [(e.ts_ns, e.name, e.pid) for e in events]
    assert _attribute(lean) == _attribute(events)
