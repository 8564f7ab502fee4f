"""trace_pipe text → TraceEvent: header variants, fields as printed, lost events (pure)."""

from __future__ import annotations

from softrt.trace.parse import LineParser, parse_fields

# Lines as this kernel (6.18, x86_64) printed them in a softrt-<pid> instance, irq-info on and off.
PIPE = """\
          <idle>-0       [001] d..2.   227.320031: sched_switch: prev_comm=swapper/1 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=My Task - x next_pid=1234 next_prio=19
         python3-24261   [001] d.h..   719.150228: sched_wakeup: comm=softrt-disturb pid=24258 prio=9 target_cpu=001
 MsMpEng helper-c-900    [001]   719.150300: irq_handler_entry: irq=24 name=virtio0 input.0
     kworker/u4:1-55     [001] ..s..   227.320081: softirq_entry: vec=9 [action=RCU]
     kworker/1:1-33      [001] .....   227.320081: workqueue_execute_start: work struct 00000000c0ffee00: function vmstat_update
         python3-1234    [001]   227.320090: sys_enter: NR 1 (1, 7ffd5a7b2d60, 5, 0, 0, 0)
         python3-1234    [001]   227.320095: sys_exit: NR 1 = 5
         python3-1234    [001]   227.320100: page_fault_user: address=0x7f00dead0000 ip=0x55d0c0ffee error_code=0x6
         python3-1234 (   1234) [001] d.h..   227.320200: local_timer_entry: vector=236
CPU:1 [LOST 17 EVENTS]
         python3-1234    [001] .....   227.330000: ipi_send_cpu: cpu=0 callsite=update_curr+0x80/0x140 callback=0x0
"""


def test_every_line_becomes_one_event_with_its_header():
    parser = LineParser()
    events = parser.parse_text(PIPE)
    assert len(events) == 10 and parser.lost == 17 and parser.unparsed == 0
    first = events[0]
    assert (first.ts_ns, first.cpu, first.name, first.pid, first.comm) == (
        227_320_031_000,
        1,
        "sched_switch",
        0,
        "<idle>",
    )
    assert events[2].comm == "MsMpEng helper-c" and events[2].pid == 900  # spaces and dashes in a comm
    assert events[8].name == "local_timer_entry" and events[8].pid == 1234  # with the tgid column


def test_fields_as_the_kernel_printed_them():
    events = LineParser().parse_text(PIPE)
    by_name = {e.name: e.fields for e in events}
    assert by_name["sched_switch"] == {
        "prev_comm": "swapper/1",
        "prev_pid": "0",
        "prev_prio": "120",
        "prev_state": "R",
        "next_comm": "My Task - x",
        "next_pid": "1234",
        "next_prio": "19",
    }
    assert by_name["irq_handler_entry"] == {"irq": "24", "name": "virtio0 input.0"}
    assert by_name["softirq_entry"] == {"vec": "9", "action": "RCU"}
    assert by_name["workqueue_execute_start"] == {"work": "00000000c0ffee00", "function": "vmstat_update"}
    assert by_name["sys_enter"] == {"id": "1", "args": "1, 7ffd5a7b2d60, 5, 0, 0, 0"}
    assert by_name["sys_exit"] == {"id": "1", "ret": "5"}
    assert by_name["page_fault_user"]["error_code"] == "0x6"
    assert by_name["ipi_send_cpu"]["callsite"] == "update_curr+0x80/0x140"


def test_headers_and_garbage_are_not_events_but_garbage_is_counted():
    parser = LineParser()
    assert parser.parse_text("# tracer: nop\n#\nnot a trace line\n") == []
    assert parser.unparsed == 1 and parser.lost == 0


def test_a_field_without_a_value_list():
    assert parse_fields("rcu_utilization", "Start context switch") == {}
