"""Where a CiA 402 drive's objects sit in its process image (pure; used by the master).

SOEM lays out a slave's outputs as its RxPDOs in assignment order (SM2), and its inputs as its
TxPDOs (SM3), bit-packed, with padding entries (index 0) counted (``ecx_map_sii``,
``ecx_readPDOmap``). From the PDO lists — out of the SII (ETG.2010 categories 50/51) or, for CoE
drives, out of 0x1C12/0x1C13 and the PDO mapping objects (ETG.1000.6 §5.6.7.4) — we find the
byte offset of each object the CSP cycle needs, per CiA 402 axis (axis n's objects at + n·0x800,
ETG.6010 §6).
"""

from __future__ import annotations

from dataclasses import dataclass

from .description import MAX_AXES_PER_DEVICE, Pdo, axis_index

#: Objects the CSP cycle cannot do without (CiA 402-2: controlword, target position / statusword,
#: position actual value).
REQUIRED_OUTPUTS = (0x6040, 0x607A)
REQUIRED_INPUTS = (0x6041, 0x6064)


@dataclass(frozen=True)
class DriveMap:
    """Byte offsets of the CSP objects in one slave's outputs/inputs (None: not mapped)."""

    controlword: int
    target_position: int
    statusword: int
    position_actual: int
    modes_of_operation: int | None
    error_code: int | None
    following_error: int | None


def byte_offsets(pdos: tuple[Pdo, ...]) -> dict[int, tuple[int, int]]:
    """Return ``{object index: (byte offset, bits)}`` for byte-aligned entries of *pdos*."""
    out: dict[int, tuple[int, int]] = {}
    bit = 0
    for pdo in pdos:
        for e in pdo.entries:
            if e.index and bit % 8 == 0 and e.index not in out:
                out[e.index] = (bit // 8, e.bits)
            bit += e.bits
    return out


def missing_objects(rx_pdos: tuple[Pdo, ...], tx_pdos: tuple[Pdo, ...], axis: int = 0) -> list[int]:
    """Return the required CSP objects of *axis* that are not mapped (with the right size)."""
    outs, ins = byte_offsets(rx_pdos), byte_offsets(tx_pdos)
    want = {0x6040: 16, 0x607A: 32, 0x6041: 16, 0x6064: 32}
    missing = [axis_index(i, axis) for i in REQUIRED_OUTPUTS if outs.get(axis_index(i, axis), (0, 0))[1] != want[i]]
    missing += [axis_index(i, axis) for i in REQUIRED_INPUTS if ins.get(axis_index(i, axis), (0, 0))[1] != want[i]]
    return missing


def drive_map(rx_pdos: tuple[Pdo, ...], tx_pdos: tuple[Pdo, ...], axis: int = 0) -> DriveMap | None:
    """Return the map of CiA 402 axis *axis* (objects at + axis·0x800), or None if one is missing."""
    if missing_objects(rx_pdos, tx_pdos, axis):
        return None
    outs, ins = byte_offsets(rx_pdos), byte_offsets(tx_pdos)

    def at(table: dict[int, tuple[int, int]], index: int) -> int:
        return table[axis_index(index, axis)][0]

    def opt(table: dict[int, tuple[int, int]], index: int, bits: int) -> int | None:
        where = table.get(axis_index(index, axis))
        return where[0] if where and where[1] == bits else None

    return DriveMap(
        at(outs, 0x6040),
        at(outs, 0x607A),
        at(ins, 0x6041),
        at(ins, 0x6064),
        opt(outs, 0x6060, 8),
        opt(ins, 0x603F, 16),
        opt(ins, 0x60F4, 32),
    )


def drive_maps(rx_pdos: tuple[Pdo, ...], tx_pdos: tuple[Pdo, ...], axes: int = MAX_AXES_PER_DEVICE) -> list[DriveMap]:
    """Return the maps of axes 0, 1, ... (up to *axes*) while each is completely mapped."""
    maps = []
    for axis in range(axes):
        found = drive_map(rx_pdos, tx_pdos, axis)
        if found is None:
            break
        maps.append(found)
    return maps


def pdos_from_mapping(assigned: list[tuple[int, list[int]]]) -> tuple[Pdo, ...]:
    """Build PDOs from CoE mapping values: ``[(pdo index, [u32 index<<16|sub<<8|bits, ...])]``."""
    from .description import PdoEntry

    return tuple(
        Pdo(idx, tuple(PdoEntry(v >> 16, (v >> 8) & 0xFF, v & 0xFF, 0) for v in values)) for idx, values in assigned
    )
