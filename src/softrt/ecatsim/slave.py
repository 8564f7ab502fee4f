"""Slave applications: what runs behind each ESC's PDI (the drive) and its object dictionary.

:class:`DriveApp` binds a :class:`.cia402.Drive` to the process-data layout of a
:class:`.description.DeviceDescription` (offsets of 0x6040/0x607A/0x6060 in the outputs and
0x6041/0x6064/0x6061/0x60F4/0x603F in the inputs) and, for CoE devices, serves its object
dictionary (CiA 301 communication objects plus the CiA 402 objects of every axis, at + n·0x800)
through :mod:`.coe`. The PDO assignment and mapping objects (:mod:`.pdomap`) decide the layout;
a master that rewrites them in PRE-OP changes it on the way to SAFEOP. A CoE drive that faults
sends an emergency.
"""

from __future__ import annotations

import functools
import operator
import struct

from ..ethercat.al import AlState
from ..ethercat.description import DeviceDescription, axis_index
from ..ethercat.mapping import byte_offsets
from .cia402 import MODE_CSP, Drive, DriveState
from .coe import (
    ABORT_DEVICE_STATE,
    ABORT_VALUE_RANGE,
    ACCESS_READ,
    ACCESS_RXPDO,
    ACCESS_TXPDO,
    ACCESS_WRITE,
    DATA_TYPES,
    VISIBLE_STRING,
    CoeServer,
    ObjectDictionary,
    SdoAbort,
)
from .esc import REG_DC_CYCLE0, REG_DC_SYNC_ACT, Esc
from .pdomap import RX_ASSIGN, TX_ASSIGN, PdoConfig

DEFAULT_CYCLE_NS = 250_000
#: Device type 0x1000 (CiA 402-2 §7.1): profile 402, "servo drive" type 0x0002.
DEVICE_TYPE_SERVO = 0x0002_0192
#: Axis n of a drive starts n × this many counts after axis 0 (tests tell the axes apart).
AXIS_START_STEP = 500
#: Error register bits by the error code's first hex digit (CiA 301 Table 47 / Table 21):
#: 2 current, 3 voltage, 4 temperature, 8 communication.
_ERROR_CLASS = {0x2: 0x02, 0x3: 0x04, 0x4: 0x08, 0x8: 0x10}

_FMT = {8: "b", 16: "H", 32: "i"}
_STRUCT = {fmt: struct.Struct("<" + fmt) for fmt in _FMT.values()}
#: What a value written into the inputs is held to: signed ones saturate, unsigned 16 bits wrap (None).
_RANGE = {"b": (-128, 127), "H": (None, None), "i": (-(2**31), 2**31 - 1)}
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
    """A CiA 402 drive (one or more axes) behind an ESC (see the module docstring)."""

    def __init__(self, desc: DeviceDescription, start_counts: int = 0, ca_abort: bool = False, serial: int = 0) -> None:
        self.desc = desc
        self.serial = serial  #: 0x1018:4, as in the SII
        self.drives = [Drive(start_counts=start_counts + AXIS_START_STEP * n) for n in range(desc.axes)]
        for n, d in enumerate(self.drives):
            d.on_fault = functools.partial(self._on_fault, n)
        self.esc: Esc | None = None
        self.interpolation_period_ns = DEFAULT_CYCLE_NS  # 0x60C2
        self.od = ObjectDictionary()
        self.pdo = PdoConfig(desc, self.od, self._al_state)
        self._build_od()
        self.coe = CoeServer(self.od, desc.mailbox_bytes, ca_abort) if desc.coe else None
        self.cycles = 0
        #: Per axis: the indices of its controlword, target, mode; statusword, actual, display,
        #: following error, error code (axis n: + n·0x800).
        self._objects = [
            tuple(axis_index(i, n) for i in (0x6040, 0x607A, 0x6060, 0x6041, 0x6064, 0x6061, 0x60F4, 0x603F))
            for n in range(desc.axes)
        ]
        self._apply_layout()

    @property
    def drive(self) -> Drive:
        """Axis 0 (every drive has one)."""
        return self.drives[0]

    def _al_state(self) -> AlState:
        return self.esc.al.state if self.esc is not None else AlState.INIT

    def _apply_layout(self) -> None:
        """Take the PDOs assigned now as the process-data layout (on PRE-OP → SAFEOP): per axis,
        where its set-points are read and its feedback written (worked out here, not per cycle)."""
        out = {i: (o, _FMT[b]) for i, (o, b) in byte_offsets(self.pdo.pdos(RX_ASSIGN)).items() if b in _FMT}
        inp = {i: (o, _FMT[b]) for i, (o, b) in byte_offsets(self.pdo.pdos(TX_ASSIGN)).items() if b in _FMT}
        self._io = []
        for d, (cw, target, mode, sw, actual, display, ferr, err) in zip(self.drives, self._objects):
            gets = tuple((_STRUCT[out[i][1]].unpack_from, out[i][0]) if i in out else None for i in (cw, target, mode))
            puts = tuple(
                (_STRUCT[inp[i][1]].pack_into, inp[i][0], operator.attrgetter(attr), *_RANGE[inp[i][1]])
                for i, attr in (
                    (sw, "statusword"),
                    (actual, "position_counts"),
                    (display, "mode_display"),
                    (ferr, "following_error"),
                    (err, "error_code"),
                )
                if i in inp
            )
            self._io.append((d, gets, puts))

    def pd_bytes(self) -> tuple[int, int]:
        """Output and input bytes of the PDOs assigned now (what SM2/SM3 must be sized for)."""
        return tuple((sum(p.bits for p in self.pdo.pdos(a)) + 7) // 8 for a in (RX_ASSIGN, TX_ASSIGN))

    def error_register(self) -> int:
        """0x1001 (CiA 301 §7.5.2.2): bit 0 generic error, plus the class of each axis's error code."""
        reg = 0
        for d in self.drives:
            if d.state is DriveState.FAULT:
                reg |= 0x01 | _ERROR_CLASS.get(d.error_code >> 12, 0)
        return reg

    def cycle_ns(self) -> int:
        """The drive's cycle: the DC SYNC0 cycle when SYNC0 is active, else 0x60C2."""
        if self.esc is not None and self.esc.mem[REG_DC_SYNC_ACT] & 0x03 == 0x03:
            cycle = _U32.unpack_from(self.esc.mem, REG_DC_CYCLE0)[0]
            if cycle:
                return cycle
        return self.interpolation_period_ns

    # --- SlaveApp -----------------------------------------------------------------------------
    def on_al_change(self, old: AlState, new: AlState, code: int) -> None:
        if old is AlState.PREOP and new is AlState.SAFEOP:
            self._apply_layout()
        for d in self.drives:
            d.on_al_change(old, new, code)

    def exchange(self, outputs: bytes | None, inputs: memoryview) -> None:
        if outputs is not None:
            self.cycles += 1
        dt_s = self.cycle_ns() * 1e-9
        for d, (cw, target, mode), puts in self._io:
            if outputs is not None:
                d.step(
                    None if cw is None else cw[0](outputs, cw[1])[0],
                    None if target is None else target[0](outputs, target[1])[0],
                    None if mode is None else mode[0](outputs, mode[1])[0],
                    dt_s,
                )
            for pack, at, value_of, lo, hi in puts:
                value = value_of(d)
                if lo is None:  # unsigned 16 bits: wraps
                    value &= 0xFFFF
                elif value < lo:  # signed: saturates
                    value = lo
                elif value > hi:
                    value = hi
                pack(inputs, at, value)

    def mailbox(self, request: bytes) -> list[bytes]:
        return self.coe.handle(request) if self.coe is not None else []

    def _on_fault(self, axis: int, code: int) -> None:
        # A CoE drive announces a fault with an emergency (CiA 301 §7.2.7; ETG.1000.6 §5.6.4);
        # the manufacturer-specific bytes carry the axis.
        if self.coe is not None and self.esc is not None:
            self.esc.send_mailbox(self.coe.emergency(code, self.error_register(), bytes([axis])))

    # --- object dictionary (CiA 301 §7.5, CiA 402-2 §7) ---------------------------------------------
    def _build_od(self) -> None:
        od, desc = self.od, self.desc
        od.names.update(
            {
                0x1000: "Device type",
                0x1001: "Error register",
                0x1008: "Device name",
                0x1018: "Identity",
                0x1C00: "Sync manager type",
                0x60C2: "Interpolation time period",
                0x6502: "Supported drive modes",
            }
        )
        od.add_value(0x1000, 0, "I", DEVICE_TYPE_SERVO)
        od.add(
            0x1001, 0, 1, lambda: bytes([self.error_register()]), data_type=0x0005, access=ACCESS_READ | ACCESS_TXPDO
        )
        name = desc.name.encode()
        od.add(0x1008, 0, 0, lambda: name, data_type=VISIBLE_STRING)
        od.add_value(0x1018, 0, "B", 4)
        for sub, (value, what) in enumerate(
            (
                (desc.vendor_id, "Vendor ID"),
                (desc.product_code, "Product code"),
                (desc.revision, "Revision"),
                (self.serial, "Serial number"),
            ),
            start=1,
        ):
            od.add_value(0x1018, sub, "I", value, name=what)
        # Sync manager communication types (ETG.1000.6 §5.6.7.4.9): mailbox out/in, outputs, inputs.
        od.add_value(0x1C00, 0, "B", 4)
        for sub, kind in enumerate((1, 2, 3, 4), start=1):
            od.add_value(0x1C00, sub, "B", kind)
        for n, d in enumerate(self.drives):
            self._axis_objects(n, d)
        od.add_value(0x6502, 0, "I", 1 << (MODE_CSP - 1))  # supported drive modes: bit 7 = CSP
        # 0x60C2 interpolation time period: value × 10^index s (CiA 402-2 §12.3.1.3), one for all axes.
        od.add_value(0x60C2, 0, "B", 2)
        od.add(
            0x60C2,
            1,
            1,
            lambda: bytes([self._ip_value()[0]]),
            lambda b: self._set_ip(b[0], None),
            data_type=0x0005,
            name="Interpolation time period value",
        )
        od.add(
            0x60C2,
            2,
            1,
            lambda: struct.pack("<b", self._ip_value()[1]),
            lambda b: self._set_ip(None, struct.unpack("<b", b)[0]),
            data_type=0x0002,
            name="Interpolation time index",
        )

    def _axis_objects(self, n: int, d: Drive) -> None:
        """The CiA 402 objects of axis *n* (at + n·0x800), bound to its drive model *d*."""
        od = self.od

        def attr(index: int, fmt: str, name: str, attribute: str, writer=None, pdo: int = 0) -> None:
            s = struct.Struct("<" + fmt)
            index = axis_index(index, n)
            od.names[index] = name + (f" (axis {n})" if n else "")
            od.add(
                index,
                0,
                s.size,
                lambda: s.pack(getattr(d, attribute)),
                (lambda b: writer(s.unpack(b)[0])) if writer else None,
                data_type=DATA_TYPES[fmt],
                access=ACCESS_READ | (ACCESS_WRITE if writer else 0) | pdo,
            )

        def set_mode(value: int) -> None:
            if value not in (0, MODE_CSP):
                raise SdoAbort(ABORT_VALUE_RANGE)
            d.mode = value
            d.mode_display = value

        attr(0x6040, "H", "Controlword", "_last_cw", d.control, ACCESS_RXPDO)
        attr(0x6041, "H", "Statusword", "statusword", pdo=ACCESS_TXPDO)
        attr(0x603F, "H", "Error code", "error_code", pdo=ACCESS_TXPDO)
        attr(0x6060, "b", "Modes of operation", "mode", set_mode, ACCESS_RXPDO)
        attr(0x6061, "b", "Modes of operation display", "mode_display", pdo=ACCESS_TXPDO)
        attr(0x6064, "i", "Position actual value", "position_counts", pdo=ACCESS_TXPDO)
        attr(0x607A, "i", "Target position", "target", lambda v: setattr(d, "target", v), ACCESS_RXPDO)
        attr(0x6065, "I", "Following error window", "following_window", lambda v: setattr(d, "following_window", v))
        attr(0x6066, "H", "Following error time out", "following_time_ms", lambda v: setattr(d, "following_time_ms", v))
        attr(0x60F4, "i", "Following error actual value", "following_error", pdo=ACCESS_TXPDO)

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


def make_app(
    desc: DeviceDescription, start_counts: int = 0, ca_abort: bool = False, serial: int = 0
) -> DriveApp | PlainApp:
    """Return the application a description asks for (``ca_abort``: see :class:`.coe.CoeServer`)."""
    return DriveApp(desc, start_counts, ca_abort, serial) if desc.profile == "cia402" else PlainApp(desc)
