"""The cyclic frame, built, sent and checked by softrt: freshness by construction (OS layer, Linux).

Why not SOEM's ``ecx_send_processdata``/``ecx_receive_processdata``: SOEM matches a reply to the
frame it waits for by the first datagram's index alone (16 indexes, ``nicdrv.c`` ``ecx_inframe``),
so a reply 16 frames late is taken for the current frame's: a valid working counter, a round trip
of a few µs and input data 16 cycles old (issue 20). softrt's cyclic frame says which frame it is::

    NOP   index 0xC0, data: the frame's sequence number (u64); slaves pass a NOP on untouched
          (ETG.1000.4 §5.4.1.2, Table 13: "slave ignores command")
    LRW   index 0xC0, logical [start, start + length): the process image SOEM mapped (outputs out,
          inputs back; :func:`read_layout` reads it back from the slaves' FMMUs)
    FRMW  index 0xC0, 0x0910 of the reference clock (with DC): its system time as the frame passed

and a reply is the cycle's answer only when it is well-formed, every datagram header comes back as
sent (command, index, address, length: a slave changes none of them for these commands) and the NOP
holds this frame's number. Before each send the socket is emptied: a reply for an earlier frame is
counted once as *late* (with its round trip), a second copy as a *duplicate*, a frame with a
changed header as *bad* (by kind), never as an answer. Frames of other masters or of SOEM's own
transactions (another first index) are left alone (*foreign*).

The frame goes out on a *link* (:mod:`.transport`). With ``af_packet`` (Linux's default) it is SOEM's own
socket (a duplicate of its descriptor): a second socket bound to EtherType 0x88A4 would receive a copy of every
reply, and SOEM's would fill with them. Its first index 0xC0 is above SOEM's (EC_MAXBUF = 16), so SOEM's own
receive drops it as not its own ("strange things happened" branch of ``ecx_inframe``). With ``pcap`` (Windows'
default: Npcap) it is a handle of softrt's own that sees only received frames of index 0xC0. Reads never block.
A frame that comes back byte for byte as it was sent with a working counter of 0 is this host's own frame read
back (a capture that taps the send path) or one no slave touched: *bad* (``echo``), never an answer.

Receive times are the kernel's where the link gives them (``SO_TIMESTAMPNS``, socket(7), or libpcap's; taken
when the reply entered this host's receive path): a reply that arrived before the deadline while this host was
stalled is an answer, not a lost frame, and the round trip is send → kernel receive, without the time this
process took to look. Where the link gives none (Npcap) the time it was read stands, which only ever judges late.
"""

from __future__ import annotations

import struct
import time
from dataclasses import dataclass

from ..schema.device import Frames
from .errors import EcatError
from .nsstat import NsStat
from .transport import as_link
from .wire import CYCLIC_INDEX, ETH_HEADER_BYTES, MAX_DATA_BYTES, Cmd, encode_frame, parse_frame

#: A reply's first-datagram index sits here (Ethernet header, EtherCAT header, command byte).
INDEX_BYTE = ETH_HEADER_BYTES + 2 + 1
#: The working counter when no fresh reply came by the deadline (SOEM's EC_NOFRAME).
NOFRAME = -1
#: Frames whose send time and fate are remembered (16 s at 250 µs; a reply later than that is
#: counted late without its round trip).
HISTORY = 65536
REG_DC_SYSTEM_TIME = 0x0910
REG_FMMU_COUNT, REG_FMMU0, FMMU_BYTES = 0x0004, 0x0600, 16
_MIN_FRAME = 60  # the Ethernet minimum without FCS: a NIC pads shorter frames

_U64 = struct.Struct("<Q")
_HEAD = struct.Struct("<BBI")  # command, index, address (ADP+ADO or logical)
_LEN = struct.Struct("<H")
_FMMU = struct.Struct("<IHBBHBBB3x")

# What became of each frame (per slot of the history ring).
_PENDING, _ANSWERED, _LATE = 0, 1, 2
#: Kinds of bad frames: a reply of ours (first index 0xC0) that cannot be this cycle's answer.
BAD_KINDS = ("short", "length", "command", "index", "address", "tag", "echo")


@dataclass(frozen=True)
class ImageLayout:
    """Where the process image lies on the bus: the LRW's logical window and each slave's share."""

    start: int  #: logical address of the first byte
    length: int  #: bytes
    outputs: dict[int, int]  #: slave position → offset of its outputs in the LRW data
    inputs: dict[int, int]  #: slave position → offset of its inputs


def read_layout(m, iface: str, read=lambda slave, reg, size: slave._fprd(reg, size)) -> ImageLayout:
    """Read the process image's layout back from every slave's FMMUs (after SOEM's ``config_map``).

    An FMMU (ETG.1000.4 §6.6, 16 bytes: logical start u32, length u16, start/stop bit, physical
    start u16, physical bit, type (1 read, 2 write), activate) maps a logical range onto the
    slave's process RAM; SOEM gives each slave one for its outputs and one for its inputs, sized
    as pysoem's ``slave.output``/``slave.input``. Reading them back makes the frame describe what
    the slaves were told, not a copy of SOEM's arithmetic. *read* is ``read(slave, register,
    size)`` (pysoem's FPRD; bring-up's retries it, :func:`.steps.read_register`).
    """
    outputs: dict[int, int] = {}
    inputs: dict[int, int] = {}
    spans: list[tuple[int, int]] = []
    for pos, s in enumerate(m.slaves):
        want = {2: len(s.output), 1: len(s.input)}
        if not any(want.values()):
            continue
        count = min(read(s, REG_FMMU_COUNT, 1)[0], 16) or 8
        raw = read(s, REG_FMMU0, FMMU_BYTES * count)
        found: dict[int, int] = {}
        for n in range(count):
            lstart, length, _sb, _eb, _phys, _pb, ftype, active = _FMMU.unpack_from(raw, FMMU_BYTES * n)
            if active & 1 and ftype in want and length == want[ftype] and ftype not in found:
                found[ftype] = lstart
        for ftype, table in ((2, outputs), (1, inputs)):
            if want[ftype]:
                if ftype not in found:
                    raise EcatError(
                        "config",
                        iface,
                        f"slave {pos} '{s.name}': no active FMMU maps its "
                        f"{want[ftype]} {'output' if ftype == 2 else 'input'} bytes",
                    )
                spans.append((found[ftype], found[ftype] + want[ftype]))
                table[pos] = found[ftype]
    if not spans:
        raise EcatError("config", iface, "no slave has process data mapped")
    start = min(a for a, _ in spans)
    length = max(b for _, b in spans) - start
    if length > MAX_DATA_BYTES - 64:
        raise EcatError(
            "config",
            iface,
            f"the process image takes {length} bytes; softrt's cyclic frame carries "
            f"at most {MAX_DATA_BYTES - 64} in one LRW",
            hint="map fewer PDOs",
        )
    return ImageLayout(
        start, length, {p: o - start for p, o in outputs.items()}, {p: o - start for p, o in inputs.items()}
    )


class CyclicFrame:
    """One EtherCAT frame per cycle on *sock* (a link of :mod:`.transport`, or a socket), checked on receipt.

    ``exchange(timeout_ns)`` returns the LRW's working counter from this frame's own reply, or
    :data:`NOFRAME`; after it ``rtt_ns`` (0 unless fresh) and ``dc_time`` hold what it brought.
    Outputs go into ``tx`` at ``data_at + offset``, inputs are read from ``rx`` at the same place.
    """

    def __init__(self, sock, layout: ImageLayout, dc_reference: int | None = None, clock=time.monotonic_ns) -> None:
        datagrams = [
            (Cmd.NOP, CYCLIC_INDEX, 0, 0, bytes(8)),
            (Cmd.LRW, CYCLIC_INDEX, layout.start & 0xFFFF, layout.start >> 16, bytes(layout.length)),
        ]
        if dc_reference is not None:
            datagrams.append((Cmd.FRMW, CYCLIC_INDEX, dc_reference, REG_DC_SYSTEM_TIME, bytes(8)))
        frame = encode_frame(datagrams)
        parsed = parse_frame(frame)
        self.frame_bytes = len(frame)  #: a reply must have at least this many
        self.tx = frame + bytes(max(0, _MIN_FRAME - len(frame)))
        self.rx = bytearray(2048)
        self.layout = layout
        self._tag_at = parsed[0].data_offset
        self.data_at = parsed[1].data_offset
        self._wkc_at = parsed[1].wkc_offset
        self._dc_at = parsed[2].data_offset if dc_reference is not None else None
        # What each datagram header must say on the way back: (offset, command, index, address, length word).
        self._heads = [
            (
                dg.header_offset,
                *_HEAD.unpack_from(frame, dg.header_offset),
                _LEN.unpack_from(frame, dg.header_offset + 6)[0],
            )
            for dg in parsed
        ]
        self._ecat_header = _LEN.unpack_from(frame, ETH_HEADER_BYTES)[0]
        self._link = as_link(sock)
        self._clock = clock
        self.seq = 0
        self._sent_ns = [0] * HISTORY
        self._fate = bytearray(HISTORY)
        self._deadline_ns = 0
        self._offset_ns = 0  # CLOCK_REALTIME - CLOCK_MONOTONIC at the last send
        self.rtt_ns = 0
        self.dc_time = 0
        self.wkc = NOFRAME
        #: Counters (``report``): frames sent, answered in time, unanswered; late replies, duplicates,
        #: bad frames by kind, foreign frames, failed sends (the last errno).
        self.sent = self.answered = self.unanswered = self.duplicates = self.foreign = 0
        self.send_errors = 0
        self.send_errno = 0
        self.late = NsStat()  # round trips of the late replies
        self.late_untimed = 0
        self.bad = dict.fromkeys(BAD_KINDS, 0)

    def exchange(self, timeout_ns: int) -> int:
        """Send the next frame and wait at most *timeout_ns* for its own reply; return its WKC or NOFRAME."""
        self.drain()
        clock = self._clock
        seq = self.seq + 1
        self.seq = seq
        slot = seq % HISTORY
        self._fate[slot] = _PENDING
        _U64.pack_into(self.tx, self._tag_at, seq)
        self.rtt_ns = 0
        self.wkc = NOFRAME
        t = clock()
        self._offset_ns = time.time_ns() - t
        self._sent_ns[slot] = t
        self._deadline_ns = deadline = t + timeout_ns
        try:
            self._link.send(self.tx)
        except OSError as err:  # ENETDOWN, ENXIO: the link is gone; the frame is unanswered
            self.send_errors += 1
            self.send_errno = err.errno or 0
            self.unanswered += 1
            return NOFRAME
        self.sent += 1
        receive = self._receive
        while True:
            got = receive()
            if got is None:
                if clock() >= deadline:
                    break
            elif got == _ANSWERED:
                return self.wkc
        # A stalled host may find the reply only now: its kernel receive time decides.
        while (got := receive()) is not None:
            if got == _ANSWERED:
                return self.wkc
        self.unanswered += 1
        return NOFRAME

    def drain(self) -> None:
        """Take every frame waiting on the socket (late replies, duplicates, foreign frames) and count it."""
        while self._receive() is not None:
            pass

    def _receive(self) -> int | None:
        """Read one frame if one is queued and classify it; None when none is."""
        got = self._link.receive_into(self.rx)
        if got is None:
            return None
        n, wall_ns = got
        at = wall_ns - self._offset_ns if wall_ns else 0
        now = self._clock()
        if not 0 < at <= now:  # no timestamp (or a clock step): when it was read
            at = now
        return self.classify(n, at)

    def classify(self, n: int, at_ns: int) -> int:
        """Judge the *n*-byte frame in ``rx``, received at *at_ns*; return its fate (or -1: not an answer)."""
        rx = self.rx
        if n < INDEX_BYTE + 1 or rx[12] != 0x88 or rx[13] != 0xA4 or rx[INDEX_BYTE] != CYCLIC_INDEX:
            self.foreign += 1
            return -1
        kind = self._bad_kind(n)
        if kind is not None:
            self.bad[kind] += 1
            return -1
        tag = _U64.unpack_from(rx, self._tag_at)[0]
        seq = self.seq
        if (
            tag == seq
            and _LEN.unpack_from(rx, self._wkc_at)[0] == 0
            and rx[: self.frame_bytes] == self.tx[: self.frame_bytes]
        ):
            self.bad["echo"] += 1  # this frame as it was sent: never its own answer
            return -1
        if tag == 0 or tag > seq:
            self.bad["tag"] += 1  # a number never sent: not a reply to this master
            return -1
        slot = tag % HISTORY
        if seq - tag >= HISTORY:  # too old to know its send time or whether it came already
            self.late_untimed += 1
            return _LATE
        fate = self._fate[slot]
        if fate != _PENDING:
            self.duplicates += 1
            return -1
        if tag == seq and at_ns <= self._deadline_ns:
            self._fate[slot] = _ANSWERED
            self.answered += 1
            self.rtt_ns = max(1, at_ns - self._sent_ns[slot])
            self.wkc = _LEN.unpack_from(rx, self._wkc_at)[0]
            if self._dc_at is not None:
                self.dc_time = _U64.unpack_from(rx, self._dc_at)[0]
            return _ANSWERED
        self._fate[slot] = _LATE
        self.late.add(at_ns - self._sent_ns[slot])
        return _LATE

    def _bad_kind(self, n: int) -> str | None:
        rx = self.rx
        if n < self.frame_bytes:
            return "short"
        if _LEN.unpack_from(rx, ETH_HEADER_BYTES)[0] != self._ecat_header:
            return "length"
        for at, cmd, idx, address, length in self._heads:
            got_cmd, got_idx, got_address = _HEAD.unpack_from(rx, at)
            if got_cmd != cmd:
                return "command"
            if got_idx != idx:
                return "index"
            if got_address != address:
                return "address"
            if _LEN.unpack_from(rx, at + 6)[0] != length:
                return "length"
        return None

    def report(self) -> Frames:
        """Frames sent and how each ended (the board's ``frames`` block; docs/ethercat.md)."""
        return Frames(
            sent=self.sent,
            answered=self.answered,
            unanswered=self.unanswered,
            late=self.late.n + self.late_untimed,
            late_rtt_us=self.late.summary_us(),
            duplicates=self.duplicates,
            bad={k: v for k, v in self.bad.items() if v},
            foreign=self.foreign,
            send_errors=self.send_errors,
        )
