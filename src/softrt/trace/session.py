"""One run's trace: instance → consumer → attribution → ``summary["why_late"]`` (trace layer).

Used by the run as a context manager registered in its cleanup stack *before* the worker, so that
on every path (normal end, Ctrl-C, a crashed worker) the worker's last records are fed first and
then the trace is stopped, drained, attributed and its instance removed::

    tracer = cleanup.enter_context(TraceSession(config))
    ...                       # worker armed: its pid is known
    tracer.start(proc.pid)    # before "go"
    drainer.trace = tracer    # drain() calls tracer.feed(view): the chunk's cycle view

Nothing here can fail the run: a tracefs, instance or event that cannot be used leaves the run
going on and ``why_late()`` saying ``{"tracing": "unavailable: <reason>"}``.
"""

from __future__ import annotations

import os
import time
from typing import Any

from ..cpus import CpuSet
from ..platform import get_platform
from ..platform.linux import kfacts
from ..schema.config import effective_trace_mode
from ..schema.why_late import Culprit, TraceInfo, WhyLate
from .consumer import Consumer, open_reader
from .tracefs import INSTANCE_PREFIX, Holder, Instance, TracingUnavailable, event_dirs, find_or_mount

RT_BUFFER_KB = 8192  # per traced CPU: ~250 000 events, seconds of a busy loop between two reads
# Enabling raw_syscalls sends every system call of every task through the kernel's slow syscall
# path (TIF_SYSCALL_TRACEPOINT; the pid filter applies after): measured ~0.5-1 µs per call on the
# benchmark VM. A worker spinning on the virtual board makes no calls, so any is a finding; a
# sleeping one calls clock_nanosleep every cycle and would pay that on every wake-up, and a device
# worker polls its socket with a call after another (SOEM's receive: a 10 s EtherCAT run at 1 ms
# read 1.48 M events and lost 3.46 M), so neither is traced: what such a call does to the loop shows
# as a state change (the worker switched out, blocked) and as the loop's own work.
SYSCALLS_FOR_WAITS = ("spin",)
SYSCALLS_FOR_DEVICES = ("virtual",)
#: What the lean trace (``--trace-mode lean``) leaves out: the events a sleeping loop's wake-up records
#: before the loop reads its clock, but for the switch to it. Each costs the wake-up ~0.3-0.6 µs
#: (bench/trace_event_cost.py); without them the wake-up records one event, and the paired cost on a
#: sleeping loop's median drops from ~+1.9 to ~+0.6 µs (bench/trace_bench.py, docs/trace.md). Lost with
#: them: the timer interrupt's own length and the wake-up that splits it from the exit from idle
#: (analysis.attribution: one "wake-up from idle" cause).
LEAN_LEFT_OUT = frozenset({"sched:sched_wakeup", "irq_vectors:local_timer_entry", "irq_vectors:local_timer_exit"})


def wanted_events(
    available: set[str], wait: str = "spin", device: str = "virtual", mode: str = "full"
) -> list[tuple[str, str | None]]:
    """The events to enable on this kernel, with the ones filtered to the worker marked ``"worker"``
    (its own events), ``"wakeup"`` (its wakeups: the watch filters them to its threads, a run records
    every one, see TraceSession._start) or ``"others"`` (every task's but the worker's).

    Issue 9's list: scheduling, the scheduler's run-time updates of the other tasks, hard and soft
    IRQs, the x86 ``irq_vectors`` entry/exit pairs (local timer, reschedule, call function, IRQ work,
    ...), IPIs, workqueue items, and the worker's own page faults and (spin loops on the virtual
    board) system calls, ``filter``ed to its pid. *mode* ``lean``: without :data:`LEAN_LEFT_OUT`.
    """
    # sched_wakeup: the attribution reads only the worker's (a run records them all: TraceSession).
    out: list[tuple[str, str | None]] = [("sched:sched_wakeup", "wakeup"), ("sched:sched_stat_runtime", "others")] + [
        (e, None)
        for e in (
            "sched:sched_switch",
            "irq:irq_handler_entry",
            "irq:irq_handler_exit",
            "irq:softirq_entry",
            "irq:softirq_exit",
            "workqueue:workqueue_execute_start",
            "workqueue:workqueue_execute_end",
        )
    ]
    for event in sorted(available):
        system, _, name = event.partition(":")
        if (system == "irq_vectors" and name.endswith(("_entry", "_exit"))) or system == "ipi":
            out.append((event, None))
    out += [(e, "worker") for e in ("exceptions:page_fault_user", "exceptions:page_fault_kernel")]
    if wait in SYSCALLS_FOR_WAITS and device in SYSCALLS_FOR_DEVICES:
        out += [(e, "worker") for e in ("raw_syscalls:sys_enter", "raw_syscalls:sys_exit")]
    if mode == "lean":
        out = [(e, scope) for e, scope in out if e not in LEAN_LEFT_OUT]
    return out


class TraceSession(Holder):
    """Trace the RT CPU during one run and explain its late cycles."""

    purpose = "the run's trace"

    def __init__(self, config: Any) -> None:
        super().__init__()
        self.config = config
        self.reason: str | None = None if getattr(config, "trace", True) else "off (--no-trace)"
        self.consumer: Consumer | None = None
        self.attributor = None
        self.enabled: list[str] = []
        self.missing: list[str] = []
        self.result: WhyLate | None = None
        self.lost_events = 0
        self.attribution_cpu_s = 0.0
        self._trace_s = 0.0
        self._available: set[str] = set()
        self.mode = effective_trace_mode(getattr(config, "trace_mode", "full"), getattr(config, "wait", "spin"))

    # -- context manager: the cleanup -----------------------------------------------------------
    def __enter__(self) -> TraceSession:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- start --------------------------------------------------------------------------------------
    def prepare(self) -> None:
        """Make the instance and read the kernel's list of events: what does not need the worker's
        pid, done while the worker starts (about 0.1 s of a run's start-up; nothing is traced yet)."""
        if self._can_trace() and self.instance is None:
            self._guarded(self._prepare)

    def start(self, worker_pid: int) -> None:
        """Enable the events (filtered to or away from *worker_pid*), start the consumer; tracing is on
        on return (prepared first if :meth:`prepare` was not called)."""
        if self._can_trace():
            self._guarded(lambda: self._start(worker_pid))

    def _can_trace(self) -> bool:
        if self.reason is not None:
            return False
        if self.config.cpu is None:
            self.reason = (
                "unavailable: the loop is not pinned to a CPU (--profile none), so there is no RT CPU to trace"
            )
        elif not get_platform().caps.kernel_trace:
            # Windows: the ETW kernel events' parser exists (trace/etw.py), the live kernel session does not yet.
            self.reason = (
                "unavailable: softrt reads the Linux kernel's trace (tracefs), which this OS does not have; "
                "no ETW kernel session is started (record one with wpr -start CPU and open it in WPA)"
            )
        return self.reason is None

    def _guarded(self, step) -> None:
        try:
            step()
        except (TracingUnavailable, OSError, ImportError) as err:
            reason = str(err) if isinstance(err, TracingUnavailable) else _describe(err)
            self.reason = f"unavailable: {reason}"
            self.attributor = None
            if self.consumer is not None:
                self.consumer.stop()  # it holds trace_pipe open, which would keep the rmdir busy
            self.release()

    def _prepare(self) -> None:
        from ..analysis import attribution  # noqa: F401 - imported here, while the worker starts

        tracefs, self.mounted = find_or_mount()
        self.instance = Instance.create(
            tracefs, f"{INSTANCE_PREFIX}{os.getpid()}", CpuSet([self.config.cpu]), RT_BUFFER_KB
        )
        self._available = set(event_dirs(tracefs))

    def _start(self, worker_pid: int) -> None:
        from ..analysis.attribution import Attributor  # the analysis layer (issue 9, item 2)

        if self.instance is None:
            self._prepare()
        available, cpu = self._available, self.config.cpu
        device = self.config.device.partition(":")[0]
        for event, scope in wanted_events(available, self.config.wait, device, self.mode):
            if event not in available:
                self.missing.append(event)
                continue
            try:
                self.instance.enable(
                    event,
                    {
                        "worker": f"common_pid == {worker_pid}",
                        # Every wake-up on the RT CPU, not the worker's alone: its own, on its wake-up
                        # path, would pass a filter, and a passing filter costs more than none
                        # (bench/trace_event_cost.py: ~0.44 against ~0.38 µs; the kernel fills a scratch
                        # buffer, filters, then copies, kernel/trace/trace.c). The RT CPU wakes few other
                        # tasks (~130/s more of ~3,900/s on the benchmark VM), read as activity only.
                        "wakeup": None,
                        "others": f"pid != {worker_pid}",
                    }.get(scope or ""),
                )
            except OSError as err:  # one event the kernel refuses does not stop the others
                self.missing.append(f"{event} ({err.strerror or err})")
        self.enabled = list(self.instance.enabled)
        if "sched:sched_switch" not in self.instance.enabled:
            raise TracingUnavailable("this kernel has no sched:sched_switch event")
        self.attributor = Attributor(
            period_ns=self.config.period_ns,
            rt_cpu=cpu,
            worker_pid=worker_pid,
            threshold_ns=self.config.late_threshold_ns,
            keep_worst=self.config.keep_late,
            rt_throttling=rt_throttling(),
            lean=self.mode == "lean",
        )
        self.consumer = open_reader(self.instance.path, self.enabled, [cpu])
        self.consumer.start()
        self._trace_s = time.monotonic()
        self.instance.write("tracing_on", "1")

    # -- during the run (main thread) ---------------------------------------------------------------
    def feed(self, records) -> None:
        """Hand one drained chunk (records, or the drainer's cycle view of them: softrt.analysis.cycles),
        and the events read so far, to the attribution."""
        if self.attributor is None or self.result is not None:
            return
        t0 = time.thread_time()
        try:
            if records.size:
                self.attributor.add_records(records)
            self._pump()
        except Exception as err:  # noqa: BLE001  # the attribution must never fail the run
            self._fail(err)
        self.attribution_cpu_s += time.thread_time() - t0

    def culprits(self) -> list[Culprit]:
        """The sources of late time so far (Attributor.culprit_totals; none while not tracing)."""
        return self.attributor.culprit_totals() if self.attributor is not None and self.result is None else []

    def _pump(self) -> None:
        events, steal, horizon_ns = self.consumer.take()
        if events:
            self.attributor.add_events(events)
        if steal:
            self.attributor.add_steal(steal)
        if horizon_ns > 0:
            self.attributor.advance(horizon_ns)

    def _fail(self, err: Exception) -> None:
        self.reason = f"failed: the attribution stopped: {type(err).__name__}: {err}"
        self.attributor = None

    # -- stop ---------------------------------------------------------------------------------------
    def close(self) -> None:
        """Stop tracing, read the rest, finish the attribution, remove the instance (idempotent)."""
        if self.instance is None:
            return
        try:
            self._stop_and_finish()
        finally:
            self.release()

    def _stop_and_finish(self) -> None:
        instance = self.instance
        if instance is None:  # close() only calls it with an instance
            return
        try:
            instance.write("tracing_on", "0")
        except OSError:
            pass
        self._trace_s = time.monotonic() - self._trace_s
        if self.consumer is not None:
            self.consumer.stop()
            self.lost_events = max(self.consumer.parser.lost, instance.lost([self.config.cpu]))
            if self.consumer.error and self.reason is None:
                self.reason = f"failed: the trace reader stopped: {self.consumer.error}"
        if self.attributor is not None:
            t0 = time.thread_time()
            try:
                self._pump()
                self.result = self.attributor.finish(lost_events=self.lost_events)
            except Exception as err:  # noqa: BLE001 - the attribution must never fail the run
                self._fail(err)
            self.attribution_cpu_s += time.thread_time() - t0

    # -- results -----------------------------------------------------------------------------------
    def why_late(self) -> WhyLate:
        """Return the summary's ``why_late``: the attribution, ``tracing: "on"`` and how the trace went
        under ``trace`` (docs/run-format.md); without a result, only ``tracing: "<reason>"``."""
        if self.result is None or self.reason is not None:
            return WhyLate.build(tracing=self.reason or "unavailable: tracing did not start")
        consumer = self.consumer
        return self.result.replace(
            tracing="on",
            trace=TraceInfo.build(
                events=self.enabled,
                events_missing=self.missing,
                events_read=consumer.events_read,
                lost_events=self.lost_events,
                unparsed_lines=consumer.parser.unparsed,
                consumer_cpu_s=round(consumer.cpu_s, 3),
                attribution_cpu_s=round(self.attribution_cpu_s, 3),
                traced_s=round(self._trace_s, 3),
                buffer_kb=RT_BUFFER_KB,
                mode=self.mode,
            ),
        )


def rt_throttling(root: str = "/") -> bool | None:
    """Whether RT throttling is in force now (the run has applied its settings), None if unknown.

    Off when ``sched_rt_runtime_us`` is -1; since Linux 6.12 also off without CONFIG_RT_GROUP_SCHED,
    where the fair server replaced it (commit "sched/rt: Remove default bandwidth control"; the
    sysctl then only bounds admission). The attribution says "RT throttling" only when True.
    """
    runtime_us = get_platform().rt_runtime_us(root)
    if runtime_us is None:
        return None
    if runtime_us < 0:
        return False
    version = kfacts.kernel_version_tuple(root)
    if version is None:
        return None
    if version < (6, 12):
        return True
    config = kfacts.kconfig(root)
    if config is None:
        return None  # a 6.12+ kernel whose config is not exposed: throttling or the fair server
    return config[0].get("CONFIG_RT_GROUP_SCHED") == "y"


def _describe(err: Exception) -> str:
    if isinstance(err, ImportError):
        return f"the attribution module is missing ({err})"
    if isinstance(err, PermissionError):
        return f"no permission for tracefs ({err.filename}): run as root or grant the tracefs permissions"
    return f"{err.strerror or err} ({getattr(err, 'filename', '')})"
