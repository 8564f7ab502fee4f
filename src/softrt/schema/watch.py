"""``softrt watch``'s documents (schema layer; docs/watch.md).

:class:`Watch` is the ``watch`` block of a watched thread's summary.json (a run of scenario
``watch``: its top-level metrics are the thread's cycles, ``process_us`` its run time); it says
which thread, how it waits, the period it was checked against, its preemptions and when it
exited. What ``softrt watch --json`` prints is :mod:`.watch_report`.
"""

from __future__ import annotations

from .doc import Doc, count, many, obj, opt

#: How a thread waits (analysis.watch.ThreadCycles.kind).
WAITS = ("timer", "polls", "sleeps", "idle")


class WatchedThread(Doc):
    """The thread watched, as /proc showed it when the watch began."""

    pid: int | None = None  # its process (thread group)
    tid: int | None = None
    comm: str = ""
    policy: str | None = None  # SCHED_FIFO, SCHED_OTHER, ...
    priority: int | None = None  # its real-time priority (0 for SCHED_OTHER)
    cpus_allowed: str | None = None


class Preemptor(Doc):
    """A task that held the thread's CPU while the thread was runnable but switched out."""

    comm: str = ""
    pid: int | None = None
    detail: str | None = opt()  # its policy and priority (FIFO/RR 90, OTHER nice 0)
    times: int | None = count()  # preemptions it took part in
    total_us: float | None = None
    worst_us: float | None = None


class Watch(Doc):
    """summary.json's ``watch``: the thread behind a run of scenario ``watch``."""

    thread: WatchedThread = WatchedThread()
    waits: str | None = None  # one of WAITS
    timers: dict[str, int] = obj()  # timer function -> cycles it ended
    timer_slack_us: float | None = None  # the most its wake-ups were allowed to come late (its timer slack)
    returns_seen_by: str | None = None  # "sys_exit" (back in user space) or "switch_in"
    sleeps: int | None = count()
    woken_early: int | None = count()  # sleeps that ended before their timer
    period_expected_us: float | None = None  # --period
    period_observed_us: float | None = None  # the median step between requested expiries
    period_agrees: bool | None = None  # observed within 1 % (or 1 µs) of expected
    cpus: list[int] = many()  # where it ran
    migrations: int | None = count()
    preemptions: int | None = count()
    preempted_us: float | None = None
    longest_preemption_us: float | None = None
    preemptors: list[Preemptor] = many()
    exited_at_s: float | None = None  # seconds into the watch; None: it ran to the end
