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
"""

from __future__ import annotations

import time
from collections.abc import Callable

from .esc import REG_DC_RECV_TIME0, Esc
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

    def process(self, frame: bytearray, skip_pd: SkipHook | None = None) -> list[Datagram]:
        """Process every datagram of *frame* in place; return them (raises wire.FrameError)."""
        datagrams = parse_frame(frame)
        now = self._clock()
        for esc in self.escs:  # the frame passes slave p at one instant, p hops after the first
            esc.pass_ns = now + esc.position * HOP_DELAY_NS
        try:
            for dg in datagrams:
                self._datagram(frame, dg, now, skip_pd)
            for esc in self.escs:
                esc.end_frame()
        finally:
            for esc in self.escs:
                esc.pass_ns = None
        return datagrams

    def poll(self, now_ns: int) -> None:
        """Let every ESC check its watchdog."""
        for esc in self.escs:
            esc.poll(now_ns)

    def _datagram(self, frame: bytearray, dg: Datagram, now: int, skip_pd: SkipHook | None) -> None:
        cmd = dg.cmd
        wkc = read_wkc(frame, dg)
        if cmd in (Cmd.LRD, Cmd.LWR, Cmd.LRW):
            for esc in self.escs:
                if skip_pd is not None and skip_pd(esc.position):
                    continue
                wkc += self._logical(frame, dg, esc)
        elif cmd in (Cmd.APRD, Cmd.APWR, Cmd.APRW, Cmd.ARMW, Cmd.BRD, Cmd.BWR, Cmd.BRW):
            adp = dg.adp
            for esc in self.escs:
                addressed = adp == 0 or cmd in (Cmd.BRD, Cmd.BWR, Cmd.BRW)
                if cmd == Cmd.ARMW:
                    wkc += self._rmw(frame, dg, esc, reader=addressed)
                elif addressed:
                    wkc += self._physical(frame, dg, esc, now)
                adp = (adp + 1) & 0xFFFF
            write_adp(frame, dg, adp)
        elif cmd in (Cmd.FPRD, Cmd.FPWR, Cmd.FPRW, Cmd.FRMW):
            for esc in self.escs:
                addressed = int.from_bytes(esc.mem[0x0010:0x0012], "little") == dg.adp
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

    @staticmethod
    def _logical(frame: bytearray, dg: Datagram, esc: Esc) -> int:
        cmd, laddr, lo = dg.cmd, dg.logical_address, dg.data_offset
        wkc = 0
        incoming = None
        if cmd != Cmd.LRD and esc.has_fmmu(laddr, dg.length, write=True):
            incoming = bytes(frame[lo:lo + dg.length])
        if cmd != Cmd.LWR and esc.logical_read(laddr, frame, lo, dg.length):
            wkc += 1
        if incoming is not None and esc.logical_write(laddr, incoming):
            wkc += 2 if cmd == Cmd.LRW else 1
        return wkc
