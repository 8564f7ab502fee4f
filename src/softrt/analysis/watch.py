"""Cycles of a thread softrt did not write, from the kernel's trace alone (analysis layer; pure, no I/O).

``softrt watch`` measures any thread's cycle the way cyclictest measures its own
(rt-tests' cyclictest.c: ``clock_nanosleep(TIMER_ABSTIME, next)``, then ``now - next``), from events
the kernel logs for the thread:

``timer:hrtimer_start`` (kernel/time/hrtimer.c, ``debug_activate``)
    in the thread's context when it arms a timer to sleep on: ``softexpires`` is the wake-up it
    asked for (``expires`` adds its timer slack, include/linux/hrtimer.h); ``function`` says which
    kind: ``hrtimer_wakeup`` (clock_nanosleep, nanosleep, select/poll/epoll timeouts, timed futex
    waits: schedule_hrtimeout and do_nanosleep), ``timerfd_tmrproc`` (timerfd, rearmed in the
    read that returns: fs/timerfd.c), ``posix_timer_fn`` and ``it_real_fn`` (POSIX timers and
    setitimer, which signal it). Other hrtimers that fire while the thread is current (the tick)
    are not its sleeps.
``timer:hrtimer_setup``
    the clock of that timer: a BOOTTIME expiry is converted to the trace's mono clock with the
    offset the caller measured; REALTIME and TAI too when the expiry is one (decades from the mono
    clock: a relative REALTIME timer runs on the monotonic base). The trace records only setups of
    another clock than MONOTONIC (trace.watch: a sleep sets its timer up again every time), so a
    timer whose setup was not seen runs on MONOTONIC, or on REALTIME when its expiry is decades away;
    a sleep's timer (``hrtimer_wakeup``, on the stack) is forgotten once the thread is back.
``timer:hrtimer_cancel`` before its expiry
    the sleep was cut short (a signal, I/O): that expiry never comes. (The kernel logs the same
    event when the timer fires, at or after the expiry: that one is kept.)
``sched:sched_switch``, ``sched:sched_wakeup``
    when it blocked (``prev_state`` not R), was woken (``target_cpu``), was preempted
    (``prev_state`` R) and ran again.
``raw_syscalls:sys_exit``
    when it was back in user space.

Per cycle: the *edge* is the requested expiry, *wake* the wake-up, *detect* the return to user
space (latency = detect - edge, cyclictest's measure; without ``sys_exit`` the switch to the
thread), *done* the moment it blocked again (run time = done - detect: until it first blocks
again), and its CPU. A cycle whose thread never blocked because its next expiry had already
passed (an overrun: clock_nanosleep on a past time returns at once) is a cycle too; its *done*
is when it asked to sleep. A sleep that ended before its expiry is counted as *woken early*, not
a cycle. A thread that never blocks *polls*: its involuntary preemptions and who held its CPU
meanwhile are what can be measured.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..ipc.layout import RECORD_DTYPE
from .events import TraceEvent, field_int

#: Timer callbacks that end a sleep of the task that armed them (see the module docstring).
SLEEP_TIMERS = frozenset({"hrtimer_wakeup", "timerfd_tmrproc", "posix_timer_fn", "it_real_fn"})
#: The text trace prints µs (kernel/trace/trace_output.c): a wake-up printed up to 1 µs before its
#: expiry (truncated) is still that expiry's.
TRACE_RESOLUTION_NS = 1_000
#: Expiries kept per thread at most (a thread arms one or two timers at a time).
MAX_ARMED = 16
#: A REALTIME or TAI expiry is this far from the trace's mono clock (ns since 1970 against ns since boot).
_FAR_NS = 10 * 365 * 86400 * 10**9


@dataclass(slots=True)
class Cycle:
    """One cycle of a watched thread (CLOCK_MONOTONIC ns)."""

    edge_ns: int  # the expiry it asked for
    detect_ns: int  # back in user space
    cpu: int  # where it came back
    wake_ns: int | None = None  # its sched_wakeup (None: it never blocked, an overrun)
    done_ns: int | None = None  # when it blocked again (or asked to sleep on a past expiry)
    timer: str = ""  # the timer's function


@dataclass(slots=True)
class _Armed:
    ptr: str
    expiry_ns: int
    start_ns: int
    function: str


@dataclass(slots=True)
class _Preempt:
    """The watched thread switched out while runnable: where, since when, who holds its CPU since
    when, and the pids already counted once for this preemption."""

    cpu: int
    start_ns: int
    holder: tuple[str, int, int | None]  # (comm, pid, prio)
    holder_since_ns: int
    credited: set[int] = field(default_factory=set)


@dataclass
class Preemptor:
    """A task that held the watched thread's CPU while the thread was runnable but switched out."""

    comm: str
    pid: int
    prio: int | None
    times: int = 0
    total_ns: int = 0
    worst_ns: int = 0


@dataclass
class ThreadCycles:
    """One watched thread's cycles and preemptions, from its trace events in time order.

    *clock_offsets_ns*: ``{clockid name: that clock - CLOCK_MONOTONIC}`` (e.g. ``CLOCK_REALTIME``),
    measured by the caller; *back*: ``"sys_exit"`` (the return to user space) or ``"switch_in"``
    (when the kernel has no raw_syscalls events: the switch to the thread).
    """

    tid: int
    clock_offsets_ns: dict[str, int] = field(default_factory=dict)
    back: str = "sys_exit"
    cycles: list[Cycle] = field(default_factory=list)  # finished, not yet taken
    woken_early: int = 0
    sleeps: int = 0  # times it blocked
    preemptions: int = 0
    preempted_ns: int = 0
    longest_preemption_ns: int = 0
    preemptors: dict[tuple[int, str], Preemptor] = field(default_factory=dict)
    cpus: set[int] = field(default_factory=set)  # where it ran
    migrations: int = 0
    timers: dict[str, int] = field(default_factory=dict)  # timer function -> cycles
    timer_slack_ns: int = 0  # the most its timers were allowed to fire late (expires - softexpires)
    exited_ns: int | None = None
    first_ns: int | None = None  # its first event
    last_ns: int | None = None  # its last event
    _armed: list[_Armed] = field(default_factory=list)
    _clock: dict[str, str] = field(default_factory=dict)  # hrtimer pointer -> clockid
    _on_stack: set[str] = field(default_factory=set)  # the sleeps' timers armed since it was last back
    _blocked: bool = False
    _woken_ns: int | None = None
    _cut_short: bool = False  # a timer was cancelled before its expiry since it last blocked
    _cur: Cycle | None = None  # the cycle running (its done not yet known)
    _last_cpu: int | None = None
    _preempt: _Preempt | None = None

    def __post_init__(self) -> None:
        self._tid_text = str(self.tid)  # the pid as the kernel prints it in the events' fields

    # -- input --------------------------------------------------------------------------------------
    def add(self, ev: TraceEvent) -> None:
        """One trace event (of any task, any CPU), in time order."""
        name = ev.name
        if name == "sched_switch":
            f = ev.fields  # most switches are other tasks': compared as the kernel printed them
            prev_me, next_me = f.get("prev_pid") == self._tid_text, f.get("next_pid") == self._tid_text
            if prev_me or next_me or self._preempt is not None:
                self._switch(ev, prev_me, next_me)
            return
        if name == "sched_wakeup":
            if ev.fields.get("pid") == self._tid_text:
                self._seen(ev.ts_ns)
                self._woken_ns = ev.ts_ns
            return
        if name == "sched_process_exit":
            if ev.fields.get("pid") == self._tid_text:
                self.exited_ns = ev.ts_ns
            return
        if ev.pid != self.tid:
            return
        self._seen(ev.ts_ns)
        if name == "sys_exit":
            if self.back == "sys_exit":
                self._returned(ev.ts_ns, ev.cpu)
        elif name == "hrtimer_start":
            self._start(ev)
        elif name in ("hrtimer_setup", "hrtimer_init"):
            ptr, clock = ev.fields.get("hrtimer"), ev.fields.get("clockid")
            if ptr and clock:
                self._clock[ptr] = clock
        elif name == "hrtimer_cancel":
            ptr = ev.fields.get("hrtimer")
            # Cancelled before its expiry: the sleep was cut short. At or after it: the expiry itself.
            kept = [a for a in self._armed if not (a.ptr == ptr and a.expiry_ns > ev.ts_ns)]
            self._cut_short = self._cut_short or len(kept) < len(self._armed)
            self._armed = kept

    def take(self) -> list[Cycle]:
        """Return (and forget) the cycles finished so far, in order."""
        out, self.cycles = self.cycles, []
        return out

    @property
    def kind(self) -> str:
        """How the thread waited: ``timer`` (it sleeps on a timer: cycles), ``polls`` (it never
        blocked), ``sleeps`` (it blocked, never on a timer that woke it) or ``idle`` (it never ran)."""
        if self.timers:
            return "timer"
        if self.sleeps:
            return "sleeps"
        return "polls" if self.cpus else "idle"

    # -- internals ----------------------------------------------------------------------------------
    def _seen(self, ts_ns: int) -> None:
        if self.first_ns is None:
            self.first_ns = ts_ns
        self.last_ns = ts_ns

    def _start(self, ev: TraceEvent) -> None:
        f = ev.fields
        function = f.get("function", "")
        if function not in SLEEP_TIMERS:
            return  # the tick or another timer rearmed in an interrupt while the thread was current
        soft, hard = f.get("softexpires"), f.get("expires")
        expiry = field_int(hard if soft is None else soft)
        if expiry < 0:
            return
        if hard != soft:  # a real-time task's timers have no slack: the two are the same text
            self.timer_slack_ns = max(self.timer_slack_ns, field_int(hard, expiry) - expiry)
        ptr = f.get("hrtimer", "")
        if function == "hrtimer_wakeup":
            self._on_stack.add(ptr)
        clock = self._clock.get(ptr, "CLOCK_REALTIME")
        if clock in ("CLOCK_REALTIME", "CLOCK_TAI") and abs(expiry - ev.ts_ns) < _FAR_NS:
            # A relative CLOCK_REALTIME timer runs on the monotonic base (kernel/time/hrtimer.c,
            # __hrtimer_setup: glibc's nanosleep is one), though hrtimer_setup logs REALTIME.
            clock = "CLOCK_MONOTONIC"
        expiry -= self.clock_offsets_ns.get(clock, 0)
        # Rearmed before it fired: the earlier expiry never comes.
        armed = [a for a in self._armed if not (a.ptr == ptr and a.expiry_ns > ev.ts_ns)]
        armed.append(_Armed(ptr, expiry, ev.ts_ns, function))
        self._armed = armed[-MAX_ARMED:]

    def _switch(self, ev: TraceEvent, prev_me: bool, next_me: bool) -> None:
        """A switch from (*prev_me*) or to (*next_me*) the thread, or on the CPU it was preempted on."""
        f, ts = ev.fields, ev.ts_ns
        p = self._preempt
        if p is not None and ev.cpu == p.cpu and not prev_me:
            self._credit(p, ts)
            p.holder, p.holder_since_ns = _next_task(f), ts
        if prev_me:
            self._seen(ts)
            if (f.get("prev_state") or "").startswith("R"):  # preempted: still runnable
                self._preempt = _Preempt(ev.cpu, ts, _next_task(f), ts)
            else:
                self.sleeps += 1
                self._blocked, self._woken_ns, self._cut_short = True, None, False
                if self._cur is not None:
                    self._cur.done_ns = ts
                    self.cycles.append(self._cur)
                    self._cur = None
        if next_me:
            self._seen(ts)
            if p is not None:
                if ev.cpu != p.cpu:
                    self._credit(p, ts)  # it ran again elsewhere: what held the old CPU held it up
                length = ts - p.start_ns
                self.preemptions += 1
                self.preempted_ns += length
                self.longest_preemption_ns = max(self.longest_preemption_ns, length)
                self._preempt = None
            if self._last_cpu is not None and ev.cpu != self._last_cpu:
                self.migrations += 1
            self._last_cpu = ev.cpu
            self.cpus.add(ev.cpu)
            if self.back == "switch_in" and self._blocked:
                self._returned(ts, ev.cpu)

    def _credit(self, p: _Preempt, ts_ns: int) -> None:
        (comm, pid, prio), since = p.holder, p.holder_since_ns
        if pid == self.tid or ts_ns <= since:
            return
        key = (pid, comm)
        who = self.preemptors.get(key)
        if who is None:
            who = self.preemptors[key] = Preemptor(comm, pid, prio)
        if pid not in p.credited:
            p.credited.add(pid)
            who.times += 1
        who.total_ns += ts_ns - since
        who.worst_ns = max(who.worst_ns, ts_ns - since)

    def _returned(self, ts_ns: int, cpu: int) -> None:
        """Back in user space (or on the CPU): a cycle ends when a timer it slept on has expired."""
        woken = self._woken_ns if self._blocked else None
        ref = woken if woken is not None else ts_ns
        due = [a for a in self._armed if a.expiry_ns <= ref + TRACE_RESOLUTION_NS and a.start_ns < ref]
        if due:
            timer = max(due, key=lambda a: a.expiry_ns)
            self._armed = [] if len(due) == len(self._armed) else [a for a in self._armed if a not in due]
            cur = self._cur
            if cur is not None:  # it never blocked: it asked to sleep on an expiry already past
                cur.done_ns = timer.start_ns if timer.start_ns > cur.detect_ns else ts_ns
                self.cycles.append(cur)
            self._cur = Cycle(timer.expiry_ns, ts_ns, cpu, woken, None, timer.function)
            self.timers[timer.function] = self.timers.get(timer.function, 0) + 1
        elif self._blocked and (self._cut_short or any(a.expiry_ns > ref for a in self._armed)):
            self.woken_early += 1  # its sleep ended before the timer (a signal, I/O, another thread)
        self._blocked, self._woken_ns, self._cut_short = False, None, False
        for ptr in self._on_stack:  # a sleep's timer lived on the stack of the call that returned
            self._clock.pop(ptr, None)
        self._on_stack.clear()


def _next_task(f: dict[str, str]) -> tuple[str, int, int | None]:
    """(comm, pid, prio) of the task a switch switches to."""
    return f.get("next_comm", "?"), field_int(f.get("next_pid")), field_int(f.get("next_prio"), None)


def infer_period_ns(edges_ns: list[int]) -> int | None:
    """The thread's own cycle: the median step between its requested expiries (to 1 µs), or None."""
    steps = np.diff(np.asarray(edges_ns, dtype=np.int64))
    steps = steps[steps > 0]
    if not steps.size:
        return None
    return max(int(round(float(np.median(steps)) / 1e3)) * 1_000, 1_000)


class RecordMaker:
    """Watched cycles as the loop's records (ipc.layout.RECORD_DTYPE), so the run's streaming pass,
    late rule, samples file and attribution read them unchanged.

    ``edge_ns`` the requested expiry, ``detect_ns`` = ``write_ns`` the return to user space,
    ``done_ns`` when it blocked again; ``cycle`` the expiry's index in nominal periods from the
    first; ``missed`` the expiries it skipped (its next request more than one period after the
    previous: cyclictest and timerfd skip cycles after an overrun).
    """

    def __init__(self, period_ns: int) -> None:
        self.period_ns = period_ns
        self.seq = 0
        self._first_edge: int | None = None
        self._last_edge: int | None = None

    def records(self, cycles: list[Cycle]) -> tuple[np.ndarray, np.ndarray]:
        """The records of *cycles* and each one's CPU."""
        out = np.zeros(len(cycles), dtype=RECORD_DTYPE)
        cpus = np.empty(len(cycles), dtype=np.int64)
        period = self.period_ns
        for i, c in enumerate(cycles):
            if self._first_edge is None:
                self._first_edge = c.edge_ns
            missed = 0
            if self._last_edge is not None and period > 0:
                missed = max(0, round((c.edge_ns - self._last_edge) / period) - 1)
            self._last_edge = c.edge_ns
            index = round((c.edge_ns - self._first_edge) / period) if period > 0 else self.seq
            done = c.done_ns if c.done_ns is not None else c.detect_ns
            out[i] = (self.seq, index, c.edge_ns, c.detect_ns, c.detect_ns, done, missed, 0, 0, 0)
            cpus[i] = c.cpu
            self.seq += 1
        return out, cpus
