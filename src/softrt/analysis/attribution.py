"""Why was a cycle late: the RT CPU's trace events, cycle by cycle (analysis layer; pure, no I/O).

For every late cycle the loop recorded, the *interference window* is rebuilt from the RT CPU's
kernel events and every nanosecond of it is credited to exactly one cause.

Late cycle
    period (``detect[i] - detect[i-1]``, consecutive ``seq`` only: a period never spans records
    the ring dropped) over nominal + threshold, latency (``detect - edge``) over the threshold,
    or ``missed > 0``.

Interference window ``[start, detect_i]`` (to ``write_i`` for a missed update written late)
    ``start`` is when the worker should have seen the permit: the edge ``edge_i``. The virtual
    board's edge is the first edge after the previous write, and ``missed > 0`` means later edges
    passed too, so ``[edge_i, detect_i]`` always covers the missed stretch. When the previous
    cycle's work was still running at the edge (``done_{i-1} > edge_i``: an overrun), the window
    starts at the previous permit ``detect_{i-1}`` instead: whatever slowed that work down pushed
    this permit late too, so it is part of the story. The worker's own running time up to
    ``done_{i-1}`` is then its own work (cause kind ``loop``), not interference. A missed update
    is the write landing after later edges: when the write came after the permit was seen, the
    window runs on to ``write_i`` and the worker's own time from ``detect_i`` is its work too. This mirrors
    rtla timerlat's split of a late activation into the IRQ latency and the thread latency
    (Documentation/tools/rtla/rtla-timerlat.rst, "auto-analysis"): here the "thread" may still be
    busy with its previous activation, and that share is shown, not hidden.

Timeline (who had the CPU), layered like the osnoise tracer's accounting
(kernel/trace/trace_osnoise.c: an IRQ's duration is subtracted from the softirq or thread it
interrupted, so nested time counts once, for the innermost):

    layer 3  hard IRQs: ``irq_handler_entry/exit`` (number, name) and the x86 ``irq_vectors``
             ``<vector>_entry/_exit`` (local_timer, reschedule, call_function, irq_work, ...),
             ``ipi_entry/exit``
    layer 2  ``softirq_entry/exit`` (vector: TIMER, RCU, NET_RX, SCHED, ...)
    layer 1  in the context of one task: ``workqueue_execute_start/end`` (function), the
             worker's ``sys_enter/sys_exit`` and its page faults (``page_fault_user/_kernel`` have
             no exit event: a fault is credited up to the next event on the CPU, an upper bound)
    layer 0  the task ``sched_switch`` made current (comm, pid, prio; kernel prio < 100 is
             SCHED_FIFO/RR with priority 99 - prio, -1 is SCHED_DEADLINE)

Parked while runnable: the worker (a FIFO task) switched out while runnable (``prev_state`` R)
for idle or a lower-priority task; until it runs again, layer-0 time is a kernel cause named by
what the events and the run show. When RT throttling was in force (the Attributor is told:
``rt_throttling``, from ``sched_rt_runtime_us`` >= 0 and the kernel, see trace.session) it is
``RT throttling`` (Documentation/scheduler/sched-rt-group.rst). Otherwise a SCHED_OTHER task can
still take the CPU from a runnable FIFO task: since Linux 6.12 the *fair server*, a
SCHED_DEADLINE server for normal tasks (50 ms every 1 s by default,
/sys/kernel/debug/sched/fair_server; Documentation/scheduler/sched-deadline.rst), ranks above
SCHED_FIFO, and without CONFIG_RT_GROUP_SCHED it replaced RT throttling ("sched/rt: Remove
default bandwidth control"); seen on the benchmark VM as the worker preempted at a tick for ~50 ms of
ksoftirqd and a busy python3. So: ``fair server`` for a SCHED_OTHER task, and the plain facts
(switched out to idle, a lower-priority RT task ran) otherwise; with the value unknown, both
candidates are named. A task kept current after the worker's *wakeup* is a different case (below).

Waiting is no cause: after the worker blocked (switched out not runnable) and until its
``sched_wakeup``, whatever ran could not delay it. From the wakeup to the switch, idle is
``kernel: exit from idle`` (rtla's "exit from idle"), and a lower-priority task still current is
``kernel: switch to the woken worker`` for up to ``SWITCH_GRACE_NS`` (the scheduler's own path),
beyond it that task is blamed (it ran non-preemptible: rtla's "blocking thread"), except for
stretches of ``gap_min_ns`` without any event, which are "no guest activity" like the worker's own. So a SCHED_OTHER
task that only ran while the loop slept is never blamed.

Outside the kernel: in the window after the worker could have seen the permit, the worker
(spinning), idle, or a task that ran while the worker slept held the CPU and no event fired. A stretch of at least ``gap_min_ns`` without
any event is reported as "no guest activity on CPU N for X µs", with the RT CPU's steal counter
(/proc/stat) over the samples that bracket it as evidence. Whether it was the hypervisor, an SMI
or firmware is not guessed. Shorter stretches are the *unexplained* rest, stated as such.

Expected event fields (the kernel's ``key=value`` text, see events.py): sched_switch
``prev_comm prev_pid prev_prio prev_state next_comm next_pid next_prio``; sched_wakeup ``pid``;
irq_handler_entry/exit ``irq`` (and ``name``); softirq_entry ``vec`` (``action`` or ``[action``
when the parser kept the bracket; else the name comes from the vector number);
workqueue_execute_start ``function`` (its text is ``work struct %p: function %ps``, not
key=value: the trace layer must extract it); sys_enter ``id`` or ``NR`` (its text is ``NR %ld
(...)``). Other ``X_entry``/``X_exit`` pairs (the x86 ``irq_vectors``, ``ipi_entry/exit``) are
hard-IRQ-level kernel work named after X; every other event only shows that the guest ran.
"""

from __future__ import annotations

import bisect
import heapq
from array import array
from functools import lru_cache
from collections import deque
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from .events import StealSample, TraceEvent

#: Softirq vector numbers (include/linux/interrupt.h, ``softirq_to_name``).
SOFTIRQ_NAMES = ("HI", "TIMER", "NET_TX", "NET_RX", "BLOCK", "IRQ_POLL", "TASKLET", "SCHED", "HRTIMER", "RCU")

#: Pairs of events that open and close something that is not an ``X_entry``/``X_exit`` vector.
_NOT_VECTORS = frozenset({"irq_handler", "softirq", "hrtimer_expire", "timer_expire"})

#: Events kept before the oldest window still to explain; older ones are folded into the base
#: state, so nothing needs them: this is only slack.
MARGIN_NS = 1_000_000

#: The events whose fields the attribution reads (every other event is used by its name, time and
#: task only): the trace layer need not split the others' text (trace.parse.LineParser).
FIELDS_READ = frozenset({"sched_switch", "sched_wakeup", "sched_waking", "irq_handler_entry", "irq_handler_exit",
                         "softirq_entry", "workqueue_execute_start", "sys_enter", "ipi_entry"})

KIND_ORDER = ("thread", "irq", "softirq", "kernel", "outside", "loop")


# -- the timeline ---------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Source:
    """Who took the CPU: ``kind`` (thread, irq, softirq, kernel, outside, loop), a name, an id
    (pid, IRQ number, softirq vector, CPU; -1 when none) and a detail (e.g. ``FIFO 99``)."""

    kind: str
    name: str
    ident: int = -1
    detail: str = ""

    def label(self) -> str:
        """``thread stress-ng (pid 812, FIFO 99)``-like text."""
        what = {"thread": "pid", "irq": "IRQ", "softirq": "vec"}.get(self.kind)
        inner = ", ".join(x for x in (f"{what} {self.ident}" if what and self.ident >= 0 else "", self.detail) if x)
        return f"{self.kind} {self.name}" + (f" ({inner})" if inner else "")


@dataclass(frozen=True, slots=True)
class Segment:
    """``[start_ns, end_ns)`` held by *source* at *layer*; layer-1 segments belong to task *pid*."""

    start_ns: int
    end_ns: int
    layer: int
    source: Source
    pid: int = -1
    parked: str = ""  # the worker was runnable but switched out for: "idle", "other" (SCHED_OTHER) or "rt"
    asleep: bool = False  # the worker was blocked (not yet woken): the task ran while it could not
    woken: bool = False  # the worker was woken and this lower-priority task (or idle) was still current


@dataclass
class CpuState:
    """The RT CPU's state at one moment: the current task and what is open above it."""

    task: Source | None = None  # layer 0 (kind thread), None until the first event says
    task_pid: int = -1
    task_prio: int | None = None
    since_ns: int = 0
    parked: str = ""
    asleep: bool = False
    woken: bool = False
    worker_prio: int | None = None
    open: list = field(default_factory=list)  # [(layer, tag, source, start_ns, pid)], innermost last
    fault: tuple | None = None  # (source, start_ns, pid): a page fault waiting for the next event

    def copy(self) -> CpuState:
        return CpuState(self.task, self.task_pid, self.task_prio, self.since_ns, self.parked, self.asleep,
                        self.woken, self.worker_prio, list(self.open), self.fault)


def policy(prio: int | None) -> str:
    """Policy and priority from the kernel prio a sched_switch prints (include/linux/sched/prio.h)."""
    if prio is None:
        return ""
    if prio < 0:
        return "DEADLINE"
    if prio < 100:
        return f"FIFO/RR {99 - prio}"
    return f"OTHER nice {prio - 120}"


def _int(text: str | None, default: int = -1) -> int:
    try:
        return int(str(text).strip().strip("[]"), 0)
    except (TypeError, ValueError):
        return default


def _task(comm: str, pid: int, prio: int | None) -> Source:
    return Source("thread", comm, pid, policy(prio))


def _softirq(fields: dict[str, str]) -> Source:
    return _softirq_source(fields.get("vec"), fields.get("action") or fields.get("[action") or "")


@lru_cache(maxsize=64)
def _softirq_source(vec_text: str | None, action: str) -> Source:
    vec = _int(vec_text)
    name = action.strip("[]") or (SOFTIRQ_NAMES[vec] if 0 <= vec < len(SOFTIRQ_NAMES) else f"vec {vec}")
    return Source("softirq", name, vec)


@lru_cache(maxsize=256)
def _vector(name: str) -> tuple[str, bool] | None:
    """``(vector, is_exit)`` of an ``X_entry``/``X_exit`` event that is hard-IRQ-level work, else None."""
    for suffix in ("_entry", "_exit"):
        if name.endswith(suffix) and name[: -len(suffix)] not in _NOT_VECTORS:
            return name[: -len(suffix)], suffix == "_exit"
    return None


def _parked(state: CpuState) -> str:
    """The worker's parked reason for the current task's time: a task above the worker that runs
    meanwhile (a FIFO thread preempting it while it is parked) is blamed itself, not the parking."""
    if state.parked and state.task_pid != 0 and state.task_prio is not None and state.worker_prio is not None \
            and state.task_prio < state.worker_prio:
        return ""
    return state.parked


def _emit(out: list[Segment] | None, seg: Segment) -> None:
    if out is not None and seg.end_ns > seg.start_ns:
        out.append(seg)


def apply(state: CpuState, ev: TraceEvent, worker_pid: int, out: list[Segment] | None) -> None:
    """Advance *state* by one event; append the segments it closes to *out* (None: discard them)."""
    t, name, f = ev.ts_ns, ev.name, ev.fields
    if state.fault is not None:  # a fault has no exit event: it lasted until the next event at most
        src, start, pid = state.fault
        _emit(out, Segment(start, t, 1, src, pid))
        state.fault = None
    if state.task is None:  # the common header names the task that was current
        state.task, state.task_pid, state.since_ns = _task(ev.comm, ev.pid, None), ev.pid, t
    if name == "sched_switch":
        prev_pid, next_pid = _int(f.get("prev_pid")), _int(f.get("next_pid"))
        prev_prio, next_prio = _int(f.get("prev_prio"), None), _int(f.get("next_prio"), None)
        _emit(out, Segment(state.since_ns, t, 0, state.task, state.task_pid, _parked(state), state.asleep,
                           state.woken))
        state.woken = False
        if prev_pid == worker_pid and next_pid != worker_pid:
            runnable = (f.get("prev_state") or "").startswith("R")
            lower = next_pid == 0 or (next_prio is not None and prev_prio is not None and next_prio > prev_prio)
            state.parked = "" if not (runnable and lower) else (
                "idle" if next_pid == 0 else "rt" if next_prio is not None and next_prio < 100 else "other")
            state.asleep = not runnable
            state.worker_prio = prev_prio
        elif next_pid == worker_pid:
            state.parked, state.asleep = "", False
        state.task = _task(f.get("next_comm", "?"), next_pid, next_prio)
        state.task_pid, state.task_prio, state.since_ns = next_pid, next_prio, t
        return
    if name in ("sched_wakeup", "sched_waking") and _int(f.get("pid")) == worker_pid and state.asleep:
        # From here a task holding the CPU delays a runnable worker (rtla's "blocking thread").
        _emit(out, Segment(state.since_ns, t, 0, state.task, state.task_pid, _parked(state), True))
        state.since_ns, state.asleep = t, False
        state.woken = (state.task_pid == 0 or state.task_prio is None or state.worker_prio is None
                       or state.task_prio > state.worker_prio)
        return
    layer, tag, src = _classify(ev, worker_pid)
    if layer is None:
        return
    if src is None:  # an exit: close the innermost open item it matches
        for k in range(len(state.open) - 1, -1, -1):
            lay, otag, osrc, start, pid = state.open[k]
            if lay == layer and (otag == tag or tag == ""):
                _emit(out, Segment(start, t, lay, osrc, pid))
                del state.open[k]
                break
        return
    if tag == "fault":
        state.fault = (src, t, ev.pid)
        return
    state.open.append((layer, tag, src, t, ev.pid if layer == 1 else -1))


def _classify(ev: TraceEvent, worker_pid: int) -> tuple[int | None, str, Source | None]:
    """(layer, tag, source) of a non-switch event; source None for an exit (it closes the open item
    with the same tag; tag "" closes the innermost of its layer); layer None: activity only."""
    name, f = ev.name, ev.fields
    if name == "irq_handler_entry":
        irq = _int(f.get("irq"))
        return 3, f"irq:{irq}", Source("irq", f.get("name", f"irq {irq}"), irq)
    if name == "irq_handler_exit":
        return 3, f"irq:{_int(f.get('irq'))}", None
    if name == "softirq_entry":
        return 2, "softirq", _softirq(f)
    if name == "softirq_exit":
        return 2, "softirq", None
    if name == "workqueue_execute_start":
        return 1, "wq", Source("thread", f"{ev.comm} [{f.get('function', '?')}]", ev.pid)
    if name == "workqueue_execute_end":
        return 1, "wq", None
    if ev.pid == worker_pid and name in ("page_fault_user", "page_fault_kernel"):
        where = "user" if name.endswith("user") else "kernel"
        return 1, "fault", Source("kernel", f"page fault ({where}) of the worker: memory not locked?")
    if ev.pid == worker_pid and name == "sys_enter":
        nr = _int(f.get("id", f.get("NR")))
        return 1, "sys", Source("kernel", "system call" + (f" {nr}" if nr >= 0 else "") + " of the worker")
    if ev.pid == worker_pid and name == "sys_exit":
        return 1, "sys", None
    vec = _vector(name)
    if vec is None:
        return None, "", None
    vector, is_exit = vec
    if is_exit:
        return 3, "vec:" + vector, None
    label = f"IPI {f['reason']}" if vector == "ipi" and f.get("reason") else vector.replace("_", " ")
    return 3, "vec:" + vector, Source("kernel", label)


def build_timeline(state: CpuState, events: list[TraceEvent], end_ns: int, worker_pid: int) -> list[Segment]:
    """Segments from *state* through *events* up to *end_ns*; what is still open ends there.

    *state* is advanced in place (copy it first to replay).
    """
    out: list[Segment] = []
    for ev in events:
        if ev.ts_ns > end_ns:
            break
        apply(state, ev, worker_pid, out)
    if state.task is not None:
        out.append(Segment(state.since_ns, end_ns, 0, state.task, state.task_pid, _parked(state), state.asleep,
                           state.woken))
    for layer, _tag, src, start, pid in state.open:
        out.append(Segment(start, end_ns, layer, src, pid))
    if state.fault is not None:
        src, start, pid = state.fault
        out.append(Segment(start, end_ns, 1, src, pid))
    return out


def slice_window(segments: list[Segment], start_ns: int, end_ns: int) -> list[Segment]:
    """The segments' parts inside ``[start_ns, end_ns)``."""
    return [Segment(max(s.start_ns, start_ns), min(s.end_ns, end_ns), s.layer, s.source, s.pid, s.parked, s.asleep,
                    s.woken)
            for s in segments if s.end_ns > start_ns and s.start_ns < end_ns and s.end_ns > s.start_ns]


_THROTTLING = Source("kernel", "RT throttling (worker runnable, parked by sched_rt_runtime_us)")
_FAIR_SERVER = Source("kernel", "fair server: SCHED_OTHER tasks ran while the worker was runnable")
_PARKED = {  # rt_throttling False: what the events show; None: the value in force is unknown
    (False, "idle"): Source("kernel", "worker runnable but switched out to idle"),
    (False, "other"): _FAIR_SERVER,
    (False, "rt"): Source("kernel", "a lower-priority RT task ran while the worker was runnable"),
    (None, "idle"): Source("kernel", "RT throttling? (worker runnable, switched out to idle)"),
    (None, "other"): Source("kernel", "RT throttling or the fair server (worker runnable, SCHED_OTHER tasks ran)"),
    (None, "rt"): Source("kernel", "a lower-priority RT task ran while the worker was runnable"),
}
_LOOP = Source("loop", "the loop's own work")
_IDLE_EXIT = Source("kernel", "exit from idle to the woken worker")
_SWITCH = Source("kernel", "switch to the woken worker")

#: After the worker's wakeup a lower-priority task stays current while the kernel returns from the
#: interrupt that woke it and switches: its own time outside that IRQ (softirqs and other IRQs are
#: their own causes). A task in user space is switched at the first return to user mode, so only
#: one that holds the CPU in the kernel (a non-preemptible section, e.g. under preempt=none) stays
#: longer: beyond the grace it is the blocking thread. Measured on the benchmark VM (6.18,
#: preempt=none): a SCHED_OTHER task spinning in user space stayed current 3-22 µs of its own
#: after the worker's timer IRQ (the IRQ exit path alone 9-11 µs; a local timer takes 20-25 µs
#: there); 30 µs leaves room for that and still names a task that ran on for longer.
SWITCH_GRACE_NS = 30_000


def account(segments: list[Segment], start_ns: int, end_ns: int, *, worker_pid: int, work_ns: list[tuple[int, int]],
            event_ts: list[int], cpu: int, gap_min_ns: int, rt_throttling: bool | None = None,
            switch_grace_ns: int = SWITCH_GRACE_NS) -> tuple[dict[Source, int], list[tuple[int, int]], int]:
    """Credit every ns of ``[start_ns, end_ns)`` to the innermost source holding it.

    Returns ``(durations by source, no-guest-activity gaps as (start, end), unexplained ns)``.
    In the *work_ns* ranges the worker's own running time is its work (``loop``); elsewhere the worker
    running or the CPU idle is a wait. A stretch of either without any event that lasts *gap_min_ns*
    or more is a gap: the guest did not run (the loop's step takes a few µs, and its waits end as soon
    as the CPU is its); shorter ones are work (``loop``) and unexplained wait.
    """
    cuts = {start_ns, end_ns}
    for a, b in work_ns:
        cuts.update((min(max(a, start_ns), end_ns), min(max(b, start_ns), end_ns)))
    for s in segments:
        cuts.add(s.start_ns)
        cuts.add(s.end_ns)
    events = [t for t in event_ts if start_ns < t < end_ns]
    cuts.update(events)
    bounds = sorted(c for c in cuts if start_ns <= c <= end_ns)
    event_set = set(events)
    tasks = sorted((s for s in segments if s.layer == 0), key=lambda s: s.start_ns)
    upper = [s for s in segments if s.layer > 0]
    totals: dict[Source, int] = {}
    quiet: list[list[int]] = []  # [start, end, work ns]: runs of work or wait not broken by an event
    unknown = 0  # before the first event: nothing is known about the CPU
    blocking: list[list] = []  # [start, end, source]: a lower-priority task current after the wakeup
    steps = []
    own: dict[int, int] = {}  # a task segment's time not covered by an IRQ, softirq or item above it
    for a, b in zip(bounds, bounds[1:]):
        if b <= a:
            continue
        task = next((s for s in tasks if s.start_ns <= a < s.end_ns), None)
        best = None
        for s in upper:
            if s.start_ns <= a < s.end_ns and (s.layer != 1 or task is None or s.pid == task.pid):
                if best is None or s.layer > best.layer or (s.layer == best.layer and s.start_ns >= best.start_ns):
                    best = s
        steps.append((a, b, task, best))
        if best is None and task is not None:
            own[id(task)] = own.get(id(task), 0) + (b - a)
    for a, b, task, best in steps:
        if best is not None:
            src = best.source
        elif task is None:
            unknown += b - a
            continue
        elif task.parked:
            src = _THROTTLING if rt_throttling else _PARKED[(rt_throttling, task.parked)]
        elif task.woken and task.pid == 0:
            src = _IDLE_EXIT
        elif task.woken and own[id(task)] <= switch_grace_ns:  # the IRQ that woke the worker is its own cause
            src = _SWITCH
        elif task.pid in (worker_pid, 0) or task.asleep:
            src = None  # the worker waiting (spinning, or blocked until its timer): no cause yet
        elif task.woken:
            # the blocking thread, unless no event fired for gap_min_ns: then the guest did not run
            if blocking and blocking[-1][1] == a and a not in event_set and blocking[-1][2] is task.source:
                blocking[-1][1] = b
            else:
                blocking.append([a, b, task.source])
            continue
        else:
            src = task.source
        if src is not None:
            totals[src] = totals.get(src, 0) + (b - a)
            continue
        work = b - a if task.pid == worker_pid and any(wa <= a and b <= wb for wa, wb in work_ns) else 0
        if quiet and quiet[-1][1] == a and a not in event_set:
            quiet[-1][1] = b
            quiet[-1][2] += work
        else:
            quiet.append([a, b, work])
    for a, b, src in blocking:
        if b - a >= gap_min_ns:
            quiet.append([a, b, 0])
        else:
            totals[src] = totals.get(src, 0) + (b - a)
    quiet.sort()
    gaps = [(a, b) for a, b, _w in quiet if b - a >= gap_min_ns]
    short = [(b - a, w) for a, b, w in quiet if b - a < gap_min_ns]
    unexplained = unknown + sum(n - w for n, w in short)
    if sum(w for _n, w in short):
        totals[_LOOP] = sum(w for _n, w in short)
    if gaps:
        totals[Source("outside", f"no guest activity on CPU {cpu}", cpu)] = sum(b - a for a, b in gaps)
    return totals, gaps, unexplained


def steal_between(times_ns, steal_ns, start_ns: int, end_ns: int) -> dict | None:
    """The steal counter's rise between the samples that bracket ``[start_ns, end_ns]``, or None.

    *times_ns*/*steal_ns*: the samples' times and cumulative steal, in time order.
    """
    i = bisect.bisect_right(times_ns, start_ns) - 1
    j = bisect.bisect_left(times_ns, end_ns)
    if i < 0 or j >= len(times_ns):
        return None
    return {"from_ns": times_ns[i], "to_ns": times_ns[j], "steal_ms": round((steal_ns[j] - steal_ns[i]) / 1e6, 3),
            "over_s": round((times_ns[j] - times_ns[i]) / 1e9, 3)}


# -- late cycles ------------------------------------------------------------------------------------
@dataclass(slots=True)
class Late:
    """A late cycle waiting for its events."""

    seq: int
    cycle: int
    edge_ns: int
    detect_ns: int
    start_ns: int
    work_until_ns: int
    end_ns: int
    period_ns: int | None
    missed: int
    reasons: tuple[str, ...]


class LateFlags(NamedTuple):
    """Which records of a chunk are late, and why (boolean arrays, one entry per record)."""

    period_ns: np.ndarray  # detect - the previous record's detect (meaningful where ``consecutive``)
    consecutive: np.ndarray  # the previous record is the one before in seq (no record dropped between)
    by_period: np.ndarray
    by_latency: np.ndarray
    by_missed: np.ndarray

    @property
    def any(self) -> np.ndarray:
        return self.by_period | self.by_latency | self.by_missed


def late_flags(recs: np.ndarray, prev_seq: int | None, prev_detect_ns: int | None, period_ns: int,
               threshold_ns: int) -> LateFlags:
    """softrt's one definition of a late cycle, for one chunk of records: its period (permit to permit,
    never across a ``seq`` gap) over nominal + *threshold_ns*, its latency (``detect - edge``) over
    *threshold_ns*, or a missed update. *prev_seq*/*prev_detect_ns* are the last record of the chunk
    before (None for the first chunk), so a period spans chunk boundaries. Used by the attribution
    and by the ``--samples late`` store (softrt.store.late)."""
    seq, detect = recs["seq"], recs["detect_ns"]
    p_seq = np.empty_like(seq)
    p_detect = np.empty_like(detect)
    p_seq[1:], p_detect[1:] = seq[:-1], detect[:-1]
    if prev_seq is None:
        p_seq[:1], p_detect[:1] = seq[:1] - 2, 0
    else:
        p_seq[:1], p_detect[:1] = prev_seq, prev_detect_ns
    consecutive = seq - p_seq == 1
    period = detect - p_detect
    return LateFlags(period, consecutive, consecutive & (period > period_ns + threshold_ns),
                     detect - recs["edge_ns"] > threshold_ns, recs["missed"] > 0)


def late_cycles(recs: np.ndarray, prev: tuple | None, period_ns: int, threshold_ns: int) -> list[Late]:
    """The late cycles of one chunk of records; *prev* is the last record of the chunk before
    (``(seq, detect_ns, done_ns)``) so a period and an overrun can span chunk boundaries."""
    if recs.size == 0:
        return []
    seq, detect, done, edge = recs["seq"], recs["detect_ns"], recs["done_ns"], recs["edge_ns"]
    flags = late_flags(recs, None if prev is None else prev[0], None if prev is None else prev[1],
                       period_ns, threshold_ns)
    p_detect = np.empty_like(detect)
    p_done = np.empty_like(done)
    p_detect[1:], p_done[1:] = detect[:-1], done[:-1]
    if prev is None:
        p_detect[0], p_done[0] = 0, 0
    else:
        _, p_detect[0], p_done[0] = prev
    consecutive, period = flags.consecutive, flags.period_ns
    late_period, late_latency, late_missed = flags.by_period, flags.by_latency, flags.by_missed
    out = []
    for i in np.flatnonzero(late_period | late_latency | late_missed):
        overran = bool(consecutive[i]) and int(p_done[i]) > int(edge[i])
        reasons = tuple(r for r, m in (("period", late_period), ("latency", late_latency), ("missed", late_missed))
                        if m[i])
        # A missed update is the write landing late: when it came well after the permit was seen,
        # the window runs to the write (the worker's own time in between is its work).
        end = max(int(detect[i]), int(recs["write_ns"][i])) if late_missed[i] else int(detect[i])
        out.append(Late(int(seq[i]), int(recs["cycle"][i]), int(edge[i]), int(detect[i]),
                        int(p_detect[i]) if overran else int(edge[i]), int(p_done[i]) if overran else int(edge[i]),
                        end, int(period[i]) if consecutive[i] else None, int(recs["missed"][i]), reasons))
    return out


def _us(ns: float) -> float:
    return round(ns / 1e3, 3)


class Attributor:
    """Streams records, events and steal samples; explains each late cycle once its events are in.

    Memory is bounded: events older than the oldest window still to explain (and the last record)
    are folded into a base state and dropped; only the *keep_worst* longest windows keep their
    detail, while the culprits table counts every late cycle.
    """

    def __init__(self, *, period_ns: int, rt_cpu: int, worker_pid: int, threshold_ns: int = 20_000,
                 keep_worst: int = 100, gap_min_ns: int = 10_000, rt_throttling: bool | None = None) -> None:
        self.period_ns, self.rt_cpu, self.worker_pid = period_ns, rt_cpu, worker_pid
        # RT throttling in force during the run (the caller read sched_rt_runtime_us and the kernel); None: unknown
        self.rt_throttling = rt_throttling
        self.threshold_ns, self.keep_worst, self.gap_min_ns = threshold_ns, keep_worst, gap_min_ns
        self._prev: tuple | None = None
        self._pending: deque[Late] = deque()
        self._events: list[TraceEvent] = []
        self._times: list[int] = []  # their ts_ns, for bisection
        self._base = CpuState()
        # Steal samples are kept for the whole run (two int64 a second: 4 MB for 72 h) so that the
        # worst cycles' gaps get the sample after them, which arrives up to a second later.
        self._steal_ts = array("q")
        self._steal_ns = array("q")
        self._worst: list = []  # min-heap of (window_ns, seq, detail)
        self._culprits: dict[tuple, dict] = {}
        self.cycles = 0
        self.late = 0
        self._explained_ns = 0
        self._window_ns = 0
        self._events_seen = 0
        self._first_event_ns: int | None = None

    # -- input ------------------------------------------------------------------------------------
    def add_records(self, recs: np.ndarray) -> None:
        """One drained chunk of RECORD_DTYPE records, in order."""
        if recs.size == 0:
            return
        self._pending.extend(late_cycles(recs, self._prev, self.period_ns, self.threshold_ns))
        last = recs[-1]
        self._prev = (int(last["seq"]), int(last["detect_ns"]), int(last["done_ns"]))
        self.cycles += int(recs.size)

    def add_events(self, events: list[TraceEvent]) -> None:
        """Events of the RT CPU, in time order (other CPUs' events are ignored)."""
        mine = [e for e in events if e.cpu == self.rt_cpu]
        if mine and self._first_event_ns is None:
            self._first_event_ns = mine[0].ts_ns
        self._events.extend(mine)
        self._times.extend(e.ts_ns for e in mine)
        self._events_seen += len(mine)

    def add_steal(self, samples: list[StealSample]) -> None:
        """Cumulative steal samples (~1/s); only the RT CPU's are kept."""
        for s in samples:
            if s.cpu == self.rt_cpu:
                self._steal_ts.append(s.ts_ns)
                self._steal_ns.append(s.steal_ns)

    def advance(self, horizon_ns: int) -> None:
        """Events are complete up to *horizon_ns*: explain the windows that end before it."""
        while self._pending and self._pending[0].end_ns <= horizon_ns:
            self._explain(self._pending.popleft())
        self._trim()

    def finish(self, lost_events: int = 0) -> dict:
        """Explain what is still pending with the events there are; return summary.json's ``why_late``."""
        while self._pending:
            self._explain(self._pending.popleft())
        worst = [d for _w, _s, d in sorted(self._worst, key=lambda x: (-x[0], x[1]))]
        for cycle in worst:
            for c in cycle["causes"]:
                if c["kind"] == "outside":
                    c["steal"] = steal_between(self._steal_ts, self._steal_ns, c["gaps_ns"][0][0], c["gaps_ns"][-1][1])
        culprits = sorted(self._culprits.values(), key=lambda c: (-c["total_ns"], c["kind"], c["name"]))
        table = [{"kind": c["kind"], "name": c["name"], "id": c["id"], "detail": c["detail"], "cycles": c["cycles"],
                  "total_us": _us(c["total_ns"]), "worst_us": _us(c["worst_ns"])} for c in culprits]
        steal = None
        if self._steal_ts:
            steal = {"cpu": self.rt_cpu, "total_ms": round((self._steal_ns[-1] - self._steal_ns[0]) / 1e6, 3),
                     "over_s": round((self._steal_ts[-1] - self._steal_ts[0]) / 1e9, 3)}
        return {
            "tracing": "on",
            "rt_cpu": self.rt_cpu,
            "worker_pid": self.worker_pid,
            "threshold_us": _us(self.threshold_ns),
            "gap_min_us": _us(self.gap_min_ns),
            "rt_throttling": self.rt_throttling,
            "cycles": self.cycles,
            "late_cycles": self.late,
            "window_us": _us(self._window_ns),
            "explained_us": _us(self._explained_ns),
            "events": self._events_seen,
            "lost_events": int(lost_events),
            "steal": steal,
            "culprits": table,
            "worst": worst,
        }

    # -- internals --------------------------------------------------------------------------------
    def _explain(self, late: Late) -> None:
        start, end = late.start_ns, late.end_ns
        work = [(start, late.work_until_ns), (late.detect_ns, end)]
        # Windows start in order (edge_i > detect_{i-1}), and a record still to come starts its
        # window after the last one seen: the events before this start are folded for good.
        self._fold(bisect.bisect_left(self._times, start))
        times = self._times
        state = self._base.copy()
        j = bisect.bisect_right(times, end)
        segments = build_timeline(state, self._events[:j], end, self.worker_pid)
        segments = slice_window(segments, start, end)
        totals, gaps, unexplained = account(segments, start, end, worker_pid=self.worker_pid,
                                            work_ns=work, event_ts=times[:j], cpu=self.rt_cpu,
                                            gap_min_ns=self.gap_min_ns, rt_throttling=self.rt_throttling)
        window = max(end - start, 0)
        self.late += 1
        self._window_ns += window
        self._explained_ns += window - unexplained
        for src, ns in totals.items():
            key = (src.kind, src.name, src.ident)
            c = self._culprits.get(key)
            if c is None:
                c = self._culprits[key] = {"kind": src.kind, "name": src.name, "id": src.ident, "detail": src.detail,
                                           "cycles": 0, "total_ns": 0, "worst_ns": 0}
            c["cycles"] += 1
            c["total_ns"] += ns
            c["worst_ns"] = max(c["worst_ns"], ns)
        item = (window, -late.seq)
        if len(self._worst) >= self.keep_worst and (not self._worst or item <= self._worst[0][:2]):
            return  # not among the worst: counted in the culprits, no detail kept
        traced = self._first_event_ns is not None and self._first_event_ns <= start
        detail = self._detail(late, totals, gaps, unexplained, window, traced)
        entry = (window, -late.seq, detail)
        if len(self._worst) < self.keep_worst:
            heapq.heappush(self._worst, entry)
        elif self.keep_worst > 0:
            heapq.heapreplace(self._worst, entry)

    def _detail(self, late: Late, totals, gaps, unexplained: int, window: int, traced: bool) -> dict:
        causes = sorted(totals.items(), key=lambda kv: (-kv[1], KIND_ORDER.index(kv[0].kind), kv[0].name))
        out_causes = []
        for src, ns in causes:
            c = {"kind": src.kind, "name": src.name, "id": src.ident, "detail": src.detail,
                 "duration_us": _us(ns), "share": round(ns / window, 4) if window else 0.0, "label": src.label()}
            if src.kind == "outside":
                c["gaps_ns"] = [[a, b] for a, b in gaps]
                c["longest_gap_us"] = _us(max(b - a for a, b in gaps))
                c["steal"] = None  # filled in by finish(): the sample after the gap may not be in yet
            out_causes.append(c)
        main = out_causes[0]["label"] if out_causes else "unexplained"
        return {
            "seq": late.seq,
            "cycle": late.cycle,
            "detect_ns": late.detect_ns,
            "reasons": list(late.reasons),
            "period_us": None if late.period_ns is None else _us(late.period_ns),
            "latency_us": _us(late.detect_ns - late.edge_ns),
            "missed": late.missed,
            "window": {"start_ns": late.start_ns, "end_ns": late.end_ns, "duration_us": _us(window),
                       "from": "previous permit (its work ran past the edge)" if late.start_ns != late.edge_ns
                       else "edge",
                       "to": "write (a missed update)" if late.end_ns != late.detect_ns else "permit seen"},
            "causes": out_causes,
            "unexplained_us": _us(unexplained),
            "unexplained_share": round(unexplained / window, 4) if window else 0.0,
            "main_cause": main,
            "traced": traced,
        }

    def _fold(self, k: int) -> None:
        """Apply the first *k* buffered events to the base state and drop them."""
        if k:
            for ev in self._events[:k]:
                apply(self._base, ev, self.worker_pid, None)
            del self._events[:k]
            del self._times[:k]

    def _trim(self) -> None:
        """Fold the events no window can need into the base state."""
        keep_from = self._pending[0].start_ns if self._pending else None
        if self._prev is not None:
            keep_from = self._prev[1] if keep_from is None else min(keep_from, self._prev[1])
        if keep_from is None:
            return
        cut_ns = keep_from - MARGIN_NS
        self._fold(bisect.bisect_left(self._times, cut_ns))


def unavailable(reason: str) -> dict:
    """summary.json's ``why_late`` when there was no tracing: the reason, e.g. ``off (--no-trace)``."""
    return {"tracing": reason}
