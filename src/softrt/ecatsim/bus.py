"""A chain of ESCs on one segment: datagram addressing and working counters (ETG.1000.4 §5.4).

:meth:`Segment.process` edits a received frame in place, exactly as it would come back to the
master after passing every slave in port order (0 → 1 → … → last → back). Rules, per command
(ETG.1000.4 §5.4.1.2 Table 13; KickCAT ``EmulatedESC::process*``):

* auto-increment (APxx, ARMW): every slave increments ADP; the slave that sees ADP 0 is addressed.
* configured address (FPxx, FRMW): slaves whose station address (0x0010) equals ADP.
* broadcast (Bxx): every slave; reads are OR-ed into the frame; ADP is incremented too.
* read-multiple-write (ARMW/FRMW): the addressed slave reads, every other slave writes.
* working counter per addressed slave: read +1, write +1; read-write commands +1 read, +2 write.
* logical (LRD/LWR/LRW): per slave, +1 if a read FMMU maps part of the datagram, +2 (LRW) or +1
  (LWR) if a write FMMU does. LRW reads first, then writes from the data as it arrived at that
  slave (so overlapping input/output maps stay correct).

Speed: what a logical datagram touches (per slave, the spans of frame and process RAM its FMMUs
map and may reach now) is worked out once per address, length and configuration, and kept until
a slave's FMMUs, SyncManagers or AL state change (:attr:`.esc.Esc.epoch`): the cyclic frame then
costs a few slice copies per slave. The slave applications run after the reply (:meth:`finish`).
"""

from __future__ import annotations

import struct
import time
from collections.abc import Callable

from .esc import REG_DC_RECV_TIME0, REG_STATION_ADDRESS, Esc
from ..ethercat.wire import Cmd, Datagram, parse_frame, read_wkc, write_adp, write_wkc

#: Modelled forward delay per slave (cable plus ESC forwarding), used for DC receive times.
HOP_DELAY_NS = 600

#: A hook that may suppress a slave's process-data access in one frame (fault injection):
#: ``skip(position) -> bool``.
SkipHook = Callable[[int], bool]


class Segment:
    """N ESCs in a line; the master is on port 0 of the first."""

    def __init__(self, escs: list[Esc], clock: Callable[[], int] = time.monotonic_ns) -> None:
        self.escs = escs
        self._clock = clock
        #: (command, logical address, length) → per slave (esc, reads, writes, wkc), valid for _epoch.
        self._plans: dict[tuple[int, int, int], list] = {}
        self._epoch = -1

    def process(self, frame: bytearray, skip_pd: SkipHook | None = None, defer_apps: bool = False,
                datagrams: list[Datagram] | None = None) -> list[Datagram]:
        """Process every datagram of *frame* in place; return them (raises wire.FrameError).

        The slave applications (the drives) run after the frame has passed, as behind a real ESC
        they run on the PDI after the SyncManager event: nothing they do changes this frame's
        reply. With *defer_apps* they wait for :meth:`finish` (the simulator sends the reply first).
        *datagrams*: the frame already parsed (``wire.parse_frame``).
        """
        if datagrams is None:
            datagrams = parse_frame(frame)
        now = self._clock()
        for esc in self.escs:  # the frame passes slave p at one instant, p hops after the first
            esc.pass_ns = now + esc.position * HOP_DELAY_NS
        try:
            for dg in datagrams:
                self._datagram(frame, dg, now, skip_pd)
        except BaseException:
            self.finish()
            raise
        if not defer_apps:
            self.finish()
        return datagrams

    def finish(self) -> None:
        """Run the slave applications of the frame just processed (see :meth:`process`)."""
        try:
            for esc in self.escs:
                esc.end_frame()
        finally:
            for esc in self.escs:
                esc.pass_ns = None

    def poll(self, now_ns: int) -> None:
        """Let every ESC check its watchdog."""
        for esc in self.escs:
            esc.poll(now_ns)

    def _datagram(self, frame: bytearray, dg: Datagram, now: int, skip_pd: SkipHook | None) -> None:
        cmd = dg.cmd
        wkc = read_wkc(frame, dg)
        if cmd in _LOGICAL:
            wkc += self._logical(frame, dg, skip_pd)
        elif cmd in _POSITIONAL:
            adp = dg.adp
            for esc in self.escs:
                addressed = adp == 0 or cmd in _BROADCAST
                if cmd == Cmd.ARMW:
                    wkc += self._rmw(frame, dg, esc, reader=addressed)
                elif addressed:
                    wkc += self._physical(frame, dg, esc, now)
                adp = (adp + 1) & 0xFFFF
            write_adp(frame, dg, adp)
        elif cmd in _CONFIGURED:
            adp = dg.adp
            for esc in self.escs:
                addressed = _U16.unpack_from(esc.mem, REG_STATION_ADDRESS)[0] == adp
                if cmd == Cmd.FRMW:
                    wkc += self._rmw(frame, dg, esc, reader=addressed)
                elif addressed:
                    wkc += self._physical(frame, dg, esc, now)
        elif cmd != Cmd.NOP:
            return  # unknown command: passed on untouched, as an ESC does
        write_wkc(frame, dg, wkc)

    def _physical(self, frame: bytearray, dg: Datagram, esc: Esc, now: int) -> int:
        cmd, lo = dg.cmd, dg.data_offset
        reads = cmd in (Cmd.APRD, Cmd.FPRD, Cmd.BRD, Cmd.APRW, Cmd.FPRW, Cmd.BRW)
        writes = cmd in (Cmd.APWR, Cmd.FPWR, Cmd.BWR, Cmd.APRW, Cmd.FPRW, Cmd.BRW)
        incoming = bytes(frame[lo:lo + dg.length]) if writes else b""
        if reads:
            data = esc.read(dg.ado, dg.length)
            if cmd == Cmd.BRD or cmd == Cmd.BRW:
                frame[lo:lo + dg.length] = bytes(a | b for a, b in zip(frame[lo:lo + dg.length], data))
            else:
                frame[lo:lo + dg.length] = data
        if writes:
            if dg.ado <= REG_DC_RECV_TIME0 < dg.ado + dg.length:
                self._latch(esc, now)
            esc.write(dg.ado, incoming)
        return (1 if reads else 0) + (2 if reads and writes else 1 if writes else 0)

    def _rmw(self, frame: bytearray, dg: Datagram, esc: Esc, reader: bool) -> int:
        lo = dg.data_offset
        if reader:
            frame[lo:lo + dg.length] = esc.read(dg.ado, dg.length)
        else:
            esc.write(dg.ado, bytes(frame[lo:lo + dg.length]))
        return 1

    def _latch(self, esc: Esc, now: int) -> None:
        # Port 0 sees the frame on its way out; port 1 when it returns from the slaves behind.
        n, p = len(self.escs), esc.position
        back = now + (2 * (n - 1) - p) * HOP_DELAY_NS if p < n - 1 else None
        esc.latch_receive_times(now + p * HOP_DELAY_NS, back)

    def _logical(self, frame: bytearray, dg: Datagram, skip_pd: SkipHook | None) -> int:
        """An LRD/LWR/LRW through every slave's FMMUs; return the working counter it adds."""
        epoch = sum(esc.epoch for esc in self.escs)  # each only grows: any change changes the sum
        if epoch != self._epoch:
            self._plans.clear()
            self._epoch = epoch
        key = (dg.cmd, dg.logical_address, dg.length)
        plan = self._plans.get(key)
        if plan is None:
            plan = self._plans[key] = self._plan(*key)
        base = dg.data_offset
        wkc = 0
        for esc, reads, writes, add in plan:
            if skip_pd is not None and skip_pd(esc.position):
                continue
            incoming = [frame[base + lo:base + hi] for lo, hi, _p in writes]  # as it arrived (read first)
            for lo, hi, p in reads:
                frame[base + lo:base + hi] = esc.mem[p:p + hi - lo]
            if reads:
                esc.pd_read = True
            for (lo, hi, p), data in zip(writes, incoming):
                esc.store_outputs(p, data)
            wkc += add
        return wkc

    def _plan(self, cmd: int, laddr: int, length: int) -> list:
        plan = []
        for esc in self.escs:
            reads = esc.spans(laddr, length, write=False) if cmd != Cmd.LWR else []
            writes = esc.spans(laddr, length, write=True) if cmd != Cmd.LRD else []
            add = (1 if reads else 0) + ((2 if cmd == Cmd.LRW else 1) if writes else 0)
            if add:
                plan.append((esc, reads, writes, add))
        return plan


_LOGICAL = frozenset({Cmd.LRD, Cmd.LWR, Cmd.LRW})
_POSITIONAL = frozenset({Cmd.APRD, Cmd.APWR, Cmd.APRW, Cmd.ARMW, Cmd.BRD, Cmd.BWR, Cmd.BRW})
_BROADCAST = frozenset({Cmd.BRD, Cmd.BWR, Cmd.BRW})
_CONFIGURED = frozenset({Cmd.FPRD, Cmd.FPWR, Cmd.FPRW, Cmd.FRMW})
_U16 = struct.Struct("<H")
