"""Bus bring-up with pysoem: interface checks, discovery, PDO maps, DC, INIT → OP, and back.

Drive configuration in PRE-OP (identity, axes, PDO assignment by SDO) is :mod:`.preop`.

Each step runs under :class:`.steps.Steps` (a deadline tied to the bus timeout and the slave count;
a bus gone silent ends it at once) and raises :class:`.errors.EcatError` with the step, the slave,
what was expected and what was seen (states, AL status codes); the caller then calls
:func:`shutdown`, which requests INIT (with the error acknowledge) and closes the socket, so a
failed bring-up leaves the bus safe. The AL state sequence is ETG.1000.6 §6.4.1; SOEM's own steps
per phase are in the feasibility study §1.
"""

from __future__ import annotations

import struct
import time
from dataclasses import dataclass

from ..schema.device import Slave
from . import preop
from .al import AlStatusCode, state_name
from .description import MAX_AXES_PER_DEVICE, axis_index
from .drives import DriveConfig
from .errors import EcatError, MappingRefused
from .mapping import DriveMap, drive_maps, missing_objects
from .sii import parse_image
from .steps import Steps, read_register

_INIT, _PREOP, _SAFEOP, _OP, _ACK = 0x01, 0x02, 0x04, 0x08, 0x10
_STATE_NAMES = {_PREOP: "PRE-OP", _SAFEOP: "SAFE-OP", _OP: "OP"}
#: Step deadlines (s): the scan (SOEM's config_init: identities and SII categories of every
#: slave), per slave its SII image and its PRE-OP configuration by SDO, the mapping per slave.
SCAN_S, SII_S, PREOP_CONFIG_S, MAPPING_S = 3.0, 3.0, 3.0, 1.0
#: AL status codes of a slave that refuses the process data SyncManagers it was given.
_SM_REFUSALS = (AlStatusCode.INVALID_OUTPUT_CONFIG, AlStatusCode.INVALID_INPUT_CONFIG)
#: The identity fields a slave's SII holds too (0x1018's): the report takes them from there when the
#: drive does not say them over CoE.
_SII_IDENTITY = ("vendor_id", "product_code", "revision", "serial")


@dataclass
class SlaveInfo:
    """What bring-up learned about one slave."""

    position: int
    name: str
    vendor_id: int
    product_code: int
    has_coe: bool
    has_dc: bool
    #: One map per usable CiA 402 axis (axis n's objects at + n·0x800); empty: not a CSP drive.
    drives: list[DriveMap]
    missing: list[int]  #: axis 0's missing CSP objects when ``drives`` is empty
    revision: int = 0
    serial: int = 0
    output_bytes: int = 0  #: what its PDOs take in the process image (SOEM must map as much)
    input_bytes: int = 0
    pdo_source: str = "SII"  #: where its PDOs came from (see :func:`discover`)
    identity: Slave | None = None  #: what the drive says about itself (CoE: preop.read_identity)

    @property
    def drive(self) -> DriveMap | None:
        """Axis 0's map (None: not a CSP drive)."""
        return self.drives[0] if self.drives else None

    def where(self) -> str:
        return f"slave {self.position} '{self.name}'"

    def report(self) -> Slave:
        """Identity, PDO source and errors, for the run summary's board section: what the drive said
        over CoE (``identity``), where it lacks an identity object what its SII holds."""
        said = self.identity or Slave()
        sii = {name: getattr(self, name) for name in _SII_IDENTITY if getattr(said, name) is None}
        return said.replace(position=self.position, name=self.name, axes=len(self.drives), pdo=self.pdo_source, **sii)


def open_master(iface: str):
    """Return an opened ``pysoem.Master`` on *iface*; its calls release the GIL where pysoem can
    (so a step's deadline timer runs while SOEM waits, :mod:`.steps`)."""
    import pysoem

    m = pysoem.Master()
    try:
        m.open(iface)
    except ConnectionError as err:
        raise EcatError("config", iface, f"pysoem could not open the interface ({err})") from err
    m.always_release_gil = True
    return m


def describe_states(m) -> dict[str, str]:
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


#: Reads of zeros an SII image reading may try again (in all): SOEM's EEPROM read returns zeros
#: when the slave did not answer in time (a host stall past its 20 ms wait), and an SII holds zeros
#: of its own too (reserved header words). Taken as data, a zeroed category header cut a drive's
#: PDO categories off: no PDOs, "lacks 0x6040, 0x607A, 0x6041, 0x6064" (a suite run on this VM).
ZERO_REREADS = 128


def read_sii(slave, steps: Steps | None = None) -> bytes:
    """Read a slave's SII image (header words 0x00-0x3F, then the categories) via pysoem.

    SOEM's EEPROM read returns zeros when the slave does not answer: a read of zeros asks
    *steps* whether the bus went silent (and every read, whether the step is past its deadline),
    and is read twice more (at most :data:`ZERO_REREADS` times in all); zeros read three times are
    the SII's own.
    """
    image = bytearray()
    rereads = ZERO_REREADS

    def fill(word_end: int) -> None:
        nonlocal rereads
        while len(image) < 2 * word_end:
            word = len(image) // 2
            data, tries = slave.eeprom_read(word), 0
            while not any(data):
                if steps is not None:  # (raises if the bus went silent)
                    steps.failure(f"its SII EEPROM read as zeros at word 0x{word:04X}")
                if tries == 2 or not rereads:
                    break
                tries, rereads = tries + 1, rereads - 1
                data = slave.eeprom_read(word)
            if steps is not None and any(data):
                steps.check()
            image.extend(data)

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


def discover(
    m,
    iface: str,
    want_dc: bool,
    config: DriveConfig | None = None,
    on_emergency=None,
    steps: Steps | None = None,
    state_timeout_s: float = 3.0,
) -> list[SlaveInfo]:
    """Run ``config_init`` and learn every slave's identity, protocols, axes and CSP maps.

    A CoE drive (one whose statusword 0x6041 answers) gets the PDOs of its plan in *config*
    (:mod:`.drives`; the CSP defaults without one) assigned by SDO in PRE-OP
    (:func:`.preop.assign_pdos`); its identity and errors are read. Other slaves keep their
    PDOs: from 0x1C12/0x1C13 with CoE, else from the SII (as SOEM does, ``ecx_map_sii``).
    *on_emergency* (a pysoem emergency callback) is registered on every CoE slave.
    """
    config = config or DriveConfig()
    steps = steps or Steps(m, iface, 10_000_000)
    with steps.step("scan", "every slave to answer the scan and its identity", SCAN_S):
        count = m.config_init(release_gil=True)
        if count <= 0:
            raise EcatError(
                "no_slaves",
                iface,
                f"no slaves answered (config_init returned {count})",
                seen={"config_init": count},
                hint="check the cable/link and that the first slave is powered",
            )
    wait_state(m, steps, _PREOP, state_timeout_s)
    infos = []
    for i, s in enumerate(m.slaves):
        where = f"slave {i} '{s.name}'"
        with steps.step("SII", "its SII EEPROM image", SII_S):
            steps.at(where)
            image = read_sii(s, steps)
        with steps.step("PRE-OP configuration", "its identity and PDOs (SDO, registers)", PREOP_CONFIG_S):
            steps.at(where)
            infos.append(_configure(s, i, image, iface, want_dc, config, on_emergency, steps))
    return infos


def _configure(
    s, i: int, image: bytes, iface: str, want_dc: bool, config: DriveConfig, on_emergency, steps: Steps
) -> SlaveInfo:
    """What :func:`discover` learns about slave *i* in PRE-OP (see there)."""
    sii = parse_image(image if len(image) >= 0x3A else image + bytes(0x3A))
    # Identity from softrt's own SII read, which reads a word of zeros again (read_sii); SOEM's,
    # read once in config_init, had a name cut at a zero ("softrt vir") when this VM stalled.
    info = SlaveInfo(
        i,
        sii.name or s.name,
        sii.vendor_id or s.man,
        sii.product_code or s.id,
        sii.has_coe,
        False,
        [],
        [],
        sii.revision,
        sii.serial,
    )
    rx, tx, axes = sii.rx_pdos, sii.tx_pdos, MAX_AXES_PER_DEVICE
    if info.has_coe:
        if on_emergency is not None:
            s.add_emergency_callback(on_emergency)
        if preop.read_uint(s, 0x6041, 0, 2) is not None:  # a CiA 402 drive
            plan = config.plan_for(i, s.man, s.id)
            axes = plan.axes or preop.count_axes(s)
            if plan.assign != "never":
                info.pdo_source = preop.assign_pdos(s, info.where(), iface, plan, axes)
            info.identity = preop.read_identity(s, axes)
        try:
            rx, tx = preop.read_pdos(s)
            if info.pdo_source == "SII":
                info.pdo_source = "the drive's own"
        except preop.sdo_errors():
            pass  # fall back to the SII PDOs, as SOEM does (ecx_map_sii)
        steps.confirm("its CoE mailbox did not answer")  # SDO reads that failed may mean a dead bus
    features = struct.unpack("<H", read_register(steps, s, 0x0008, 2))[0] if want_dc else 0
    info.has_dc = bool(features & 0x0004)
    info.drives = drive_maps(rx, tx, axes)
    info.missing = [] if info.drives else missing_objects(rx, tx)
    info.output_bytes = (sum(p.bits for p in rx) + 7) // 8
    info.input_bytes = (sum(p.bits for p in tx) + 7) // 8
    return info


def wait_state(m, steps: Steps, state: int, timeout_s: float) -> None:
    """Wait (as step PRE-OP, SAFE-OP or OP) until every slave is in *state*; fail as soon as the
    bus is silent, or at the deadline with every slave's state and AL status code."""
    name = _STATE_NAMES[state]
    with steps.step(name, f"every slave in {name}", timeout_s):
        steps.until(lambda: m.read_state() == state, lambda: _not_reached(m, steps, name))


def _not_reached(m, steps: Steps, name: str) -> str:
    steps.seen = describe_states(m)
    return f"not all slaves reached {name}: {_states_line(steps.seen)}"


def description_warnings(config: DriveConfig | None, infos: list[SlaveInfo]) -> list[str]:
    """What a drive description asked for that this bus cannot take: a ``[[drive]]`` that
    matches no slave (a typo in its position or identity), or one that matches a slave
    without CoE (its PDOs come from the SII and cannot be assigned)."""
    warnings = []
    for n, match in enumerate(config.drives if config else (), start=1):
        hits = [i for i in infos if match.matches(i.position, i.vendor_id, i.product_code)]
        if not hits:
            warnings.append(f"drive description {config.source}: [[drive]] {n} matches no slave on the bus")
        warnings += [
            f"drive description {config.source}: [[drive]] {n} matches {i.where()}, which has no CoE "
            "mailbox: its SII PDOs are used"
            for i in hits
            if not i.has_coe
        ]
    return warnings


def configure_csp(m, iface: str, axes: list[tuple[SlaveInfo, int]], period_ns: int) -> None:
    """Set CSP mode (0x6060 = 8) and the interpolation period (0x60C2) by SDO on each CoE axis."""
    exponent, value = -9, period_ns
    while value > 255 and value % 10 == 0:
        value, exponent = value // 10, exponent + 1
    for info, axis in axes:
        if not info.has_coe:
            continue
        s = m.slaves[info.position]
        mode = axis_index(0x6060, axis)
        try:
            preop.sdo_write(s, mode, 0, struct.pack("<b", 8))
        except preop.sdo_errors() as err:
            raise EcatError(
                "unsupported_drive",
                iface,
                f"{info.where()} refuses CSP mode (0x{mode:04X} = 8): {preop.sdo_error_text(err)}",
            ) from err
        period = axis_index(0x60C2, axis)
        try:  # optional on many drives (and one for all axes on some): a refusal is not fatal
            preop.sdo_write(s, period, 1, bytes([value & 0xFF]))
            preop.sdo_write(s, period, 2, struct.pack("<b", exponent))
        except preop.sdo_errors():
            pass


def set_watchdog(m, iface: str, watchdog_ms: float, steps: Steps | None = None) -> None:
    """Program the process-data watchdog (0x0420, in units of 0x0400; ETG.1000.4 §6.6) of every slave
    (again while the bus answers others, until the step's deadline: one lost frame is not a refusal)."""
    import warnings

    import pysoem

    steps = steps or Steps(m, iface, 10_000_000)
    for i, s in enumerate(m.slaves):
        while True:
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", UserWarning)  # rounding to the 100 µs unit
                    s.set_watchdog("processdata", watchdog_ms)
                break
            except AttributeError as err:
                raise EcatError(
                    "config", iface, f"slave {i} '{s.name}': cannot set the watchdog to {watchdog_ms} ms ({err})"
                ) from err
            except pysoem.WkcError:
                steps.at(f"slave {i} '{s.name}'")
                steps.failure(f"its watchdog registers (0x0400, 0x0420) did not take {watchdog_ms} ms")


def map_and_safeop(m, iface: str, timeout_s: float, infos: list[SlaveInfo], steps: Steps | None = None) -> list[str]:
    """Map the PDOs (``config_map`` requests SAFEOP) and wait for SAFEOP; return warnings.

    pysoem raises ``ConfigMapError`` when SOEM's error list is not empty after
    ``ecx_config_map_group``, even when SOEM recovered: a slave that answers the complete-access
    read of its mapping with an abort is read again without complete access
    (``ecx_map_coe_soe``), and the mapping completes. The mapping is then checked: when every
    slave got the process data its PDOs need, those errors are warnings; otherwise the mapping
    failed, and the message names the slave.
    """
    import pysoem

    steps = steps or Steps(m, iface, 10_000_000)
    warnings = []
    with steps.step("mapping", "the PDO mapping (SyncManagers, FMMUs) of every slave", MAPPING_S * len(infos)):
        try:
            m.config_map()
        except pysoem.ConfigMapError as err:
            errors = [_map_error_text(e) for e in err.error_list]
            wrong = _mapped_otherwise(m, infos)
            if wrong:
                steps.confirm(f"PDO mapping failed on {wrong[0].where()}")
                raise EcatError(
                    "config", iface, f"PDO mapping failed on {_sizes(m, wrong[0])} ({'; '.join(errors)})"
                ) from err
            warnings += [f"PDO mapping: {e}; SOEM recovered (the mapping is complete)" for e in errors]
        steps.confirm("the slaves stopped answering during the mapping")  # SOEM does not check its writes
    try:
        wait_state(m, steps, _SAFEOP, timeout_s)
    except EcatError as err:  # (describe_states has just read every slave's AL status)
        refused = [s for s in m.slaves or () if s.al_status in _SM_REFUSALS]
        if refused and err.reason != "bus_lost":
            wrong = _mapped_otherwise(m, infos)
            said = err.msg.removeprefix(f"EtherCAT on {iface}: ") + (f"; on {_sizes(m, wrong[0])}" if wrong else "")
            raise MappingRefused(err.reason, iface, said, seen=err.seen) from err
        raise
    return warnings


def _mapped_otherwise(m, infos: list[SlaveInfo]) -> list[SlaveInfo]:
    """The slaves whose process data SOEM mapped with other sizes than softrt read their PDOs take."""
    return [
        i
        for i in infos
        if i.output_bytes + i.input_bytes
        and (len(m.slaves[i.position].output), len(m.slaves[i.position].input)) != (i.output_bytes, i.input_bytes)
    ]


def _sizes(m, info: SlaveInfo) -> str:
    s = m.slaves[info.position]
    return (
        f"{info.where()}: SOEM mapped {len(s.output)} output and {len(s.input)} input bytes, its PDOs take "
        f"{info.output_bytes} and {info.input_bytes}"
    )


def _map_error_text(err: Exception) -> str:
    """``slave 0: 0x1C00:00 SDO abort 0x06010000 (...)`` for an entry of SOEM's error list."""
    where = f"slave {err.slave_pos - 1}" if isinstance(getattr(err, "slave_pos", None), int) else "a slave"
    if hasattr(err, "index"):
        where += f": 0x{err.index:04X}:{err.subindex:02X}"
    return f"{where} {preop.sdo_error_text(err)}"


def setup_dc(m, infos: list[SlaveInfo], period_ns: int) -> bool:
    """Measure delays, set offsets (``config_dc``) and start SYNC0 at *period_ns* on DC slaves."""
    if not any(i.has_dc for i in infos) or not m.config_dc():
        return False
    for info in infos:
        if info.has_dc:
            m.slaves[info.position].dc_sync(True, period_ns)
    return True


def request_op(m, iface: str, exchange, period_s: float, timeout_s: float, steps: Steps | None = None) -> None:
    """Request OP while exchanging process data (drives want valid outputs first); wait for it."""
    steps = steps or Steps(m, iface, 10_000_000)
    with steps.step("OP", "every slave in OP", timeout_s):
        for _ in range(10):
            exchange()
            time.sleep(period_s)
        m.state = _OP
        m.write_state()

        def in_op() -> bool:
            exchange()
            return m.read_state() == _OP

        steps.until(in_op, lambda: _not_reached(m, steps, "OP"), poll_s=period_s)


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
