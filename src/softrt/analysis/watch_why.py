"""Why a watched thread's cycles were late, on every CPU it ran on (analysis layer; pure, no I/O).

The attribution is ``softrt run``'s own (:class:`.attribution.Attributor`: the late rule, the
timeline of who held the CPU, the causes), which explains one CPU. A watched thread may run
anywhere its affinity allows, so each cycle goes to an Attributor of the CPU it ran on (where it
came back to user space: the CPU whose events can have delayed it), and the per-CPU results are
added up by :func:`merge`. An Attributor is opened when a cycle first lands on its CPU, fed the
last :data:`RECENT_NS` of that CPU's events first (its window starts before), and finished once
the thread has had no cycle there for :data:`RETIRE_NS`, so a CPU the thread left holds no
events. A cycle right after a migration has no period on its new CPU (an Attributor sees it as a
gap): its latency and skipped expiries still make it late, as they do on any CPU.

A ``sched_wakeup`` of the thread is logged where the waker ran; it is moved to the CPU it wakes the
thread onto (``target_cpu``), whose timeline it changes (:func:`split_by_cpu`).
"""

from __future__ import annotations

from collections import deque
from typing import TypeVar

import numpy as np

from ..schema.why_late import Culprit, WhyLate
from .attribution import Attributor
from .cycles import CycleView
from .events import StealSample, TraceEvent

RECENT_NS = 2_000_000_000
RETIRE_NS = 2_000_000_000


def split_by_cpu(events: list[TraceEvent], tids: frozenset[int]) -> dict[int, list[TraceEvent]]:
    """Events by CPU, a watched thread's wake-up on the CPU it wakes it onto."""
    texts = {str(t) for t in tids}
    moved = {
        id(e)
        for e in events
        if e.name == "sched_wakeup"
        and e.fields.get("pid") in texts
        and e.fields.get("target_cpu", "").isdigit()
        and int(e.fields["target_cpu"]) != e.cpu
    }
    if not moved:
        cpus = {e.cpu for e in events}
        return (
            {cpu: [e for e in events if e.cpu == cpu] for cpu in cpus}
            if len(cpus) > 1
            else {cpu: list(events) for cpu in cpus}
        )
    out: dict[int, list[TraceEvent]] = {}
    for ev in events:
        if id(ev) in moved:
            ev = TraceEvent(ev.ts_ns, int(ev.fields["target_cpu"]), ev.name, ev.pid, ev.comm, ev.fields)
        out.setdefault(ev.cpu, []).append(ev)
    return out


class RecentEvents:
    """The last :data:`RECENT_NS` (at least) of every CPU's events, and every steal sample, for an
    Attributor opened late; one per watch, shared by its threads."""

    def __init__(self) -> None:
        self._batches: dict[int, deque[list[TraceEvent]]] = {}
        self.steal: list[StealSample] = []

    def add(self, by_cpu: dict[int, list[TraceEvent]], steal: list[StealSample], horizon_ns: int) -> None:
        for cpu, events in by_cpu.items():
            if events:
                self._batches.setdefault(cpu, deque()).append(events)
        self.steal.extend(steal)
        cut = horizon_ns - RECENT_NS
        for q in self._batches.values():
            while q and q[0][-1].ts_ns < cut:  # whole batches, oldest first
                q.popleft()

    def of(self, cpu: int) -> list[TraceEvent]:
        """The CPU's recent events, in order."""
        return [ev for batch in self._batches.get(cpu, ()) for ev in batch]


class ThreadAttribution:
    """The late cycles of one watched thread, explained by the Attributors of the CPUs it ran on."""

    def __init__(
        self,
        tid: int,
        period_ns: int,
        threshold_ns: int,
        keep_worst: int,
        recent: RecentEvents,
        rt_throttling: bool | None = None,
        lean: bool = False,
    ) -> None:
        self.tid, self.period_ns, self.threshold_ns, self.keep_worst = tid, period_ns, threshold_ns, keep_worst
        self.lean = lean  # the lean trace: no timer interrupt or wake-up recorded (Attributor)
        self.rt_throttling = rt_throttling
        self.recent = recent
        self._open: dict[int, Attributor] = {}
        self._last_ns: dict[int, int] = {}  # the latest cycle on each open CPU
        self._done: list[WhyLate] = []
        self._last_cpu: int | None = None  # the CPU of the latest cycle

    def add_events(self, by_cpu: dict[int, list[TraceEvent]], steal: list[StealSample]) -> None:
        """This batch's events (already in :class:`RecentEvents`) for the CPUs open now."""
        for cpu, att in self._open.items():
            if by_cpu.get(cpu):
                att.add_events(by_cpu[cpu])
            if steal:
                att.add_steal(steal)

    def add_records(self, view: CycleView, cpus: np.ndarray) -> None:
        """Cycles as the watch's view of them (the session's: analysis.cycles) and the CPU of each, in
        order. A chunk that stays on the CPU of the cycle before goes to its Attributor as that view
        (the late rule is not computed again); the cycles of a CPU the thread moved to are seen from
        the last cycle it had there."""
        records = view.records
        unique = np.unique(cpus).tolist()
        if len(unique) == 1 and unique[0] == self._last_cpu and unique[0] in self._open:
            self._open[unique[0]].add_records(view)
            self._last_ns[unique[0]] = int(records["detect_ns"][-1])
            return
        self._last_cpu = int(cpus[-1]) if cpus.size else self._last_cpu
        for cpu in unique:
            att = self._open.get(cpu)
            if att is None:
                att = self._open[cpu] = self._attributor(cpu)
                att.add_events(self.recent.of(cpu))
                att.add_steal(self.recent.steal)
            mine = records[cpus == cpu]
            att.add_records(mine)
            self._last_ns[cpu] = int(mine["detect_ns"][-1])

    def advance(self, horizon_ns: int) -> None:
        """Explain the windows complete by *horizon_ns*; finish the CPUs it left."""
        for cpu in list(self._open):
            self._open[cpu].advance(horizon_ns)
            if self._last_ns[cpu] < horizon_ns - RETIRE_NS:
                self._done.append(self._open.pop(cpu).finish())
                del self._last_ns[cpu]

    def finish(self, lost_events: int, home_cpu: int) -> WhyLate:
        """summary.json's ``why_late`` for this thread (``rt_cpu``: the CPU with most of its cycles,
        *home_cpu* when it had none)."""
        results = self._done + [att.finish() for att in self._open.values()]
        self._open.clear()
        if not results:
            results = [self._attributor(home_cpu).finish()]
        return merge(results, self.keep_worst, lost_events)

    def _attributor(self, cpu: int) -> Attributor:
        """The attribution of this thread's cycles on *cpu*."""
        return Attributor(
            period_ns=self.period_ns,
            rt_cpu=cpu,
            worker_pid=self.tid,
            threshold_ns=self.threshold_ns,
            keep_worst=self.keep_worst,
            rt_throttling=self.rt_throttling,
            lean=self.lean,
        )


def merge(results: list[WhyLate], keep_worst: int, lost_events: int) -> WhyLate:
    """Add up Attributor results of one thread on several CPUs (or several stretches of one)."""
    by_cpu: dict[int, int] = {}
    for r in results:
        if r.rt_cpu is not None:  # an Attributor's result names its CPU
            by_cpu[r.rt_cpu] = by_cpu.get(r.rt_cpu, 0) + (r.cycles or 0)
    home = max(by_cpu, key=lambda c: (by_cpu[c], -c))
    culprits: dict[tuple[str | None, str, int | None, str | None], Culprit] = {}
    for r in results:
        for c in r.culprits or ():
            k = (c.kind, c.name, c.id, c.via)
            have = culprits.get(k)
            culprits[k] = (
                c
                if have is None
                else have.replace(
                    cycles=_n(have.cycles) + _n(c.cycles),
                    total_us=round(_n(have.total_us) + _n(c.total_us), 3),
                    worst_us=max(_n(have.worst_us), _n(c.worst_us)),
                )
            )
    worst = [w for r in results for w in r.worst or ()]
    return results[0].replace(
        cycles=sum(_n(r.cycles) for r in results),
        late_cycles=sum(_n(r.late_cycles) for r in results),
        events=sum(_n(r.events) for r in results),
        window_us=round(sum(_n(r.window_us) for r in results), 3),
        explained_us=round(sum(_n(r.explained_us) for r in results), 3),
        culprits=sorted(culprits.values(), key=lambda c: (-c.total_us, c.kind, c.name)),
        worst=sorted(worst, key=lambda w: (-w.window.duration_us, w.seq))[:keep_worst],
        rt_cpu=home,
        steal=next((r.steal for r in results if r.rt_cpu == home and r.steal), None),
        lost_events=int(lost_events),
    )


_Figure = TypeVar("_Figure", int, float)


def _n(figure: _Figure | None) -> _Figure | int:
    """A figure an Attributor's result always holds (its fields are optional only for files that lack
    them): 0 for none, so a sum is a sum."""
    return 0 if figure is None else figure
