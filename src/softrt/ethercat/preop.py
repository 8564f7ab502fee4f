"""Drive configuration in PRE-OP by SDO (pysoem): identity, axes, PDO assignment and mapping.

What a configuration tool's start-up list does before SAFEOP (ETG.1000.6 §5.6.7.4; CiA 301
§7.5.2.35/36 for the order): for each PDO mapping object, subindex 0 := 0, the entries, then
subindex 0 := their count; then the same for the assignment objects 0x1C12/0x1C13. Only objects
that differ from what the drive reports are written, so a drive already mapped as described is
left untouched. A drive whose first write is refused (read-only, unsupported, wrong state: the
abort codes in ``REFUSALS``) does not allow assignment: with ``assign = "auto"`` its own mapping
is used. Any other refusal is a failure that names the slave and the object.

Identity and errors (CiA 301 §7.5.2): 0x1018 vendor/product/revision/serial, 0x1008 device
name, 0x1001 error register, and 0x603F error code of each axis (CiA 402-2 §8.4.1). Each is
optional: a drive that lacks one reports ``None`` for it.
"""

from __future__ import annotations

import struct
import time

from ..schema.device import Slave
from .description import AXIS_OBJECT_OFFSET, AXIS_PDO_OFFSET, MAX_AXES_PER_DEVICE, Pdo, PdoEntry, axis_index
from .drives import DrivePlan, entry_text
from .errors import EcatError
from .mapping import pdos_from_mapping

RX_ASSIGN, TX_ASSIGN = 0x1C12, 0x1C13
#: Abort codes that mean "this drive does not let you assign PDOs" (CiA 301 Table 22):
#: unsupported access, read-only, no such object, cannot be stored (local control / device state).
REFUSALS = (0x06010000, 0x06010002, 0x06020000, 0x08000020, 0x08000021, 0x08000022)


def sdo_errors():
    """The pysoem exceptions an SDO transfer raises."""
    import pysoem

    return (pysoem.SdoError, pysoem.MailboxError, pysoem.PacketError, pysoem.WkcError)


def sdo_error_text(err: Exception) -> str:
    """One phrase for a pysoem SDO failure: ``SDO abort 0x06010002 (Attempt to write a read only object)``."""
    code = getattr(err, "abort_code", None)
    if code is not None:
        return f"SDO abort 0x{code:08X} ({getattr(err, 'desc', '')})"
    if hasattr(err, "error_code"):
        return f"{type(err).__name__} {err.error_code} ({getattr(err, 'desc', '')})".replace(" ()", "")
    return f"no answer ({type(err).__name__}: working counter {getattr(err, 'wkc', 0)})"


#: SDO transfers tried again when the mailbox gave no answer at all (pysoem.WkcError: SOEM's
#: receive timed out), as opposed to an answer that the object is missing (an SDO abort). A busy
#: master host missed a mailbox answer now and then (1 run in ~5 of the test suite): a CiA 402
#: drive whose statusword read went unanswered was taken for a slave without CSP objects, exit 2.
NO_ANSWER_RETRIES = 2
#: How long the answer to a request SOEM gave up on is waited for, and read out, before the
#: request is sent again (see _read_out_late_answer).
LATE_ANSWER_S = 0.2


def _answered(slave, transfer):
    """Return ``transfer()`` (an SDO transfer of *slave*), tried NO_ANSWER_RETRIES more times when
    no answer came at all."""
    import pysoem

    for _ in range(NO_ANSWER_RETRIES):
        try:
            return transfer()
        except pysoem.WkcError:
            _read_out_late_answer(slave)
    return transfer()


def _read_out_late_answer(slave) -> None:
    """Read out the answer a slave may still give to the request SOEM just gave up on.

    "No answer" can be an answer too late: the request reached the slave while the frame that
    carried it, or its answer, was held past SOEM's timeouts (a stalled host or slave). That answer
    then waits in the slave's mailbox, and SOEM takes the first answer whose *index* matches as the
    next request's (ecx_SDOread compares index, not subindex; it empties the mailbox once, with no
    wait, before it sends): 0x1600:01's value read as 0x1600:02's. So before trying again, wait a
    while for a late answer and drop it; a request that never arrived costs LATE_ANSWER_S."""
    import pysoem

    end = time.monotonic() + LATE_ANSWER_S
    while time.monotonic() < end:
        try:
            if slave.mbx_receive() > 0:
                return
        except (*sdo_errors(), pysoem.Emergency):
            pass  # (a mailbox error or an emergency: not the answer waited for; keep reading)
        time.sleep(0.001)


def sdo_read(slave, index: int, sub: int, size: int = 0) -> bytes:
    """``slave.sdo_read`` (*size* 0: pysoem's default, objects up to 256 bytes), tried again when
    no answer came (see :func:`_answered`)."""
    return _answered(slave, lambda: slave.sdo_read(index, sub, size))


def sdo_write(slave, index: int, sub: int, data: bytes) -> None:
    """``slave.sdo_write``, tried again when no answer came (see :func:`_answered`): every write
    softrt makes sets a value, so writing it twice does no harm."""
    _answered(slave, lambda: slave.sdo_write(index, sub, data))


def read_uint(slave, index: int, sub: int, size: int) -> int | None:
    """Read an unsigned object of *size* bytes; None if the drive lacks it or does not answer."""
    try:
        data = sdo_read(slave, index, sub)
    except sdo_errors():
        return None
    return int.from_bytes(data[:size].ljust(size, b"\0"), "little")


def read_identity(slave, axes: int) -> Slave:
    """What the drive says about itself, as the summary's :class:`~softrt.schema.device.Slave` whose
    other fields bring-up fills in (:meth:`.bringup.SlaveInfo.report`): 0x1018, 0x1008, 0x1001 and
    each axis's 0x603F."""
    vendor_id, product_code, revision, serial = (read_uint(slave, 0x1018, sub, 4) for sub in (1, 2, 3, 4))
    try:
        device_name = sdo_read(slave, 0x1008, 0, 512).rstrip(b"\0").decode("utf-8", "replace")
    except sdo_errors():
        device_name = None
    error_register, error_codes = read_errors(slave, axes)
    return Slave(
        vendor_id=vendor_id,
        product_code=product_code,
        revision=revision,
        serial=serial,
        device_name=device_name,
        error_register=error_register,
        error_codes=list(error_codes),
    )


def read_errors(slave, axes: int) -> tuple[int | None, tuple[int | None, ...]]:
    """Return the error register (0x1001) and each axis's error code (0x603F) now."""
    return read_uint(slave, 0x1001, 0, 1), tuple(read_uint(slave, axis_index(0x603F, n), 0, 2) for n in range(axes))


def read_assigned(slave, assign: int) -> list[tuple[int, list[int]]]:
    """Return ``[(pdo index, [mapping values])]`` of 0x1C12 or 0x1C13, read subindex by subindex."""
    n = sdo_read(slave, assign, 0)[0]
    assigned = []
    for sub in range(1, n + 1):
        pdo = struct.unpack("<H", sdo_read(slave, assign, sub)[:2])[0]
        count = sdo_read(slave, pdo, 0)[0]
        assigned.append((pdo, [struct.unpack("<I", sdo_read(slave, pdo, k)[:4])[0] for k in range(1, count + 1)]))
    return assigned


def read_pdos(slave) -> tuple[tuple[Pdo, ...], tuple[Pdo, ...]]:
    """The drive's RxPDOs and TxPDOs as it reports them now."""
    return pdos_from_mapping(read_assigned(slave, RX_ASSIGN)), pdos_from_mapping(read_assigned(slave, TX_ASSIGN))


def count_axes(slave) -> int:
    """Count the CiA 402 axes that answer (statusword 0x6041 + n·0x800)."""
    axes = 1
    while axes < MAX_AXES_PER_DEVICE and read_uint(slave, 0x6041 + axes * AXIS_OBJECT_OFFSET, 0, 2) is not None:
        axes += 1
    return axes


def wanted_objects(plan: DrivePlan, axes: int) -> dict[int, list[int]]:
    """``{object: [values]}`` the plan asks for: mapping objects per axis, then 0x1C12/0x1C13."""
    out: dict[int, list[int]] = {}
    for base, entries in ((0x1600, plan.rx), (0x1A00, plan.tx)):
        for n in range(axes):
            out[base + n * AXIS_PDO_OFFSET] = [
                (axis_index(e.index, n) << 16) | (e.subindex << 8) | e.bits for e in entries
            ]
    out[RX_ASSIGN] = [0x1600 + n * AXIS_PDO_OFFSET for n in range(axes)]
    out[TX_ASSIGN] = [0x1A00 + n * AXIS_PDO_OFFSET for n in range(axes)]
    return out


def assign_pdos(slave, where: str, iface: str, plan: DrivePlan, axes: int) -> str:
    """Assign and map the plan's PDOs on a drive in PRE-OP; return how its PDOs were set.

    Returns ``"assigned by SDO"``, ``"already as described"`` or, when the drive refuses the
    first write and the plan's ``assign`` is ``auto``, ``"the drive's own (...)"``. Raises
    EcatError naming *where* (``slave N 'name'``) and the object for any other failure.
    """
    try:
        rx, tx = read_assigned(slave, RX_ASSIGN), read_assigned(slave, TX_ASSIGN)
    except sdo_errors() as err:  # it cannot say what it has: nothing to compare with, nothing written
        if plan.assign == "always":
            raise EcatError(
                "config",
                iface,
                f"{where}: reading its PDO assignment (0x1C12/0x1C13) failed: {sdo_error_text(err)}",
                hint='set assign = "auto" to use its SII PDOs',
            ) from None
        return f"the SII's (0x1C12/0x1C13 cannot be read: {sdo_error_text(err)})"
    current = {pdo: values for pdo, values in (*rx, *tx)}
    current[RX_ASSIGN], current[TX_ASSIGN] = [p for p, _ in rx], [p for p, _ in tx]
    wanted = wanted_objects(plan, axes)
    todo = [(index, values) for index, values in wanted.items() if _current(slave, index, current) != values]
    if not todo:
        return "already as described"
    first = True
    for index, values in todo:
        try:
            _write_object(slave, index, values, first)
        except _Refused as refused:
            if plan.assign == "always":
                raise EcatError(
                    "config",
                    iface,
                    f"{where} refuses PDO assignment: writing {refused.what} got {refused.text}",
                    hint='set assign = "auto" to use the drive\'s own mapping, '
                    "or configure its PDOs with the vendor's tool",
                ) from None
            return f"the drive's own ({refused.what} is not writable: {refused.text})"
        except _Failed as failed:
            raise EcatError(
                "config",
                iface,
                f"{where}: writing {failed.what} failed: {failed.text}",
                hint="check the drive description (--ecat-drives) against the drive's manual: "
                "which objects it can map, and how many",
            ) from None
        first = False
    return "assigned by SDO"


class _WriteError(Exception):
    def __init__(self, what: str, text: str) -> None:
        super().__init__(what)
        self.what, self.text = what, text


class _Refused(_WriteError):
    """The drive does not allow PDO assignment (its first write was refused)."""


class _Failed(_WriteError):
    """A write failed part-way: the description asks for something this drive cannot do."""


def _current(slave, index: int, known: dict[int, list[int]]) -> list[int] | None:
    if index in known:
        return known[index]
    try:  # a mapping object that is not assigned now
        count = sdo_read(slave, index, 0)[0]
        return [struct.unpack("<I", sdo_read(slave, index, k)[:4])[0] for k in range(1, count + 1)]
    except sdo_errors():
        return None


def _write_object(slave, index: int, values: list[int], first: bool) -> None:
    fmt = "<H" if index in (RX_ASSIGN, TX_ASSIGN) else "<I"
    steps = [(0, b"\x00", "0")] + [
        (sub, struct.pack(fmt, v), _value_text(index, v)) for sub, v in enumerate(values, start=1)
    ]
    steps.append((0, bytes([len(values)]), str(len(values))))
    for k, (sub, data, shown) in enumerate(steps):
        try:
            sdo_write(slave, index, sub, data)
        except sdo_errors() as err:
            what = f"0x{index:04X}:{sub:02X} = {shown}"
            code = getattr(err, "abort_code", None)
            if first and k == 0 and code in REFUSALS:
                raise _Refused(what, sdo_error_text(err)) from None
            raise _Failed(what, sdo_error_text(err)) from None


def _value_text(index: int, value: int) -> str:
    if index in (RX_ASSIGN, TX_ASSIGN):
        return f"0x{value:04X}"
    return entry_text(PdoEntry(value >> 16, (value >> 8) & 0xFF, value & 0xFF, 0))
