"""Who had the RT CPU, moment by moment: a timeline rebuilt from its trace events (analysis layer; pure).

The attribution (:mod:`.attribution`) slices this timeline to each late cycle's interference
window and credits every nanosecond to the innermost source.

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
    RUN      not a holder: how much of a stretch the scheduler counted as the current task's run time.
             ``sched_stat_runtime`` (include/trace/events/sched.h) reports, at each update of the
             current task's clock (a tick, a switch), the time it ran since the previous update,
             measured on the runqueue's task clock, which stops while the hypervisor runs (with
             CONFIG_PARAVIRT_TIME_ACCOUNTING, kernel/sched/core.c ``update_rq_clock_task``: steal is
             left out). A stretch from one update to the next that lasted longer than the time it
             reports lost the difference to the hypervisor: its ``stolen`` share. Seen on the
             benchmark VM: a 300 µs spin current for 726 µs, its runtime 385 µs of a 484 µs stretch.

Expected event fields (the kernel's ``key=value`` text, see events.py): sched_switch
``prev_comm prev_pid prev_prio prev_state next_comm next_pid next_prio``; sched_wakeup ``pid``;
sched_stat_runtime ``pid runtime``; irq_handler_entry/exit ``irq`` (and ``name``); softirq_entry
``vec`` (``action`` or ``[action`` when the parser kept the bracket; else the name comes from the
vector number);
workqueue_execute_start ``function`` (its text is ``work struct %p: function %ps``, not
key=value: the trace layer must extract it); sys_enter ``id`` or ``NR`` (its text is ``NR %ld
(...)``). Other ``X_entry``/``X_exit`` pairs (the x86 ``irq_vectors``, ``ipi_entry/exit``) are
hard-IRQ-level kernel work named after X; every other event only shows that the guest ran.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import lru_cache

from .events import TraceEvent, field_int

#: Softirq vector numbers (include/linux/interrupt.h, ``softirq_to_name``).
SOFTIRQ_NAMES = ("HI", "TIMER", "NET_TX", "NET_RX", "BLOCK", "IRQ_POLL", "TASKLET", "SCHED", "HRTIMER", "RCU")

#: Pairs of events that open and close something that is not an ``X_entry``/``X_exit`` vector.
_NOT_VECTORS = frozenset({"irq_handler", "softirq", "hrtimer_expire", "timer_expire"})

#: The events whose fields the attribution reads (every other event is used by its name, time and
#: task only): the trace layer need not split the others' text (trace.parse.LineParser).
FIELDS_READ = frozenset(
    {
        "sched_switch",
        "sched_wakeup",
        "sched_waking",
        "irq_handler_entry",
        "irq_handler_exit",
        "softirq_entry",
        "workqueue_execute_start",
        "sys_enter",
        "ipi_entry",
        "sched_stat_runtime",
    }
)


@dataclass(frozen=True, slots=True)
class Source:
    """Who took the CPU: ``kind`` (thread, irq, softirq, kernel, outside, loop), a name, an id
    (pid, IRQ number, softirq vector, CPU; -1 when none), a detail (e.g. ``FIFO 99``) and, for a
    task that ran while the worker was parked, the mechanism that let it (``via``)."""

    kind: str
    name: str
    ident: int = -1
    detail: str = ""
    via: str = ""  # a task that ran while the worker was parked: "fair_server", "rt_throttling", ...

    def label(self) -> str:
        """``thread stress-ng (pid 812, FIFO 99)``-like text."""
        what = {"thread": "pid", "irq": "IRQ", "softirq": "vec"}.get(self.kind)
        inner = ", ".join(x for x in (f"{what} {self.ident}" if what and self.ident >= 0 else "", self.detail) if x)
        return f"{self.kind} {self.name}" + (f" ({inner})" if inner else "")


#: Not a kernel event: the lean trace's worker taken as woken (analysis.attribution; it records no
#: wake-up), from here on delayed by what holds the CPU, unless it runs or is parked.
ASSUMED_WAKEUP = "softrt_assumed_wakeup"

#: The layer of the scheduler's run-time stretches (not a holder of the CPU; see the module doc).
RUN = -1


@dataclass(frozen=True, slots=True)
class Segment:
    """``[start_ns, end_ns)`` held by *source* at *layer*; layer-1 and RUN segments belong to task *pid*."""

    start_ns: int
    end_ns: int
    layer: int
    source: Source
    pid: int = -1
    parked: str = ""  # the worker was runnable but switched out for: "idle", "other" (SCHED_OTHER) or "rt"
    asleep: bool = False  # the worker was blocked (not yet woken): the task ran while it could not
    woken: bool = False  # the worker was woken and this lower-priority task (or idle) was still current
    stolen: float = 0.0  # RUN: the share of the stretch the scheduler did not count as the task's run time


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
    open: list[tuple[int, str, Source, int, int]] = field(
        default_factory=list
    )  # (layer, tag, source, start_ns, pid), innermost last
    fault: tuple[Source, int, int] | None = None  # (source, start_ns, pid): a page fault waiting for the next event
    ran_since_ns: int = 0  # the current task's last run-time update (or its switch-in)

    def copy(self) -> CpuState:
        return replace(self, open=list(self.open))  # the open items are the one mutable part


def policy(prio: int | None) -> str:
    """Policy and priority from the kernel prio a sched_switch prints (include/linux/sched/prio.h)."""
    if prio is None:
        return ""
    if prio < 0:
        return "DEADLINE"
    if prio < 100:
        return f"FIFO/RR {99 - prio}"
    return f"OTHER nice {prio - 120}"


@lru_cache(maxsize=1024)
def _task(comm: str, pid: int, prio: int | None) -> Source:
    # Cached: a frozen dataclass costs ~1.6 µs to make, and a few tasks switch thousands of times a second.
    return Source("thread", comm, pid, policy(prio))


def _softirq(fields: dict[str, str]) -> Source:
    return _softirq_source(fields.get("vec"), fields.get("action") or fields.get("[action") or "")


@lru_cache(maxsize=64)
def _softirq_source(vec_text: str | None, action: str) -> Source:
    vec = field_int(vec_text)
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
    if (
        state.parked
        and state.task_pid != 0
        and state.task_prio is not None
        and state.worker_prio is not None
        and state.task_prio < state.worker_prio
    ):
        return ""
    return state.parked


def _emit(out: list[Segment], seg: Segment) -> None:
    if seg.end_ns > seg.start_ns:
        out.append(seg)


#: Events that only say the CPU was active (the watch's timer and exit events): no state of their own.
_ACTIVITY_ONLY = frozenset({"hrtimer_start", "hrtimer_setup", "hrtimer_init", "hrtimer_cancel", "sched_process_exit"})


def apply(state: CpuState, ev: TraceEvent, worker_pid: int, out: list[Segment] | None) -> None:
    """Advance *state* by one event; append the segments it closes to *out* (None: discard them).

    Folding (*out* None) is what most events get, so it builds no segment at all: ~13 % less time an
    event on the benchmark VM (1.58 -> 1.38 µs)."""
    t, name, f = ev.ts_ns, ev.name, ev.fields
    if state.fault is not None:  # a fault has no exit event: it lasted until the next event at most
        fault_src, start, pid = state.fault
        if out is not None:
            _emit(out, Segment(start, t, 1, fault_src, pid))
        state.fault = None
    if state.task is None:  # the common header names the task that was current
        state.task, state.task_pid, state.since_ns, state.ran_since_ns = _task(ev.comm, ev.pid, None), ev.pid, t, t
    if name in _ACTIVITY_ONLY:
        return
    if name == "sched_switch":
        prev_pid, next_pid = field_int(f.get("prev_pid")), field_int(f.get("next_pid"))
        prev_prio, next_prio = field_int(f.get("prev_prio"), None), field_int(f.get("next_prio"), None)
        if out is not None:
            _emit(
                out,
                Segment(state.since_ns, t, 0, state.task, state.task_pid, _parked(state), state.asleep, state.woken),
            )
        state.woken = False
        if prev_pid == worker_pid and next_pid != worker_pid:
            runnable = (f.get("prev_state") or "").startswith("R")
            lower = next_pid == 0 or (next_prio is not None and prev_prio is not None and next_prio > prev_prio)
            state.parked = (
                ""
                if not (runnable and lower)
                else ("idle" if next_pid == 0 else "rt" if next_prio is not None and next_prio < 100 else "other")
            )
            state.asleep = not runnable
            state.worker_prio = prev_prio
        elif next_pid == worker_pid:
            state.parked, state.asleep = "", False
        state.task = _task(f.get("next_comm", "?"), next_pid, next_prio)
        state.task_pid, state.task_prio, state.since_ns, state.ran_since_ns = next_pid, next_prio, t, t
        return
    if name == "sched_stat_runtime":
        if field_int(f.get("pid")) == state.task_pid and state.task_pid not in (worker_pid, 0):
            length, ran = t - state.ran_since_ns, field_int(f.get("runtime"), 0)
            if length > 0 and out is not None:
                _emit(
                    out,
                    Segment(
                        state.ran_since_ns, t, RUN, state.task, state.task_pid, stolen=max(0, length - ran) / length
                    ),
                )
            state.ran_since_ns = t
        return
    if name == ASSUMED_WAKEUP:
        if state.task_pid != worker_pid and not state.parked:
            _wake(state, t, out)
        return
    if name in ("sched_wakeup", "sched_waking") and field_int(f.get("pid")) == worker_pid and state.asleep:
        _wake(state, t, out)
        return
    layer, tag, src = _classify(ev, worker_pid)
    if layer is None:
        return
    if src is None:  # an exit: close the innermost open item it matches
        for k in range(len(state.open) - 1, -1, -1):
            lay, otag, osrc, start, pid = state.open[k]
            if lay == layer and (otag == tag or tag == ""):
                if out is not None:
                    _emit(out, Segment(start, t, lay, osrc, pid))
                del state.open[k]
                break
        return
    if tag == "fault":
        state.fault = (src, t, ev.pid)
        return
    state.open.append((layer, tag, src, t, ev.pid if layer == 1 else -1))


def _wake(state: CpuState, t: int, out: list[Segment] | None) -> None:
    """The worker woken at *t*: from here a task holding the CPU delays it (rtla's "blocking thread"),
    unless it ranks above the worker."""
    if out is not None and state.task is not None:
        _emit(
            out,
            Segment(state.since_ns, t, 0, state.task, state.task_pid, _parked(state), state.asleep, state.woken),
        )
    state.since_ns, state.asleep = t, False
    state.woken = (
        state.task_pid == 0
        or state.task_prio is None
        or state.worker_prio is None
        or state.task_prio > state.worker_prio
    )


def _classify(ev: TraceEvent, worker_pid: int) -> tuple[int | None, str, Source | None]:
    """(layer, tag, source) of a non-switch event; source None for an exit (it closes the open item
    with the same tag; tag "" closes the innermost of its layer); layer None: activity only."""
    name, f = ev.name, ev.fields
    if name == "irq_handler_entry":
        irq = field_int(f.get("irq"))
        return 3, f"irq:{irq}", _irq_source(f.get("name", f"irq {irq}"), irq)
    if name == "irq_handler_exit":
        return 3, f"irq:{field_int(f.get('irq'))}", None
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
        nr = field_int(f.get("id", f.get("NR")))
        return 1, "sys", Source("kernel", "system call" + (f" {nr}" if nr >= 0 else "") + " of the worker")
    if ev.pid == worker_pid and name == "sys_exit":
        return 1, "sys", None
    vec = _vector(name)
    if vec is None:
        return None, "", None
    vector, is_exit = vec
    if is_exit:
        return 3, "vec:" + vector, None
    return 3, "vec:" + vector, _vector_source(vector, f.get("reason") if vector == "ipi" else None)


@lru_cache(maxsize=256)
def _irq_source(name: str, irq: int) -> Source:
    return Source("irq", name, irq)


@lru_cache(maxsize=256)
def _vector_source(vector: str, reason: str | None) -> Source:
    return Source("kernel", f"IPI {reason}" if reason else vector.replace("_", " "))


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
        out.append(
            Segment(state.since_ns, end_ns, 0, state.task, state.task_pid, _parked(state), state.asleep, state.woken)
        )
    for layer, _tag, src, start, pid in state.open:
        out.append(Segment(start, end_ns, layer, src, pid))
    if state.fault is not None:
        src, start, pid = state.fault
        out.append(Segment(start, end_ns, 1, src, pid))
    return out


def slice_window(segments: list[Segment], start_ns: int, end_ns: int) -> list[Segment]:
    """The segments' parts inside ``[start_ns, end_ns)``."""
    return [
        Segment(
            max(s.start_ns, start_ns),
            min(s.end_ns, end_ns),
            s.layer,
            s.source,
            s.pid,
            s.parked,
            s.asleep,
            s.woken,
            s.stolen,
        )
        for s in segments
        if s.end_ns > start_ns and s.start_ns < end_ns and s.end_ns > s.start_ns
    ]
