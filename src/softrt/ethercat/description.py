"""Declarative description of a virtual EtherCAT slave (what an ESI file says about a device).

The simulator builds everything else from it: the SII EEPROM image (:mod:`.sii`), the ESC's
process-data SyncManagers (:mod:`.esc`), the object dictionary (:mod:`.cia402`) and, when
``coe`` is set, the mailbox. The default is a single-axis CiA 402 servo drive with the mapping of
ETG.6010 §5 / CiA 402-3 "cyclic synchronous position" (fixed PDOs 0x1600 / 0x1A00).

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

    @property
    def output_bytes(self) -> int:
        return (sum(p.bits for p in self.rx_pdos) + 7) // 8

    @property
    def input_bytes(self) -> int:
        return (sum(p.bits for p in self.tx_pdos) + 7) // 8


def _csp_pdos() -> tuple[tuple[Pdo, ...], tuple[Pdo, ...]]:
    # CiA 402-2: 0x6040 controlword, 0x607A target position, 0x6060 modes of operation;
    # 0x6041 statusword, 0x6064 position actual, 0x6061 mode display, 0x60F4 following error,
    # 0x603F error code (the "last error" a master shows when the drive faults).
    rx = Pdo(0x1600, (
        PdoEntry(0x6040, 0, 16, UINT16, "Controlword"),
        PdoEntry(0x607A, 0, 32, INT32, "Target position"),
        PdoEntry(0x6060, 0, 8, INT8, "Modes of operation"),
        PdoEntry(0x0000, 0, 8, 0, ""),
    ), "RxPDO CSP")
    tx = Pdo(0x1A00, (
        PdoEntry(0x6041, 0, 16, UINT16, "Statusword"),
        PdoEntry(0x6064, 0, 32, INT32, "Position actual value"),
        PdoEntry(0x6061, 0, 8, INT8, "Modes of operation display"),
        PdoEntry(0x0000, 0, 8, 0, ""),
        PdoEntry(0x60F4, 0, 32, INT32, "Following error actual value"),
        PdoEntry(0x603F, 0, 16, UINT16, "Error code"),
    ), "TxPDO CSP")
    return (rx,), (tx,)


def csp_drive(coe: bool = False) -> DeviceDescription:
    """Return the built-in single-axis CSP servo drive (``coe``: with a CoE mailbox)."""
    rx, tx = _csp_pdos()
    return DeviceDescription(
        name="softrt virtual CSP drive" + (" (CoE)" if coe else ""),
        product_code=0x0000_0402 if not coe else 0x0001_0402,
        rx_pdos=rx, tx_pdos=tx, coe=coe,
    )


def io_block() -> DeviceDescription:
    """Return a drive-less slave (16 digital inputs) to test "unsupported drive" handling."""
    tx = Pdo(0x1A00, (PdoEntry(0x6000, 1, 16, UINT16, "Inputs"),), "Inputs")
    return DeviceDescription(name="softrt virtual 16DI", product_code=0x0000_1016, group="IO",
                             tx_pdos=(tx,), profile="", dc=False)


#: Descriptions the simulator knows by name (``softrt ecat-sim --device NAME``).
BUILTIN = {"csp-drive": lambda: csp_drive(False), "csp-drive-coe": lambda: csp_drive(True), "io-16di": io_block,
           # A drive whose ESC has no distributed clocks (free-running, SM-synchronous).
           "csp-drive-nodc": lambda: dataclasses.replace(csp_drive(False), dc=False)}


def builtin(name: str) -> DeviceDescription:
    """Return a built-in description by name; raise KeyError with the known names."""
    try:
        return BUILTIN[name]()
    except KeyError:
        raise KeyError(f"unknown device description {name!r}; known: {', '.join(sorted(BUILTIN))}") from None
