"""Declarative description of a virtual EtherCAT slave (what an ESI file says about a device).

The simulator builds everything else from it: the SII EEPROM image (:mod:`.sii`), the ESC's
process-data SyncManagers, the object dictionary and, when ``coe`` is set, the mailbox
(:mod:`softrt.ecatsim`). The default is a single-axis CiA 402 servo drive with the mapping of
ETG.6010 §5 / CiA 402-3 "cyclic synchronous position" (PDOs 0x1600 / 0x1A00). A multi-axis drive
repeats the axis objects every 0x800 (CiA 402-2 §5.2 / ETG.6010 §6: axis *n* at 0x6000 + n·0x800)
and its PDOs every 0x10 (0x1600 + n·0x10, 0x1A00 + n·0x10).

The vendor ID is deliberately fake (ETG assigns real ones); tools show it as ``0x0EC0FFEE``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

#: Not an ETG-assigned vendor ID: marks the virtual slave as such in every master's bus scan.
FAKE_VENDOR_ID = 0x0EC0FFEE

# CoE data types (ETG.1000.6 §5.6.7 Table 64 / CiA 301 Table 44), as they appear in SII PDO entries.
INT8, INT16, INT32, UINT8, UINT16, UINT32 = 0x0002, 0x0003, 0x0004, 0x0005, 0x0006, 0x0007

#: Physical process-data RAM of the ESC starts here (ETG.1000.4 §6.7: 0x1000 on every ESC).
PROCESS_RAM_START = 0x1000

#: CiA 402 multi-axis offsets (ETG.6010 §6): object index per axis, PDO index per axis.
AXIS_OBJECT_OFFSET, AXIS_PDO_OFFSET = 0x800, 0x10
#: The profile's object range that moves with the axis (0x6000-0x67FF for axis 0).
PROFILE_OBJECTS = range(0x6000, 0x6800)
#: At most 8 axes per device (0x6000 + 8·0x800 reaches 0xA000, past the profile area).
MAX_AXES_PER_DEVICE = 8

# SII General category, CoE details byte (ETG.2010 Table 8): bit 0 SDO, bit 1 SDO information,
# bit 2 PDO assign, bit 3 PDO configuration, bit 4 upload at startup, bit 5 SDO complete access.
COE_SDO, COE_SDO_INFO, COE_PDO_ASSIGN, COE_PDO_CONFIG, COE_COMPLETE_ACCESS = 0x01, 0x02, 0x04, 0x08, 0x20


def axis_index(index: int, axis: int) -> int:
    """Return the index of profile object *index* (given for axis 0) for axis *axis*."""
    return index + axis * AXIS_OBJECT_OFFSET if index in PROFILE_OBJECTS else index


@dataclass(frozen=True)
class PdoEntry:
    """One mapped object: index 0 is a padding entry (SOEM still counts its bits)."""

    index: int
    subindex: int
    bits: int
    data_type: int
    name: str = ""


@dataclass(frozen=True)
class Pdo:
    """A fixed PDO (RxPDO 0x16xx = master→slave outputs; TxPDO 0x1Axx = slave→master inputs)."""

    index: int
    entries: tuple[PdoEntry, ...]
    name: str = ""

    @property
    def bits(self) -> int:
        return sum(e.bits for e in self.entries)


@dataclass(frozen=True)
class DeviceDescription:
    """Identity, memory layout, PDOs and protocols of one slave type."""

    name: str
    product_code: int
    revision: int = 0x0001_0000
    vendor_id: int = FAKE_VENDOR_ID
    group: str = "Drive"
    #: RxPDOs (outputs, SM2) and TxPDOs (inputs, SM3), in SII order.
    rx_pdos: tuple[Pdo, ...] = ()
    tx_pdos: tuple[Pdo, ...] = ()
    outputs_start: int = 0x1100
    inputs_start: int = 0x1400
    #: Distributed clocks: feature bit 2 of register 0x0008 (ETG.1000.4 §6.1.2).
    dc: bool = True
    #: CoE mailbox (SM0 receive at mailbox_out_start, SM1 send at mailbox_in_start).
    coe: bool = False
    mailbox_out_start: int = 0x1000
    mailbox_in_start: int = 0x1080
    mailbox_bytes: int = 128
    #: Application behind the process data: "cia402" (a servo drive) or "" (plain memory).
    profile: str = "cia402"
    extra_strings: tuple[str, ...] = field(default=())
    #: CiA 402 axes in this device (the objects of axis n at +n·0x800).
    axes: int = 1
    #: CoE: may the master assign and map PDOs by SDO in PRE-OP (0x1C12/0x1C13, 0x16xx/0x1Axx)?
    pdo_assignable: bool = True
    #: CoE: does the SII announce SDO complete access (SOEM then reads the mapping with it)?
    complete_access: bool = True

    @property
    def coe_details(self) -> int:
        """The SII General "CoE details" byte this device announces (0 without CoE)."""
        if not self.coe:
            return 0
        flags = COE_SDO | COE_SDO_INFO
        if self.pdo_assignable:
            flags |= COE_PDO_ASSIGN | COE_PDO_CONFIG
        return flags | (COE_COMPLETE_ACCESS if self.complete_access else 0)

    @property
    def output_bytes(self) -> int:
        return (sum(p.bits for p in self.rx_pdos) + 7) // 8

    @property
    def input_bytes(self) -> int:
        return (sum(p.bits for p in self.tx_pdos) + 7) // 8


#: The CiA 402 CSP objects (CiA 402-2): 0x6040 controlword, 0x607A target position, 0x6060 modes
#: of operation; 0x6041 statusword, 0x6064 position actual, 0x6061 mode display, 0x60F4 following
#: error, 0x603F error code (the "last error" a master shows when the drive faults). Padding keeps
#: the 32-bit objects after it aligned.
CSP_RX_ENTRIES = (
    PdoEntry(0x6040, 0, 16, UINT16, "Controlword"),
    PdoEntry(0x607A, 0, 32, INT32, "Target position"),
    PdoEntry(0x6060, 0, 8, INT8, "Modes of operation"),
    PdoEntry(0x0000, 0, 8, 0, ""),
)
CSP_TX_ENTRIES = (
    PdoEntry(0x6041, 0, 16, UINT16, "Statusword"),
    PdoEntry(0x6064, 0, 32, INT32, "Position actual value"),
    PdoEntry(0x6061, 0, 8, INT8, "Modes of operation display"),
    PdoEntry(0x0000, 0, 8, 0, ""),
    PdoEntry(0x60F4, 0, 32, INT32, "Following error actual value"),
    PdoEntry(0x603F, 0, 16, UINT16, "Error code"),
)


def axis_pdo(pdo_index: int, entries: tuple[PdoEntry, ...], axis: int, name: str = "") -> Pdo:
    """Return the PDO of *axis*: index + axis·0x10, profile objects + axis·0x800."""
    return Pdo(
        pdo_index + axis * AXIS_PDO_OFFSET,
        tuple(PdoEntry(axis_index(e.index, axis), e.subindex, e.bits, e.data_type, e.name) for e in entries),
        name + (f" axis {axis}" if axis else ""),
    )


def csp_drive(coe: bool = False, axes: int = 1) -> DeviceDescription:
    """Return the built-in CSP servo drive (``coe``: with a CoE mailbox; *axes* CiA 402 axes)."""
    if not 1 <= axes <= MAX_AXES_PER_DEVICE:
        raise ValueError(f"a drive has 1 to {MAX_AXES_PER_DEVICE} axes, not {axes}")
    rx = tuple(axis_pdo(0x1600, CSP_RX_ENTRIES, n, "RxPDO CSP") for n in range(axes))
    tx = tuple(axis_pdo(0x1A00, CSP_TX_ENTRIES, n, "TxPDO CSP") for n in range(axes))
    return DeviceDescription(
        name="softrt virtual CSP drive" + (f" ({axes} axes)" if axes > 1 else "") + (" (CoE)" if coe else ""),
        product_code=(0x0000_0402 if not coe else 0x0001_0402) | ((axes - 1) << 20),
        rx_pdos=rx,
        tx_pdos=tx,
        coe=coe,
        axes=axes,
    )


def io_block() -> DeviceDescription:
    """Return a drive-less slave (16 digital inputs) to test "unsupported drive" handling."""
    tx = Pdo(0x1A00, (PdoEntry(0x6000, 1, 16, UINT16, "Inputs"),), "Inputs")
    return DeviceDescription(
        name="softrt virtual 16DI", product_code=0x0000_1016, group="IO", tx_pdos=(tx,), profile="", dc=False
    )


#: Descriptions the simulator knows by name (``softrt ecat-sim --device NAME``); drives take
#: ``axes`` (CiA 402 axes per device).
BUILTIN = {
    "csp-drive": lambda axes=1: csp_drive(False, axes),
    "csp-drive-coe": lambda axes=1: csp_drive(True, axes),
    "io-16di": lambda axes=1: io_block(),
    # A drive whose ESC has no distributed clocks (free-running, SM-synchronous).
    "csp-drive-nodc": lambda axes=1: dataclasses.replace(csp_drive(False, axes), dc=False),
}


def builtin(name: str, axes: int = 1) -> DeviceDescription:
    """Return a built-in description by name; raise KeyError with the known names."""
    try:
        make = BUILTIN[name]
    except KeyError:
        raise KeyError(f"unknown device description {name!r}; known: {', '.join(sorted(BUILTIN))}") from None
    return make(axes)
