"""Decode the binary pages of ``per_cpu/cpuN/trace_pipe_raw`` into TraceEvents (trace layer; pure but
for the symbol and comm look-ups it is handed).

Reading the binary ring-buffer pages instead of ``trace_pipe``'s text spares the kernel the
formatting of every event (``%ps`` symbol look-ups, ``sprintf``) and the reader the regular
expressions: the housekeeping CPU's share of the trace (issue 31, item 1).

Sources: Documentation/trace/ring-buffer-design.rst and ``events/header_page`` (a page is a u64
timestamp, a ``commit`` word whose low 27 bits are the data size and whose bits 31 and 30 say events
were lost before it and their count is stored after the data, then the data); ``events/header_event``
and include/linux/ring_buffer.h (each event: a u32 of ``type_len`` (5 bits) and ``time_delta`` (27
bits); type_len 1-28 is a payload of 4 * type_len bytes, 0 a payload whose length (itself included)
is the next u32, 29 padding, 30 a time extend and 31 an absolute time stamp, each with the next u32
as the upper bits above 27); ``events/<system>/<event>/format`` for the payload (the common header,
then each field's offset and size; ``__data_loc`` fields are a u16 offset and a u16 length).
libtraceevent's kbuffer-parse.c reads the same layout.

The fields are rendered as the kernel's text prints them (the attribution reads text:
``prev_state`` ``R``/``R+``/``S``..., softirq ``action``, workqueue ``function`` by symbol), and
``ts_ns`` is rounded to the µs as ``trace_pipe`` prints a ns clock (kernel/trace/trace_output.c,
``ns2usecs``), so a run's explanation is the same whichever way it was read.
"""

from __future__ import annotations

import functools
import re
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..analysis.events import TraceEvent
from ..analysis.timeline import SOFTIRQ_NAMES
from ..platform.kfiles import read_text

PAGE_HEADER = struct.Struct("<QQ")  # timestamp, commit (events/header_page on 64-bit kernels)
_U32 = struct.Struct("<I")
_MISSED_EVENTS, _MISSED_STORED = 1 << 31, 1 << 30
_COMMIT_MASK = (1 << 27) - 1
_DATA_MAX, _PADDING, _TIME_EXTEND, _TIME_STAMP = 28, 29, 30, 31
_TS_SHIFT = 27
_FIELD = re.compile(r"field:(?P<decl>[^;]+);\s*offset:(?P<offset>\d+);\s*size:(?P<size>\d+);\s*signed:(?P<signed>\d)")
# sched_switch's prev_state letters, from its print fmt: { 0x00000001, "S" }, ...
_FLAG = re.compile(r"\{ (0x[0-9a-fA-F]+), \"(\w)\" \}")
_INTS = {
    (1, False): "<B",
    (1, True): "<b",
    (2, False): "<H",
    (2, True): "<h",
    (4, False): "<I",
    (4, True): "<i",
    (8, False): "<Q",
    (8, True): "<q",
}


@dataclass(frozen=True)
class Field:
    """One payload field: how to read it (``kind``: int, str (a char array), loc (``__data_loc``
    string) or skip) at *offset*."""

    name: str
    offset: int
    size: int
    kind: str
    signed: bool = False


@dataclass(frozen=True)
class EventFormat:
    """An event's ``format`` file: its id, name and payload fields (the common ones left out)."""

    ident: int
    name: str
    fields: tuple[Field, ...]
    print_fmt: str


def parse_format(text: str) -> EventFormat:
    """Parse an ``events/<system>/<event>/format`` file."""
    name = re.search(r"^name: (\S+)", text, re.MULTILINE)
    ident = re.search(r"^ID: (\d+)", text, re.MULTILINE)
    if name is None or ident is None:
        raise ValueError("not a tracefs event format file (no name or ID)")
    fields = []
    for m in _FIELD.finditer(text):
        decl, offset, size, signed = m["decl"].strip(), int(m["offset"]), int(m["size"]), m["signed"] == "1"
        fname = re.sub(r"\[.*\]$", "", decl.split()[-1])
        if fname.startswith("common_"):
            continue
        if decl.startswith("__data_loc"):
            kind = "loc"
        elif decl.startswith(("char ", "const char ")) and "[" in decl.split()[-1]:
            kind = "str"
        elif (size, signed) in _INTS and "[" not in decl.split()[-1]:
            kind = "int"
        else:
            kind = "skip"  # arrays of numbers (a system call's args): not read
        fields.append(Field(fname, offset, size, kind, signed))
    fmt = re.search(r"^print fmt: (.*)$", text, re.MULTILINE)
    return EventFormat(int(ident[1]), name[1], tuple(fields), fmt[1] if fmt else "")


_COMMON = struct.Struct("<H2xi")  # common_type, common_flags, common_preempt_count, common_pid
_COMMON_BYTES = _COMMON.size


def _plan(fmt: EventFormat) -> tuple[tuple[tuple[str, ...], Callable], list[tuple[str, int, int]]]:
    """How to read *fmt*'s payload: its integers in one ``unpack_from`` (their names, the unpacker),
    and its strings as ``(name, offset, size)`` (size -1: a ``__data_loc`` string)."""
    layout, names, at = "<", [], 0
    for f in sorted((f for f in fmt.fields if f.kind == "int"), key=lambda f: f.offset):
        if f.offset < at:
            continue  # overlapping fields (a union): the first one only
        layout += ("x" * (f.offset - at)) + _INTS[(f.size, f.signed)][1]
        names.append(f.name)
        at = f.offset + f.size
    texts = [(f.name, f.offset, f.size if f.kind == "str" else -1) for f in fmt.fields if f.kind in ("str", "loc")]
    return (tuple(names), struct.Struct(layout).unpack_from), texts


_SYMBOLIC = re.compile(r"__print_symbolic\(REC->(\w+), ((?:\{ [^}]* \},? ?)+)\)")
_PAIR = re.compile(r"\{ (-?\d+|0x[0-9a-fA-F]+), \"([^\"]*)\" \}")


def _symbolic(print_fmt: str) -> dict[str, dict[int, str]]:
    """The fields a print fmt prints by name (``__print_symbolic`` with numeric keys), e.g. a timer's
    ``clockid``: {field: {value: name}}; a key the format names by a constant is left as a number."""
    out = {}
    for m in _SYMBOLIC.finditer(print_fmt):
        pairs = {int(k, 0): v for k, v in _PAIR.findall(m[2])}
        if pairs:
            out[m[1]] = pairs
    return out


def _cstr(data: bytes, start: int, end: int) -> str:
    raw = data[start:end]
    nul = raw.find(b"\0")
    return (raw if nul < 0 else raw[:nul]).decode(errors="replace")


#: Events whose fields :meth:`RawDecoder._fields` renders as the kernel prints them (or whose task it learns).
_RENDERED = frozenset(
    {
        "sched_switch",
        "sched_wakeup",
        "sched_waking",
        "sched_stat_runtime",
        "sched_process_exit",
        "softirq_entry",
        "softirq_exit",
        "workqueue_execute_start",
        "workqueue_execute_end",
        "irq_handler_exit",
    }
)


#: Events whose payload recurs as it is (no time, count or address in it): a task's switches and
#: wake-ups, interrupts and softirqs, workqueue items, and the x86 vectors (their one field ``vector``).
#: Their rendered fields are kept by payload (:meth:`RawDecoder.decode_page`): a sleeping loop's
#: switch to and from idle is the same 64 bytes every cycle.
_RECURRING = frozenset(
    {
        "sched_switch",
        "sched_wakeup",
        "sched_waking",
        "softirq_entry",
        "softirq_exit",
        "irq_handler_entry",
        "irq_handler_exit",
        "workqueue_execute_start",
        "workqueue_execute_end",
    }
)
#: Events that name a task (its pid and comm in the payload): the decoder learns its comm from them.
_NAMES_TASKS = frozenset({"sched_switch", "sched_wakeup", "sched_waking", "sched_stat_runtime", "sched_process_exit"})
#: Payloads kept per event type at most (a few recur; the cache starts over past this).
_CACHE_MAX = 4096


#: How an event type is decoded: its name, its integers (names, unpacker), its strings, whether its
#: fields are rendered, and its payload cache (None: its payloads do not recur).
_Plan = tuple[
    str, Any, list[tuple[str, int, int]], bool, "dict[bytes, tuple[dict[str, str], tuple[tuple[int, str], ...]]] | None"
]


def _recurs(fmt: EventFormat) -> bool:
    return fmt.name in _RECURRING or [f.name for f in fmt.fields] == ["vector"]


class RawDecoder:
    """Turns ring-buffer pages into TraceEvents; counts the lost events the pages report.

    *formats*: the enabled events' formats; *fields_of*: the event names whose fields are rendered
    (the others get none, as with the text parser); *symbol*: a kernel address to its symbol (a
    workqueue item's function), *comm_of*: a pid's comm when no event named it yet.
    """

    def __init__(
        self,
        formats: list[EventFormat],
        fields_of: frozenset[str],
        symbol: Callable[[int], str],
        comm_of: Callable[[int], str],
    ) -> None:
        self.formats = {f.ident: f for f in formats}
        self.fields_of = fields_of
        self._plans: dict[int, _Plan] = {
            f.ident: (f.name, *_plan(f), f.name in fields_of, {} if f.name in fields_of and _recurs(f) else None)
            for f in formats
        }
        self._symbolic = {
            f.name: _symbolic(f.print_fmt)
            for f in formats  # softirq: vec and its action
            if f.name in fields_of and not f.name.startswith("softirq_")
        }
        self.symbol, self.comm_of = symbol, comm_of
        self.comms: dict[int, str] = {0: "<idle>"}
        self.lost = 0
        self.unparsed = 0  # events of a type the decoder was not told about
        self.states = _state_letters(next((f.print_fmt for f in formats if f.name == "sched_switch"), ""))
        self._state_text: dict[int, str] = {}  # prev_state as printed, by its value: a few values recur
        # the events whose fields are rendered past their numbers (_fields), or that name a task
        self._rendered = frozenset(
            f.name
            for f in formats
            if f.name in _RENDERED
            or f.name.startswith("hrtimer_")
            or any(x.name == "function" for x in f.fields)
            or self._symbolic.get(f.name)
        )

    def decode_page(self, page: bytes, cpu: int) -> list[TraceEvent]:
        """The events of one page read from *cpu*'s ``trace_pipe_raw``, in time order."""
        if len(page) < PAGE_HEADER.size:
            return []
        ts, commit = PAGE_HEADER.unpack_from(page)
        size = commit & _COMMIT_MASK
        if commit & _MISSED_EVENTS:
            stored = commit & _MISSED_STORED and PAGE_HEADER.size + size + 8 <= len(page)
            self.lost += struct.unpack_from("<Q", page, PAGE_HEADER.size + size)[0] if stored else 1
        out: list[TraceEvent] = []
        pos, end = PAGE_HEADER.size, min(PAGE_HEADER.size + size, len(page))
        u32, common, plans, comms = _U32.unpack_from, _COMMON.unpack_from, self._plans, self.comms
        while pos + 4 <= end:
            (word,) = u32(page, pos)
            type_len, delta = word & 0x1F, word >> 5
            pos += 4
            if type_len <= _DATA_MAX:  # an event (the loop's body inlined: this runs for every event)
                if type_len:
                    length = type_len * 4
                else:
                    length = u32(page, pos)[0] - 4
                    pos += 4
                ts += delta
                etype, pid = common(page, pos)
                plan = plans.get(etype)
                if plan is None:
                    self.unparsed += 1
                else:
                    name, ints, texts, wanted, cache = plan
                    if cache is not None:  # the same payload, the same fields (read-only: TraceEvent)
                        key = page[pos + _COMMON_BYTES : pos + length]
                        kept = cache.get(key)
                        if kept is None:
                            if len(cache) >= _CACHE_MAX:
                                cache.clear()
                            fields = self._fields(name, ints, texts, page, pos)
                            kept = cache[key] = (fields, _tasks_named(name, fields))
                        fields, named = kept
                    else:
                        fields = self._fields(name, ints, texts, page, pos) if wanted else {}
                        named = _tasks_named(name, fields) if name in _NAMES_TASKS else ()
                    for named_pid, named_comm in named:  # a kept payload too: its task may have been renamed since
                        comms[named_pid] = named_comm
                    comm = comms.get(pid)
                    if comm is None:
                        comm = comms[pid] = self.comm_of(pid)
                    # trace_pipe prints a ns clock in µs, rounded (ns2usecs): the same instants as the text
                    out.append(TraceEvent((ts + 500) // 1000 * 1000, cpu, name, pid, comm, fields))
                pos += (length + 3) & ~3
            elif type_len == _PADDING:
                if delta == 0:
                    break  # the rest of the page is empty
                pos += u32(page, pos)[0]  # a discarded event: its delta is not time (rb_update_read_stamp)
            elif type_len == _TIME_EXTEND:
                ts += (u32(page, pos)[0] << _TS_SHIFT) + delta
                pos += 4
            else:  # _TIME_STAMP: absolute, its upper bits from the page's time
                ts = ((u32(page, pos)[0] << _TS_SHIFT) + delta) | (ts & ~((1 << 59) - 1))
                pos += 4
        return out

    def _fields(self, name: str, ints, texts, page: bytes, pos: int) -> dict[str, str]:
        names, unpack = ints
        raw = unpack(page, pos) if names else ()
        out = dict(zip(names, map(str, raw)))  # in C: ~40 % of the cost of a comprehension here
        for fname, offset, size in texts:
            at = pos + offset
            if size < 0:  # __data_loc: a u16 offset (from the payload) and a u16 length
                loc = _U32.unpack_from(page, at)[0]
                at, size = pos + (loc & 0xFFFF), loc >> 16
            out[fname] = _cstr(page, at, at + size if size else len(page))  # char buf[]: to its NUL
        if name not in self._rendered:
            return out
        values = dict(zip(names, raw))
        if name == "sched_switch":
            state = values.get("prev_state", 0)
            text = self._state_text.get(state)
            if text is None:
                text = self._state_text[state] = self._state(state)
            out["prev_state"] = text
        elif name in _NAMES_TASKS:
            if "target_cpu" in values:
                out["target_cpu"] = f"{values['target_cpu']:03d}"
            if "group_dead" in values:
                out["group_dead"] = "true" if values["group_dead"] else "false"
        elif name in ("softirq_entry", "softirq_exit"):
            vec = values.get("vec", -1)
            out["action"] = SOFTIRQ_NAMES[vec] if 0 <= vec < len(SOFTIRQ_NAMES) else str(vec)
        elif name in ("workqueue_execute_start", "workqueue_execute_end"):
            out["work"] = f"{values.get('work', 0):016x}"
        elif name == "irq_handler_exit":
            out["ret"] = "handled" if values.get("ret") else "unhandled"
        elif name.startswith("hrtimer_") and "mode" in values:
            out["mode"] = _timer_mode(values["mode"])
        if "function" in values:  # printed with %ps: a workqueue item's or a timer's function
            out["function"] = self.symbol(values["function"])
        for fname, names in self._symbolic.get(name, {}).items():  # __print_symbolic: a timer's clockid
            if fname in values:
                out[fname] = names.get(values[fname], out[fname])
        return out

    def _state(self, state: int) -> str:
        """``prev_state`` as sched_switch's print fmt renders it: ``R`` (``R+`` preempted) or the letters."""
        report_max = self.states[1]
        bits = state & (report_max - 1)
        if not bits:
            return "R+" if state & report_max else "R"
        text = "|".join(letter for bit, letter in self.states[0] if bits & bit)
        return text + ("+" if state & report_max else "")


def _tasks_named(name: str, fields: dict[str, str]) -> tuple[tuple[int, str], ...]:
    """(pid, comm) of the tasks an event names, which the decoder learns (the idle task stays
    ``<idle>``, as trace_pipe names pid 0)."""
    pairs = (("prev_pid", "prev_comm"), ("next_pid", "next_comm")) if name == "sched_switch" else (("pid", "comm"),)
    return tuple(
        (int(pid), comm)
        for pid, comm in ((fields.get(p), fields.get(c)) for p, c in pairs)
        if pid and pid != "0" and comm
    )


@functools.cache
def _timer_mode(mode: int) -> str:
    """An hrtimer's mode as its events print it (include/linux/hrtimer.h: HRTIMER_MODE_* bits)."""
    return "|".join(
        ["REL" if mode & 1 else "ABS"] + [w for bit, w in ((2, "PINNED"), (4, "SOFT"), (8, "HARD")) if mode & bit]
    )


def _state_letters(print_fmt: str) -> tuple[list[tuple[int, str]], int]:
    """sched_switch's state letters and its TASK_REPORT_MAX bit, from its print fmt (include/trace/
    events/sched.h: the letters of the states below TASK_REPORT_MAX, ``+`` for a preempted task)."""
    letters = [(int(bit, 16), letter) for bit, letter in _FLAG.findall(print_fmt)]
    if not letters:  # the layout of Linux 4.14-6.x
        letters = [(1 << i, c) for i, c in enumerate("SDTtXZPI")]
    return letters, max(bit for bit, _ in letters) << 1  # TASK_REPORT_MAX: the bit above the last letter's


def page_size(header_page: str) -> int:
    """The size of a ring-buffer page (a read of ``trace_pipe_raw``), from ``events/header_page``."""
    m = re.search(r"field: char data;\s*offset:(\d+);\s*size:(\d+);", header_page)
    if m is None:
        raise ValueError("events/header_page has no data field")
    return int(m[1]) + int(m[2])


_SYMBOLS: dict[int, str] = {}
_KALLSYMS: list[bytes] = []


def kernel_symbol(address: int) -> str:
    """The kernel function at *address* (``%ps``: its name alone), from /proc/kallsyms (its text read
    once, 5 MB, 0.04 s; each new address found in it, 0.2 ms: a run meets a few workqueue and timer
    functions, so no table of its 120,000 symbols is built); its address in hex when not found."""
    name = _SYMBOLS.get(address)
    if name is None:
        if not _KALLSYMS:
            try:
                with open("/proc/kallsyms", "rb") as f:
                    _KALLSYMS.append(f.read())
            except OSError:
                _KALLSYMS.append(b"")
        text, key = _KALLSYMS[0], b"%016x " % address
        at = text.find(key)
        while at > 0 and text[at - 1] != 0x0A:  # the address must start its line
            at = text.find(key, at + 1)
        line = text[at : text.find(b"\n", at)].split() if at >= 0 else []
        name = _SYMBOLS[address] = line[2].decode() if len(line) >= 3 and address else f"0x{address:x}"
    return name


def task_comm(pid: int) -> str:
    """A task's comm from /proc (proc(5), ``comm``), ``<...>`` as trace_pipe prints an unknown one."""
    return read_text("/", f"/proc/{pid}/comm", fallback="") or "<...>"
