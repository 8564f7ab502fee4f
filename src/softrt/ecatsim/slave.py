"""Slave applications: what runs behind each ESC's PDI (the drive) and its object dictionary.

:class:`DriveApp` binds a :class:`.cia402.Drive` to the process-data layout of a
:class:`.description.DeviceDescription` (offsets of 0x6040/0x607A/0x6060 in the outputs and
0x6041/0x6064/0x6061/0x60F4/0x603F in the inputs) and, for CoE devices, serves its object
dictionary (CiA 301 communication objects plus the CiA 402 objects) through :mod:`.coe`.
"""

from __future__ import annotations

import struct

from ..ethercat.al import AlState
from .cia402 import MODE_CSP, Drive
from .coe import ABORT_DEVICE_STATE, ABORT_VALUE_RANGE, CoeServer, ObjectDictionary, SdoAbort
from ..ethercat.description import DeviceDescription
from .esc import REG_DC_CYCLE0, REG_DC_SYNC_ACT, Esc
from ..ethercat.mapping import byte_offsets

DEFAULT_CYCLE_NS = 250_000
#: Device type 0x1000 (CiA 402-2 §7.1): profile 402, "servo drive" type 0x0002.
DEVICE_TYPE_SERVO = 0x0002_0192

_FMT = {8: "b", 16: "H", 32: "i"}
_U32 = struct.Struct("<I")


class PlainApp:
    """An application with no behaviour: inputs count frames (a stand-in for an I/O block)."""

    def __init__(self, desc: DeviceDescription) -> None:
        self.desc = desc
        self.count = 0

    def on_al_change(self, old: AlState, new: AlState, code: int) -> None:
        pass

    def exchange(self, outputs: bytes | None, inputs: memoryview) -> None:
        self.count = (self.count + 1) & 0xFFFF
        if len(inputs) >= 2:
            inputs[0:2] = self.count.to_bytes(2, "little")

    def mailbox(self, request: bytes) -> list[bytes]:
        return []


class DriveApp:
    """A CiA 402 drive behind an ESC (see the module docstring)."""

    def __init__(self, desc: DeviceDescription, start_counts: int = 0) -> None:
        self.desc = desc
        self.drive = Drive(start_counts=start_counts)
        self.esc: Esc | None = None
        self.interpolation_period_ns = DEFAULT_CYCLE_NS  # 0x60C2
        self._out = {i: (o, _FMT[b]) for i, (o, b) in byte_offsets(desc.rx_pdos).items() if b in _FMT}
        self._in = {i: (o, _FMT[b]) for i, (o, b) in byte_offsets(desc.tx_pdos).items() if b in _FMT}
        self.od = self._build_od()
        self.coe = CoeServer(self.od, desc.mailbox_bytes) if desc.coe else None
        self.cycles = 0

    def cycle_ns(self) -> int:
        """The drive's cycle: the DC SYNC0 cycle when SYNC0 is active, else 0x60C2."""
        if self.esc is not None and self.esc.mem[REG_DC_SYNC_ACT] & 0x03 == 0x03:
            cycle = _U32.unpack_from(self.esc.mem, REG_DC_CYCLE0)[0]
            if cycle:
                return cycle
        return self.interpolation_period_ns

    # --- SlaveApp -----------------------------------------------------------------------------
    def on_al_change(self, old: AlState, new: AlState, code: int) -> None:
        self.drive.on_al_change(old, new, code)

    def exchange(self, outputs: bytes | None, inputs: memoryview) -> None:
        d = self.drive
        if outputs is not None:
            self.cycles += 1
            get = self._get
            d.step(get(outputs, 0x6040), get(outputs, 0x607A), get(outputs, 0x6060), self.cycle_ns() * 1e-9)
        self._put(inputs, 0x6041, d.statusword)
        self._put(inputs, 0x6064, d.position_counts)
        self._put(inputs, 0x6061, d.mode_display)
        self._put(inputs, 0x60F4, d.following_error)
        self._put(inputs, 0x603F, d.error_code)

    def mailbox(self, request: bytes) -> list[bytes]:
        return self.coe.handle(request) if self.coe is not None else []

    def _get(self, outputs: bytes, index: int) -> int | None:
        where = self._out.get(index)
        if where is None:
            return None
        return struct.unpack_from("<" + where[1], outputs, where[0])[0]

    def _put(self, inputs: memoryview, index: int, value: int) -> None:
        where = self._in.get(index)
        if where is not None:
            fmt = where[1]
            if fmt == "b":
                value = max(-128, min(127, value))
            elif fmt == "H":
                value &= 0xFFFF
            else:
                value = max(-2**31, min(2**31 - 1, value))
            struct.pack_into("<" + fmt, inputs, where[0], value)

    # --- object dictionary (CiA 301 §7.5, CiA 402-2 §7) ---------------------------------------------
    def _build_od(self) -> ObjectDictionary:
        od, d, desc = ObjectDictionary(), self.drive, self.desc
        od.add_value(0x1000, 0, "I", DEVICE_TYPE_SERVO)
        name = desc.name.encode()
        od.add(0x1008, 0, 0, lambda: name)
        od.add_value(0x1018, 0, "B", 4)
        for sub, value in enumerate((desc.vendor_id, desc.product_code, desc.revision, 0), start=1):
            od.add_value(0x1018, sub, "I", value)
        # Sync manager communication types (ETG.1000.6 §5.6.7.4.9): mailbox out/in, outputs, inputs.
        od.add_value(0x1C00, 0, "B", 4)
        for sub, kind in enumerate((1, 2, 3, 4), start=1):
            od.add_value(0x1C00, sub, "B", kind)
        for assign, pdos in ((0x1C12, desc.rx_pdos), (0x1C13, desc.tx_pdos)):
            od.add_value(assign, 0, "B", len(pdos))
            for sub, pdo in enumerate(pdos, start=1):
                od.add_value(assign, sub, "H", pdo.index)
                od.add_value(pdo.index, 0, "B", len(pdo.entries))
                for esub, e in enumerate(pdo.entries, start=1):
                    od.add_value(pdo.index, esub, "I", (e.index << 16) | (e.subindex << 8) | e.bits)

        def attr(index: int, fmt: str, name: str, writable: bool = False, check=None) -> None:
            s = struct.Struct("<" + fmt)

            def write(b: bytes) -> None:
                value = s.unpack(b)[0]
                if check is not None:
                    check(value)
                setattr(d, name, value)
            od.add(index, 0, s.size, lambda: s.pack(getattr(d, name)), write if writable else None)

        def mode_ok(value: int) -> None:
            if value not in (0, MODE_CSP):
                raise SdoAbort(ABORT_VALUE_RANGE)
            d.mode_display = value

        attr(0x6040, "H", "_last_cw")
        od.entries[(0x6040, 0)].writer = lambda b: d.control(struct.unpack("<H", b)[0])
        od.add(0x6041, 0, 2, lambda: struct.pack("<H", d.statusword))
        attr(0x603F, "H", "error_code")
        attr(0x6060, "b", "mode", True, mode_ok)
        attr(0x6061, "b", "mode_display")
        od.add(0x6064, 0, 4, lambda: struct.pack("<i", d.position_counts))
        attr(0x607A, "i", "target", True)
        attr(0x6065, "I", "following_window", True)
        attr(0x6066, "H", "following_time_ms", True)
        attr(0x60F4, "i", "following_error")
        od.add_value(0x6502, 0, "I", 1 << (MODE_CSP - 1))  # supported drive modes: bit 7 = CSP
        # 0x60C2 interpolation time period: value × 10^index s (CiA 402-2 §12.3.1.3).
        od.add_value(0x60C2, 0, "B", 2)
        od.add(0x60C2, 1, 1, lambda: bytes([self._ip_value()[0]]), lambda b: self._set_ip(b[0], None))
        od.add(0x60C2, 2, 1, lambda: struct.pack("<b", self._ip_value()[1]),
               lambda b: self._set_ip(None, struct.unpack("<b", b)[0]))
        return od

    def _ip_value(self) -> tuple[int, int]:
        ns, exp = self.interpolation_period_ns, -9
        while ns % 10 == 0 and ns >= 10 and (ns > 255 or exp < -6):
            ns //= 10
            exp += 1
        return ns, exp

    def _set_ip(self, value: int | None, exp: int | None) -> None:
        if self.esc is not None and self.esc.al.state is AlState.OP:
            raise SdoAbort(ABORT_DEVICE_STATE)
        v, e = self._ip_value()
        v = v if value is None else value
        e = e if exp is None else exp
        ns = v * 10 ** (e + 9) if e >= -9 else 0
        if ns <= 0:
            raise SdoAbort(ABORT_VALUE_RANGE)
        self.interpolation_period_ns = int(ns)


def make_app(desc: DeviceDescription, start_counts: int = 0) -> DriveApp | PlainApp:
    """Return the application a description asks for."""
    return DriveApp(desc, start_counts) if desc.profile == "cia402" else PlainApp(desc)
