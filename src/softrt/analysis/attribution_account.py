"""Credit every nanosecond of one late cycle's window to one cause (analysis layer; pure, no I/O).

The accounting behind :mod:`.attribution` (its module docstring states the rules: the interference
window, parked while runnable, never more than it ran, waiting is no cause, outside the kernel):
the window is cut at every segment edge, event and work edge of the RT CPU's timeline
(:mod:`.timeline`), and each stretch is credited to the innermost source holding it. The split of a
late activation follows rtla timerlat's auto-analysis (Documentation/tools/rtla/rtla-timerlat.rst).
"""

from __future__ import annotations

from dataclasses import dataclass

from .timeline import RUN, Segment, Source

_THROTTLING = Source("kernel", "RT throttling (worker runnable, parked by sched_rt_runtime_us)")
_PARKED = {  # rt_throttling False: what the events show; None: the value in force is unknown
    (False, "idle"): Source("kernel", "worker runnable but switched out to idle"),
    (False, "rt"): Source("kernel", "a lower-priority RT task ran while the worker was runnable"),
    (None, "idle"): Source("kernel", "RT throttling? (worker runnable, switched out to idle)"),
    (None, "rt"): Source("kernel", "a lower-priority RT task ran while the worker was runnable"),
}
#: A SCHED_OTHER task that ran while the worker was parked is named itself, with the mechanism that let
#: it run (``via``, and in words in its detail) by the RT throttling in force (True, False, None: unknown).
_THROUGH = {
    True: ("rt_throttling", "RT throttling"),
    False: ("fair_server", "the fair server"),
    None: ("rt_throttling_or_fair_server", "RT throttling or the fair server"),
}
_LOOP = Source("loop", "the loop's own work")
_IDLE_EXIT = Source("kernel", "exit from idle to the woken worker")
#: The lean trace (no timer interrupt, no wake-up recorded: trace.session.LEAN_LEFT_OUT) sees idle from
#: the edge to the switch to the worker, and cannot split it into its parts.
LEAN_WAKE = Source("kernel", "wake-up from idle: timer interrupt, exit from idle and switch (lean trace: not split)")
#: The same with a lower-priority task current: the lean trace cannot tell the wake-up path from a
#: task that held the CPU past it (the full trace's blocking thread), so it blames no task.
LEAN_WAKE_PAST = Source(
    "kernel", "wake-up past a lower-priority task: timer interrupt and switch (lean trace: not split)"
)
#: What the lean trace says of a quiet stretch: the timer interrupt it does not record may be it.
LEAN_GAP_DETAIL = "or an unrecorded timer interrupt: lean trace"
#: The lean trace's wake-up from idle without any event is a gap only from this long: the timer
#: interrupt, the exit from idle and the switch took 14 µs at the median and 19 µs at p99 on the
#: benchmark VM (its local timer alone 14-25 µs in the full trace); a longer silence is more likely
#: the hypervisor than the wake-up path.
LEAN_WAKE_GAP_NS = 50_000
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


def account(
    segments: list[Segment],
    start_ns: int,
    end_ns: int,
    *,
    worker_pid: int,
    work_ns: list[tuple[int, int]],
    event_ts: list[int],
    cpu: int,
    gap_min_ns: int,
    rt_throttling: bool | None = None,
    switch_grace_ns: int = SWITCH_GRACE_NS,
    lean: bool = False,
) -> tuple[dict[Source, int], list[tuple[int, int]], int]:
    """Credit every ns of ``[start_ns, end_ns)`` to the innermost source holding it.

    Returns ``(durations by source, no-guest-activity gaps as (start, end), unexplained ns)``.
    In the *work_ns* ranges the worker's own running time is its work (``loop``); elsewhere the worker
    running or the CPU idle is a wait. A stretch of either without any event that lasts *gap_min_ns*
    or more is a gap: the guest did not run (the loop's step takes a few µs, and its waits end as soon
    as the CPU is its); shorter ones are work (``loop``) and unexplained wait.
    """
    steps, own, event_set = _steps(segments, start_ns, end_ns, work_ns, event_ts)
    totals: dict[Source, int] = {}
    quiet: list[list[int]] = []  # [start, end, work ns]: runs of work or wait not broken by an event
    unknown = 0  # before the first event: nothing is known about the CPU
    blocking: list[_Held] = []  # a lower-priority task current after the wakeup; the lean trace's wake-up
    steal = Source("outside", f"hypervisor steal while another task held CPU {cpu}", cpu)
    src: Source | None
    for a, b, task, best, stolen in steps:
        if best is not None and best.layer == 1 and task is not None and task.parked:
            src = _parked(task, rt_throttling, best.source)  # a kworker's item, run while the worker was parked
        elif best is not None:
            src = best.source
        elif task is None:
            unknown += b - a
            continue
        elif task.parked:
            src = _parked(task, rt_throttling)
        elif task.woken and lean:  # from the edge to the switch: the wake-up's path, settled below
            _hold(blocking, a, b, LEAN_WAKE if task.pid == 0 else LEAN_WAKE_PAST, stolen, event_set, LEAN_WAKE_GAP_NS)
            continue
        elif task.woken and task.pid == 0:
            src = _IDLE_EXIT
        elif task.woken and own[id(task)] <= switch_grace_ns:  # the IRQ that woke the worker is its own cause
            src = _SWITCH
        elif task.pid in (worker_pid, 0) or task.asleep:
            src = None  # the worker waiting (spinning, or blocked until its timer): no cause yet
        elif task.woken:
            # the blocking thread, unless no event fired for gap_min_ns: then the guest did not run
            _hold(blocking, a, b, task.source, stolen, event_set)
            continue
        else:
            src = task.source
        if src is not None:
            _credit(totals, src, b - a, stolen if src.kind == "thread" else 0, steal)
            continue
        work = (
            b - a
            if task is not None and task.pid == worker_pid and any(wa <= a and b <= wb for wa, wb in work_ns)
            else 0
        )
        if quiet and quiet[-1][1] == a and a not in event_set:
            quiet[-1][1] = b
            quiet[-1][2] += work
        else:
            quiet.append([a, b, work])
    gap = Source("outside", f"no guest activity on CPU {cpu}", cpu, LEAN_GAP_DETAIL if lean else "")
    gaps, unexplained = _settle(totals, quiet, blocking, unknown, gap_min_ns=gap_min_ns, gap=gap, steal=steal)
    return totals, gaps, unexplained


def _settle(
    totals: dict[Source, int],
    quiet: list[list[int]],
    blocking: list[_Held],
    unknown: int,
    *,
    gap_min_ns: int,
    gap: Source,
    steal: Source,
) -> tuple[list[tuple[int, int]], int]:
    """Close :func:`account`'s window: a blocking thread's (or the lean trace's wake-up's) stretch of
    *gap_min_ns* (its ``quiet_from_ns``) or more is quiet (the guest did not run), shorter ones are
    credited; quiet runs of *gap_min_ns* or more are gaps, shorter ones the loop's work and the
    unexplained rest. Adds to *totals*; returns ``(gaps, unexplained ns)``."""
    for held in blocking:
        if held.end_ns - held.start_ns >= max(gap_min_ns, held.quiet_from_ns):
            quiet.append([held.start_ns, held.end_ns, 0])
        else:
            _credit(totals, held.source, held.end_ns - held.start_ns, held.stolen_ns, steal)
    quiet.sort()
    gaps = [(a, b) for a, b, _w in quiet if b - a >= gap_min_ns]
    short = [(b - a, w) for a, b, w in quiet if b - a < gap_min_ns]
    unexplained = unknown + sum(n - w for n, w in short)
    if sum(w for _n, w in short):
        totals[_LOOP] = sum(w for _n, w in short)
    if gaps:
        totals[gap] = sum(b - a for a, b in gaps)
    return gaps, unexplained


#: One stretch of a window: (start_ns, end_ns, the task current, the innermost segment above it, steal ns).
_Step = tuple[int, int, "Segment | None", "Segment | None", int]


@dataclass(slots=True)
class _Held:
    """A lower-priority task current after the worker's wakeup (or the lean trace's wake-up path), over
    consecutive stretches; quiet (the guest did not run) from ``quiet_from_ns`` without an event."""

    start_ns: int
    end_ns: int
    source: Source
    stolen_ns: int
    quiet_from_ns: int = 0


def _hold(
    held: list[_Held], a: int, b: int, source: Source, stolen: int, event_set: set[int], quiet_from_ns: int = 0
) -> None:
    """Add ``[a, b)`` of *source* to the last stretch held, when it goes on without an event, else a new one."""
    last = held[-1] if held else None
    if last is not None and last.end_ns == a and a not in event_set and last.source is source:
        last.end_ns = b
        last.stolen_ns += stolen
    else:
        held.append(_Held(a, b, source, stolen, quiet_from_ns))


def _steps(
    segments: list[Segment], start_ns: int, end_ns: int, work_ns: list[tuple[int, int]], event_ts: list[int]
) -> tuple[list[_Step], dict[int, int], set[int]]:
    """``[start_ns, end_ns)`` cut at every segment edge, event and work edge: each stretch with the task
    current, the innermost segment above it (an IRQ, a softirq, a workqueue item; None) and the
    hypervisor's steal in it; each task segment's own time (not under anything above it); the events."""
    cuts = {start_ns, end_ns}
    for a, b in work_ns:
        cuts.update((min(max(a, start_ns), end_ns), min(max(b, start_ns), end_ns)))
    for s in segments:
        cuts.add(s.start_ns)
        cuts.add(s.end_ns)
    events = [t for t in event_ts if start_ns < t < end_ns]
    cuts.update(events)
    bounds = sorted(c for c in cuts if start_ns <= c <= end_ns)
    tasks = sorted((s for s in segments if s.layer == 0), key=lambda s: s.start_ns)
    runs = [s for s in segments if s.layer == RUN]
    upper = [s for s in segments if s.layer > 0]
    steps: list[_Step] = []
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
        # A task's own time is what the scheduler counted as its run time (the rest of the stretch the
        # hypervisor ran: steal); spread evenly, since where in the stretch it stopped is not known.
        run = (
            None if task is None else next((r for r in runs if r.pid == task.pid and r.start_ns <= a < r.end_ns), None)
        )
        steps.append((a, b, task, best, round((b - a) * run.stolen) if run is not None else 0))
        if best is None and task is not None:
            own[id(task)] = own.get(id(task), 0) + (b - a)
    return steps, own, set(events)


def _parked(task: Segment, rt_throttling: bool | None, item: Source | None = None) -> Source:
    """Who held the CPU while the worker was runnable but switched out: a SCHED_OTHER task (or the
    workqueue *item* it ran) is named with the mechanism that let it run; idle and lower-priority RT
    tasks are the kernel's doing (an item they ran is itself)."""
    if task.pid != 0 and not task.source.detail.startswith(("FIFO", "DEADLINE")):
        via, words = _THROUGH[rt_throttling]
        src = item or task.source
        return Source(src.kind, src.name, src.ident, ", ".join(x for x in (src.detail, f"through {words}") if x), via)
    if item is not None:
        return item
    if rt_throttling:
        return _THROTTLING
    return _PARKED[(rt_throttling, "idle" if task.pid == 0 else "rt")]


def _credit(totals: dict[Source, int], src: Source, ns: int, stolen: int, steal: Source) -> None:
    """Add *ns* to *src*, less the *stolen* part, which goes to *steal*."""
    totals[src] = totals.get(src, 0) + ns - stolen
    if stolen:
        totals[steal] = totals.get(steal, 0) + stolen
