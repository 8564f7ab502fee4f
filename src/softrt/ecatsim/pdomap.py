"""A slave's PDO assignment and mapping objects, which a master may rewrite by SDO in PRE-OP.

ETG.1000.6 §5.6.7.4 (and CiA 301 §7.5.2.35/36): 0x1C12 (SM2, outputs) and 0x1C13 (SM3, inputs)
list the assigned PDOs; each PDO mapping object (RxPDO 0x16xx, TxPDO 0x1Axx) lists its entries as
``index << 16 | subindex << 8 | bits``. The rules real slaves enforce, and this one too:

* writable only in PRE-OP (else abort 0x08000022), and only on a device whose PDOs are
  configurable (``DeviceDescription.pdo_assignable``; else read-only, abort 0x06010002);
* subindex 0 (the count) must be 0 while entries are written (abort 0x06010003), and writing a
  count checks the entries it enables: every mapped object must exist and be mappable in that
  direction with its own size (abort 0x06040041), at most ``MAX_PDO_BYTES`` per PDO (0x06040042);
  an assigned PDO must be a mapping object of the right kind (0x06090030);
* the new layout takes effect on PRE-OP → SAFEOP (the master has to size SM2/SM3 for it).

A multi-axis drive has 4 RxPDOs and 4 TxPDOs per axis (0x1600 + n·0x10 + k, 0x1A00 + n·0x10 + k);
the description's PDOs are their defaults, the others start empty.
"""

from __future__ import annotations

import struct
from collections.abc import Callable

from ..ethercat.al import AlState
from ..ethercat.description import AXIS_PDO_OFFSET, DeviceDescription, Pdo, PdoEntry
from .coe import (
    ABORT_DEVICE_STATE,
    ABORT_NOT_MAPPABLE,
    ABORT_PDO_LENGTH,
    ABORT_SUB0_NOT_ZERO,
    ABORT_VALUE_RANGE,
    ACCESS_READ,
    ACCESS_RXPDO,
    ACCESS_TXPDO,
    ACCESS_WRITE_PREOP,
    ObjectDictionary,
    SdoAbort,
)

RX_ASSIGN, TX_ASSIGN = 0x1C12, 0x1C13
PDOS_PER_AXIS = 4
MAX_ENTRIES = 32  #: entries per mapping object
MAX_PDO_BYTES = 64

_U8, _U16, _U32 = struct.Struct("<B"), struct.Struct("<H"), struct.Struct("<I")


def entry_value(e: PdoEntry) -> int:
    """Return the mapping-object value of *e* (``index << 16 | subindex << 8 | bits``)."""
    return (e.index << 16) | (e.subindex << 8) | e.bits


def entry_text(value: int) -> str:
    """Return e.g. ``"0x607A:00/32"`` for a mapping-object value."""
    return f"0x{value >> 16:04X}:{(value >> 8) & 0xFF:02X}/{value & 0xFF}"


class PdoConfig:
    """The assignment (0x1C12/0x1C13) and mapping (0x16xx/0x1Axx) objects of one slave."""

    def __init__(self, desc: DeviceDescription, od: ObjectDictionary, state: Callable[[], AlState]) -> None:
        self.od = od
        self._state = state
        self.writable = desc.coe and desc.pdo_assignable
        self.mapping: dict[int, list[int]] = {}
        for base in (0x1600, 0x1A00):
            for axis in range(desc.axes):
                for k in range(PDOS_PER_AXIS):
                    self.mapping[base + axis * AXIS_PDO_OFFSET + k] = []
        for pdo in (*desc.rx_pdos, *desc.tx_pdos):
            self.mapping[pdo.index] = [entry_value(e) for e in pdo.entries]
        self.assign = {RX_ASSIGN: [p.index for p in desc.rx_pdos], TX_ASSIGN: [p.index for p in desc.tx_pdos]}
        # Entries written while subindex 0 is 0 (the count), per object: what the count enables.
        self._slots = {
            idx: list(v) + [0] * (self._capacity(idx) - len(v))
            for idx, v in (*self.assign.items(), *self.mapping.items())
        }
        self._count = {idx: len(v) for idx, v in (*self.assign.items(), *self.mapping.items())}
        for idx in self._slots:
            self._add(idx)

    def _capacity(self, index: int) -> int:
        return len(self.mapping) // 2 if index in (RX_ASSIGN, TX_ASSIGN) else MAX_ENTRIES

    # --- the live layout ---------------------------------------------------------------------
    def pdos(self, assign: int) -> tuple[Pdo, ...]:
        """The PDOs assigned now to SM2 (0x1C12) or SM3 (0x1C13), with their entries."""
        return tuple(
            Pdo(i, tuple(PdoEntry(v >> 16, (v >> 8) & 0xFF, v & 0xFF, 0) for v in self.mapping[i]))
            for i in self.assign[assign]
        )

    def report(self) -> dict[str, list[str]]:
        """``{"0x1C12": ["0x1600"], "0x1600": ["0x6040:00/16", ...], ...}``: what is assigned now."""
        out: dict[str, list[str]] = {}
        for assign, pdos in self.assign.items():
            out[f"0x{assign:04X}"] = [f"0x{p:04X}" for p in pdos]
            for p in pdos:
                out[f"0x{p:04X}"] = [entry_text(v) for v in self.mapping[p]]
        return out

    # --- object dictionary -------------------------------------------------------------------
    def _add(self, index: int) -> None:
        is_assign = index in (RX_ASSIGN, TX_ASSIGN)
        access = ACCESS_READ | (ACCESS_WRITE_PREOP if self.writable else 0)
        fmt = _U16 if is_assign else _U32
        self.od.names[index] = (
            "Sync manager 2 PDO assignment"
            if index == RX_ASSIGN
            else "Sync manager 3 PDO assignment"
            if index == TX_ASSIGN
            else f"{'Rx' if index < 0x1A00 else 'Tx'}PDO mapping 0x{index:04X}"
        )
        self.od.add(
            index,
            0,
            1,
            lambda: _U8.pack(self._count[index]),
            (lambda b: self._set_count(index, b[0])) if self.writable else None,
            data_type=0x0005,
            name="Number of entries",
            access=access,
        )
        for sub in range(1, self._capacity(index) + 1):
            self.od.add(
                index,
                sub,
                fmt.size,
                lambda s=sub: fmt.pack(self._slots[index][s - 1]),
                (lambda b, s=sub: self._set_slot(index, s, fmt.unpack(b)[0])) if self.writable else None,
                data_type=0x0006 if is_assign else 0x0007,
                name=f"Subindex {sub:03d}",
                access=access,
            )

    def _check_state(self) -> None:
        if self._state() is not AlState.PREOP:
            raise SdoAbort(ABORT_DEVICE_STATE)

    def _set_slot(self, index: int, sub: int, value: int) -> None:
        self._check_state()
        if self._count[index]:
            raise SdoAbort(ABORT_SUB0_NOT_ZERO)
        self._slots[index][sub - 1] = value

    def _set_count(self, index: int, count: int) -> None:
        self._check_state()
        if count > self._capacity(index):
            raise SdoAbort(ABORT_VALUE_RANGE)
        values = self._slots[index][:count]
        if index in (RX_ASSIGN, TX_ASSIGN):
            lo = 0x1600 if index == RX_ASSIGN else 0x1A00
            if any(v not in self.mapping or not lo <= v < lo + 0x200 for v in values):
                raise SdoAbort(ABORT_VALUE_RANGE)
            self.assign[index] = list(values)
        else:
            self._check_entries(index, values)
            self.mapping[index] = list(values)
        self._count[index] = count

    def _check_entries(self, pdo: int, values: list[int]) -> None:
        direction = ACCESS_RXPDO if pdo < 0x1A00 else ACCESS_TXPDO
        if sum(v & 0xFF for v in values) > 8 * MAX_PDO_BYTES:
            raise SdoAbort(ABORT_PDO_LENGTH)
        for v in values:
            index, sub, bits = v >> 16, (v >> 8) & 0xFF, v & 0xFF
            if index == 0:  # a gap (padding): any length
                continue
            entry = self.od.entries.get((index, sub))
            if entry is None or not entry.access_bits() & direction or entry.size * 8 != bits:
                raise SdoAbort(ABORT_NOT_MAPPABLE)
