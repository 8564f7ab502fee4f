"""Distributed clocks during a run, the master side: the host's phase against SYNC0, each slave's
0x092C, and the phase lock (``--dc-lock``).

Per cycle (in :meth:`DcMonitor.cycle`, called by the master after its frame came back; a few
integer operations, no allocation beyond ints):

* the **phase**: the cyclic frame carries an FRMW of 0x0910 that the reference clock (the first
  DC slave) fills with its system time as the frame passes (:mod:`.cyclic`, as SOEM's
  ``ecx_send_processdata`` does). :func:`.dc.phase_error` places it in the SYNC0 cycle the drives run
  (SYNC0 fires at ``start + k * cycle``, read back from 0x0990 after ``dc_sync``); with the lock,
  :class:`.dc.PhaseLock` turns the error into a move of the next host edge.
* the **system time differences**: every ``sample_every``-th cycle one extra frame of FPRDs of
  0x092C (one per DC slave behind the reference) goes out on a link of our own (:mod:`.transport`), right after the
  cyclic frame came back; its answer is picked up, without waiting, when the next one is due. The
  hot cycle pays one ``send`` and one non-blocking ``recv`` per sample, never a round trip.

The DC time and the host clock are compared over the run as well (``dc_vs_host_ppm``): it is the
rate at which an unlocked host's phase walks through the drives' cycle. A late frame only ever
adds delay, so each window of ``sample_every`` cycles keeps its smallest DC-minus-host offset
(the minimum-delay filter NTP uses, RFC 5905 §10) and the rate is the slope between the first
and the last window's.
"""

from __future__ import annotations

import struct
import time
from dataclasses import dataclass

from ..schema.device import DcReference, DcSlave, DistributedClocks, Phase, Sync0
from ..schema.device import PhaseLock as LockReport
from ..schema.doc import present
from .dc import (
    REG_SYNC0_CYCLE,
    REG_SYNC0_START,
    REG_SYNC_ACTIVATION,
    REG_SYSTEM_DIFF,
    SYNC0_ACTIVE,
    PhaseLock,
    decode_diff,
)
from .errors import EcatError, EcatInputError
from .nsstat import NsStat
from .transport import as_link, open_link
from .wire import Cmd, FrameError, encode_frame, parse_frame, read_wkc

#: First-datagram index of the probe frame (SOEM's own indices stay below EC_MAXBUF, 16 or 32:
#: it drops a frame with this index as not its own, ``ecx_inframe``).
PROBE_INDEX = 0xDC
#: Bins of the phase histogram over one cycle.
PHASE_BINS = 1024
#: Points kept of the phase over the run (pairs are merged when full).
SERIES_POINTS = 512
_U16, _U32, _U64 = struct.Struct("<H"), struct.Struct("<I"), struct.Struct("<Q")
REG_STATION_ADDRESS = 0x0010


@dataclass(frozen=True)
class DcOptions:
    """What a run asks of distributed clocks (the master's ``dc``, ``dc_lock``, ``dc_shift_ns`` and
    ``dc_sample_every``): use them at all (``wanted``), lock the host cycle to SYNC0 (``lock``,
    ``--dc-lock``) with the frame ``shift_ns`` after it (``--dc-shift``; negative: before), and read
    each slave's 0x092C every ``sample_every`` cycles."""

    wanted: bool = True
    lock: bool = False
    shift_ns: int = 0
    sample_every: int = 100


class _SlaveDiff:
    __slots__ = ("address", "name", "position", "stat", "unanswered")

    def __init__(self, position: int, name: str, address: int) -> None:
        self.position, self.name, self.address = position, name, address
        self.stat = NsStat()
        self.unanswered = 0


class DiffProbe:
    """The 0x092C probe: one frame of FPRDs (and a NOP carrying a sequence number) on a link of its own
    (:mod:`.transport`; a socket is taken as one)."""

    def __init__(self, sock, slaves: list[_SlaveDiff]) -> None:
        self.link = as_link(sock)
        self.slaves = slaves
        self.seq = 0
        self.outstanding = False
        self.sent = self.unanswered_frames = self.send_errors = 0
        datagrams = [(Cmd.FPRD, PROBE_INDEX, s.address, REG_SYSTEM_DIFF, bytes(4)) for s in slaves]
        datagrams.append((Cmd.NOP, PROBE_INDEX, 0, 0, bytes(2)))
        frame = encode_frame(datagrams)
        self.frame = frame + bytes(max(0, 60 - len(frame)))  # the Ethernet minimum, as a NIC pads
        self._seq_offset = parse_frame(self.frame)[-1].data_offset
        self._buf = bytearray(2048)

    def send(self) -> None:
        """Collect the previous probe's answer (if any), then send the next one."""
        if self.outstanding:
            self.collect()
        self.seq = (self.seq + 1) & 0xFFFF
        _U16.pack_into(self.frame, self._seq_offset, self.seq)
        try:
            self.link.send(self.frame)
        except OSError:
            self.send_errors += 1
            return
        self.sent += 1
        self.outstanding = True

    def collect(self, grace_s: float = 0.0) -> None:
        """Read the answer to the outstanding probe if it is there (polling up to *grace_s* for it); otherwise
        count it unanswered. Polled, not waited for: Wine's wpcap.dll has no ``pcap_getevent``."""
        buf = self._buf
        end = time.monotonic() + grace_s if grace_s else 0.0
        while True:
            while (got := self.link.receive_into(buf)) is not None:
                if self._take(memoryview(buf)[: got[0]]):
                    self.outstanding = False
                    return
            if not grace_s or time.monotonic() >= end:
                break
            time.sleep(0.0005)
        self.outstanding = False
        self.unanswered_frames += 1
        for s in self.slaves:
            s.unanswered += 1

    def _take(self, frame) -> bool:
        try:
            datagrams = parse_frame(frame)
        except FrameError:
            return False
        if len(datagrams) != len(self.slaves) + 1 or _U16.unpack_from(frame, datagrams[-1].data_offset)[0] != self.seq:
            return False  # an older probe's late answer
        for s, dg in zip(self.slaves, datagrams):
            if read_wkc(frame, dg) == 1:
                s.stat.add(decode_diff(_U32.unpack_from(frame, dg.data_offset)[0]))
            else:
                s.unanswered += 1
        return True


class _Series:
    """The phase over the run in at most SERIES_POINTS windows of ``every`` cycles: per window the
    sum of the errors, of their magnitudes, the measured cycles and the lock's edge moves."""

    def __init__(self, every_cycles: int) -> None:
        self.every = every_cycles
        self.points: list[list[int]] = []
        self._cur = [0, 0, 0, 0]
        self._cycles = 0

    def add(self, error_ns: int | None, move_ns: int) -> None:
        cur = self._cur
        if error_ns is not None:
            cur[0] += error_ns
            cur[1] += -error_ns if error_ns < 0 else error_ns
            cur[2] += 1
        cur[3] += move_ns
        self._cycles += 1
        if self._cycles == self.every:
            self.points.append(cur)
            self._cur = [0, 0, 0, 0]
            self._cycles = 0
            if len(self.points) >= SERIES_POINTS:
                p = self.points
                self.points = [[x + y for x, y in zip(a, b)] for a, b in zip(p[0::2], p[1::2])]
                self.every *= 2

    def means_us(self) -> tuple[list, list]:
        """Per window: the mean error and the mean |error| (µs; None for a window without a frame)."""
        mean = [round(s / n / 1e3, 2) if n else None for s, _a, n, _m in self.points]
        abs_mean = [round(a / n / 1e3, 2) if n else None for _s, a, n, _m in self.points]
        return mean, abs_mean

    def late_correction_ppm(self, period_ns: int) -> float | None:
        """The lock's edge moves over the later half of the run, in ppm of the period (the drift it follows)."""
        late = self.points[len(self.points) // 2 :]
        if not late:
            return None
        return round(sum(p[3] for p in late) / (len(late) * self.every * period_ns) * 1e6, 1)


class DcMonitor:
    """Per-run DC figures and the optional phase lock (see the module docstring)."""

    def __init__(
        self,
        period_ns: int,
        sync0_ns: int,
        reference: tuple[int, str],
        probe: DiffProbe | None,
        options: DcOptions,
        *,
        sync0_active: bool,
        reference_address: int = 0,
    ) -> None:
        self.period_ns, self.sync0_ns, self.sync0_active = period_ns, sync0_ns, sync0_active
        #: The reference clock (position, name) and its station address (0x0010): the cyclic frame's FRMW goes to it.
        self.reference, self.reference_address = reference, reference_address
        self.probe = probe
        # (kept as attributes of their own: cycle() reads them every cycle)
        self.shift_ns, self.sample_every = options.shift_ns, options.sample_every
        self.lock = PhaseLock(period_ns) if options.lock else None
        self.moved_ns = 0
        self.cycles = self.measured = 0
        self._half = period_ns // 2
        self.bins = [0] * PHASE_BINS
        self.total = self.total_abs = 0
        self.min = self.max = 0
        self.series = _Series(options.sample_every)
        # (smallest DC time - host time, host time) of the first, the last and the current window.
        self.first: tuple[int, int] | None = None
        self.last: tuple[int, int] | None = None
        self._window: tuple[int, int] | None = None

    def cycle(self, now_ns: int, dc: int | None) -> int:
        """Account one cycle whose frame was sent at *now_ns* and brought the reference clock's
        time *dc* (None: no valid reply); return the move of the next edge (ns)."""
        self.cycles += 1
        move = 0
        if dc is not None:
            half, period = self._half, self.period_ns
            e = (dc - self.sync0_ns - self.shift_ns + half) % period - half
            self.bins[(e + half) * PHASE_BINS // period] += 1
            if not self.measured or e < self.min:
                self.min = e
            if not self.measured or e > self.max:
                self.max = e
            self.measured += 1
            self.total += e
            self.total_abs += -e if e < 0 else e
            w = self._window
            if w is None or dc - now_ns < w[0]:
                self._window = (dc - now_ns, now_ns)
            if self.lock is not None:
                move = self.lock.update(e)
            self.series.add(e, move)
        else:
            if self.lock is not None:
                move = self.lock.hold()
            self.series.add(None, move)
        self.moved_ns += move
        if self.cycles % self.sample_every == 0:
            if self._window is not None:
                if self.first is None:
                    self.first = self._window
                else:
                    self.last = self._window
                self._window = None
            if self.probe is not None:
                self.probe.send()
        return move

    def close(self) -> None:
        """Collect the last probe answer and close the probe's link (idempotent)."""
        if self.probe is not None and not self.probe.link.closed:
            try:
                if self.probe.outstanding:
                    self.probe.collect(0.01)  # one round trip's grace, off the hot path
            finally:
                self.probe.link.close()

    # --- the report --------------------------------------------------------------------------
    def _percentile(self, q: float, absolute: bool) -> float:
        period, half, n = self.period_ns, self._half, self.measured
        width = period / PHASE_BINS
        if absolute:  # fold the bins onto |error|
            folded: dict[float, int] = {}
            for i, c in enumerate(self.bins):
                if c:
                    centre = abs(-half + (i + 0.5) * width)
                    folded[centre] = folded.get(centre, 0) + c
            items = sorted(folded.items())
        else:
            items = [(-half + (i + 0.5) * width, c) for i, c in enumerate(self.bins) if c]
        rank = q / 100 * (n - 1)
        seen = 0
        for value, count in items:
            seen += count
            if seen > rank:
                return value
        return items[-1][0]

    def report(self) -> DistributedClocks:
        """The ``distributed_clocks`` block of the board's counters (docs/ethercat.md)."""
        n = self.measured
        us = lambda ns: round(ns / 1e3, 2)  # noqa: E731
        phase = None
        if n:
            clamp = lambda v: min(max(v, self.min), self.max)  # noqa: E731 - a bin centre never beyond the extremes
            phase = Phase(
                n=n,
                mean_us=us(self.total / n),
                min_us=us(self.min),
                max_us=us(self.max),
                p1_us=us(clamp(self._percentile(1, False))),
                p50_us=us(clamp(self._percentile(50, False))),
                p99_us=us(clamp(self._percentile(99, False))),
                abs_mean_us=us(self.total_abs / n),
                abs_p99_us=us(min(self._percentile(99, True), max(-self.min, self.max))),
                abs_max_us=us(max(-self.min, self.max)),
                resolution_us=us(self.period_ns / PHASE_BINS),
            )
        rate = None
        if self.first and self.last and self.last[1] - self.first[1] >= 100 * self.period_ns:
            rate = round((self.last[0] - self.first[0]) / (self.last[1] - self.first[1]) * 1e6, 1)
        mean, abs_mean = self.series.means_us()
        # (the keys in the order this report has always written them: the probe after the slaves)
        return DistributedClocks.build(
            reference=DcReference(slave=self.reference[0], name=self.reference[1]),
            sync0=Sync0(active=self.sync0_active, cycle_ns=self.period_ns, start_ns=self.sync0_ns),
            target_shift_us=us(self.shift_ns),
            cycles=self.cycles,
            phase=phase,
            phase_series={"every_cycles": self.series.every, "mean_us": mean, "abs_mean_us": abs_mean},
            dc_vs_host_ppm=rate,
            lock=self._lock_report(abs_mean),
            sample_every=self.sample_every,
            slaves=[]
            if self.probe is None
            else [
                DcSlave(
                    slave=s.position,
                    name=s.name,
                    samples=s.stat.n,
                    unanswered=s.unanswered,
                    abs_diff_ns=s.stat.summary(),
                )
                for s in self.probe.slaves
            ],
            **present(
                probe=None
                if self.probe is None
                else {
                    "sent": self.probe.sent,
                    "unanswered": self.probe.unanswered_frames,
                    "send_errors": self.probe.send_errors,
                }
            ),
        )

    def _lock_report(self, abs_mean: list[float | None]) -> LockReport | None:
        """What the phase lock did (None without ``--dc-lock``): its gains, its correction, and the
        phase error's first and last tenth of the run."""
        if self.lock is None:
            return None
        us = lambda ns: round(ns / 1e3, 2)  # noqa: E731
        known = [a for a in abs_mean if a is not None]
        tenth = max(1, len(known) // 10)
        return LockReport(
            kp=self.lock.kp,
            ki=self.lock.ki,
            max_step_us=us(self.lock.max_step_ns),
            correction_ppm=self.series.late_correction_ppm(self.period_ns),
            moved_us=us(self.moved_ns),
            first_tenth_abs_mean_us=round(sum(known[:tenth]) / tenth, 2) if known else None,
            last_tenth_abs_mean_us=round(sum(known[-tenth:]) / tenth, 2) if known else None,
        )


def attach(
    m,
    iface: str,
    slaves,
    drive_positions: list[int],
    period_ns: int,
    options: DcOptions,
    dc_active: bool,
    read=lambda slave, reg, size: slave._fprd(reg, size),
    transport: str = "af_packet",
) -> tuple[DcMonitor | None, str | None]:
    """Set up the run's DC figures after ``setup_dc``; return ``(monitor, None)`` or ``(None, why absent)``.

    *slaves* are :class:`.bringup.SlaveInfo`; the lock needs DC, so asking for it without is an
    :class:`EcatError`. Reads (station addresses, SYNC0 start and cycle) go through *read*
    (``read(slave, register, size)``: pysoem's FPRD; bring-up's retries it, :func:`.steps.read_register`).
    The probe's link is of the master's *transport* (:mod:`.transport`).
    *options* ``wanted`` False: the master was asked not to use DC (its slaves' DC features are not read).
    """
    dc_slaves = [s for s in slaves if s.has_dc]
    why = None
    if not options.wanted:
        why = "distributed clocks were turned off (dc=False)"
    elif not dc_slaves:
        why = "no slave has distributed clocks (ESC feature register 0x0008, bit 2)"
    elif not dc_active:
        why = "distributed clocks were not configured (SOEM's config_dc found no DC slave)"
    if why:
        if options.lock:
            raise EcatInputError(
                "config",
                iface,
                f"--dc-lock needs distributed clocks: {why}",
                hint="run without --dc-lock, or put a DC-capable drive on the bus",
            )
        return None, why
    ref = dc_slaves[0]
    # SYNC0 of the first DC drive (the cycle the frame must meet); the reference's if no drive has DC.
    timing = next((s for s in dc_slaves if s.position in drive_positions), ref)
    sl = m.slaves[timing.position]
    active = read(sl, REG_SYNC_ACTIVATION, 1)[0] & SYNC0_ACTIVE == SYNC0_ACTIVE
    sync0 = _U64.unpack(read(sl, REG_SYNC0_START, 8))[0]
    cycle = _U32.unpack(read(sl, REG_SYNC0_CYCLE, 4))[0]
    if active and cycle and cycle != period_ns:
        raise EcatError(
            "config", iface, f"slave {timing.position} runs SYNC0 every {cycle} ns, the cycle is {period_ns} ns"
        )
    probe = None
    behind = [s for s in dc_slaves if s is not ref]
    address = {s.position: _U16.unpack(read(m.slaves[s.position], REG_STATION_ADDRESS, 2))[0] for s in dc_slaves}
    if behind:
        diffs = [_SlaveDiff(s.position, s.name, address[s.position]) for s in behind]
        probe = DiffProbe(open_link(iface, PROBE_INDEX, transport), diffs)
    reference = (ref.position, ref.name)
    return DcMonitor(
        period_ns, sync0, reference, probe, options, sync0_active=active, reference_address=address[ref.position]
    ), None
