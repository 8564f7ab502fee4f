"""EtherCAT frames and datagrams on the wire (pure encode/decode; no I/O, no state).

Layout (ETG.1000.4 §5.3 "Frame structure", §5.4 "EtherCAT PDU structure")::

    Ethernet header (14 B, EtherType 0x88A4)
    EtherCAT header u16: length of the datagrams in bits 0-10, type (1 = EtherCAT PDUs) in bits 12-15
    datagram*: cmd u8 | idx u8 | address u32 | len u16 | irq u16 | data[len] | wkc u16
               len: bits 0-10 data length, bit 14 circulating, bit 15 "more datagrams follow"
               address: ADP u16 + ADO u16 (position/node/broadcast) or a 32-bit logical address

All integers are little-endian. A :class:`Datagram` describes where a datagram sits in a frame, so
a slave can edit data and working counter in place and send the same bytes back (SOEM matches
replies by the index byte and copies the whole buffer back, ``nicdrv.c`` ``ecx_inframe``).
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass

ETH_P_ECAT = 0x88A4
ETH_HEADER_BYTES = 14
ECAT_HEADER_BYTES = 2
DATAGRAM_HEADER_BYTES = 10
WKC_BYTES = 2
ECAT_TYPE_PDU = 1
#: Largest datagram data (1500-byte payload minus headers), ETG.1000.4 §5.4.
MAX_DATA_BYTES = 1486

_LEN_MASK = 0x07FF
_CIRCULATING = 0x4000
_MORE = 0x8000

_ETH = struct.Struct("<6s6sH")  # the EtherType is big-endian: read it separately
_HDR = struct.Struct("<BBHHHH")  # cmd, idx, adp/laddr-lo, ado/laddr-hi, len, irq
_U16 = struct.Struct("<H")


class Cmd(enum.IntEnum):
    """Datagram command types (ETG.1000.4 §5.4.1.2, Table 13)."""

    NOP = 0
    APRD = 1
    APWR = 2
    APRW = 3
    FPRD = 4
    FPWR = 5
    FPRW = 6
    BRD = 7
    BWR = 8
    BRW = 9
    LRD = 10
    LWR = 11
    LRW = 12
    ARMW = 13
    FRMW = 14


#: Commands addressed by position (auto-increment): every slave increments ADP.
AUTO_INCREMENT = frozenset({Cmd.APRD, Cmd.APWR, Cmd.APRW, Cmd.ARMW})
#: Commands addressed by configured station address (register 0x0010).
CONFIGURED = frozenset({Cmd.FPRD, Cmd.FPWR, Cmd.FPRW, Cmd.FRMW})
BROADCAST = frozenset({Cmd.BRD, Cmd.BWR, Cmd.BRW})
LOGICAL = frozenset({Cmd.LRD, Cmd.LWR, Cmd.LRW})


class FrameError(ValueError):
    """A frame that is not a well-formed EtherCAT frame (it is dropped, as an ESC would)."""


@dataclass(slots=True)
class Datagram:
    """Where one datagram lives in a frame buffer (offsets are into that buffer)."""

    cmd: int
    idx: int
    adp: int  #: position / station address (or the low half of a logical address)
    ado: int  #: register offset (or the high half of a logical address)
    length: int  #: data bytes
    header_offset: int
    more: bool
    circulating: bool

    @property
    def data_offset(self) -> int:
        return self.header_offset + DATAGRAM_HEADER_BYTES

    @property
    def wkc_offset(self) -> int:
        return self.data_offset + self.length

    @property
    def logical_address(self) -> int:
        return self.adp | (self.ado << 16)


def parse_frame(frame: bytes | bytearray | memoryview) -> list[Datagram]:
    """Return the datagrams of an Ethernet frame carrying EtherCAT; raise :class:`FrameError`."""
    if len(frame) < ETH_HEADER_BYTES + ECAT_HEADER_BYTES + DATAGRAM_HEADER_BYTES + WKC_BYTES:
        raise FrameError(f"frame of {len(frame)} bytes is too short for one datagram")
    ethertype = (frame[12] << 8) | frame[13]
    if ethertype != ETH_P_ECAT:
        raise FrameError(f"EtherType 0x{ethertype:04x} is not EtherCAT (0x88a4)")
    (ecat,) = _U16.unpack_from(frame, ETH_HEADER_BYTES)
    if ecat >> 12 != ECAT_TYPE_PDU:
        raise FrameError(f"EtherCAT header type {ecat >> 12} is not 1 (PDUs)")
    end = ETH_HEADER_BYTES + ECAT_HEADER_BYTES + (ecat & _LEN_MASK)
    if end > len(frame):
        raise FrameError(f"EtherCAT header claims {ecat & _LEN_MASK} bytes, frame has {len(frame)}")
    out: list[Datagram] = []
    pos = ETH_HEADER_BYTES + ECAT_HEADER_BYTES
    while True:
        if pos + DATAGRAM_HEADER_BYTES + WKC_BYTES > end:
            raise FrameError(f"datagram at byte {pos} runs past the EtherCAT payload")
        cmd, idx, adp, ado, lenw, _irq = _HDR.unpack_from(frame, pos)
        length = lenw & _LEN_MASK
        if pos + DATAGRAM_HEADER_BYTES + length + WKC_BYTES > end:
            raise FrameError(f"datagram at byte {pos} ({length} data bytes) runs past the payload")
        more = bool(lenw & _MORE)
        out.append(Datagram(cmd, idx, adp, ado, length, pos, more, bool(lenw & _CIRCULATING)))
        pos += DATAGRAM_HEADER_BYTES + length + WKC_BYTES
        if not more:
            return out


def read_wkc(frame: bytes | bytearray, dg: Datagram) -> int:
    """Return the working counter of *dg*."""
    return _U16.unpack_from(frame, dg.wkc_offset)[0]


def write_wkc(frame: bytearray, dg: Datagram, wkc: int) -> None:
    """Store the working counter of *dg* (wraps at 16 bits, as the ESC counter does)."""
    _U16.pack_into(frame, dg.wkc_offset, wkc & 0xFFFF)


def write_adp(frame: bytearray, dg: Datagram, adp: int) -> None:
    """Store the ADP field of *dg* (auto-increment commands count it up at every slave)."""
    _U16.pack_into(frame, dg.header_offset + 2, adp & 0xFFFF)


def encode_datagram(cmd: int, idx: int, adp: int, ado: int, data: bytes, more: bool, wkc: int = 0) -> bytes:
    """Return one encoded datagram (for masters and tests)."""
    if len(data) > MAX_DATA_BYTES:
        raise FrameError(f"datagram data of {len(data)} bytes exceeds {MAX_DATA_BYTES}")
    lenw = len(data) | (_MORE if more else 0)
    return _HDR.pack(cmd, idx, adp & 0xFFFF, ado & 0xFFFF, lenw, 0) + bytes(data) + _U16.pack(wkc)


def encode_frame(
    datagrams: list[tuple[int, int, int, int, bytes]],
    src_mac: bytes = b"\x01\x01\x01\x01\x01\x01",
    dst_mac: bytes = b"\xff" * 6,
) -> bytearray:
    """Return an Ethernet frame with the datagrams ``(cmd, idx, adp, ado, data)`` (for masters and tests)."""
    body = b"".join(
        encode_datagram(c, i, p, o, d, n < len(datagrams) - 1) for n, (c, i, p, o, d) in enumerate(datagrams)
    )
    ecat = _U16.pack(len(body) | (ECAT_TYPE_PDU << 12))
    return bytearray(dst_mac + src_mac + ETH_P_ECAT.to_bytes(2, "big") + ecat + body)


#: First-datagram index of the cyclic frame (SOEM's stay below EC_MAXBUF, 16; the DC probe has 0xDC).
CYCLIC_INDEX = 0xC0
