"""The rig's stable identity: which machine a run was measured on (platform layer).

A lab's history names each rig (a test PC) by an id that survives a re-install, a new kernel, a
new host name or a new IP address, as rteval's results server did (``sysid = sha1(SystemUUID:SerialNo)``
from DMI; rteval ``server/sql/rteval-1.5.sql``):

1. DMI/SMBIOS: the system UUID and the board serial, ``/sys/class/dmi/id/product_uuid`` and
   ``board_serial`` (kernel ``Documentation/ABI/testing/sysfs-firmware-dmi-tables`` and
   ``drivers/firmware/dmi-id.c``: both readable by root only, mode 0400). They belong to the
   hardware, so a re-imaged rig keeps its id.
2. Else the systemd machine id, ``/etc/machine-id`` (machine-id(5): "should be considered
   confidential, and must not be exposed in untrusted environments", hence hashed here; it
   changes with a re-install).
3. Windows: the ``MachineGuid`` of ``HKLM\\SOFTWARE\\Microsoft\\Cryptography`` (set at install).

The id is the first 16 hex digits of a SHA-1 over the source and its values, so the raw serials
never leave the rig. A rig measured both as root and as a user gets the DMI id as root only; softrt
run is normally root.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from . import IS_WINDOWS
from .kfiles import read_text

#: Values firmware vendors leave in DMI fields they did not fill (dmidecode's ``dmi_system_uuid``
#: and the common placeholders): no identity.
_PLACEHOLDERS = {
    "",
    "none",
    "not specified",
    "default string",
    "to be filled by o.e.m.",
    "not applicable",
    "system serial number",
    "0",
    "00000000-0000-0000-0000-000000000000",
    "ffffffff-ffff-ffff-ffff-ffffffffffff",
    "03000200-0400-0500-0006-000700080009",
}
ID_HEX_DIGITS = 16


def _value(root: Path, rel: str) -> str:
    text = read_text(root, rel, fallback="")
    return "" if text.strip().lower() in _PLACEHOLDERS else text.strip()


def _digest(*parts: str) -> str:
    return hashlib.sha1(":".join(parts).encode()).hexdigest()[:ID_HEX_DIGITS]


def rig_id(root: Path = Path("/")) -> str:
    """Return this machine's stable id (16 hex digits), or ``""`` when the OS exposes none.

    *root* is the file system root to read (tests give a directory holding ``sys/`` and ``etc/``).
    """
    uuid = _value(root, "sys/class/dmi/id/product_uuid").lower()
    serial = _value(root, "sys/class/dmi/id/board_serial")
    if uuid or serial:
        return _digest("dmi", uuid, serial)
    machine_id = _value(root, "etc/machine-id")
    if machine_id:
        return _digest("machine-id", machine_id)
    if IS_WINDOWS and Path(root) == Path("/"):
        guid = _windows_machine_guid()
        if guid:
            return _digest("machine-guid", guid.lower())
    return ""


def _windows_machine_guid() -> str:
    """``MachineGuid`` (Windows registry); "" when it cannot be read."""
    try:
        import winreg  # type: ignore[import-not-found]

        with winreg.OpenKey(winreg.HKEY_LOCAL_MACHINE, r"SOFTWARE\Microsoft\Cryptography") as key:
            return str(winreg.QueryValueEx(key, "MachineGuid")[0]).strip()
    except OSError:
        return ""
