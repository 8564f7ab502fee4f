"""The trace of ``softrt watch``: a private tracefs instance following some threads on every CPU
they may run on (trace layer; docs/watch.md).

The same instance as a run's (:mod:`.tracefs`: ``instances/softrt-<pid>``, ``trace_clock`` mono,
read by :class:`.consumer.Consumer` on other CPUs), with the run's events (:func:`.session.wanted_events`:
scheduling, hard and soft IRQs, the x86 vectors, IPIs, workqueue items, the threads' page
faults), on every CPU of the threads' affinity, plus what measures a thread's cycle without
touching it (analysis.watch): its timers (``timer:hrtimer_start``/``hrtimer_setup``/``hrtimer_cancel``),
its returns to user space (``raw_syscalls:sys_exit``) and its exit (``sched:sched_process_exit``),
``filter``ed to the threads (Documentation/trace/events.rst, section 5). Without the attribution
(``explain=False``, ``--no-explain``) only the threads' own events are traced, their switches
included: cyclictest's p50 rose 1 µs instead of 6.5 µs under the watch (docs/benchmarks.md).

Enabling ``raw_syscalls`` sends every system call of every task through the kernel's slower
syscall path while the watch goes (docs/trace.md): the cost is stated in docs/watch.md.
"""

from __future__ import annotations

import os
import time

from ..analysis.timeline import FIELDS_READ
from ..cpus import CpuSet
from ..schema.why_late import TraceInfo
from .consumer import Consumer, open_reader
from .session import RT_BUFFER_KB, _describe, wanted_events
from .tracefs import INSTANCE_PREFIX, Holder, Instance, TracingUnavailable, event_dirs, find_or_mount

#: The watch's own events: scope "threads" filters on the task that logged it, "pid" on the thread
#: it is about. Required ones stop the watch when the kernel lacks them.
WATCH_EVENTS = (
    ("timer:hrtimer_start", "threads"),
    ("timer:hrtimer_cancel", "threads"),
    ("raw_syscalls:sys_exit", "threads"),
    ("sched:sched_process_exit", "pid"),
)
REQUIRED = ("sched:sched_switch", "timer:hrtimer_start")
#: ``hrtimer_setup``'s clockid for CLOCK_MONOTONIC (include/uapi/linux/time.h), the clock a timer
#: whose setup was not seen is taken to run on (analysis.watch): its setups are not recorded.
CLOCK_MONOTONIC_ID = 1
#: Events whose fields analysis.watch reads, beyond the attribution's.
WATCH_FIELDS = FIELDS_READ | {"hrtimer_start", "hrtimer_setup", "hrtimer_init", "hrtimer_cancel", "sched_process_exit"}
#: All traced CPUs together get at most this much buffer (a CPU at least 1 MB).
TOTAL_BUFFER_KB = 65536


def _filter(field: str, tids: list[int]) -> str:
    return " || ".join(f"{field} == {tid}" for tid in tids)


def enable(instance, event: str, event_filter: str | None, fallback: str | None) -> None:
    """Enable *event* with *event_filter*, or with *fallback* where the kernel refuses that one (a
    ``clockid`` field it does not know: every setup of the threads is recorded then)."""
    try:
        instance.enable(event, event_filter)
    except OSError:
        if fallback is None:
            raise
        instance.enable(event, fallback)


class WatchTrace(Holder):
    """Trace *tids* on *cpus*; ``with`` it: :meth:`close` turns it off and removes the instance."""

    purpose = "the watch's trace"

    def __init__(self, tids: list[int], cpus: CpuSet, explain: bool = True, mode: str = "lean") -> None:
        super().__init__()
        self.tids = sorted(tids)
        self.explain = explain
        self.mode = mode  # "lean": without trace.session.LEAN_LEFT_OUT (docs/watch.md, "Lean tracing")
        self.cpus = cpus
        self.consumer: Consumer | None = None
        self.enabled: list[str] = []
        self.missing: list[str] = []
        self.lost_events = 0
        self.buffer_kb = max(1024, min(RT_BUFFER_KB, TOTAL_BUFFER_KB // max(len(list(cpus)), 1)))
        self._started = 0.0
        self.traced_s = 0.0

    def __enter__(self) -> WatchTrace:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def back(self) -> str:
        """How a return to user space is seen: ``sys_exit``, or ``switch_in`` without raw_syscalls."""
        return "sys_exit" if "raw_syscalls:sys_exit" in self.enabled else "switch_in"

    def start(self) -> None:
        """Make the instance, enable the events, start reading; raise TracingUnavailable (said plainly)."""
        try:
            self._start()
        except (OSError, ImportError) as err:
            self.close()
            raise TracingUnavailable(_describe(err)) from None
        except BaseException:
            self.close()
            raise

    def _start(self) -> None:
        tracefs, self.mounted = find_or_mount()
        self.instance = Instance.create(tracefs, f"{INSTANCE_PREFIX}{os.getpid()}", self.cpus, self.buffer_kb)
        available = set(event_dirs(tracefs))
        threads = _filter("common_pid", self.tids)
        filters = {
            "wakeup": _filter("pid", self.tids),
            "pid": _filter("pid", self.tids),
            "worker": _filter("common_pid", self.tids),
            "threads": threads,
            # A sleep's on-stack timer is set up again before every sleep (kernel/time/hrtimer.c,
            # hrtimer_setup_sleeper_on_stack): one event a cycle. Only a clock other than MONOTONIC,
            # the one an unseen setup is taken for, is worth recording.
            "clock": f"({threads}) && clockid != {CLOCK_MONOTONIC_ID}",
            "others": " && ".join(f"pid != {tid}" for tid in self.tids),
            "switch": f"{_filter('prev_pid', self.tids)} || {_filter('next_pid', self.tids)}",
        }
        # Without the attribution only the threads' own switches are needed: fewer events on their CPUs.
        # The lean trace leaves out their wake-ups too (analysis.watch measures a cycle without them).
        cause = (
            wanted_events(available, wait="sleep", mode=self.mode)
            if self.explain
            else [("sched:sched_wakeup", "wakeup"), ("sched:sched_switch", "switch")][self.mode == "lean" :]
        )
        # A timer's clock: hrtimer_setup on newer kernels (it replaced hrtimer_init).
        clock = "timer:hrtimer_setup" if "timer:hrtimer_setup" in available else "timer:hrtimer_init"
        for event, scope in [*cause, (clock, "clock"), *WATCH_EVENTS]:
            if event not in available:
                self.missing.append(event)
                continue
            try:
                enable(self.instance, event, filters.get(scope or ""), filters["threads"] if scope == "clock" else None)
            except OSError as err:
                self.missing.append(f"{event} ({err.strerror or err})")
        self.enabled = list(self.instance.enabled)
        lacking = [e for e in REQUIRED if e not in self.enabled]
        if lacking:
            raise TracingUnavailable(f"this kernel lacks the trace events {', '.join(lacking)}")
        self.consumer = open_reader(self.instance.path, self.instance.enabled, list(self.cpus), WATCH_FIELDS)
        self.consumer.start()
        self._started = time.monotonic()
        self.instance.write("tracing_on", "1")

    def take(self):
        """``(events, steal samples, horizon_ns)`` read since the last call (Consumer.take)."""
        return self.consumer.take()

    def stop(self) -> None:
        """Tracing off; the reader reads the rest and ends (then :meth:`take` the last batch)."""
        if self.instance is None or self.consumer is None:
            return
        try:
            self.instance.write("tracing_on", "0")
        except OSError:
            pass
        self.traced_s = time.monotonic() - self._started
        self.consumer.stop()
        self.lost_events = max(self.consumer.parser.lost, self.instance.lost(self.cpus))

    def close(self) -> None:
        """Stop reading, remove the instance, unmount what we mounted (idempotent)."""
        if self.consumer is not None and self.consumer.is_alive():
            self.consumer.stop()
        self.release()

    def info(self, attribution_cpu_s: float) -> TraceInfo:
        """summary.json's ``why_late.trace``: how the trace went (the run's fields)."""
        c = self.consumer
        return TraceInfo.build(
            events=self.enabled,
            events_missing=self.missing,
            events_read=c.events_read if c else 0,
            lost_events=self.lost_events,
            unparsed_lines=c.parser.unparsed if c else 0,
            consumer_cpu_s=round(c.cpu_s, 3) if c else 0.0,
            attribution_cpu_s=round(attribution_cpu_s, 3),
            traced_s=round(self.traced_s, 3),
            buffer_kb=self.buffer_kb,
            mode=self.mode,
        )
