"""The SII (slave information interface) EEPROM image: build it from a description, parse it back.

Layout (ETG.2010 "EtherCAT Slave Information Interface", §2 and §5; word addresses)::

    0x00-0x07  ESC configuration area; word 4 = configured station alias; byte 14 = CRC-8
               (poly 0x07, init 0xFF) of bytes 0-13
    0x08 vendor ID u32, 0x0A product code, 0x0C revision, 0x0E serial number
    0x18/0x19  standard receive mailbox offset/size, 0x1A/0x1B send mailbox, 0x1C protocols
    0x3E size in KiBit - 1, 0x3F version (1)
    0x40...    categories {type u16, length in words u16, data}, ended by type 0xFFFF

Categories used by SOEM (``ecx_siifind``/``ecx_siiSM``/``ecx_siiPDO``): Strings (10), General
(30), FMMU (40), SyncM (41), TxPDO (50, inputs), RxPDO (51, outputs). The parser is what the
master side uses to find where each CiA 402 object sits in the process image.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from .description import DeviceDescription, Pdo, PdoEntry

CAT_STRINGS, CAT_GENERAL, CAT_FMMU, CAT_SYNCM, CAT_TXPDO, CAT_RXPDO, CAT_END = 10, 30, 40, 41, 50, 51, 0xFFFF
MBX_PROTO_COE = 0x0004  # word 0x1C bit 2 (ETG.2010 Table 2)
SM_TYPE_MBX_OUT, SM_TYPE_MBX_IN, SM_TYPE_OUTPUTS, SM_TYPE_INPUTS = 1, 2, 3, 4
#: SyncManager control bytes (ETG.1000.4 §6.7.2 Table 58): mailbox write/read; buffered
#: outputs with watchdog trigger (0x64) and buffered inputs (0x20).
SM_CTRL_MBX_OUT, SM_CTRL_MBX_IN, SM_CTRL_OUTPUTS, SM_CTRL_INPUTS = 0x26, 0x22, 0x64, 0x20
PDI_CONTROL = 0x0C80  # word 0: PDI type SPI/µC, "device emulation" off (ETG.1000.4 §6.3)
SII_BYTES = 2048  # a 16 KiBit EEPROM


def crc8(data: bytes) -> int:
    """Return the CRC-8 of the configuration area (ETG.2010 §2.1: x^8+x^2+x+1, init 0xFF)."""
    crc = 0xFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = ((crc << 1) ^ 0x07) & 0xFF if crc & 0x80 else (crc << 1) & 0xFF
    return crc


def _category(cat: int, data: bytes) -> bytes:
    if len(data) % 2:
        data += b"\x00"
    return struct.pack("<HH", cat, len(data) // 2) + data


def _pdo_category(pdos: tuple[Pdo, ...], sm: int, strings: list[str]) -> bytes:
    out = b""
    for pdo in pdos:
        strings.append(pdo.name)
        out += struct.pack("<HBBBBH", pdo.index, len(pdo.entries), sm, 0, len(strings), 0)
        for e in pdo.entries:
            name_idx = 0
            if e.name:
                strings.append(e.name)
                name_idx = len(strings)
            out += struct.pack("<HBBBBH", e.index, e.subindex, name_idx, e.data_type, e.bits, 0)
    return out


def build_image(desc: DeviceDescription, serial: int = 0, alias: int = 0) -> bytes:
    """Return the SII EEPROM image (``SII_BYTES`` long, 0xFF-filled) for *desc*."""
    config = struct.pack("<HHHHH", PDI_CONTROL, 0, 0, 0, alias) + b"\x00" * 4
    config += bytes([crc8(config), 0])
    words = bytearray(config)
    mbx = desc.mailbox_bytes if desc.coe else 0
    words += struct.pack("<IIII", desc.vendor_id, desc.product_code, desc.revision, serial)
    words += b"\x00" * 8  # 0x10-0x13 execution delay, port delays, reserved
    words += b"\x00" * 8  # 0x14-0x17 bootstrap mailbox (no bootstrap)
    words += struct.pack(
        "<HHHHH",
        desc.mailbox_out_start if mbx else 0,
        mbx,
        desc.mailbox_in_start if mbx else 0,
        mbx,
        MBX_PROTO_COE if desc.coe else 0,
    )
    words += b"\x00" * (0x3E * 2 - len(words))
    words += struct.pack("<HH", SII_BYTES * 8 // 1024 - 1, 1)
    strings = [desc.name, desc.group, desc.name, *desc.extra_strings]
    body = b""
    # General (ETG.2010 Table 8): 0 group, 1 image, 2 order, 3 name idx, 5 CoE details
    # (description.COE_*: SDO, SDO info, PDO assign/configuration, complete access), 11 flags.
    general = bytearray(32)
    general[0], general[2], general[3] = 2, 3, 1
    general[5] = desc.coe_details
    general[14] = 2
    body += _category(CAT_GENERAL, bytes(general))
    body += _category(CAT_FMMU, bytes([1, 2, 3 if desc.coe else 0, 0]))
    sms = b""
    if desc.coe:
        sms += struct.pack("<HHBBBB", desc.mailbox_out_start, mbx, SM_CTRL_MBX_OUT, 0, 1, SM_TYPE_MBX_OUT)
        sms += struct.pack("<HHBBBB", desc.mailbox_in_start, mbx, SM_CTRL_MBX_IN, 0, 1, SM_TYPE_MBX_IN)
    else:  # placeholders keep SM2/SM3 at their numbers; SOEM skips SMs whose start is 0
        sms += b"\x00" * 16
    sms += struct.pack(
        "<HHBBBB",
        desc.outputs_start,
        desc.output_bytes,
        SM_CTRL_OUTPUTS,
        0,
        1 if desc.output_bytes else 0,
        SM_TYPE_OUTPUTS,
    )
    sms += struct.pack(
        "<HHBBBB", desc.inputs_start, desc.input_bytes, SM_CTRL_INPUTS, 0, 1 if desc.input_bytes else 0, SM_TYPE_INPUTS
    )
    body += _category(CAT_SYNCM, sms)
    if desc.tx_pdos:
        body += _category(CAT_TXPDO, _pdo_category(desc.tx_pdos, 3, strings))
    if desc.rx_pdos:
        body += _category(CAT_RXPDO, _pdo_category(desc.rx_pdos, 2, strings))
    encoded = [s.encode("ascii", "replace")[:255] for s in strings]
    table = bytes([len(encoded)]) + b"".join(bytes([len(s)]) + s for s in encoded)
    image = bytes(words) + _category(CAT_STRINGS, table) + body + struct.pack("<H", CAT_END)
    if len(image) > SII_BYTES:
        raise ValueError(f"SII image of {len(image)} bytes does not fit {SII_BYTES}")
    return image + b"\xff" * (SII_BYTES - len(image))


@dataclass(frozen=True)
class SiiInfo:
    """What a master needs from an SII image."""

    vendor_id: int
    product_code: int
    revision: int
    serial: int
    mailbox_bytes: int
    protocols: int
    name: str
    rx_pdos: tuple[Pdo, ...]
    tx_pdos: tuple[Pdo, ...]
    coe_details: int = 0  #: General category byte 5 (description.COE_*)

    @property
    def has_coe(self) -> bool:
        return bool(self.mailbox_bytes and self.protocols & MBX_PROTO_COE)


def iter_categories(image: bytes):
    """Yield ``(type, data)`` for each category, stopping at the end marker or the image end."""
    pos = 0x40 * 2
    while pos + 4 <= len(image):
        cat, words = struct.unpack_from("<HH", image, pos)
        if cat == CAT_END:
            return
        yield cat, image[pos + 4 : pos + 4 + 2 * words]
        pos += 4 + 2 * words


def _parse_pdos(data: bytes, strings: list[str]) -> tuple[Pdo, ...]:
    pdos, pos = [], 0
    while pos + 8 <= len(data):
        index, n, sm, _sync, name_idx, _flags = struct.unpack_from("<HBBBBH", data, pos)
        pos += 8
        entries = []
        for _ in range(n):
            e_index, sub, e_name, dtype, bits, _f = struct.unpack_from("<HBBBBH", data, pos)
            pos += 8
            entries.append(PdoEntry(e_index, sub, bits, dtype, _string(strings, e_name)))
        if sm != 0xFF:  # SM 0xFF: PDO not assigned (ETG.2010 Table 12)
            pdos.append(Pdo(index, tuple(entries), _string(strings, name_idx)))
    return tuple(pdos)


def _string(strings: list[str], idx: int) -> str:
    return strings[idx - 1] if 0 < idx <= len(strings) else ""


def parse_image(image: bytes) -> SiiInfo:
    """Parse identity, mailbox, strings and fixed PDOs from an SII image."""
    vendor, product, rev, serial = struct.unpack_from("<IIII", image, 0x08 * 2)
    _rx_off, mbx, _tx_off, _tx_size, protocols = struct.unpack_from("<HHHHH", image, 0x18 * 2)
    cats = list(iter_categories(image))
    strings: list[str] = []
    for cat, data in cats:
        if cat == CAT_STRINGS and data:
            pos = 1
            for _ in range(data[0]):
                n = data[pos]
                strings.append(data[pos + 1 : pos + 1 + n].decode("ascii", "replace"))
                pos += 1 + n
    rx = tuple(p for cat, d in cats if cat == CAT_RXPDO for p in _parse_pdos(d, strings))
    tx = tuple(p for cat, d in cats if cat == CAT_TXPDO for p in _parse_pdos(d, strings))
    general = next((d for cat, d in cats if cat == CAT_GENERAL), b"")
    details = general[5] if len(general) > 5 else 0
    # The device's name: the string the General category's NameIdx (byte 3) points at (ETG.2010
    # Table 8), as SOEM takes it; the first string is often the group or the order number.
    name = _string(strings, general[3]) if len(general) > 3 else (strings[0] if strings else "")
    return SiiInfo(vendor, product, rev, serial, mbx, protocols, name, rx, tx, details)
