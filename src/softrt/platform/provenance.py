"""A run's provenance, read from what the OS exposes without extra tools (platform layer).

Linux (each read under *root*, so tests give captured trees, as :mod:`.linux.kfacts`):

- DMI: ``/sys/class/dmi/id/{bios_vendor,bios_version,bios_date,product_name,board_name}``, world
  readable (kernel ``drivers/firmware/dmi-id.c``; the serials and the UUID are root's only and are
  not recorded: :func:`softrt.platform.rig.rig_id` hashes them into the rig's id);
- the microcode revision: ``/proc/cpuinfo``'s ``microcode`` line (x86, ``arch/x86/kernel/cpu/proc.c``);
- an EtherCAT device's network card: ETHTOOL_GDRVINFO on a socket (``linux/ethtool.h``, what
  ``ethtool -i`` prints: driver, version, firmware-version, bus-info), else the driver's name from
  the ``/sys/class/net/<if>/device/driver`` link (``Documentation/ABI/testing/sysfs-class-net``).

Windows: the BIOS values firmware hands the OS, ``HKLM\\HARDWARE\\DESCRIPTION\\System\\BIOS``
(BIOSVendor, BIOSVersion, BIOSReleaseDate, SystemProductName, BaseBoardProduct), and the
microcode revision Windows reads at boot, ``…\\CentralProcessor\\0`` "Update Revision".

The kernel, command line, preemption model and CPU model are the host facts (``host_facts``).
"""

from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import Any

from ..schema.provenance import Nic, Provenance
from ..schema.text import printable
from . import IS_WINDOWS
from .kfiles import read_text
from .rig import rig_id

RIG_LABEL_ENV = "SOFTRT_RIG_LABEL"
MAX_LABEL = 80
DMI = "/sys/class/dmi/id"
#: collect()'s *tune_applied* when the caller did not ask (the key is then not written).
_UNASKED: Any = object()
_DMI_FIELDS = ("bios_vendor", "bios_version", "bios_date", "product_name", "board_name")
_BIOS_KEY = r"HARDWARE\DESCRIPTION\System\BIOS"
_WIN_BIOS = {
    "bios_vendor": "BIOSVendor",
    "bios_version": "BIOSVersion",
    "bios_date": "BIOSReleaseDate",
    "product_name": "SystemProductName",
    "board_name": "BaseBoardProduct",
}
SIOCETHTOOL = 0x8946  #: linux/sockios.h
ETHTOOL_GDRVINFO = 0x00000003  #: linux/ethtool.h
#: struct ethtool_drvinfo: u32 cmd; char driver[32], version[32], fw_version[32], bus_info[32],
#: erom_version[32], reserved2[12]; u32 n_priv_flags, n_stats, testinfo_len, eedump_len, regdump_len.
_DRVINFO = struct.Struct("I32s32s32s32s32s12s5I")


def rig_label(environ: dict | None = None) -> str | None:
    """The user's label of this rig (``SOFTRT_RIG_LABEL``, which ``--rig-label`` sets), printable and bounded."""
    value = (environ if environ is not None else os.environ).get(RIG_LABEL_ENV, "").strip()
    return printable(value)[:MAX_LABEL] or None


def collect(
    root: str = "/",
    device: str | None = None,
    environ: dict[str, str] | None = None,
    tune_applied: list[str] | None = _UNASKED,
) -> Provenance:
    """Return the provenance block of a run on the device *device*; *tune_applied* (what ``softrt tune
    --apply`` has changed, audit.state: the session asks) is written when given, also as null."""
    if IS_WINDOWS and root == "/":
        firmware, microcode = _windows()
        nics: list[Nic] = []
    else:
        firmware = {name: _clean(read_text(root, f"{DMI}/{name}", fallback="")) for name in _DMI_FIELDS}
        microcode = _microcode(read_text(root, "/proc/cpuinfo", fallback=""))
        iface = _ethercat_interface(device)
        nics = [nic(iface, root)] if iface else []
    asked = {} if tune_applied is _UNASKED else {"tune_applied": tune_applied}
    return Provenance.build(
        rig_id=rig_id(Path(root)) or None,
        rig_label=rig_label(environ),
        **firmware,
        microcode=microcode,
        nics=nics,
        **asked,
    )


def _clean(value: object) -> str | None:
    text = printable(str(value)).strip() if value is not None else ""
    return text[:MAX_LABEL] or None


def _microcode(cpuinfo: str) -> str | None:
    for line in cpuinfo.splitlines():
        if line.startswith("microcode"):
            return _clean(line.split(":", 1)[1]) if ":" in line else None
    return None


def _ethercat_interface(device: str | None) -> str | None:
    """The interface of ``--device ethercat:IFACE`` (None for the virtual board or another device)."""
    if not device or not device.startswith("ethercat:"):
        return None
    iface = device.split(":", 1)[1].split(",", 1)[0].strip()
    return iface if iface and "/" not in iface and len(iface) < 16 else None  # IFNAMSIZ


def nic(iface: str, root: str = "/") -> Nic:
    """The driver and firmware of network interface *iface* (``ethtool -i``'s fields; None where unknown)."""
    info = _drvinfo(iface) if root == "/" else None
    if info is not None:
        return info
    driver = None
    try:
        driver = _clean(os.path.basename(os.readlink(Path(root) / f"sys/class/net/{iface}/device/driver")))
    except OSError:
        pass  # a virtual interface (veth) has no device
    return Nic.build(interface=iface, driver=driver)


def _drvinfo(iface: str) -> Nic | None:
    """ETHTOOL_GDRVINFO (SIOCETHTOOL, netdevice(7)); None when the interface or the ioctl is not there."""
    import array
    import fcntl
    import socket

    data = array.array("B", _DRVINFO.pack(ETHTOOL_GDRVINFO, b"", b"", b"", b"", b"", b"", 0, 0, 0, 0, 0))
    addr, _ = data.buffer_info()
    # struct ifreq {ifr_name[16]; union {… ifr_data}}: 40 bytes on 64-bit Linux, which the kernel copies in.
    request = struct.pack("16sP", iface.encode()[:15], addr).ljust(40, b"\0")
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            fcntl.ioctl(sock, SIOCETHTOOL, request)
    except OSError:
        return None
    fields = _DRVINFO.unpack(data.tobytes())

    def text(raw: bytes) -> str | None:
        return _clean(raw.split(b"\0", 1)[0].decode(errors="replace"))

    return Nic.build(
        interface=iface,
        driver=text(fields[1]),
        version=text(fields[2]),
        firmware=text(fields[3]),
        bus_info=text(fields[4]),
    )


def _windows() -> tuple[dict[str, str | None], str | None]:
    """The BIOS values in the registry (by provenance field) and the microcode revision (None where absent)."""
    import winreg  # type: ignore[import-not-found]  # Windows only

    def value(key: str, name: str) -> object:
        try:
            with winreg.OpenKey(winreg.HKEY_LOCAL_MACHINE, key) as handle:
                return winreg.QueryValueEx(handle, name)[0]
        except OSError:
            return None

    firmware = {name: _clean(value(_BIOS_KEY, reg)) for name, reg in _WIN_BIOS.items()}
    revision = value(r"HARDWARE\DESCRIPTION\System\CentralProcessor\0", "Update Revision")
    # REG_BINARY, 8 bytes: the revision in the high DWORD (as Intel's microcode tools print it).
    microcode = (
        hex(int.from_bytes(revision[4:8], "little")) if isinstance(revision, bytes) and len(revision) >= 8 else None
    )
    return firmware, microcode
