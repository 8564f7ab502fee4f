"""Why was a cycle late: the RT CPU's trace events, cycle by cycle (analysis layer; pure, no I/O).

For every late cycle the loop recorded, the *interference window* is rebuilt from the RT CPU's
kernel events and every nanosecond of it is credited to exactly one cause.

A late cycle is defined in :mod:`.cycles` (the run's one rule; in a run, the drainer's view of each
chunk is handed here as it is); the timeline of who had the CPU is built in
:mod:`.timeline`.

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

Parked while runnable: the worker (a FIFO task) switched out while runnable (``prev_state`` R)
for idle or a lower-priority task. A SCHED_OTHER task that runs until the worker runs again is
named itself (the culprit to move), with the mechanism that let it run as its ``via`` and in its
detail: ``through RT throttling`` when RT throttling was in force (the Attributor is told:
``rt_throttling``, from ``sched_rt_runtime_us`` >= 0 and the kernel, see trace.session;
Documentation/scheduler/sched-rt-group.rst), else ``through the fair server``: since Linux 6.12 a
SCHED_DEADLINE server for normal tasks (50 ms every 1 s by default,
/sys/kernel/debug/sched/fair_server; Documentation/scheduler/sched-deadline.rst) ranks above
SCHED_FIFO, and without CONFIG_RT_GROUP_SCHED it replaced RT throttling ("sched/rt: Remove
default bandwidth control"); seen on the benchmark VM as the worker preempted at a tick for ~50 ms of
ksoftirqd and a busy python3; with the value unknown, both are named. Idle and a lower-priority RT
task are the kernel's doing: ``RT throttling`` when in force, else the plain fact (switched out to
idle, a lower-priority RT task ran). A task kept current after the worker's *wakeup* is a different
case (below).

Never more than it ran: a task's own time in a window is what the scheduler counted as its run
time (timeline, ``RUN``); the rest of its stretch is ``hypervisor steal while another task held CPU
N`` (outside the guest). Windows never overlap: a window that would start inside the previous one
starts where that one ended, so no moment is credited twice.

Waiting is no cause: after the worker blocked (switched out not runnable) and until its
``sched_wakeup``, whatever ran could not delay it. From the wakeup to the switch, idle is
``kernel: exit from idle`` (rtla's "exit from idle"), and a lower-priority task still current is
``kernel: switch to the woken worker`` for up to ``SWITCH_GRACE_NS`` (the scheduler's own path),
beyond it that task is blamed (it ran non-preemptible: rtla's "blocking thread"), except for
stretches of ``gap_min_ns`` without any event, which are "no guest activity" like the worker's own. So a SCHED_OTHER
task that only ran while the loop slept is never blamed.

The lean trace (``--trace-mode lean``, trace.session): no timer interrupt and no wake-up are
recorded, so the worker is taken as woken at a window's start (the edge: its timer was due) and again
after each switch to another task in it (timeline.ASSUMED_WAKEUP). Idle from then to the switch is one
``wake-up from idle`` cause (the timer interrupt, the exit from idle and the switch, not split) up to
LEAN_WAKE_GAP_NS; a lower-priority task current then is ``wake-up past a lower-priority task``, never
blamed (without the wake-up, its time cannot be told from the timer's path); a longer silence is a gap
that may be an unrecorded timer interrupt (said in its detail). Tasks above the worker, IRQs, softirqs
and kworker items are named as in the full trace (attribution_account).

Outside the kernel: in the window after the worker could have seen the permit, the worker
(spinning), idle, or a task that ran while the worker slept held the CPU and no event fired. A stretch of at least ``gap_min_ns`` without
any event is reported as "no guest activity on CPU N for X µs", with the RT CPU's steal counter
(/proc/stat) over the samples that bracket it as evidence. Whether it was the hypervisor, an SMI
or firmware is not guessed. Shorter stretches are the *unexplained* rest, stated as such.
"""

from __future__ import annotations

import bisect
import heapq
from array import array
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..schema.config import DEFAULT_THRESHOLD_NS
from ..schema.doc import present
from ..schema.why_late import Cause, CauseSteal, Culprit, LateCycle, Steal, WhyLate, Window
from .attribution_account import SWITCH_GRACE_NS, account
from .cycles import CycleStream, CycleView, Late, LateRule
from .events import StealSample, TraceEvent, field_int
from .timeline import ASSUMED_WAKEUP, CpuState, Source, apply, build_timeline, slice_window

#: Events kept before the oldest window still to explain; older ones are folded into the base
#: state, so nothing needs them: this is only slack.
MARGIN_NS = 1_000_000

KIND_ORDER = ("thread", "irq", "softirq", "kernel", "outside", "loop")

#: Re-exported: the accounting of one window lives in :mod:`.attribution_account`.
__all__ = ["KIND_ORDER", "MARGIN_NS", "SWITCH_GRACE_NS", "Attributor", "account", "steal_between", "unavailable"]


def steal_between(times_ns: Sequence[int], steal_ns: Sequence[int], start_ns: int, end_ns: int) -> CauseSteal | None:
    """The steal counter's rise between the samples that bracket ``[start_ns, end_ns]``, or None.

    *times_ns*/*steal_ns*: the samples' times and cumulative steal, in time order.
    """
    i = bisect.bisect_right(times_ns, start_ns) - 1
    j = bisect.bisect_left(times_ns, end_ns)
    if i < 0 or j >= len(times_ns):
        return None
    return CauseSteal(
        from_ns=times_ns[i],
        to_ns=times_ns[j],
        steal_ms=round((steal_ns[j] - steal_ns[i]) / 1e6, 3),
        over_s=round((times_ns[j] - times_ns[i]) / 1e9, 3),
    )


def _us(ns: float) -> float:
    return round(ns / 1e3, 3)


class Attributor:
    """Streams records, events and steal samples; explains each late cycle once its events are in.

    Memory is bounded: events older than the oldest window still to explain (and the last record)
    are folded into a base state and dropped; only the *keep_worst* longest windows keep their
    detail, while the culprits table counts every late cycle.
    """

    def __init__(
        self,
        *,
        period_ns: int,
        rt_cpu: int,
        worker_pid: int,
        threshold_ns: int = DEFAULT_THRESHOLD_NS,
        keep_worst: int = 100,
        gap_min_ns: int = 10_000,
        rt_throttling: bool | None = None,
        lean: bool = False,
    ) -> None:
        self.period_ns, self.rt_cpu, self.worker_pid = period_ns, rt_cpu, worker_pid
        # The lean trace records no wake-up: the worker is taken as woken at a window's start (its
        # edge, when its timer was due): _assume_woken.
        self.lean = lean
        # RT throttling in force during the run (the caller read sched_rt_runtime_us and the kernel); None: unknown
        self.rt_throttling = rt_throttling
        self.threshold_ns, self.keep_worst, self.gap_min_ns = threshold_ns, keep_worst, gap_min_ns
        self._cycles = CycleStream(LateRule(period_ns, threshold_ns))
        self._pending: deque[Late] = deque()
        self._events: list[TraceEvent] = []
        self._times: list[int] = []  # their ts_ns, for bisection
        self._base = CpuState()
        # Steal samples are kept for the whole run (two int64 a second: 4 MB for 72 h) so that the
        # worst cycles' gaps get the sample after them, which arrives up to a second later.
        self._steal_ts = array("q")
        self._steal_ns = array("q")
        self._worst: list[tuple[int, int, LateCycle]] = []  # min-heap of (window_ns, -seq, detail)
        self._culprits: dict[tuple[str, str, int, str], _Total] = {}
        self.cycles = 0
        self.late = 0
        self._explained_ns = 0
        self._window_ns = 0
        self._events_seen = 0
        self._first_event_ns: int | None = None
        self._explained_until_ns = 0  # the end of the last window explained

    # -- input ------------------------------------------------------------------------------------
    def add_records(self, chunk: np.ndarray | CycleView) -> None:
        """One drained chunk of RECORD_DTYPE records, in order, or its cycle view (the drainer's)."""
        view = self._cycles.view(chunk)
        if view.size == 0:
            return
        self._pending.extend(view.late_cycles())
        self.cycles += view.size

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

    def culprit_totals(self) -> list[Culprit]:
        """Every source's late time so far (``kind``, ``name``, ``total_us``; unordered), for a live
        exporter; the culprits table of :meth:`finish` holds the same sums."""
        return [Culprit(kind=c.kind, name=c.name, total_us=_us(c.total_ns)) for c in self._culprits.values()]

    def finish(self, lost_events: int = 0) -> WhyLate:
        """Explain what is still pending with the events there are; return summary.json's ``why_late``."""
        while self._pending:
            self._explain(self._pending.popleft())
        worst = [self._steal_of(d) for _w, _s, d in sorted(self._worst, key=lambda x: (-x[0], x[1]))]
        culprits = sorted(self._culprits.values(), key=lambda c: (-c.total_ns, c.kind, c.name))
        table = [
            Culprit.build(
                kind=c.kind,
                name=c.name,
                id=c.ident,
                detail=c.detail,
                **present(via=c.via or None),  # no via key where there is none (docs/run-format.md)
                cycles=c.cycles,
                total_us=_us(c.total_ns),
                worst_us=_us(c.worst_ns),
            )
            for c in culprits
        ]
        steal = None
        if self._steal_ts:
            steal = Steal(
                cpu=self.rt_cpu,
                total_ms=round((self._steal_ns[-1] - self._steal_ns[0]) / 1e6, 3),
                over_s=round((self._steal_ts[-1] - self._steal_ts[0]) / 1e9, 3),
            )
        return WhyLate.build(
            tracing="on",
            rt_cpu=self.rt_cpu,
            worker_pid=self.worker_pid,
            threshold_us=_us(self.threshold_ns),
            gap_min_us=_us(self.gap_min_ns),
            rt_throttling=self.rt_throttling,
            cycles=self.cycles,
            late_cycles=self.late,
            window_us=_us(self._window_ns),
            explained_us=_us(self._explained_ns),
            events=self._events_seen,
            lost_events=int(lost_events),
            steal=steal,
            culprits=table,
            worst=worst,
        )

    def _steal_of(self, cycle: LateCycle) -> LateCycle:
        """*cycle* with the steal around its no-guest-activity gaps (the sample after a gap comes up to a
        second later, so it is looked up at the end)."""
        causes = [
            c.replace(steal=steal_between(self._steal_ts, self._steal_ns, c.gaps_ns[0][0], c.gaps_ns[-1][1]))
            if c.gaps_ns
            else c
            for c in cycle.causes
        ]
        return cycle.replace(causes=causes)

    # -- internals --------------------------------------------------------------------------------
    def _explain(self, late: Late) -> None:
        end = late.end_ns
        # Windows may overlap: a missed update's window runs to its late write, and the next cycle's
        # starts at that permit when its work overran the edge. What the previous window explained is
        # not credited again, so that no source is counted twice in the culprits.
        start = min(max(late.start_ns, self._explained_until_ns), end)
        self._explained_until_ns = max(self._explained_until_ns, end)
        work = [(start, late.work_until_ns), (late.detect_ns, end)]
        # Windows start in order (edge_i > detect_{i-1}), and a record still to come starts its
        # window after the last one seen: the events before this start are folded for good.
        self._fold(bisect.bisect_left(self._times, start))
        times = self._times
        state = self._base.copy()
        j = bisect.bisect_right(times, end)
        events = self._events[:j]
        if self.lean and (j or self._base.task is not None):  # no event yet: nothing is known, nothing woken
            events = self._assume_woken(events, bisect.bisect_left(times, start, 0, j), start)
        segments = build_timeline(state, events, end, self.worker_pid)
        segments = slice_window(segments, start, end)
        totals, gaps, unexplained = account(
            segments,
            start,
            end,
            worker_pid=self.worker_pid,
            work_ns=work,
            event_ts=times[:j],
            cpu=self.rt_cpu,
            gap_min_ns=self.gap_min_ns,
            rt_throttling=self.rt_throttling,
            lean=self.lean,
        )
        window = max(end - start, 0)
        self.late += 1
        self._window_ns += window
        self._explained_ns += window - unexplained
        for src, ns in totals.items():
            key = (src.kind, src.name, src.ident, src.via)
            c = self._culprits.get(key)
            if c is None:
                c = self._culprits[key] = _Total(src.kind, src.name, src.ident, src.detail, src.via)
            c.cycles += 1
            c.total_ns += ns
            c.worst_ns = max(c.worst_ns, ns)
        item = (window, -late.seq)
        if len(self._worst) >= self.keep_worst and (not self._worst or item <= self._worst[0][:2]):
            return  # not among the worst: counted in the culprits, no detail kept
        traced = self._first_event_ns is not None and self._first_event_ns <= start
        detail = self._detail(late, start, totals, gaps, unexplained, window, traced)
        entry = (window, -late.seq, detail)
        if len(self._worst) < self.keep_worst:
            heapq.heappush(self._worst, entry)
        elif self.keep_worst > 0:
            heapq.heapreplace(self._worst, entry)

    def _detail(
        self,
        late: Late,
        start: int,
        totals: dict[Source, int],
        gaps: list[tuple[int, int]],
        unexplained: int,
        window: int,
        traced: bool,
    ) -> LateCycle:
        causes = sorted(totals.items(), key=lambda kv: (-kv[1], KIND_ORDER.index(kv[0].kind), kv[0].name))
        out_causes = []
        for src, ns in causes:
            fields = dict(
                kind=src.kind,
                name=src.name,
                id=src.ident,
                detail=src.detail,
                **present(via=src.via or None),
                duration_us=_us(ns),
                share=round(ns / window, 4) if window else 0.0,
                label=src.label(),
            )
            if src.kind == "outside" and gaps and src.name.startswith("no guest activity"):
                # steal: filled in by finish() (the sample after the gap may not be in yet); null until then
                fields.update(
                    gaps_ns=[[a, b] for a, b in gaps], longest_gap_us=_us(max(b - a for a, b in gaps)), steal=None
                )
            out_causes.append(Cause.build(**fields))
        main = out_causes[0].label if out_causes else "unexplained"
        frm = (
            "edge"
            if start == late.edge_ns
            else "previous permit (its work ran past the edge)"
            if start == late.start_ns
            else "end of the previous late cycle's window (explained there)"
        )
        return LateCycle.build(
            seq=late.seq,
            cycle=late.cycle,
            detect_ns=late.detect_ns,
            reasons=list(late.reasons),
            period_us=None if late.period_ns is None else _us(late.period_ns),
            latency_us=_us(late.detect_ns - late.edge_ns),
            missed=late.missed,
            window=Window.build(
                start_ns=start,
                end_ns=late.end_ns,
                duration_us=_us(window),
                start=frm,
                to="write (a missed update)" if late.end_ns != late.detect_ns else "permit seen",
            ),
            causes=out_causes,
            unexplained_us=_us(unexplained),
            unexplained_share=round(unexplained / window, 4) if window else 0.0,
            main_cause=main,
            traced=traced,
        )

    def _assume_woken(self, events: list[TraceEvent], k: int, start_ns: int) -> list[TraceEvent]:
        """The lean trace's *events* with the worker taken as woken at the window's start (event *k* on)
        and again after each switch to another task in it: with no wake-up recorded, a lower-priority
        task current from the edge on is the wake-up's path, never a culprit (timeline.ASSUMED_WAKEUP)."""

        def woken(ts_ns: int) -> TraceEvent:
            return TraceEvent(ts_ns, self.rt_cpu, ASSUMED_WAKEUP, -1, "", {})

        out = [*events[:k], woken(start_ns)]
        for ev in events[k:]:
            out.append(ev)
            if ev.name == "sched_switch" and field_int(ev.fields.get("next_pid")) != self.worker_pid:
                out.append(woken(ev.ts_ns))
        return out

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
        last = self._cycles.prev  # the last record: a window of the next chunk may start at its permit
        if last is not None:
            keep_from = last.detect_ns if keep_from is None else min(keep_from, last.detect_ns)
        if keep_from is None:
            return
        cut_ns = keep_from - MARGIN_NS
        self._fold(bisect.bisect_left(self._times, cut_ns))


def unavailable(reason: str) -> WhyLate:
    """summary.json's ``why_late`` when there was no tracing: the reason, e.g. ``off (--no-trace)``."""
    return WhyLate.build(tracing=reason)


@dataclass(slots=True)
class _Total:
    """One source's late time over the run (a row of the culprits table, in ns while it adds up)."""

    kind: str
    name: str
    ident: int
    detail: str
    via: str
    cycles: int = 0
    total_ns: int = 0
    worst_ns: int = 0
