"""CoE (CANopen over EtherCAT) server for a slave's object dictionary (mailbox layer).

Mailbox header (ETG.1000.4 §5.6, 6 bytes): length u16 (bytes after the header), address u16,
channel/priority u8, type (bits 0-3; 3 = CoE) and counter (bits 4-6) u8. CoE header u16
(ETG.1000.6 §5.6.1): number bits 0-8, service bits 12-15 (1 = emergency, 2 = SDO request,
3 = SDO response, 8 = SDO information).

* SDO (ETG.1000.6 §5.6.2, the CiA 301 SDO protocol; command u8, index u16, subindex u8, data):
  expedited, normal and segmented upload and download, and *complete access* (command bit 4,
  §5.6.2.1.2: the whole object in one transfer; from subindex 0, that subindex travels as 16
  bits, u8 plus a padding byte, as SOEM's ``ec_PDOassignt`` expects). A server built with
  ``ca_abort`` answers complete access with an abort (0x06010000), as some real slaves do
  although their SII announces it. Anything else is answered with an abort (CiA 301 §7.2.4.3.17
  codes).
* SDO information (§5.6.3): header opcode u8 (bit 7: more fragments follow), reserved u8,
  fragments left u16. Get OD list (1 → 2: list type, then the indices, fragmented to the mailbox
  size), get object description (3 → 4: index, data type, max subindex, object code, name), get
  entry description (5 → 6: index, subindex, value info, data type, bit length, access, name),
  and the SDO information error (7: an abort code).
* Emergency (§5.6.4): CoE header, error code u16, error register u8, 5 bytes of manufacturer
  data; sent unsolicited (:func:`emergency_message`), e.g. when a drive faults.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

MBX_TYPE_COE = 3
COE_EMERGENCY, COE_SDO_REQUEST, COE_SDO_RESPONSE, COE_SDO_INFO = 1, 2, 3, 8
INFO_OD_LIST_REQ, INFO_OD_LIST_RES, INFO_OD_REQ, INFO_OD_RES = 1, 2, 3, 4
INFO_OE_REQ, INFO_OE_RES, INFO_ERROR = 5, 6, 7
OBJECT_VAR, OBJECT_ARRAY, OBJECT_RECORD = 7, 8, 9  # object codes (ETG.1000.6 Table 60)
#: Entry access bits (ETG.1000.6 Table 63): read in PREOP/SAFEOP/OP, write in PREOP/SAFEOP/OP,
#: mappable in an RxPDO / TxPDO.
ACCESS_READ, ACCESS_WRITE, ACCESS_WRITE_PREOP = 0x0007, 0x0038, 0x0008
ACCESS_RXPDO, ACCESS_TXPDO = 0x0040, 0x0080
VISIBLE_STRING = 0x0009

ABORT_TOGGLE = 0x05030000
ABORT_COMMAND = 0x05040001
ABORT_UNSUPPORTED_ACCESS = 0x06010000
ABORT_SUB0_NOT_ZERO = 0x06010003  # "subindex cannot be written, SI0 must be 0 for write access"
ABORT_READ_ONLY = 0x06010002
ABORT_NO_OBJECT = 0x06020000
ABORT_NOT_MAPPABLE = 0x06040041
ABORT_PDO_LENGTH = 0x06040042
ABORT_LENGTH = 0x06070010
ABORT_NO_SUBINDEX = 0x06090011
ABORT_VALUE_RANGE = 0x06090030
ABORT_DEVICE_STATE = 0x08000022

_MBX = struct.Struct("<HHBB")
_SDO = struct.Struct("<BHB")  # command, index, subindex
_INFO = struct.Struct("<HBBH")  # CoE header, opcode, reserved, fragments left
#: CoE data types by struct format (ETG.1000.6 Table 64).
DATA_TYPES = {"b": 0x0002, "h": 0x0003, "i": 0x0004, "B": 0x0005, "H": 0x0006, "I": 0x0007}


class SdoAbort(Exception):
    """Raised by an object's accessor to abort a transfer with a CiA 301 abort code."""

    def __init__(self, code: int) -> None:
        super().__init__(f"SDO abort 0x{code:08x}")
        self.code = code


@dataclass
class ObjectEntry:
    """One (index, subindex): its size, how to read/write it (``writer`` None = read-only) and
    what the SDO information service says about it."""

    size: int  #: bytes (0 = variable, e.g. a string)
    reader: object  #: () -> bytes
    writer: object = None  #: (bytes) -> None, may raise SdoAbort
    data_type: int = 0
    name: str = ""
    access: int = 0  #: ACCESS_* bits; 0 = derived (read always, write when there is a writer)

    def access_bits(self) -> int:
        return self.access or (ACCESS_READ | (ACCESS_WRITE if self.writer is not None else 0))


@dataclass
class ObjectDictionary:
    """``{(index, subindex): ObjectEntry}`` plus the objects' names (for SDO information)."""

    entries: dict[tuple[int, int], ObjectEntry] = field(default_factory=dict)
    names: dict[int, str] = field(default_factory=dict)

    def add(
        self,
        index: int,
        sub: int,
        size: int,
        reader,
        writer=None,
        *,
        data_type: int = 0,
        name: str = "",
        access: int = 0,
    ) -> ObjectEntry:
        entry = ObjectEntry(size, reader, writer, data_type, name, access)
        self.entries[(index, sub)] = entry
        return entry

    def add_value(
        self, index: int, sub: int, fmt: str, value: int, writable: bool = False, *, name: str = "", access: int = 0
    ) -> ObjectEntry:
        """Add a plain stored value of struct format *fmt*."""
        s = struct.Struct("<" + fmt)
        cell = [value]
        writer = (lambda b: cell.__setitem__(0, s.unpack(b)[0])) if writable else None
        return self.add(
            index, sub, s.size, lambda: s.pack(cell[0]), writer, data_type=DATA_TYPES[fmt], name=name, access=access
        )

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

    def indices(self) -> list[int]:
        return sorted({i for i, _ in self.entries})

    def subindices(self, index: int) -> list[int]:
        return sorted(s for i, s in self.entries if i == index)

    # --- complete access (ETG.1000.6 §5.6.2.1.2) --------------------------------------------
    def _record_subs(self, index: int) -> list[int]:
        subs = self.subindices(index)
        if not subs or subs[0] != 0 or len(subs) < 2 or self.entries[(index, 0)].size != 1:
            raise SdoAbort(ABORT_UNSUPPORTED_ACCESS)  # not an array/record with a count in subindex 0
        if any(not self.entries[(index, s)].size for s in subs[1:]):
            raise SdoAbort(ABORT_UNSUPPORTED_ACCESS)  # variable-length entries cannot be packed
        return subs[1:]

    def upload_complete(self, index: int, from_sub: int) -> bytes:
        """Return subindex 0 (as 16 bits) when *from_sub* is 0, then subindices 1..n packed."""
        subs = self._record_subs(index)
        count = self.upload(index, 0)[0]
        data = bytes([count, 0]) if from_sub == 0 else b""
        return data + b"".join(self.upload(index, s) for s in subs if s <= count)

    def download_complete(self, index: int, from_sub: int, data: bytes) -> None:
        """Write the whole object as one transfer: subindex 0 to 0, the entries, then the count."""
        subs = self._record_subs(index)
        if from_sub == 0:
            if len(data) < 2:
                raise SdoAbort(ABORT_LENGTH)
            count, data = data[0], data[2:]
        else:
            count = len(data) // self.entries[(index, subs[0])].size if subs else 0
        if count > len(subs) or sum(self.entries[(index, s)].size for s in subs[:count]) != len(data):
            raise SdoAbort(ABORT_LENGTH)
        count_writable = self.entries[(index, 0)].writer is not None
        if count_writable:
            self.download(index, 0, b"\x00")
        pos = 0
        for s in subs[:count]:
            size = self.entries[(index, s)].size
            self.download(index, s, data[pos : pos + size])
            pos += size
        if count_writable:
            self.download(index, 0, bytes([count]))

    def _find(self, index: int, sub: int) -> ObjectEntry:
        entry = self.entries.get((index, sub))
        if entry is None:
            if any(i == index for i, _ in self.entries):
                raise SdoAbort(ABORT_NO_SUBINDEX)
            raise SdoAbort(ABORT_NO_OBJECT)
        return entry

    # --- SDO information ---------------------------------------------------------------------
    def describe(self, index: int) -> tuple[int, int, int, str]:
        """Return ``(data type, max subindex, object code, name)`` of *index*."""
        subs = self.subindices(index)
        if not subs:
            raise SdoAbort(ABORT_NO_OBJECT)
        name = self.names.get(index, "")
        if subs == [0]:
            return self.entries[(index, 0)].data_type, 0, OBJECT_VAR, name
        types = {self.entries[(index, s)].data_type for s in subs if s}
        if len(types) == 1:
            return types.pop(), subs[-1], OBJECT_ARRAY, name
        return 0, subs[-1], OBJECT_RECORD, name


def emergency_message(error_code: int, error_register: int, data: bytes = b"") -> bytes:
    """Return an emergency mailbox message (ETG.1000.6 §5.6.4; CiA 301 §7.2.7.3.1)."""
    payload = struct.pack("<HHB", COE_EMERGENCY << 12, error_code, error_register) + data[:5].ljust(5, b"\0")
    return _MBX.pack(len(payload), 0, 0, MBX_TYPE_COE) + payload


@dataclass
class CoeCounters:
    """What the server was asked (reported by the simulator's ``stats``)."""

    requests: int = 0
    aborts: int = 0
    complete_access: int = 0
    segmented_downloads: int = 0
    info_requests: int = 0
    emergencies: int = 0


class CoeServer:
    """Answers CoE mailbox requests against an :class:`ObjectDictionary` (module docstring)."""

    def __init__(self, od: ObjectDictionary, mailbox_bytes: int, ca_abort: bool = False) -> None:
        self.od = od
        self.mailbox_bytes = mailbox_bytes
        self.ca_abort = ca_abort
        self._upload: tuple[int, int, bytes, int] | None = None  # index, sub, rest, toggle
        self._download: tuple[int, int, bool, int, bytearray, int] | None = None  # index, sub, ca, size, data, toggle
        self.counters = CoeCounters()

    @property
    def requests(self) -> int:
        return self.counters.requests

    def handle(self, request: bytes) -> list[bytes]:
        """Return the mailbox responses to one mailbox request (CoE only; others are ignored)."""
        if len(request) < 8:
            return []
        length, _addr, _chan, mtype = _MBX.unpack_from(request, 0)
        if mtype & 0x0F != MBX_TYPE_COE or length < 2:
            return []
        (coe,) = struct.unpack_from("<H", request, 6)
        counter = mtype & 0x70
        body = request[8 : 6 + length]
        if coe >> 12 == COE_SDO_INFO:
            self.counters.info_requests += 1
            return self._info(counter, body)
        if coe >> 12 != COE_SDO_REQUEST or len(body) < 4:
            return []
        self.counters.requests += 1
        cmd, index, sub = _SDO.unpack_from(body, 0)
        if cmd == 0x80:  # the master aborts the transfer under way: no answer (CiA 301 §7.2.4.3.17)
            self._upload = self._download = None
            return []
        if cmd >> 5 == 0 and self._download is not None:  # a download segment: index/sub are data
            index, sub = self._download[0], self._download[1]
        try:
            return [self._reply(counter, self._sdo(cmd, index, sub, body))]
        except SdoAbort as abort:
            self.counters.aborts += 1
            self._upload = self._download = None
            # An abort travels as an "SDO request" (ETG.1000.6 §5.6.2.7; SOEM checks for it there).
            return [self._reply(counter, struct.pack("<BHBI", 0x80, index, sub, abort.code), COE_SDO_REQUEST)]

    def emergency(self, error_code: int, error_register: int, data: bytes = b"") -> bytes:
        """Return an emergency message to send (counted)."""
        self.counters.emergencies += 1
        return emergency_message(error_code, error_register, data)

    def _reply(self, counter: int, sdo: bytes, service: int = COE_SDO_RESPONSE) -> bytes:
        payload = struct.pack("<H", service << 12) + sdo
        return _MBX.pack(len(payload), 0, 0, MBX_TYPE_COE | counter) + payload

    def _sdo(self, cmd: int, index: int, sub: int, body: bytes) -> bytes:
        ccs = cmd >> 5
        complete = bool(cmd & 0x10) and ccs in (1, 2)
        if complete:
            self.counters.complete_access += 1
            if self.ca_abort:
                raise SdoAbort(ABORT_UNSUPPORTED_ACCESS)
        if ccs == 2:  # initiate upload
            data = self.od.upload_complete(index, sub) if complete else self.od.upload(index, sub)
            ca_bit = 0x10 if complete else 0
            if len(data) <= 4 and not complete:
                return struct.pack("<BHB", 0x43 | ((4 - len(data)) << 2), index, sub) + data.ljust(4, b"\0")
            room = self.mailbox_bytes - 6 - 10
            if len(data) > room:
                self._upload = (index, sub, data[room:], 0)
            return struct.pack("<BHBI", 0x41 | ca_bit, index, sub, len(data)) + data[:room]
        if ccs == 3:  # upload segment (CiA 301 §7.2.4.3.6): toggle bit 4, last = bit 0
            return self._upload_segment(cmd)
        if ccs == 1:  # initiate download
            if cmd & 0x02:  # expedited: 4 - n bytes in the data field
                n = (cmd >> 2) & 0x03 if cmd & 0x01 else 0
                self._store(index, sub, complete, bytes(body[4 : 8 - n]))
                return struct.pack("<BHBI", 0x60, index, sub, 0)
            (size,) = struct.unpack_from("<I", body, 4)
            data = bytes(body[8 : 8 + size])
            if len(data) < size:  # segments follow (CiA 301 §7.2.4.3.3)
                self._download = (index, sub, complete, size, bytearray(data), 0)
                self.counters.segmented_downloads += 1
            else:
                self._store(index, sub, complete, data)
            return struct.pack("<BHBI", 0x60, index, sub, 0)
        if ccs == 0:  # download segment: toggle bit 4, n (bits 1-3) bytes unused of 7, last = bit 0
            return self._download_segment(cmd, body)
        raise SdoAbort(ABORT_COMMAND)

    def _store(self, index: int, sub: int, complete: bool, data: bytes) -> None:
        if complete:
            self.od.download_complete(index, sub, data)
        else:
            self.od.download(index, sub, data)

    def _upload_segment(self, cmd: int) -> bytes:
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
        return bytes([toggle | last | (pad << 1 if last else 0)]) + chunk.ljust(7, b"\0")

    def _download_segment(self, cmd: int, body: bytes) -> bytes:
        if self._download is None:
            raise SdoAbort(ABORT_COMMAND)
        index, sub, complete, size, data, toggle = self._download
        if cmd & 0x10 != toggle:
            raise SdoAbort(ABORT_TOGGLE)
        chunk = body[1:]
        if cmd & 0x01 and len(chunk) == 7:  # a short last segment: 7 - n bytes are data
            chunk = chunk[: 7 - ((cmd >> 1) & 0x07)]
        data += chunk
        if len(data) > size:
            raise SdoAbort(ABORT_LENGTH)
        if cmd & 0x01:
            self._download = None
            if len(data) != size:
                raise SdoAbort(ABORT_LENGTH)
            self._store(index, sub, complete, bytes(data))
        else:
            self._download = (index, sub, complete, size, data, toggle ^ 0x10)
        return bytes([0x20 | toggle]) + bytes(7)

    # --- SDO information (ETG.1000.6 §5.6.3) ---------------------------------------------------
    def _info(self, counter: int, body: bytes) -> list[bytes]:
        opcode = body[0] & 0x7F if body else 0
        data = bytes(body[4:])
        try:
            if opcode == INFO_OD_LIST_REQ and len(data) >= 2:
                (list_type,) = struct.unpack_from("<H", data, 0)
                wanted = self.od.indices() if list_type == 1 else self._mappable(list_type)
                return self._fragments(
                    counter,
                    INFO_OD_LIST_RES,
                    struct.pack("<H", list_type) + b"".join(struct.pack("<H", i) for i in wanted),
                )
            if opcode == INFO_OD_REQ and len(data) >= 2:
                (index,) = struct.unpack_from("<H", data, 0)
                dtype, max_sub, code, name = self.od.describe(index)
                return self._fragments(
                    counter, INFO_OD_RES, struct.pack("<HHBB", index, dtype, max_sub, code) + name.encode()[:64]
                )
            if opcode == INFO_OE_REQ and len(data) >= 4:
                index, sub, value_info = struct.unpack_from("<HBB", data, 0)
                entry = self.od._find(index, sub)
                bits = 8 * (entry.size or len(entry.reader()))
                dtype = entry.data_type or (VISIBLE_STRING if not entry.size else 0)
                # Only the value-info bits that add no fields (0-2) are answered.
                return self._fragments(
                    counter,
                    INFO_OE_RES,
                    struct.pack("<HBBHHH", index, sub, value_info & 0x07, dtype, bits, entry.access_bits())
                    + entry.name.encode()[:64],
                )
            raise SdoAbort(ABORT_COMMAND)
        except SdoAbort as abort:
            self.counters.aborts += 1
            return [self._info_message(counter, INFO_ERROR, 0, struct.pack("<I", abort.code))]

    def _mappable(self, list_type: int) -> list[int]:
        """List types 2 (RxPDO-mappable) and 3 (TxPDO-mappable); others are empty here."""
        bit = {2: ACCESS_RXPDO, 3: ACCESS_TXPDO}.get(list_type, 0)
        return sorted({i for (i, _s), e in self.od.entries.items() if bit and e.access_bits() & bit})

    def _fragments(self, counter: int, opcode: int, data: bytes) -> list[bytes]:
        room = (self.mailbox_bytes - 6 - _INFO.size) & ~1  # even: OD lists are u16 indices
        chunks = [data[i : i + room] for i in range(0, len(data), room)] or [b""]
        return [self._info_message(counter, opcode, len(chunks) - 1 - k, chunk) for k, chunk in enumerate(chunks)]

    def _info_message(self, counter: int, opcode: int, left: int, data: bytes) -> bytes:
        payload = _INFO.pack(COE_SDO_INFO << 12, opcode | (0x80 if left else 0), 0, left) + data
        return _MBX.pack(len(payload), 0, 0, MBX_TYPE_COE | counter) + payload
