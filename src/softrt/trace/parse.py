"""Parse tracefs text output (``trace_pipe``) into TraceEvents (trace layer; pure, no I/O).

The line format is the kernel's default (kernel/trace/trace_output.c, ``trace_print_context``)::

    <comm>-<pid> [(<tgid>)] [<cpu>] [<irq-info flags>] <secs>.<usecs>: <event>: <fields>

``comm`` is padded, may hold spaces and dashes (the pid is the last ``-<digits>`` before ``[cpu]``);
the timestamp of an ns trace clock such as ``mono`` is printed in microseconds, so ``ts_ns`` is a
multiple of 1000. Lost events appear as ``CPU:N [LOST M EVENTS]`` (ring_buffer missed events).
Fields are kept as the kernel printed them, under the names of the event's ``format`` file: most
events print ``key=value`` pairs (values may hold spaces, e.g. a comm); the few that do not
(workqueue, raw_syscalls) are matched by their print fmt.
"""

from __future__ import annotations

import re

from ..analysis.events import TraceEvent

_LINE = re.compile(r"\s*(.*?)-(\d+)\s+(?:\(\s*[-\d]+\)\s+)?\[(\d+)\]\s+(?:\S{4,5}\s+)?(\d+)\.(\d+): (\w+): ?")
_LOST = re.compile(r"^CPU:\s*(\d+)\s+\[LOST (\d+) EVENTS\]")
# include/trace/events/workqueue.h: "work struct %p: function %ps" (6.x may add "workqueue=%s").
_WORK = re.compile(r"^work struct (?P<work>\S+): function (?P<function>\S+)(?:\s+workqueue=(?P<workqueue>\S+))?")
# include/trace/events/syscalls.h: "NR %ld (%lx, ...)" and "NR %ld = %ld".
_SYS_ENTER = re.compile(r"^NR (?P<id>-?\d+) \((?P<args>.*)\)")
_SYS_EXIT = re.compile(r"^NR (?P<id>-?\d+) = (?P<ret>-?\d+)")
# include/trace/events/sched.h: "comm=%s pid=%d runtime=%Lu [ns]" (the unit would join the value).
_RUNTIME = re.compile(r"^comm=(?P<comm>.*) pid=(?P<pid>-?\d+) runtime=(?P<runtime>\d+)")
# include/trace/events/irq.h: "vec=%u [action=%s]" (the bracket would send it down the slow path).
_SOFTIRQ = re.compile(r"^vec=(?P<vec>\d+) \[action=(?P<action>\w+)\]")
_SPECIAL = {
    "workqueue_execute_start": _WORK,
    "workqueue_execute_end": _WORK,
    "softirq_entry": _SOFTIRQ,
    "softirq_exit": _SOFTIRQ,
    "sys_enter": _SYS_ENTER,
    "sys_exit": _SYS_EXIT,
    "sched_stat_runtime": _RUNTIME,
}


def parse_fields(name: str, rest: str) -> dict[str, str]:
    """Split an event's printed fields into ``{name: text}``.

    A word without ``=`` continues the previous value (a comm or IRQ name with spaces).
    """
    special = _SPECIAL.get(name)
    if special is not None:
        m = special.match(rest)
        if m:
            return {k: v for k, v in m.groupdict().items() if v is not None}
    if "==>" in rest:  # sched_switch's arrow between prev and next
        rest = rest.replace(" ==> ", " ")
    if "[" not in rest:
        try:  # the common case, every word key=value: one pass in C
            return dict(word.split("=", 1) for word in rest.split())
        except ValueError:
            pass  # a value with a space (a comm, an IRQ name): word by word below
    out: dict[str, str] = {}
    key = None
    for word in rest.split(" "):
        if not word:
            continue
        k, eq, v = word.partition("=")
        if eq and k and (k.isidentifier() or k[0] == "["):
            if k[0] == "[":  # softirq: "vec=9 [action=RCU]"
                k, v = k[1:], v.removesuffix("]")
            key = k
            out[k] = v
        elif key is not None:
            out[key] += " " + word
    return out


class LineParser:
    """Turns complete text lines into events; counts the lost events it is told about.

    *fields_of*: the event names whose fields are split (None: all); the others get no fields,
    which saves the larger part of a line's cost for events used by name and time only.
    """

    def __init__(self, fields_of: frozenset[str] | None = None) -> None:
        self.lost = 0
        self.unparsed = 0
        self.fields_of = fields_of

    def parse(self, line: str) -> TraceEvent | None:
        m = _LINE.match(line)
        if m is None:
            lm = _LOST.match(line)
            if lm:
                self.lost += int(lm.group(2))
            elif line.strip() and not line.startswith("#"):
                self.unparsed += 1
            return None
        comm, pid, cpu, secs, frac, name = m.groups()
        ts_ns = int(secs) * 1_000_000_000 + int(frac[:9].ljust(9, "0"))
        fields = (
            parse_fields(name, line[m.end() :].rstrip()) if self.fields_of is None or name in self.fields_of else {}
        )
        return TraceEvent(ts_ns, int(cpu), name, int(pid), comm.strip(), fields)

    def parse_text(self, text: str) -> list[TraceEvent]:
        """Parse every line of *text* (complete lines only)."""
        out = []
        for line in text.splitlines():
            ev = self.parse(line)
            if ev is not None:
                out.append(ev)
        return out
