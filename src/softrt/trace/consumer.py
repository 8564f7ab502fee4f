"""Stream an instance's ``trace_pipe`` on the housekeeping CPU (trace layer).

A thread in the supervisor (which the run has already moved to the housekeeping CPUs; threads
inherit the affinity) reads the text pipe every 20 ms without blocking (``O_NONBLOCK``: stopping
never waits on a read, and no reader sleeps in the pipe, so the kernel never has to wake one from
the RT CPU with an irq_work), parses whole lines into TraceEvents and samples the RT CPU's steal time
from /proc/stat (proc(5): the 8th value of ``cpuN``, in USER_HZ ticks) once a second. Reading
``trace_pipe`` consumes the ring buffer, so the buffer only has to hold what arrives between two
reads; what it could not hold is reported by the pipe (``[LOST N EVENTS]``) and by the per-CPU
``stats`` (overrun, dropped events), both counted (Documentation/trace/ftrace.rst).

The main thread takes the batches (:meth:`Consumer.take`) and feeds the attribution, so the
attribution itself needs no lock. ``horizon_ns`` says up to when the events are complete: the
last moment the pipe was found empty, or the last event read (the pipe merges the CPUs' buffers
in time order), less a millisecond for an event still being committed.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from ..analysis.timeline import FIELDS_READ
from ..analysis.events import StealSample, TraceEvent
from ..platform.kfiles import read_text
from .parse import LineParser

READ_BYTES = 1 << 16
POLL_S = 0.02  # the longest a new event waits to be read when the pipe is quiet
STEAL_EVERY_NS = 1_000_000_000
_HORIZON_SLACK_NS = 1_000_000  # an event being committed on the RT CPU while the pipe is read


def read_steal_ns(cpu: int, root: str = "/") -> int | None:
    """Return the cumulative steal time of *cpu* in ns from /proc/stat, or None if not exposed."""
    return read_steal_all([cpu], root).get(cpu)


def read_steal_all(cpus, root: str = "/") -> dict[int, int]:
    """Return ``{cpu: cumulative steal ns}`` for the *cpus* /proc/stat exposes it for (one read)."""
    tick_ns = 1_000_000_000 // os.sysconf("SC_CLK_TCK")
    wanted = {f"cpu{cpu}": cpu for cpu in cpus}
    out = {}
    for line in (read_text(root, "/proc/stat", fallback="") or "").splitlines():
        values = line.split()
        cpu = wanted.get(values[0]) if values else None
        if cpu is not None and len(values) > 8:
            out[cpu] = int(values[8]) * tick_ns
    return out


class Consumer(threading.Thread):
    """Reads one instance's trace_pipe until :meth:`stop`; CPU time in ``cpu_s``.

    *rt_cpu*: the CPU (or CPUs) whose steal time is sampled; *fields*: the events whose fields are
    split (the attribution's, by default).
    """

    def __init__(self, pipe: Path, rt_cpu: int | list[int], fields: frozenset[str] = FIELDS_READ) -> None:
        super().__init__(name="softrt-trace", daemon=True)
        self.pipe = pipe
        self.rt_cpu = rt_cpu
        self.cpus = [rt_cpu] if isinstance(rt_cpu, int) else list(rt_cpu)
        self.parser = LineParser(fields)  # only the fields the attribution reads
        self.events_read = 0
        self.cpu_s = 0.0
        self.error: str | None = None
        self.horizon_ns = 0
        self._events: list[TraceEvent] = []
        self._steal: list[StealSample] = []
        self._lock = threading.Lock()
        self._halt = threading.Event()
        self._fd = os.open(pipe, os.O_RDONLY | os.O_NONBLOCK)  # in the caller: a failure is raised there

    def run(self) -> None:
        tail = b""
        next_steal = 0
        try:
            while True:
                stopping = self._halt.is_set()
                now = time.monotonic_ns()
                if now >= next_steal:
                    self._sample_steal(now)
                    next_steal = now + STEAL_EVERY_NS
                tail, empty_at = self._read_all(tail)
                self.horizon_ns = max(self.horizon_ns, empty_at - _HORIZON_SLACK_NS)
                if stopping:
                    break  # tracing was turned off before stop(): this read emptied the buffer
                # A fixed pace rather than poll(2), which for the pipe waits for ``buffer_percent``
                # of a buffer: reading every 20 ms keeps the horizon fresh at a few wake-ups.
                self._halt.wait(POLL_S)
        except Exception as err:  # reported in the run's summary; the run itself goes on
            self.error = f"{type(err).__name__}: {err}"
        finally:
            os.close(self._fd)
            self._sample_steal(time.monotonic_ns())
            self.cpu_s = time.thread_time()

    def _read_all(self, tail: bytes) -> tuple[bytes, int]:
        """Read until the pipe is empty; return the unfinished line and when it was found empty."""
        while True:
            t = time.monotonic_ns()
            try:
                chunk = os.read(self._fd, READ_BYTES)
            except BlockingIOError:
                return tail, t
            if not chunk:
                return tail, t
            data = tail + chunk
            cut = data.rfind(b"\n") + 1
            tail = data[cut:]
            parse = self.parser.parse
            batch = [ev for line in data[:cut].decode(errors="replace").splitlines() if (ev := parse(line))]
            self.events_read += len(batch)
            with self._lock:
                self._events.extend(batch)
                if batch:  # a pipe that never runs empty (several busy CPUs) still moves the horizon on
                    self.horizon_ns = max(self.horizon_ns, batch[-1].ts_ns - _HORIZON_SLACK_NS)

    def _sample_steal(self, now_ns: int) -> None:
        samples = [StealSample(ts_ns=now_ns, cpu=cpu, steal_ns=ns) for cpu, ns in read_steal_all(self.cpus).items()]
        if samples:
            with self._lock:
                self._steal.extend(samples)

    def take(self) -> tuple[list[TraceEvent], list[StealSample], int]:
        """Return (and forget) the events and steal samples read so far, and the horizon."""
        with self._lock:
            events, self._events = self._events, []
            steal, self._steal = self._steal, []
            horizon = self.horizon_ns
        return events, steal, horizon

    def stop(self, timeout_s: float = 10.0) -> None:
        """Read what is left (tracing should be off already) and end the thread."""
        self._halt.set()
        if self.is_alive():
            self.join(timeout_s)
