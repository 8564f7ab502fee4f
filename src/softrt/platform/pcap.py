"""Raw Ethernet through the pcap C API, by ctypes: Npcap's ``wpcap.dll`` on Windows, libpcap on Linux (platform layer).

Windows has no raw socket for a non-IP EtherType; its packet capture and injection is Npcap (npcap.com), whose
``wpcap.dll`` is libpcap's API over the NPF driver. The binding is the same on both systems, so on Linux it runs
against the distribution's libpcap (``libpcap.so.1``, Debian's ``libpcap.so.0.8``), a library softrt did not write.

Where the library is (Npcap Users' Guide, "Developing software with Npcap" / "Npcap install layout"): Npcap puts
``wpcap.dll`` and ``Packet.dll`` in ``%SystemRoot%\\System32\\Npcap``, and into ``System32`` itself only in its
"WinPcap API-compatible mode"; the guide has programs call ``SetDllDirectory`` with the ``Npcap`` folder so that
``Packet.dll`` is found beside ``wpcap.dll``. Python's ctypes loads a DLL named by its full path with
``LOAD_LIBRARY_SEARCH_DLL_LOAD_DIR`` (Python docs, ctypes, "winmode"), which searches that same folder, so the full
path is enough. A ``System32\\wpcap.dll`` without the ``Npcap`` folder is WinPcap, which lacks the calls below.

How a handle is opened (pcap(3PCAP), pcap_create(3PCAP), pcap_activate(3PCAP)): ``pcap_create``, then snap length,
promiscuous mode, immediate mode (every frame handed over as it arrives, not in buffers of 16 KB) and a 1 ms read
timeout, ``pcap_activate``, then a BPF filter (pcap_compile(3PCAP), pcap-filter(7)) and non-blocking mode. Where the
library has ``pcap_open`` (Npcap; pcap_open(3PCAP)) it is used instead, with ``PCAP_OPENFLAG_MAX_RESPONSIVENESS``
(immediate mode) and ``PCAP_OPENFLAG_NOCAPTURE_LOCAL`` (the handle does not capture the frames it sends: NPF
implements no ``pcap_setdirection``). Elsewhere ``pcap_setdirection(PCAP_D_IN)`` keeps every outgoing frame away.

Waiting for a frame (pcap_get_selectable_fd(3PCAP)): a file descriptor for select(2) on Linux; on Windows the
handle's event (``pcap_getevent``, Npcap's extension) for ``WaitForSingleObject``.

Receive times: on Linux the kernel's (``pcap_pkthdr.ts`` with ``PCAP_TSTAMP_PRECISION_NANO``, CLOCK_REALTIME like
SO_TIMESTAMPNS). On Windows none are given: Npcap's default time stamps come from the performance counter synchronized
with the system clock once, when the driver started (Npcap Guide, "Timestamps"), so they drift from the clock a
caller compares them with; a caller takes the time it read the frame instead.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import select
from dataclasses import dataclass

from ..errors import SoftRTError
from . import IS_WINDOWS

ERRBUF_SIZE = 256  #: PCAP_ERRBUF_SIZE
PCAP_D_IN = 1  #: pcap_direction_t: frames received, not those sent
NETMASK_UNKNOWN = 0xFFFFFFFF  #: PCAP_NETMASK_UNKNOWN (the filter tests no IP broadcast)
TSTAMP_PRECISION_NANO = 1
OPENFLAG_PROMISCUOUS, OPENFLAG_NOCAPTURE_LOCAL, OPENFLAG_MAX_RESPONSIVENESS = 0x01, 0x08, 0x10
IF_UP, IF_RUNNING = 0x02, 0x04  #: pcap_if_t flags (pcap/pcap.h)
IF_CONNECTION_STATUS, IF_DISCONNECTED = 0x30, 0x20
# pcap_activate's statuses (pcap/pcap.h).
ERROR_NO_SUCH_DEVICE, ERROR_PERM_DENIED, ERROR_IFACE_NOT_UP, ERROR_PROMISC_PERM_DENIED = -5, -8, -9, -11
NPCAP_DOWNLOAD = "install Npcap from npcap.com"


def raw_ethernet() -> str:
    """How this system sends and receives raw Ethernet frames by default: ``pcap`` on Windows (no raw socket for
    a non-IP EtherType; Npcap), ``af_packet`` on Linux (packet(7))."""
    return "pcap" if IS_WINDOWS else "af_packet"


class PcapError(SoftRTError):
    """The pcap library is missing or refused a call. ``reason``: ``missing`` (no library), ``no_device``,
    ``permission``, ``down`` (the interface is not up) or ``failed``."""

    def __init__(self, reason: str, msg: str, *, hint: str | None = None) -> None:
        self.reason = reason
        super().__init__(msg, hint=hint)


class _PktHdr(ctypes.Structure):
    # struct pcap_pkthdr: struct timeval (two C longs: 32-bit on Windows, 64-bit on LP64 Linux), caplen, len.
    _fields_ = [
        ("tv_sec", ctypes.c_long),
        ("tv_frac", ctypes.c_long),
        ("caplen", ctypes.c_uint32),
        ("len", ctypes.c_uint32),
    ]


class _BpfProgram(ctypes.Structure):
    _fields_ = [("bf_len", ctypes.c_uint), ("bf_insns", ctypes.c_void_p)]


class _PcapIf(ctypes.Structure):
    pass


_PcapIf._fields_ = [
    ("next", ctypes.POINTER(_PcapIf)),
    ("name", ctypes.c_char_p),
    ("description", ctypes.c_char_p),
    ("addresses", ctypes.c_void_p),
    ("flags", ctypes.c_uint32),
]

_P, _S, _I, _C = ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p
#: name: (restype, argtypes); the optional ones are looked up with hasattr.
_PROTOTYPES = {
    "pcap_lib_version": (_S, []),
    "pcap_create": (_P, [_C, _C]),
    "pcap_set_snaplen": (_I, [_P, _I]),
    "pcap_set_promisc": (_I, [_P, _I]),
    "pcap_set_timeout": (_I, [_P, _I]),
    "pcap_set_immediate_mode": (_I, [_P, _I]),
    "pcap_set_tstamp_precision": (_I, [_P, _I]),
    "pcap_get_tstamp_precision": (_I, [_P]),
    "pcap_activate": (_I, [_P]),
    "pcap_statustostr": (_S, [_I]),
    "pcap_geterr": (_S, [_P]),
    "pcap_compile": (_I, [_P, ctypes.POINTER(_BpfProgram), _C, _I, ctypes.c_uint32]),
    "pcap_setfilter": (_I, [_P, ctypes.POINTER(_BpfProgram)]),
    "pcap_freecode": (None, [ctypes.POINTER(_BpfProgram)]),
    "pcap_setdirection": (_I, [_P, _I]),
    "pcap_setnonblock": (_I, [_P, _I, _C]),
    "pcap_sendpacket": (_I, [_P, _P, _I]),
    "pcap_next_ex": (_I, [_P, ctypes.POINTER(ctypes.POINTER(_PktHdr)), ctypes.POINTER(_P)]),
    "pcap_close": (None, [_P]),
    "pcap_findalldevs": (_I, [ctypes.POINTER(ctypes.POINTER(_PcapIf)), _C]),
    "pcap_freealldevs": (None, [ctypes.POINTER(_PcapIf)]),
    "pcap_get_selectable_fd": (_I, [_P]),
    "pcap_getevent": (_P, [_P]),
    "pcap_open": (_P, [_C, _I, _I, _I, _P, _C]),
}
_REQUIRED = (
    "pcap_create",
    "pcap_activate",
    "pcap_compile",
    "pcap_setfilter",
    "pcap_sendpacket",
    "pcap_next_ex",
    "pcap_setnonblock",
    "pcap_close",
    "pcap_geterr",
)
_lib = None


def library_path(system_root: str | None = None) -> list[str]:
    """Where the pcap library is looked for, in order: Npcap's folder on Windows (under *system_root*,
    ``%SystemRoot%``); libpcap's sonames on Linux."""
    if IS_WINDOWS or system_root is not None:
        root = system_root or os.environ.get("SystemRoot", r"C:\Windows")
        return [os.path.join(root, "System32", "Npcap", "wpcap.dll")]
    found = ctypes.util.find_library("pcap")
    return ["libpcap.so.1", "libpcap.so.0.8", *([found] if found else [])]


def missing_reason(system_root: str | None = None) -> str:
    """Why Npcap's library is not where it is loaded from, in one line (the files under *system_root*)."""
    root = system_root or os.environ.get("SystemRoot", r"C:\Windows")
    if os.path.isfile(os.path.join(root, "System32", "wpcap.dll")):
        return "System32 has a wpcap.dll (WinPcap's, or Wine's) but Npcap's folder System32\\Npcap is missing"
    return "Npcap is not installed (no System32\\Npcap\\wpcap.dll)"


def load():
    """The pcap library with its prototypes (loaded once); raise :class:`PcapError` (``missing``) with the fix."""
    global _lib
    if _lib is not None:
        return _lib
    lib, tried = None, library_path()
    for path in tried:
        if IS_WINDOWS and not os.path.isfile(path):
            continue
        try:
            lib = ctypes.CDLL(path)
            break
        except OSError:
            continue
    if lib is None:
        if IS_WINDOWS:
            raise PcapError(
                "missing", f"raw Ethernet on Windows goes through Npcap: {missing_reason()}", hint=NPCAP_DOWNLOAD
            )
        raise PcapError(
            "missing",
            f"no pcap library could be loaded (tried {', '.join(tried)})",
            hint="install libpcap (apt-get install libpcap0.8, dnf install libpcap)",
        )
    # Immediate mode: pcap_open's MAX_RESPONSIVENESS on Windows, pcap_set_immediate_mode (libpcap 1.5) elsewhere.
    immediate = "pcap_open" if IS_WINDOWS else "pcap_set_immediate_mode"
    lacking = [name for name in (*_REQUIRED, immediate) if not hasattr(lib, name)]
    if lacking:
        raise PcapError(
            "missing",
            f"the pcap library is too old: it lacks {', '.join(lacking)}",
            hint=NPCAP_DOWNLOAD + " (1.0 or later)" if IS_WINDOWS else "install libpcap 1.5 or later",
        )
    for name, (restype, argtypes) in _PROTOTYPES.items():
        if hasattr(lib, name):
            fn = getattr(lib, name)
            fn.restype, fn.argtypes = restype, argtypes
    _lib = lib
    return lib


def lib_version() -> str:
    """The library's own version line (``pcap_lib_version``: "libpcap version 1.10.3", "Npcap version 1.79, ...")."""
    return load().pcap_lib_version().decode(errors="replace")


@dataclass(frozen=True)
class Device:
    """A device as the library lists it (pcap_findalldevs(3PCAP)): its name, description and flags."""

    name: str
    description: str
    flags: int

    def problem(self) -> str | None:
        """What is wrong with its link by its flags (None: up, and connected or not saying)."""
        if not self.flags & IF_UP:
            return "the interface is down"
        if self.flags & IF_CONNECTION_STATUS == IF_DISCONNECTED:
            return "no carrier"
        return None


def devices() -> list[Device]:
    """The devices the library can open (on Linux: those of the calling thread's network namespace)."""
    lib = load()
    head, err = ctypes.POINTER(_PcapIf)(), ctypes.create_string_buffer(ERRBUF_SIZE)
    if lib.pcap_findalldevs(ctypes.byref(head), err) != 0:
        raise PcapError("failed", f"pcap could not list the network devices: {err.value.decode(errors='replace')}")
    out, node = [], head
    try:
        while node:
            d = node.contents
            out.append(
                Device(
                    (d.name or b"").decode(errors="replace"), (d.description or b"").decode(errors="replace"), d.flags
                )
            )
            node = d.next
    finally:
        lib.pcap_freealldevs(head)
    return out


def _open_error(status: int, device: str, text: str) -> PcapError:
    """The PcapError of a pcap_activate/pcap_open failure, with its fix."""
    if status == ERROR_NO_SUCH_DEVICE or "No such device" in text or "doesn't exist" in text:
        return PcapError(
            "no_device",
            f"no network interface {device!r} ({text})",
            hint="name an adapter by its friendly name or GUID" if IS_WINDOWS else "list interfaces with 'ip link'",
        )
    if status in (ERROR_PERM_DENIED, ERROR_PROMISC_PERM_DENIED) or "ermission" in text or "denied" in text:
        return PcapError(
            "permission",
            f"capturing on {device!r} is not permitted ({text})",
            hint="run as Administrator (Npcap installed with 'Restrict Npcap driver's access to Administrators only')"
            if IS_WINDOWS
            else "run as root, or grant CAP_NET_RAW (setcap cap_net_raw+ep)",
        )
    if status == ERROR_IFACE_NOT_UP:
        return PcapError(
            "down",
            f"network interface {device!r} is down ({text})",
            hint="enable the adapter" if IS_WINDOWS else f"bring it up: ip link set {device} up",
        )
    return PcapError("failed", f"pcap could not open {device!r}: {text}")


class Capture:
    """One activated pcap handle on *device*: frames matching *filter_expr* (pcap-filter(7)) that the interface
    receives, never those it sends; non-blocking. ``send``, ``receive_into``, ``wait``, ``close``."""

    def __init__(self, device: str, filter_expr: str, *, snaplen: int = 2048, promisc: bool = True) -> None:
        lib = self._lib = load()
        self.device = device
        err = ctypes.create_string_buffer(ERRBUF_SIZE)
        self._hdr = ctypes.POINTER(_PktHdr)()
        self._data = ctypes.c_void_p()
        self._views: dict[int, tuple] = {}  # id(buffer) -> (the buffer, its ctypes view, its address)
        self._scratch = bytearray(64)
        self.skips_own = False  # the handle itself drops the frames it sends (Npcap's NOCAPTURE_LOCAL)
        if IS_WINDOWS and hasattr(lib, "pcap_open"):
            flags = OPENFLAG_MAX_RESPONSIVENESS | OPENFLAG_NOCAPTURE_LOCAL | (OPENFLAG_PROMISCUOUS if promisc else 0)
            self._p = lib.pcap_open(device.encode(), snaplen, flags, 1, None, err)
            if not self._p:
                raise _open_error(0, device, err.value.decode(errors="replace"))
            self.skips_own = True
        else:
            self._p = lib.pcap_create(device.encode(), err)
            if not self._p:
                raise _open_error(0, device, err.value.decode(errors="replace"))
            self._configure(snaplen, promisc)
        self.nanoseconds = (
            hasattr(lib, "pcap_get_tstamp_precision")
            and lib.pcap_get_tstamp_precision(self._p) == TSTAMP_PRECISION_NANO
        )
        try:
            self._finish(filter_expr)
        except BaseException:
            self.close()
            raise

    def _configure(self, snaplen: int, promisc: bool) -> None:
        lib, p = self._lib, self._p
        lib.pcap_set_snaplen(p, snaplen)
        lib.pcap_set_promisc(p, int(promisc))
        lib.pcap_set_timeout(p, 1)
        lib.pcap_set_immediate_mode(p, 1)
        if not IS_WINDOWS and hasattr(lib, "pcap_set_tstamp_precision"):
            lib.pcap_set_tstamp_precision(p, TSTAMP_PRECISION_NANO)  # refused before 1.5: micro stays
        status = lib.pcap_activate(p)
        if status < 0:
            text = self._error_text(status)
            lib.pcap_close(p)
            self._p = None
            raise _open_error(status, self.device, text)

    def _error_text(self, status: int) -> str:
        text = self._lib.pcap_geterr(self._p).decode(errors="replace")
        return text or self._lib.pcap_statustostr(status).decode(errors="replace")

    def _finish(self, filter_expr: str) -> None:
        lib, p = self._lib, self._p
        prog = _BpfProgram()
        if lib.pcap_compile(p, ctypes.byref(prog), filter_expr.encode(), 1, NETMASK_UNKNOWN) != 0:
            raise PcapError("failed", f"pcap could not compile the filter {filter_expr!r}: {self._error_text(-1)}")
        try:
            if lib.pcap_setfilter(p, ctypes.byref(prog)) != 0:
                raise PcapError("failed", f"pcap could not set the filter on {self.device!r}: {self._error_text(-1)}")
        finally:
            lib.pcap_freecode(ctypes.byref(prog))
        if not self.skips_own and lib.pcap_setdirection(p, PCAP_D_IN) != 0:
            raise PcapError(
                "failed",
                f"pcap cannot keep the frames {self.device!r} sends away from its capture ({self._error_text(-1)})",
                hint=NPCAP_DOWNLOAD if IS_WINDOWS else None,
            )
        err = ctypes.create_string_buffer(ERRBUF_SIZE)
        if lib.pcap_setnonblock(p, 1, err) != 0:
            raise PcapError("failed", f"pcap could not make {self.device!r} non-blocking: {err.value.decode()}")
        self.flush()  # frames captured before the filter was set

    @property
    def closed(self) -> bool:
        return self._p is None

    def send(self, frame) -> None:
        """Send *frame* (bytes or bytearray) as it is; raise OSError (EIO) with the library's reason."""
        p = self._p
        if p is None:
            raise OSError(errno.EBADF, "the pcap handle is closed")
        # A bytearray by its (cached) address; bytes as ctypes passes them, a pointer to their own buffer.
        data = self._address(frame) if isinstance(frame, bytearray) else bytes(frame)
        if self._lib.pcap_sendpacket(p, data, len(frame)) != 0:
            raise OSError(errno.EIO, self._lib.pcap_geterr(p).decode(errors="replace"))

    def receive_into(self, buf: bytearray) -> tuple[int, int] | None:
        """Copy the next frame into *buf*; return ``(length, receive time in ns of CLOCK_REALTIME, or 0 where the
        library's times are not comparable with it)``, or None when none is waiting (or the device went away)."""
        p = self._p
        if p is None or self._lib.pcap_next_ex(p, ctypes.byref(self._hdr), ctypes.byref(self._data)) != 1:
            return None
        hdr = self._hdr.contents
        n = min(hdr.caplen, len(buf))
        ctypes.memmove(self._address(buf), self._data, n)
        if IS_WINDOWS:
            return n, 0
        return n, hdr.tv_sec * 1_000_000_000 + (hdr.tv_frac if self.nanoseconds else hdr.tv_frac * 1000)

    def _address(self, buf: bytearray) -> int:
        """The address of a caller's buffer, found once per buffer (the frame buffers are reused every cycle; the
        export keeps them from being resized while this handle holds them)."""
        known = self._views.get(id(buf))
        if known is not None and known[0] is buf:
            return known[2]
        if len(self._views) > 8:
            self._views.clear()
        view = (ctypes.c_char * len(buf)).from_buffer(buf)
        self._views[id(buf)] = (buf, view, ctypes.addressof(view))
        return self._views[id(buf)][2]

    def flush(self) -> int:
        """Drop every frame waiting; return how many there were."""
        buf, n = self._scratch, 0
        while self.receive_into(buf) is not None:
            n += 1
        return n

    def fileno(self) -> int:
        """A descriptor that select(2) reports readable when a frame waits (Linux), else -1."""
        if self._p is None or IS_WINDOWS or not hasattr(self._lib, "pcap_get_selectable_fd"):
            return -1
        return self._lib.pcap_get_selectable_fd(self._p)

    def wait(self, timeout_s: float) -> bool:
        """Wait up to *timeout_s* for a frame to be waiting; True when one may be (read it with receive_into)."""
        if self._p is None:
            return False
        if IS_WINDOWS:
            event = self._lib.pcap_getevent(self._p)
            wait = ctypes.WinDLL("kernel32").WaitForSingleObject  # type: ignore[attr-defined]
            wait.argtypes, wait.restype = [ctypes.c_void_p, ctypes.c_uint32], ctypes.c_uint32
            return wait(event, max(0, int(timeout_s * 1000))) == 0  # WAIT_OBJECT_0
        fd = self.fileno()
        return fd >= 0 and bool(select.select([fd], [], [], max(0.0, timeout_s))[0])

    def close(self) -> None:
        """Close the handle (idempotent)."""
        if self._p is not None:
            self._lib.pcap_close(self._p)
            self._p = None
