"""Frame layouts the simulator has seen, found again by their header bytes (ecatsim layer).

A master sends a few frames over and over: the cyclic process-data frame, a distributed-clock
probe, a status read. Each time the same datagram headers (command, index, address, length,
flags: ETG.1000.4 §5.4), only the data and working counters differ. So a frame whose length and
header bytes equal a recent one's is that layout again: its datagrams need no parsing
(:func:`softrt.ethercat.wire.parse_frame`) and the handlers the segment chose for them
(:meth:`.bus.Segment.compile`) serve it. A frame that differs in any header byte is parsed
afresh, and a malformed one is never kept.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..ethercat.wire import DATAGRAM_HEADER_BYTES, ETH_HEADER_BYTES, LOGICAL, Datagram, parse_frame

#: The EtherType and the EtherCAT header (its length field included), before the first datagram.
_FRAME_HEADER = slice(ETH_HEADER_BYTES - 2, ETH_HEADER_BYTES + 2)


@dataclass(slots=True)
class Layout:
    """One frame layout: where its datagrams are, and what the segment made of them."""

    size: int  #: the frame's length in bytes
    frame_header: bytes  #: EtherType and EtherCAT header
    headers: tuple[tuple[int, bytes], ...]  #: (offset, the 10 header bytes) per datagram
    datagrams: list[Datagram]
    pd: Datagram | None  #: its first logical datagram (process data), if any
    #: :meth:`.bus.Segment.compile`'s steps (None: not yet).
    steps: list | None = field(default=None)

    def matches(self, frame: bytearray) -> bool:
        """Is *frame* this layout (same length, same header bytes)?"""
        if len(frame) != self.size or frame[_FRAME_HEADER] != self.frame_header:
            return False
        for at, header in self.headers:
            if frame[at : at + DATAGRAM_HEADER_BYTES] != header:
                return False
        return True


class Layouts:
    """The last *keep* layouts seen, the most recent first."""

    def __init__(self, keep: int = 8) -> None:
        self.keep = keep
        self._recent: list[Layout] = []
        self.hits = self.misses = 0

    def find(self, frame: bytearray) -> Layout:
        """Return *frame*'s layout (raises :class:`~softrt.ethercat.wire.FrameError` for a
        malformed frame, which is not kept)."""
        recent = self._recent
        for n, layout in enumerate(recent):
            if layout.matches(frame):
                if n:
                    recent.insert(0, recent.pop(n))
                self.hits += 1
                return layout
        datagrams = parse_frame(frame)
        self.misses += 1
        layout = Layout(
            len(frame),
            bytes(frame[_FRAME_HEADER]),
            tuple(
                (dg.header_offset, bytes(frame[dg.header_offset : dg.header_offset + DATAGRAM_HEADER_BYTES]))
                for dg in datagrams
            ),
            datagrams,
            next((dg for dg in datagrams if dg.cmd in LOGICAL), None),
        )
        recent.insert(0, layout)
        del recent[self.keep :]
        return layout
