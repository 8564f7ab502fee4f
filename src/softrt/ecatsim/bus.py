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
A frame of a layout seen before (:mod:`.layouts`) runs through :meth:`Segment.run`: its
datagrams' handlers are chosen once (a NOP costs nothing), and the writes that cannot change its
reply wait for :meth:`finish` too (:meth:`compile` says which).
"""

from __future__ import annotations

import operator
import struct
import time
from collections.abc import Callable

from ..ethercat.wire import DATAGRAM_HEADER_BYTES, Cmd, Datagram, parse_frame, read_wkc, write_adp, write_wkc
from .esc import PROCESS_RAM, REG_DC_RECV_TIME0, Esc

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
        #: (command, logical address, length, data offset) → its plan, valid for _epoch.
        self._plans: dict[tuple[int, int, int, int], _LogicalPlan] = {}
        self._epoch = -1
        #: Writes of the frame being processed that wait for :meth:`finish` (``(method, *args)``).
        self._deferred: list[tuple] = []

    def process(
        self,
        frame: bytearray,
        skip_pd: SkipHook | None = None,
        defer_apps: bool = False,
        datagrams: list[Datagram] | None = None,
    ) -> list[Datagram]:
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

    def run(self, frame: bytearray, steps: list, skip_pd: SkipHook | None = None) -> None:
        """Process a frame of a known layout in place with the *steps* :meth:`compile` made for its
        datagrams; its deferred writes and the slave applications wait for :meth:`finish`."""
        now = self._clock()
        for esc in self.escs:
            esc.pass_ns = now + esc.position * HOP_DELAY_NS
        try:
            for step, dg, defer in steps:
                step(frame, dg, now, skip_pd, defer)
        except BaseException:
            self.finish()
            raise

    def compile(self, datagrams: list[Datagram]) -> list:
        """Return the steps of a frame of these *datagrams* for :meth:`run`: ``(handler, datagram,
        defer)``, a NOP left out (it changes nothing, not even its working counter).

        *defer*: the datagram's writes into slave memory wait for :meth:`finish` (after the reply
        was sent), which changes nothing that anyone sees, as long as nothing later in the frame
        could see them: an RMW's writes when only NOPs follow; a logical datagram's plain writes
        (process data, not a mailbox: :class:`_LogicalPlan`) when only NOPs, reads of registers and
        such RMWs follow (register reads see no process RAM, and every deferred write keeps its order).
        """
        steps = []
        quiet = registers_only = True  # of the datagrams after this one
        for dg in reversed(datagrams):
            cmd = dg.cmd
            if cmd == Cmd.NOP:
                continue
            if cmd in _LOGICAL:
                steps.append((self._logical_step, dg, registers_only))
                registers_only = quiet = False
                continue
            defer = quiet and cmd in _RMW
            steps.append((self._frmw_step if cmd == Cmd.FRMW else self._datagram, dg, defer))
            # A logical datagram before this one may defer only if this one sees no process RAM
            # and writes nothing now.
            registers_only = registers_only and dg.ado + dg.length <= PROCESS_RAM and (defer or cmd in _READS)
            quiet = False
        steps.reverse()
        return steps

    def _logical_step(self, frame: bytearray, dg: Datagram, _now: int, skip_pd: SkipHook | None, defer: bool) -> None:
        plan = self._logical_plan(dg)
        if skip_pd is not None or not plan.one_copy:
            wkc = self._logical(frame, dg, skip_pd, defer)
        else:  # every write takes the data as the master sent it: one copy serves them all
            later = self._deferred if defer and plan.plain else None
            data = frame[plan.data_lo : plan.data_hi] if plan.writes else None
            for lo, hi, mem, p, q in plan.reads:
                frame[lo:hi] = mem[p:q]
            for esc in plan.readers:
                esc.pd_read = True
            if data is not None:
                if later is None:
                    _store(plan.writes, data)
                else:
                    later.append((_store, plan.writes, data))
            wkc = plan.wkc
        wkc_at = plan.data_hi
        _U16.pack_into(frame, wkc_at, (_U16.unpack_from(frame, wkc_at)[0] + wkc) & 0xFFFF)

    def _frmw_step(self, frame: bytearray, dg: Datagram, _now: int, _skip_pd: SkipHook | None, defer: bool) -> None:
        """An FRMW (the distributed clocks' time): the slave(s) at its address read, every other
        slave writes what reaches it (ETG.1000.4 §5.4.1.2); each adds 1 to the working counter."""
        ado, lo = dg.ado, dg.header_offset + DATAGRAM_HEADER_BYTES
        hi = lo + dg.length
        later = self._deferred if defer else None
        data = None  # what reaches the next writer, once copied
        adp = dg.adp
        for esc in self.escs:
            if esc.station_address == adp:
                frame[lo:hi] = esc.read(ado, hi - lo)
                data = None
                continue
            if data is None:
                data = bytes(frame[lo:hi])
            if later is None:
                esc.write(ado, data)
            else:
                later.append((esc.write, ado, data))
        wkc_at = hi
        _U16.pack_into(frame, wkc_at, (_U16.unpack_from(frame, wkc_at)[0] + len(self.escs)) & 0xFFFF)

    def finish(self) -> None:
        """Run the deferred writes and the slave applications of the frame just processed (see
        :meth:`process`, :meth:`run`)."""
        try:
            deferred, self._deferred = self._deferred, []
            for write, *args in deferred:
                write(*args)
            for esc in self.escs:
                esc.end_frame()
        finally:
            for esc in self.escs:
                esc.pass_ns = None

    def poll(self, now_ns: int) -> None:
        """Let every ESC check its watchdog."""
        for esc in self.escs:
            esc.poll(now_ns)

    def _datagram(
        self, frame: bytearray, dg: Datagram, now: int, skip_pd: SkipHook | None, defer: bool = False
    ) -> None:
        cmd = dg.cmd
        wkc = read_wkc(frame, dg)
        if cmd in _LOGICAL:
            wkc += self._logical(frame, dg, skip_pd, defer)
        elif cmd in _POSITIONAL:
            adp = dg.adp
            for esc in self.escs:
                addressed = adp == 0 or cmd in _BROADCAST
                if cmd == Cmd.ARMW:
                    wkc += self._rmw(frame, dg, esc, addressed, defer)
                elif addressed:
                    wkc += self._physical(frame, dg, esc, now)
                adp = (adp + 1) & 0xFFFF
            write_adp(frame, dg, adp)
        elif cmd in _CONFIGURED:
            adp = dg.adp
            for esc in self.escs:
                addressed = esc.station_address == adp
                if cmd == Cmd.FRMW:
                    wkc += self._rmw(frame, dg, esc, addressed, defer)
                elif addressed:
                    wkc += self._physical(frame, dg, esc, now)
        elif cmd != Cmd.NOP:
            return  # unknown command: passed on untouched, as an ESC does
        write_wkc(frame, dg, wkc)

    def _physical(self, frame: bytearray, dg: Datagram, esc: Esc, now: int) -> int:
        cmd, lo = dg.cmd, dg.data_offset
        reads = cmd in (Cmd.APRD, Cmd.FPRD, Cmd.BRD, Cmd.APRW, Cmd.FPRW, Cmd.BRW)
        writes = cmd in (Cmd.APWR, Cmd.FPWR, Cmd.BWR, Cmd.APRW, Cmd.FPRW, Cmd.BRW)
        incoming = bytes(frame[lo : lo + dg.length]) if writes else b""
        if reads:
            data = esc.read(dg.ado, dg.length)
            if cmd == Cmd.BRD or cmd == Cmd.BRW:
                frame[lo : lo + dg.length] = bytes(a | b for a, b in zip(frame[lo : lo + dg.length], data))
            else:
                frame[lo : lo + dg.length] = data
        if writes:
            if dg.ado <= REG_DC_RECV_TIME0 < dg.ado + dg.length:
                self._latch(esc, now)
            esc.write(dg.ado, incoming)
        return (1 if reads else 0) + (2 if reads and writes else 1 if writes else 0)

    def _rmw(self, frame: bytearray, dg: Datagram, esc: Esc, reader: bool, defer: bool = False) -> int:
        lo = dg.data_offset
        if reader:
            frame[lo : lo + dg.length] = esc.read(dg.ado, dg.length)
        elif defer:
            self._deferred.append((esc.write, dg.ado, bytes(frame[lo : lo + dg.length])))
        else:
            esc.write(dg.ado, bytes(frame[lo : lo + dg.length]))
        return 1

    def _latch(self, esc: Esc, now: int) -> None:
        # Port 0 sees the frame on its way out; port 1 when it returns from the slaves behind.
        n, p = len(self.escs), esc.position
        back = now + (2 * (n - 1) - p) * HOP_DELAY_NS if p < n - 1 else None
        esc.latch_receive_times(now + p * HOP_DELAY_NS, back)

    def _logical_plan(self, dg: Datagram) -> _LogicalPlan:
        """What the logical datagram *dg* reaches now (worked out once per epoch)."""
        epoch = sum(map(_EPOCH, self.escs))  # each only grows: any change changes the sum
        if epoch != self._epoch:
            self._plans.clear()
            self._epoch = epoch
        key = (dg.cmd, dg.logical_address, dg.length, dg.data_offset)
        plan = self._plans.get(key)
        if plan is None:
            plan = self._plans[key] = _LogicalPlan(self.escs, *key)
        return plan

    def _logical(self, frame: bytearray, dg: Datagram, skip_pd: SkipHook | None, defer: bool = False) -> int:
        """An LRD/LWR/LRW through every slave's FMMUs, one slave after the other; return the
        working counter it adds. With *defer*, plain writes wait for :meth:`finish` (:meth:`compile`)."""
        plan = self._logical_plan(dg)
        later = self._deferred if defer and plan.plain else None
        wkc = 0
        for esc, reads, writes, add in plan.slaves:
            if skip_pd is not None and skip_pd(esc.position):
                continue
            incoming = [frame[lo:hi] for lo, hi, _p in writes]  # as it arrived (read first)
            for lo, hi, p in reads:
                frame[lo:hi] = esc.mem[p : p + hi - lo]
            if reads:
                esc.pd_read = True
            for (_lo, _hi, p), data in zip(writes, incoming):
                if later is None:
                    esc.store_outputs(p, data)
                else:
                    later.append((esc.store_outputs, p, data))
            wkc += add
        return wkc


class _LogicalPlan:
    """What one logical datagram reaches through every slave's FMMUs (valid for one epoch).

    ``slaves``: per slave reached ``(esc, reads, writes, wkc)`` with frame offsets; ``reads`` and
    ``writes`` the same flattened; ``plain``: every write is plain (no mailbox:
    :meth:`.esc.Esc.plain_write`); ``one_copy``: no slave reads into bytes a later slave writes
    from, so the data as the master sent it is what every write takes.
    """

    __slots__ = ("data_hi", "data_lo", "one_copy", "plain", "readers", "reads", "slaves", "wkc", "writes")

    def __init__(self, escs: list[Esc], cmd: int, laddr: int, length: int, base: int) -> None:
        self.slaves, self.reads, self.readers, self.writes = [], [], [], []
        self.wkc, self.plain, self.one_copy = 0, True, True
        self.data_lo, self.data_hi = base, base + length
        read_so_far: list[tuple[int, int]] = []
        for esc in escs:
            reads = (
                [(base + lo, base + hi, p) for lo, hi, p in esc.spans(laddr, length, write=False)]
                if cmd != Cmd.LWR
                else []
            )
            writes = (
                [(base + lo, base + hi, p) for lo, hi, p in esc.spans(laddr, length, write=True)]
                if cmd != Cmd.LRD
                else []
            )
            add = (1 if reads else 0) + ((2 if cmd == Cmd.LRW else 1) if writes else 0)
            if not add:
                continue
            self.slaves.append((esc, reads, writes, add))
            self.wkc += add
            for lo, hi, p in writes:
                self.plain = self.plain and esc.plain_write(p, hi - lo)
                self.one_copy = self.one_copy and not any(lo < r_hi and r_lo < hi for r_lo, r_hi in read_so_far)
                self.writes.append((esc, lo - base, hi - base, p))
            for lo, hi, p in reads:
                self.reads.append((lo, hi, esc.mem, p, p + hi - lo))
                read_so_far.append((lo, hi))
            if reads:
                self.readers.append(esc)


def _store(writes: list, data: bytearray) -> None:
    """Store the outputs of a logical datagram's *data* (:class:`_LogicalPlan`'s writes)."""
    for esc, lo, hi, p in writes:
        esc.store_outputs(p, data[lo:hi])


_EPOCH = operator.attrgetter("epoch")
_LOGICAL = frozenset({Cmd.LRD, Cmd.LWR, Cmd.LRW})
_POSITIONAL = frozenset({Cmd.APRD, Cmd.APWR, Cmd.APRW, Cmd.ARMW, Cmd.BRD, Cmd.BWR, Cmd.BRW})
_BROADCAST = frozenset({Cmd.BRD, Cmd.BWR, Cmd.BRW})
_CONFIGURED = frozenset({Cmd.FPRD, Cmd.FPWR, Cmd.FPRW, Cmd.FRMW})
_RMW = frozenset({Cmd.ARMW, Cmd.FRMW})
_READS = frozenset({Cmd.APRD, Cmd.FPRD, Cmd.BRD})
_U16 = struct.Struct("<H")
