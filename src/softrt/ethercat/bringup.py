"""Bus bring-up with pysoem: interface checks, discovery, PDO maps, DC, INIT → OP, and back.

Each step raises :class:`.errors.EcatError` with what was seen (states, AL status codes); the
caller then calls :func:`shutdown`, which requests INIT (with the error acknowledge) and closes
the socket, so a failed bring-up leaves the bus safe. The AL state sequence is ETG.1000.6 §6.4.1;
SOEM's own steps per phase are in the feasibility study §1.
"""

from __future__ import annotations

import struct
import time
from dataclasses import dataclass

from .al import AlStatusCode, state_name
from .errors import EcatError
from .mapping import DriveMap, drive_map, missing_objects, pdos_from_mapping
from .sii import MBX_PROTO_COE, parse_image
from .netif import check_interface

_INIT, _PREOP, _SAFEOP, _OP, _ACK = 0x01, 0x02, 0x04, 0x08, 0x10


@dataclass
class SlaveInfo:
    """What bring-up learned about one slave."""

    position: int
    name: str
    vendor_id: int
    product_code: int
    has_coe: bool
    has_dc: bool
    drive: DriveMap | None
    missing: list[int]


def open_master(iface: str):
    """Return an opened ``pysoem.Master`` on *iface*."""
    import pysoem

    m = pysoem.Master()
    try:
        m.open(iface)
    except ConnectionError as err:
        raise EcatError("config", iface, f"pysoem could not open the interface ({err})") from err
    return m


def describe_states(m) -> dict:
    """Return ``{"slave N 'name'": "SAFEOP+ERR, AL status code 0x001D (...)"}`` after a state read."""
    try:
        m.read_state()
    except Exception:  # noqa: BLE001 - a dead bus must not hide the original error
        return {}
    seen = {}
    for i, s in enumerate(m.slaves or []):
        text = state_name(s.state)
        code = s.al_status
        if code:
            try:
                label = AlStatusCode(code).name.lower().replace("_", " ")
            except ValueError:
                label = "vendor specific"
            text += f", AL status code 0x{code:04X} ({label})"
        seen[f"slave {i} '{s.name}'"] = text
    return seen


def _states_line(seen: dict) -> str:
    return "; ".join(f"{k}: {v}" for k, v in seen.items())


#: The largest SII image read (8 KiB: a category chain running past it is cut there).
SII_MAX_BYTES = 8192


def read_sii(slave) -> bytes:
    """Read a slave's SII image (header words 0x00-0x3F, then the categories) via pysoem."""
    image = bytearray()

    def fill(word_end: int) -> None:
        while len(image) < 2 * word_end:
            image.extend(slave.eeprom_read(len(image) // 2))

    fill(0x40)
    pos = 0x40 * 2
    while True:
        if pos + 4 > SII_MAX_BYTES:  # checked before reading: a bogus length must not read on
            return bytes(image)
        fill(pos // 2 + 2)
        cat, words = struct.unpack_from("<HH", image, pos)
        if cat == 0xFFFF:
            return bytes(image)
        pos += 4 + 2 * words


def _coe_pdos(slave, assign_index: int):
    n = slave.sdo_read(assign_index, 0)[0]
    assigned = []
    for sub in range(1, n + 1):
        pdo = struct.unpack("<H", slave.sdo_read(assign_index, sub)[:2])[0]
        count = slave.sdo_read(pdo, 0)[0]
        values = [struct.unpack("<I", slave.sdo_read(pdo, k)[:4])[0] for k in range(1, count + 1)]
        assigned.append((pdo, values))
    return pdos_from_mapping(assigned)


def discover(m, iface: str, want_dc: bool) -> list[SlaveInfo]:
    """Run ``config_init`` and learn every slave's identity, protocols and CSP map."""
    import pysoem

    count = m.config_init(release_gil=True)
    if count <= 0:
        raise EcatError("no_slaves", iface, f"no slaves answered (config_init returned {count})",
                        seen={"config_init": count},
                        hint="check the cable/link and that the first slave is powered")
    if m.state_check(_PREOP, 2_000_000) != _PREOP:
        seen = describe_states(m)
        raise EcatError("state_timeout", iface, f"not all slaves reached PREOP: {_states_line(seen)}", seen=seen)
    infos = []
    for i, s in enumerate(m.slaves):
        image = read_sii(s)
        sii = parse_image(image if len(image) >= 0x3A else image + bytes(0x3A))
        has_coe = bool(sii.mailbox_bytes and sii.protocols & MBX_PROTO_COE)
        rx, tx = sii.rx_pdos, sii.tx_pdos
        if has_coe:
            try:
                rx, tx = _coe_pdos(s, 0x1C12), _coe_pdos(s, 0x1C13)
            except (pysoem.SdoError, pysoem.MailboxError, pysoem.WkcError):
                pass  # fall back to the SII PDOs, as SOEM does (ecx_map_sii)
        features = struct.unpack("<H", s._fprd(0x0008, 2))[0] if want_dc else 0
        infos.append(SlaveInfo(i, s.name, s.man, s.id, has_coe, bool(features & 0x0004),
                               drive_map(rx, tx), missing_objects(rx, tx)))
    return infos


def configure_csp(m, iface: str, infos: list[SlaveInfo], period_ns: int) -> None:
    """Set CSP mode (0x6060 = 8) and the interpolation period (0x60C2) by SDO on CoE drives."""
    import pysoem

    for info in infos:
        if info.drive is None or not info.has_coe:
            continue
        s = m.slaves[info.position]
        try:
            s.sdo_write(0x6060, 0, struct.pack("<b", 8))
        except (pysoem.SdoError, pysoem.MailboxError, pysoem.WkcError) as err:
            raise EcatError("unsupported_drive", iface,
                            f"slave {info.position} '{info.name}' refuses CSP mode (0x6060 = 8): {err}") from err
        exponent, value = -9, period_ns
        while value > 255 and value % 10 == 0:
            value, exponent = value // 10, exponent + 1
        try:  # optional on many drives: a refusal is not fatal
            s.sdo_write(0x60C2, 1, bytes([value & 0xFF]))
            s.sdo_write(0x60C2, 2, struct.pack("<b", exponent))
        except (pysoem.SdoError, pysoem.MailboxError, pysoem.WkcError):
            pass


def set_watchdog(m, iface: str, watchdog_ms: float) -> None:
    """Program the process-data watchdog (0x0420, in units of 0x0400; ETG.1000.4 §6.6) of every slave."""
    import warnings

    import pysoem

    for i, s in enumerate(m.slaves):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)  # rounding to the 100 µs unit
                s.set_watchdog("processdata", watchdog_ms)
        except (AttributeError, pysoem.WkcError) as err:
            raise EcatError("config", iface, f"slave {i} '{s.name}': cannot set the watchdog to {watchdog_ms} ms ({err})") from err


def map_and_safeop(m, iface: str, timeout_s: float) -> int:
    """Map the PDOs (``config_map`` requests SAFEOP) and wait for SAFEOP; return the IO map size."""
    import pysoem

    try:
        size = m.config_map()
    except pysoem.ConfigMapError as err:
        raise EcatError("config", iface, f"PDO mapping failed: {err.error_list}") from err
    if m.state_check(_SAFEOP, int(timeout_s * 1e6)) != _SAFEOP:
        seen = describe_states(m)
        raise EcatError("state_timeout", iface, f"not all slaves reached SAFEOP: {_states_line(seen)}", seen=seen)
    return size


def setup_dc(m, infos: list[SlaveInfo], period_ns: int) -> bool:
    """Measure delays, set offsets (``config_dc``) and start SYNC0 at *period_ns* on DC slaves."""
    if not any(i.has_dc for i in infos) or not m.config_dc():
        return False
    for info in infos:
        if info.has_dc:
            m.slaves[info.position].dc_sync(True, period_ns)
    return True


def request_op(m, iface: str, exchange, period_s: float, timeout_s: float) -> None:
    """Request OP while exchanging process data (drives want valid outputs first); wait for it."""
    for _ in range(10):
        exchange()
        time.sleep(period_s)
    m.state = _OP
    m.write_state()
    deadline = time.monotonic() + timeout_s
    checked = time.monotonic()
    while time.monotonic() < deadline:
        exchange()
        if time.monotonic() - checked > 0.005:
            checked = time.monotonic()
            if m.read_state() == _OP:
                return
        time.sleep(period_s)
    seen = describe_states(m)
    raise EcatError("state_timeout", iface, f"not all slaves reached OP in {timeout_s:g} s: {_states_line(seen)}",
                    seen=seen)


def shutdown(m) -> None:
    """Request INIT on every slave (acknowledging errors) and close the master; never raises."""
    try:
        m.state = _INIT | _ACK
        m.write_state()
        m.state_check(_INIT, 500_000)
    except Exception:  # noqa: BLE001 - best effort on the way out
        pass
    try:
        m.close()
    except Exception:  # noqa: BLE001
        pass
