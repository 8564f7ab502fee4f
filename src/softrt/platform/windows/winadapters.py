"""Windows network adapters by friendly name and GUID, mapped to Npcap's device names (platform layer).

pysoem (SOEM) opens an adapter on Windows through Npcap's WinPcap API by its NPF name,
``\\Device\\NPF_{GUID}``, which no user should type. ``GetAdaptersAddresses`` (Microsoft Learn: "GetAdaptersAddresses
function (iphlpapi.h)", "IP_ADAPTER_ADDRESSES_LH structure") gives each adapter's ``AdapterName`` (the GUID in
braces), ``FriendlyName`` ("Ethernet 2", as ``ncpa.cpl`` and ``Get-NetAdapter`` show it) and ``Description`` (the
driver's). :func:`resolve` maps what the user typed, a friendly name, a GUID with or without braces, or an NPF
name, onto the NPF name; the mapping is pure so it is tested on Linux.

Npcap (npcap.com) installs ``wpcap.dll`` under ``System32\\Npcap``; only its "WinPcap API-compatible mode" also puts
it in ``System32``, where SOEM's ``LoadLibrary("wpcap.dll")`` finds it (Npcap Users' Guide, "Developing software with
Npcap": "Npcap installs its DLLs into C:\\Windows\\System32\\Npcap\\ instead of C:\\Windows\\System32\\").
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from ...errors import ConfigError
from .. import IS_WINDOWS

NPF_PREFIX = "\\Device\\NPF_"
NPCAP_FIX = "install Npcap from npcap.com with 'WinPcap API-compatible mode'"
_GUID = re.compile(r"\{?([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})\}?")


@dataclass(frozen=True)
class Adapter:
    """One network adapter: its GUID (upper case, in braces), friendly name and description."""

    guid: str
    friendly: str
    description: str

    @property
    def npf(self) -> str:
        """Npcap's device name for it."""
        return NPF_PREFIX + self.guid

    def line(self) -> str:
        """``Ethernet 2  {GUID}  Intel(R) I210``: how softrt lists it."""
        return f"{self.friendly}  {self.guid}  {self.description}"


def adapter(guid: str, friendly: str, description: str = "") -> Adapter:
    """An :class:`Adapter` with its GUID normalized (ValueError when *guid* is not one)."""
    m = _GUID.fullmatch(guid.strip())
    if not m:
        raise ValueError(f"not an adapter GUID: {guid!r}")
    return Adapter("{" + m.group(1).upper() + "}", friendly, description)


def resolve(name: str, adapters: list[Adapter]) -> str:
    """The NPF device name of the adapter *name* names: a friendly name (case-insensitive, as Windows
    compares them), a GUID with or without braces, or an NPF name.

    Raises:
        ConfigError: no adapter or more than one matches; the hint lists the adapters.
    """
    wanted = name.strip()
    if wanted.upper().startswith(NPF_PREFIX.upper()):
        wanted = wanted[len(NPF_PREFIX) :]
    m = _GUID.fullmatch(wanted)
    if m:
        found = [a for a in adapters if a.guid == "{" + m.group(1).upper() + "}"]
    else:
        found = [a for a in adapters if a.friendly.casefold() == wanted.casefold()]
    listed = "; ".join(a.line() for a in adapters) or "none"
    if len(found) != 1:
        what = "no network adapter" if not found else f"{len(found)} network adapters"
        raise ConfigError(
            f"{what} named {name!r}",
            hint=f'name one by its friendly name or GUID, e.g. ethercat:"{adapters[0].friendly}"; adapters: {listed}'
            if adapters
            else "no network adapter was found",
        )
    return found[0].npf


def npcap_state(system_root: str | None = None) -> str:
    """``ready`` (wpcap.dll where SOEM loads it), ``no-compat`` (Npcap without WinPcap API-compatible mode) or
    ``missing``: looked up as files under *system_root* (``%SystemRoot%``), so a tree can stand for a machine."""
    root = system_root or os.environ.get("SystemRoot", r"C:\Windows")
    system32 = os.path.join(root, "System32")
    if os.path.isfile(os.path.join(system32, "wpcap.dll")):
        return "ready"
    return "no-compat" if os.path.isfile(os.path.join(system32, "Npcap", "wpcap.dll")) else "missing"


def require_npcap(system_root: str | None = None) -> None:
    """Raise ConfigError, one line with the fix, when SOEM cannot load Npcap."""
    state = npcap_state(system_root)
    if state == "missing":
        raise ConfigError("EtherCAT on Windows needs Npcap, which is not installed", hint=NPCAP_FIX)
    if state == "no-compat":
        raise ConfigError(
            "Npcap is installed without 'WinPcap API-compatible mode' (no System32\\wpcap.dll)",
            hint="reinstall Npcap from npcap.com with 'WinPcap API-compatible mode' ticked",
        )


def list_adapters() -> list[Adapter]:
    """This machine's adapters (GetAdaptersAddresses, AF_UNSPEC); [] when not Windows."""
    if not IS_WINDOWS:
        return []
    import ctypes

    class Addresses(ctypes.Structure):  # the leading fields of IP_ADAPTER_ADDRESSES_LH, as iptypes.h declares them
        pass

    Addresses._fields_ = [
        ("Length", ctypes.c_uint32),
        ("IfIndex", ctypes.c_uint32),
        ("Next", ctypes.POINTER(Addresses)),
        ("AdapterName", ctypes.c_char_p),
        ("FirstUnicastAddress", ctypes.c_void_p),
        ("FirstAnycastAddress", ctypes.c_void_p),
        ("FirstMulticastAddress", ctypes.c_void_p),
        ("FirstDnsServerAddress", ctypes.c_void_p),
        ("DnsSuffix", ctypes.c_wchar_p),
        ("Description", ctypes.c_wchar_p),
        ("FriendlyName", ctypes.c_wchar_p),
    ]
    iphlpapi = ctypes.WinDLL("iphlpapi")
    size = ctypes.c_uint32(15000)  # Microsoft's advice: start with 15 KB, grow on ERROR_BUFFER_OVERFLOW (111)
    for _ in range(4):
        buf = ctypes.create_string_buffer(size.value)
        rc = iphlpapi.GetAdaptersAddresses(0, 0, None, buf, ctypes.byref(size))
        if rc != 111:
            break
    if rc != 0:
        return []
    out, node = [], ctypes.cast(buf, ctypes.POINTER(Addresses))
    while node:
        a = node.contents
        try:
            out.append(
                adapter((a.AdapterName or b"").decode("ascii", "replace"), a.FriendlyName or "", a.Description or "")
            )
        except ValueError:
            pass  # an adapter whose name is not a GUID (none in practice) cannot be opened through Npcap
        node = a.Next
    return out
