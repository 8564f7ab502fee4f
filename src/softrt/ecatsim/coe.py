"""CoE (CANopen over EtherCAT) SDO server for a slave's object dictionary (mailbox layer).

Mailbox header (ETG.1000.4 §5.6, 6 bytes): length u16 (bytes after the header), address u16,
channel/priority u8, type (bits 0-3; 3 = CoE) and counter (bits 4-6) u8. CoE header u16
(ETG.1000.6 §5.6.1): number bits 0-8, service bits 12-15 (2 = SDO request, 3 = SDO response).
SDO (ETG.1000.6 §5.6.2, the CiA 301 SDO protocol): command u8, index u16, subindex u8, data.

Supported: expedited and normal upload, segmented upload (for objects larger than the mailbox),
expedited and normal download; an abort (command 0x80, CiA 301 §7.2.4.3.17 codes) for the rest.
Not supported: complete access, segmented download, SDO information, emergencies.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

MBX_TYPE_COE = 3
COE_SDO_REQUEST, COE_SDO_RESPONSE = 2, 3
ABORT_TOGGLE = 0x05030000
ABORT_COMMAND = 0x05040001
ABORT_UNSUPPORTED_ACCESS = 0x06010000
ABORT_READ_ONLY = 0x06010002
ABORT_NO_OBJECT = 0x06020000
ABORT_LENGTH = 0x06070010
ABORT_NO_SUBINDEX = 0x06090011
ABORT_VALUE_RANGE = 0x06090030
ABORT_DEVICE_STATE = 0x08000022

_MBX = struct.Struct("<HHBB")
_SDO = struct.Struct("<HBHB")  # CoE header, command, index, subindex


class SdoAbort(Exception):
    """Raised by an object's accessor to abort a transfer with a CiA 301 abort code."""

    def __init__(self, code: int) -> None:
        super().__init__(f"SDO abort 0x{code:08x}")
        self.code = code


@dataclass
class ObjectEntry:
    """One (index, subindex): its size, and how to read/write it (``writer`` None = read-only)."""

    size: int  #: bytes (0 = variable, e.g. a string)
    reader: object  #: () -> bytes
    writer: object = None  #: (bytes) -> None, may raise SdoAbort


@dataclass
class ObjectDictionary:
    """``{(index, subindex): ObjectEntry}``."""

    entries: dict[tuple[int, int], ObjectEntry] = field(default_factory=dict)

    def add(self, index: int, sub: int, size: int, reader, writer=None) -> None:
        self.entries[(index, sub)] = ObjectEntry(size, reader, writer)

    def add_value(self, index: int, sub: int, fmt: str, value: int, writable: bool = False) -> None:
        """Add a plain stored value of struct format *fmt*."""
        s = struct.Struct("<" + fmt)
        cell = [value]
        writer = (lambda b: cell.__setitem__(0, s.unpack(b)[0])) if writable else None
        self.add(index, sub, s.size, lambda: s.pack(cell[0]), writer)

    def upload(self, index: int, sub: int) -> bytes:
        entry = self._find(index, sub)
        return bytes(entry.reader())

    def download(self, index: int, sub: int, data: bytes) -> None:
        entry = self._find(index, sub)
        if entry.writer is None:
            raise SdoAbort(ABORT_READ_ONLY)
        if entry.size and len(data) != entry.size:
            raise SdoAbort(ABORT_LENGTH)
        entry.writer(data)

    def _find(self, index: int, sub: int) -> ObjectEntry:
        entry = self.entries.get((index, sub))
        if entry is None:
            if any(i == index for i, _ in self.entries):
                raise SdoAbort(ABORT_NO_SUBINDEX)
            raise SdoAbort(ABORT_NO_OBJECT)
        return entry


class CoeServer:
    """Answers CoE SDO mailbox requests against an :class:`ObjectDictionary`."""

    def __init__(self, od: ObjectDictionary, mailbox_bytes: int) -> None:
        self.od = od
        self.mailbox_bytes = mailbox_bytes
        self._upload: tuple[int, int, bytes, int] | None = None  # index, sub, data, toggle
        self.requests = 0
        self.aborts = 0

    def handle(self, request: bytes) -> list[bytes]:
        """Return the mailbox responses to one mailbox request (CoE SDO only; others are ignored)."""
        length, _addr, _chan, mtype = _MBX.unpack_from(request, 0)
        if mtype & 0x0F != MBX_TYPE_COE or length < 10:
            return []
        coe, cmd, index, sub = _SDO.unpack_from(request, 6)
        if coe >> 12 != COE_SDO_REQUEST:
            return []
        self.requests += 1
        counter = mtype & 0x70
        body = request[12:6 + length]
        try:
            return [self._reply(counter, sdo) for sdo in [self._sdo(cmd, index, sub, body)]]
        except SdoAbort as abort:
            self.aborts += 1
            self._upload = None
            # An abort travels as an "SDO request" (ETG.1000.6 §5.6.2.7; SOEM checks for it there).
            return [self._reply(counter, struct.pack("<BHBI", 0x80, index, sub, abort.code), COE_SDO_REQUEST)]

    def _reply(self, counter: int, sdo: bytes, service: int = COE_SDO_RESPONSE) -> bytes:
        payload = struct.pack("<H", service << 12) + sdo
        return _MBX.pack(len(payload), 0, 0, MBX_TYPE_COE | counter) + payload

    def _sdo(self, cmd: int, index: int, sub: int, body: bytes) -> bytes:
        ccs = cmd >> 5
        if cmd & 0x10 and ccs in (1, 2):  # complete access
            raise SdoAbort(ABORT_UNSUPPORTED_ACCESS)
        if ccs == 2:  # initiate upload
            data = self.od.upload(index, sub)
            if len(data) <= 4:
                return struct.pack("<BHB", 0x43 | ((4 - len(data)) << 2), index, sub) + data.ljust(4, b"\0")
            room = self.mailbox_bytes - 6 - 10
            if len(data) > room:
                self._upload = (index, sub, data[room:], 0)
            return struct.pack("<BHBI", 0x41, index, sub, len(data)) + data[:room]
        if ccs == 3:  # upload segment (CiA 301 §7.2.4.3.6): toggle bit 4, last = bit 0
            if self._upload is None:
                raise SdoAbort(ABORT_COMMAND)
            u_index, u_sub, rest, toggle = self._upload
            if cmd & 0x10 != toggle:
                raise SdoAbort(ABORT_TOGGLE)
            room = self.mailbox_bytes - 6 - 3
            chunk, rest = rest[:room], rest[room:]
            last = 0x01 if not rest else 0
            self._upload = None if last else (u_index, u_sub, rest, toggle ^ 0x10)
            pad = max(0, 7 - len(chunk))
            seg = bytes([toggle | last | (pad << 1 if last else 0)]) + chunk.ljust(7, b"\0")
            return seg
        if ccs == 1:  # initiate download
            if cmd & 0x02:  # expedited: 4 - n bytes in the data field
                n = (cmd >> 2) & 0x03 if cmd & 0x01 else 0
                data = body[:4 - n]
            else:
                (size,) = struct.unpack_from("<I", body, 0)
                data = body[4:4 + size]
                if len(data) != size:
                    raise SdoAbort(ABORT_COMMAND)  # a segmented download would follow: not supported
            self.od.download(index, sub, bytes(data))
            return struct.pack("<BHBI", 0x60, index, sub, 0)
        raise SdoAbort(ABORT_COMMAND)
