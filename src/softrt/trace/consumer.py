"""Stream an instance's ``trace_pipe`` on the housekeeping CPU (trace layer).

A thread in the supervisor (which the run has already moved to the housekeeping CPUs; threads
inherit the affinity) reads the text pipe every 20 ms without blocking (``O_NONBLOCK``: stopping
never waits on a read, and no reader sleeps in the pipe, so the kernel never has to wake one from
the RT CPU with an irq_work), parses whole lines into TraceEvents and samples the RT CPU's steal time
from /proc/stat (proc(5): the 8th value of ``cpuN``, in USER_HZ ticks) once a second. Reading
``trace_pipe`` consumes the ring buffer, so the buffer only has to hold what arrives between two
reads; what it could not hold is reported by the pipe (``[LOST N EVENTS]``) and by the per-CPU
``stats`` (overrun, dropped events), both counted (Documentation/trace/ftrace.rst).

:class:`RawConsumer` reads the same buffers as binary pages, CPU by CPU (``per_cpu/cpuN/trace_pipe_raw``,
decoded by :mod:`.raw`): no text formatting in the kernel and no regular expressions here, about half
the reader's CPU time a event on the benchmark VM (docs/trace.md, "What it costs"); :func:`open_reader`
picks it when the kernel's layouts are the ones it decodes, else the text pipe.

The main thread takes the batches (:meth:`Consumer.take`) and feeds the attribution, so the
attribution itself needs no lock. ``horizon_ns`` says up to when the events are complete: the
last moment the pipe was found empty, or the last event read (the pipe merges the CPUs' buffers
in time order), less a millisecond for an event still being committed.
"""

from __future__ import annotations

import bisect
import os
import threading
import time
from pathlib import Path

from ..analysis.events import StealSample, TraceEvent
from ..analysis.timeline import FIELDS_READ
from ..platform.kfiles import read_text
from .parse import LineParser
from .raw import RawDecoder, kernel_symbol, page_size, parse_format, task_comm

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
        self._fd = self._open(pipe)  # in the caller: a failure is raised there

    def _open(self, pipe: Path) -> int:
        return os.open(pipe, os.O_RDONLY | os.O_NONBLOCK)

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
        except Exception as err:  # noqa: BLE001  # reported in the run's summary; the run itself goes on
            self.error = f"{type(err).__name__}: {err}"
        finally:
            self._close()
            self._sample_steal(time.monotonic_ns())
            self.cpu_s = time.thread_time()

    def _close(self) -> None:
        os.close(self._fd)

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


class RawConsumer(Consumer):
    """Reads the instance's per-CPU ``trace_pipe_raw`` pages (binary) instead of the text pipe; the
    same thread, pace, horizon and interface as :class:`Consumer` (``parser`` is its decoder).

    Each pass reads every traced CPU's buffer until it is empty (``EAGAIN``), from the time the pass
    began: the events up to then are all in, whatever CPU logged them, so the horizon is that time.
    Several CPUs' events are merged in time order, and the ones past the horizon wait for the next
    pass (a later event of another CPU may still come before them).
    """

    #: Pages read from one CPU in one pass at most (4 MB): a CPU that never runs empty still moves on.
    MAX_PAGES = 1024

    def __init__(self, instance_path: Path, cpus: list[int], decoder, page_bytes: int) -> None:
        self.fds = {
            cpu: os.open(instance_path / "per_cpu" / f"cpu{cpu}" / "trace_pipe_raw", os.O_RDONLY | os.O_NONBLOCK)
            for cpu in cpus
        }
        super().__init__(instance_path / "trace_pipe", cpus[0] if len(cpus) == 1 else list(cpus))
        self.parser = decoder
        self.page_bytes = page_bytes
        self._held: list[TraceEvent] = []

    def _open(self, pipe: Path) -> int:
        return -1  # the per-CPU files are open already

    def _close(self) -> None:
        for fd in self.fds.values():
            os.close(fd)

    def _read_all(self, tail: bytes) -> tuple[bytes, int]:
        final = self._halt.is_set()  # tracing is off: this pass empties the buffers for good
        horizon = time.monotonic_ns()
        runs = [self._held] if self._held else []
        for cpu, fd in self.fds.items():
            events, emptied = self._read_cpu(cpu, fd)
            self.events_read += len(events)
            if events:
                runs.append(events)
                if not emptied:  # complete only up to its last event
                    horizon = min(horizon, events[-1].ts_ns)
        if len(runs) <= 1:
            merged = runs[0] if runs else []
        else:
            merged = sorted((e for r in runs for e in r), key=lambda e: e.ts_ns)  # stable: a CPU's order kept
        self._held = []
        if len(self.fds) > 1 and not final:
            cut = horizon - _HORIZON_SLACK_NS
            k = bisect.bisect_right([e.ts_ns for e in merged], cut)
            merged, self._held = merged[:k], merged[k:]
        with self._lock:
            self._events.extend(merged)
        return tail, horizon

    def _read_cpu(self, cpu: int, fd: int) -> tuple[list[TraceEvent], bool]:
        """The events read from *cpu*'s buffer, and whether it was emptied."""
        out: list[TraceEvent] = []
        decode = self.parser.decode_page
        for _ in range(self.MAX_PAGES):
            try:
                page = os.read(fd, self.page_bytes)
            except BlockingIOError:
                return out, True
            if not page:
                return out, True
            out.extend(decode(page, cpu))
        return out, False


def open_reader(
    instance_path: Path, events: list[str], cpus: list[int], fields: frozenset[str] = FIELDS_READ
) -> Consumer:
    """The reader of an instance whose *events* (``system:event``) are enabled on *cpus*: its binary
    per-CPU pages (:class:`RawConsumer`) when the kernel's page and event layouts are the ones
    :mod:`.raw` decodes, else its text pipe (:class:`Consumer`)."""
    try:
        header = (instance_path.parents[1] / "events" / "header_event").read_text()
        if "type_len    :    5 bits" not in header or "time_delta  :   27 bits" not in header:
            raise ValueError("an event header layout other than Linux's 5 + 27 bits")
        page = page_size((instance_path.parents[1] / "events" / "header_page").read_text())
        formats = [
            parse_format((instance_path / "events" / e.replace(":", "/") / "format").read_text()) for e in events
        ]
        decoder = RawDecoder(formats, fields, kernel_symbol, task_comm)
        return RawConsumer(instance_path, cpus, decoder, page)
    except (OSError, ValueError):
        return Consumer(instance_path / "trace_pipe", cpus[0] if len(cpus) == 1 else cpus, fields)
