"""The Win32 calls of the Windows backend, declared through ctypes (platform layer, private to the backend).

Every call softrt makes goes through :class:`Win32`, one method a call, each declared with its
``argtypes``/``restype`` in :data:`SIGNATURES` (the sizes of 64-bit Windows, LLP64, whatever this host is)
and raising :class:`Win32Failed` with GetLastError (an MMRESULT as ERROR_INVALID_PARAMETER);
:func:`to_softrt_error` maps a failure to the softrt error with its fix (psutil's ``wrap_exceptions``).
The DLLs are resolved on the first call only, so this module imports on Linux, where the backend's call
sequence is tested against a recording fake of :class:`Win32`. Constants: winbase.h, winnt.h, timeapi.h,
winerror.h, pdh.h (Microsoft Learn pages of each function).
"""

from __future__ import annotations

import ctypes
import mmap
from collections.abc import Callable

from ...errors import NoSuchProcess, NotSupported, PermissionDenied, SoftRTError

# --- constants (winbase.h, winnt.h, timeapi.h, winerror.h) -------------------------------------
MAX_GROUP_CPUS = 64  # one processor group: the width of an affinity mask (DWORD_PTR)
NORMAL_PRIORITY_CLASS, HIGH_PRIORITY_CLASS, REALTIME_PRIORITY_CLASS = 0x20, 0x80, 0x100
THREAD_PRIORITY_IDLE, THREAD_PRIORITY_TIME_CRITICAL = -15, 15
THREAD_PRIORITY_ERROR_RETURN = 0x7FFFFFFF
#: REALTIME_PRIORITY_CLASS's base priority: SetThreadPriority's level is added to it, saturating at
#: 16 (THREAD_PRIORITY_IDLE) and 31 (THREAD_PRIORITY_TIME_CRITICAL); in this class the levels -7…6
#: are also accepted (SetThreadPriority, "nPriority"; "Scheduling Priorities").
REALTIME_CLASS_BASE, REALTIME_LOWEST, REALTIME_HIGHEST = 24, 16, 31
ANY_CLASS_LEVELS = (-15, -2, -1, 0, 1, 2, 15)  # the levels every priority class accepts
QUOTA_LIMITS_HARDWS_MIN_ENABLE, QUOTA_LIMITS_HARDWS_MIN_DISABLE = 0x1, 0x2
QUOTA_LIMITS_HARDWS_MAX_ENABLE, QUOTA_LIMITS_HARDWS_MAX_DISABLE = 0x4, 0x8
#: Working-set room above what the worker uses now and the ring it locks (VirtualLock can lock
#: "the minimum working set size minus a small overhead", VirtualLock remarks).
WORKING_SET_MARGIN_BYTES = 64 << 20
CREATE_WAITABLE_TIMER_HIGH_RESOLUTION = 0x2
TIMER_ALL_ACCESS = 0x1F0003
INFINITE = 0xFFFFFFFF
WAIT_FAILED = 0xFFFFFFFF
TIMER_RESOLUTION_MS = 1
JOB_OBJECT_EXTENDED_LIMIT_INFORMATION_CLASS = 9
JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE = 0x2000
PROCESS_TERMINATE, PROCESS_SET_QUOTA, PROCESS_SET_INFORMATION = 0x1, 0x100, 0x200
PROCESS_QUERY_LIMITED_INFORMATION = 0x1000
FILE_MAP_READ = 0x4
LOCKFILE_FAIL_IMMEDIATELY, LOCKFILE_EXCLUSIVE_LOCK = 0x1, 0x2
#: The machine lock holds one byte past the pid it writes: Windows byte-range locks are mandatory,
#: so the pid stays readable by the process that is refused (for its message).
LOCK_OFFSET = 4096
ERROR_FILE_NOT_FOUND, ERROR_ACCESS_DENIED, ERROR_INVALID_PARAMETER = 2, 5, 87
ERROR_LOCK_VIOLATION, ERROR_PRIVILEGE_NOT_HELD, ERROR_WORKING_SET_QUOTA = 33, 1314, 1453
TIMERR_NOERROR = 0
PDH_FMT_DOUBLE, PDH_MORE_DATA = 0x200, 0x800007D2
PDH_CSTATUS_VALID_DATA, PDH_CSTATUS_NEW_DATA = 0x0, 0x1
CURRENT_VERSION_KEY = r"SOFTWARE\Microsoft\Windows NT\CurrentVersion"
PROCESSOR_KEY = r"HARDWARE\DESCRIPTION\System\CentralProcessor\0"
ADMIN_HINT = "run softrt from an elevated prompt (Run as Administrator)"

# --- C types with the sizes of 64-bit Windows, whatever this host is (LLP64) ------------------------
DWORD, BOOL, LONG, UINT = ctypes.c_uint32, ctypes.c_int32, ctypes.c_int32, ctypes.c_uint32
HANDLE, LPVOID = ctypes.c_void_p, ctypes.c_void_p
SIZE_T = DWORD_PTR = ctypes.c_size_t
LARGE_INTEGER = ctypes.c_int64


class IO_COUNTERS(ctypes.Structure):  # noqa: N801 (the Win32 name)
    _fields_ = [
        (name, ctypes.c_uint64)
        for name in (
            "ReadOperationCount",
            "WriteOperationCount",
            "OtherOperationCount",
            "ReadTransferCount",
            "WriteTransferCount",
            "OtherTransferCount",
        )
    ]


class JOBOBJECT_BASIC_LIMIT_INFORMATION(ctypes.Structure):  # noqa: N801
    _fields_ = [
        ("PerProcessUserTimeLimit", LARGE_INTEGER),
        ("PerJobUserTimeLimit", LARGE_INTEGER),
        ("LimitFlags", DWORD),
        ("MinimumWorkingSetSize", SIZE_T),
        ("MaximumWorkingSetSize", SIZE_T),
        ("ActiveProcessLimit", DWORD),
        ("Affinity", DWORD_PTR),
        ("PriorityClass", DWORD),
        ("SchedulingClass", DWORD),
    ]


class JOBOBJECT_EXTENDED_LIMIT_INFORMATION(ctypes.Structure):  # noqa: N801
    _fields_ = [
        ("BasicLimitInformation", JOBOBJECT_BASIC_LIMIT_INFORMATION),
        ("IoInfo", IO_COUNTERS),
        ("ProcessMemoryLimit", SIZE_T),
        ("JobMemoryLimit", SIZE_T),
        ("PeakProcessMemoryUsed", SIZE_T),
        ("PeakJobMemoryUsed", SIZE_T),
    ]


class PDH_FMT_COUNTERVALUE(ctypes.Structure):  # noqa: N801 (pdh.h; the union read as its double)
    _fields_ = [("CStatus", DWORD), ("doubleValue", ctypes.c_double)]


class PDH_FMT_COUNTERVALUE_ITEM_W(ctypes.Structure):  # noqa: N801
    _fields_ = [("szName", ctypes.c_wchar_p), ("FmtValue", PDH_FMT_COUNTERVALUE)]


class OVERLAPPED(ctypes.Structure):
    _fields_ = [
        ("Internal", DWORD_PTR),
        ("InternalHigh", DWORD_PTR),
        ("Offset", DWORD),
        ("OffsetHigh", DWORD),
        ("hEvent", HANDLE),
    ]


_P = ctypes.POINTER
#: Every call: (DLL, restype, argtypes, how failure shows). "zero": a 0/NULL result, GetLastError
#: says why; "mmresult": a non-zero MMRESULT; "wait": WAIT_FAILED; "thread_priority":
#: THREAD_PRIORITY_ERROR_RETURN; "pdh": a PDH_STATUS other than ERROR_SUCCESS; None: cannot fail.
SIGNATURES: dict[str, tuple[str, type, list, str | None]] = {
    "GetCurrentProcess": ("kernel32", HANDLE, [], None),
    "GetCurrentThread": ("kernel32", HANDLE, [], None),
    "OpenProcess": ("kernel32", HANDLE, [DWORD, BOOL, DWORD], "zero"),
    "CloseHandle": ("kernel32", BOOL, [HANDLE], "zero"),
    "GetPriorityClass": ("kernel32", DWORD, [HANDLE], "zero"),
    "SetPriorityClass": ("kernel32", BOOL, [HANDLE, DWORD], "zero"),
    "GetProcessAffinityMask": ("kernel32", BOOL, [HANDLE, _P(DWORD_PTR), _P(DWORD_PTR)], "zero"),
    "SetProcessAffinityMask": ("kernel32", BOOL, [HANDLE, DWORD_PTR], "zero"),
    "SetThreadAffinityMask": ("kernel32", DWORD_PTR, [HANDLE, DWORD_PTR], "zero"),
    "GetThreadPriority": ("kernel32", ctypes.c_int, [HANDLE], "thread_priority"),
    "SetThreadPriority": ("kernel32", BOOL, [HANDLE, ctypes.c_int], "zero"),
    "GetProcessWorkingSetSizeEx": ("kernel32", BOOL, [HANDLE, _P(SIZE_T), _P(SIZE_T), _P(DWORD)], "zero"),
    "SetProcessWorkingSetSizeEx": ("kernel32", BOOL, [HANDLE, SIZE_T, SIZE_T, DWORD], "zero"),
    "VirtualLock": ("kernel32", BOOL, [LPVOID, SIZE_T], "zero"),
    "VirtualUnlock": ("kernel32", BOOL, [LPVOID, SIZE_T], "zero"),
    "timeBeginPeriod": ("winmm", UINT, [UINT], "mmresult"),
    "timeEndPeriod": ("winmm", UINT, [UINT], "mmresult"),
    "CreateWaitableTimerExW": ("kernel32", HANDLE, [LPVOID, ctypes.c_wchar_p, DWORD, DWORD], "zero"),
    "SetWaitableTimer": ("kernel32", BOOL, [HANDLE, _P(LARGE_INTEGER), LONG, LPVOID, LPVOID, BOOL], "zero"),
    "WaitForSingleObject": ("kernel32", DWORD, [HANDLE, DWORD], "wait"),
    "CreateJobObjectW": ("kernel32", HANDLE, [LPVOID, ctypes.c_wchar_p], "zero"),
    "SetInformationJobObject": ("kernel32", BOOL, [HANDLE, ctypes.c_int, LPVOID, DWORD], "zero"),
    "AssignProcessToJobObject": ("kernel32", BOOL, [HANDLE, HANDLE], "zero"),
    "OpenFileMappingW": ("kernel32", HANDLE, [DWORD, BOOL, ctypes.c_wchar_p], "zero"),
    "LockFileEx": ("kernel32", BOOL, [HANDLE, DWORD, DWORD, DWORD, DWORD, _P(OVERLAPPED)], "zero"),
    "PdhOpenQueryW": ("pdh", LONG, [ctypes.c_wchar_p, DWORD_PTR, _P(HANDLE)], "pdh"),
    "PdhAddEnglishCounterW": ("pdh", LONG, [HANDLE, ctypes.c_wchar_p, DWORD_PTR, _P(HANDLE)], "pdh"),
    "PdhCollectQueryData": ("pdh", LONG, [HANDLE], "pdh"),
    "PdhGetFormattedCounterArrayW": ("pdh", LONG, [HANDLE, DWORD, _P(DWORD), _P(DWORD), LPVOID], "pdh"),
    "PdhCloseQuery": ("pdh", LONG, [HANDLE], "pdh"),
}


class Win32Failed(Exception):
    """A Win32 call failed: its name and the Windows error code (GetLastError, winerror.h)."""

    def __init__(self, function: str, winerror: int, text: str = "") -> None:
        self.function = function
        self.winerror = winerror
        self.text = text or f"Windows error {winerror}"
        super().__init__(f"{function}: {self.text} (error {winerror})")


class Win32:
    """The Win32 calls softrt makes, one method a call (the real ones, through ctypes).

    Handles are ints; out-parameters come back as return values. Each method raises
    :class:`Win32Failed` on failure. A recording fake with the same methods stands in for it
    in the tests (tests/platform/windows/conftest.py).
    """

    def __init__(self) -> None:
        self._fns: dict[str, Callable] = {}

    def _fn(self, name: str) -> Callable:
        fn = self._fns.get(name)
        if fn is None:
            fn = self._fns[name] = _bind(name)
        return fn

    def _call(self, name: str, *args):
        dll, _, _, failure = SIGNATURES[name]
        result = self._fn(name)(*args)
        if failure == "zero" and not result:
            raise _last_error(name)
        if failure == "wait" and result == WAIT_FAILED:
            raise _last_error(name)
        if failure == "thread_priority" and result == THREAD_PRIORITY_ERROR_RETURN:
            raise _last_error(name)
        if failure == "pdh" and result != 0:
            raise Win32Failed(name, result & 0xFFFFFFFF, f"PDH status 0x{result & 0xFFFFFFFF:08X}")
        if failure == "mmresult" and result != TIMERR_NOERROR:
            raise Win32Failed(name, ERROR_INVALID_PARAMETER, f"MMRESULT {result} (TIMERR_NOCANDO: period out of range)")
        return result

    # processes and threads
    def GetCurrentProcess(self) -> int:  # noqa: N802 (the Win32 names, so a call sequence reads as the doc)
        return self._call("GetCurrentProcess")

    def GetCurrentThread(self) -> int:  # noqa: N802
        return self._call("GetCurrentThread")

    def OpenProcess(self, access: int, inherit: bool, pid: int) -> int:  # noqa: N802
        return self._call("OpenProcess", access, inherit, pid)

    def CloseHandle(self, handle: int) -> None:  # noqa: N802
        self._call("CloseHandle", handle)

    def GetPriorityClass(self, process: int) -> int:  # noqa: N802
        return self._call("GetPriorityClass", process)

    def SetPriorityClass(self, process: int, priority_class: int) -> None:  # noqa: N802
        self._call("SetPriorityClass", process, priority_class)

    def GetProcessAffinityMask(self, process: int) -> tuple[int, int]:  # noqa: N802
        mine, system = DWORD_PTR(), DWORD_PTR()
        self._call("GetProcessAffinityMask", process, ctypes.byref(mine), ctypes.byref(system))
        return mine.value, system.value

    def SetProcessAffinityMask(self, process: int, mask: int) -> None:  # noqa: N802
        self._call("SetProcessAffinityMask", process, mask)

    def SetThreadAffinityMask(self, thread: int, mask: int) -> int:  # noqa: N802
        return self._call("SetThreadAffinityMask", thread, mask)

    def GetThreadPriority(self, thread: int) -> int:  # noqa: N802
        return self._call("GetThreadPriority", thread)

    def SetThreadPriority(self, thread: int, priority: int) -> None:  # noqa: N802
        self._call("SetThreadPriority", thread, priority)

    # memory
    def GetProcessWorkingSetSizeEx(self, process: int) -> tuple[int, int, int]:  # noqa: N802
        low, high, flags = SIZE_T(), SIZE_T(), DWORD()
        self._call("GetProcessWorkingSetSizeEx", process, ctypes.byref(low), ctypes.byref(high), ctypes.byref(flags))
        return low.value, high.value, flags.value

    def SetProcessWorkingSetSizeEx(self, process: int, low: int, high: int, flags: int) -> None:  # noqa: N802
        self._call("SetProcessWorkingSetSizeEx", process, low, high, flags)

    def VirtualLock(self, address: int, size: int) -> None:  # noqa: N802
        self._call("VirtualLock", address, size)

    def VirtualUnlock(self, address: int, size: int) -> None:  # noqa: N802
        self._call("VirtualUnlock", address, size)

    # timers
    def timeBeginPeriod(self, period_ms: int) -> None:  # noqa: N802
        self._call("timeBeginPeriod", period_ms)

    def timeEndPeriod(self, period_ms: int) -> None:  # noqa: N802
        self._call("timeEndPeriod", period_ms)

    def CreateWaitableTimerExW(self, flags: int, access: int) -> int:  # noqa: N802
        return self._call("CreateWaitableTimerExW", None, None, flags, access)

    def SetWaitableTimer(self, timer: int, due_100ns: int) -> None:  # noqa: N802
        """Arm *timer* once; a negative *due_100ns* is relative (SetWaitableTimer: "negative values indicate relative time")."""
        self._call("SetWaitableTimer", timer, ctypes.byref(LARGE_INTEGER(due_100ns)), 0, None, None, False)

    def WaitForSingleObject(self, handle: int, timeout_ms: int) -> int:  # noqa: N802
        return self._call("WaitForSingleObject", handle, timeout_ms)

    # jobs
    def CreateJobObjectW(self) -> int:  # noqa: N802
        return self._call("CreateJobObjectW", None, None)

    def SetInformationJobObject(self, job: int, limit_flags: int) -> None:  # noqa: N802
        """Set the job's JOBOBJECT_EXTENDED_LIMIT_INFORMATION with *limit_flags* (the only limits softrt sets)."""
        info = JOBOBJECT_EXTENDED_LIMIT_INFORMATION()
        info.BasicLimitInformation.LimitFlags = limit_flags
        self._call(
            "SetInformationJobObject",
            job,
            JOB_OBJECT_EXTENDED_LIMIT_INFORMATION_CLASS,
            ctypes.byref(info),
            ctypes.sizeof(info),
        )

    def AssignProcessToJobObject(self, job: int, process: int) -> None:  # noqa: N802
        self._call("AssignProcessToJobObject", job, process)

    # shared memory and files
    def OpenFileMappingW(self, access: int, name: str) -> int:  # noqa: N802
        return self._call("OpenFileMappingW", access, False, name)

    def map_pagefile(self, name: str, size: int) -> mmap.mmap:
        """Map the pagefile-backed section *name* (Python's mmap: CreateFileMapping + MapViewOfFile)."""
        return mmap.mmap(-1, size, tagname=name)  # type: ignore[call-arg]  # Windows-only argument

    def get_osfhandle(self, fd: int) -> int:
        """Return the Win32 handle of C runtime file descriptor *fd* (_get_osfhandle)."""
        import msvcrt  # Windows only

        return msvcrt.get_osfhandle(fd)

    def read_registry(self, key: str, name: str) -> str | int | None:
        """Return value *name* under HKEY_LOCAL_MACHINE\\*key* (RegQueryValueEx, through winreg), None if absent."""
        import winreg  # Windows only

        try:
            with winreg.OpenKey(winreg.HKEY_LOCAL_MACHINE, key) as handle:
                return winreg.QueryValueEx(handle, name)[0]
        except OSError:
            return None

    # performance counters (pdh.dll): English counter paths, whatever the display language
    def PdhOpenQueryW(self) -> int:  # noqa: N802
        query = HANDLE()
        self._call("PdhOpenQueryW", None, 0, ctypes.byref(query))
        return query.value

    def PdhAddEnglishCounterW(self, query: int, path: str) -> int:  # noqa: N802
        counter = HANDLE()
        self._call("PdhAddEnglishCounterW", query, path, 0, ctypes.byref(counter))
        return counter.value

    def PdhCollectQueryData(self, query: int) -> None:  # noqa: N802
        self._call("PdhCollectQueryData", query)

    def PdhGetFormattedCounterArrayW(self, counter: int) -> list[tuple[str, int, float]]:  # noqa: N802
        """Every instance of *counter* as (instance name, CStatus, value as a double)."""
        size, count = DWORD(0), DWORD(0)
        status = self._fn("PdhGetFormattedCounterArrayW")(
            counter, PDH_FMT_DOUBLE, ctypes.byref(size), ctypes.byref(count), None
        )
        if status & 0xFFFFFFFF != PDH_MORE_DATA:  # the first call only sizes the buffer
            raise Win32Failed(
                "PdhGetFormattedCounterArrayW", status & 0xFFFFFFFF, f"PDH status 0x{status & 0xFFFFFFFF:08X}"
            )
        buffer = ctypes.create_string_buffer(size.value)
        self._call(
            "PdhGetFormattedCounterArrayW", counter, PDH_FMT_DOUBLE, ctypes.byref(size), ctypes.byref(count), buffer
        )
        items = (PDH_FMT_COUNTERVALUE_ITEM_W * count.value).from_buffer(buffer)
        return [(i.szName or "", i.FmtValue.CStatus, i.FmtValue.doubleValue) for i in items]

    def PdhCloseQuery(self, query: int) -> None:  # noqa: N802
        self._call("PdhCloseQuery", query)

    def LockFileEx(self, handle: int, flags: int, offset: int, length: int) -> bool:  # noqa: N802
        """Lock *length* bytes at *offset*; False if another process holds them (ERROR_LOCK_VIOLATION)."""
        overlapped = OVERLAPPED(Offset=offset & 0xFFFFFFFF, OffsetHigh=offset >> 32)
        try:
            self._call("LockFileEx", handle, flags, 0, length & 0xFFFFFFFF, length >> 32, ctypes.byref(overlapped))
        except Win32Failed as err:
            if err.winerror == ERROR_LOCK_VIOLATION:
                return False
            raise
        return True


def _bind(name: str) -> Callable:
    """Resolve *name* in its DLL and declare its types (Windows only: ctypes.WinDLL exists there)."""
    dll_name, restype, argtypes, _ = SIGNATURES[name]
    windll = getattr(ctypes, "WinDLL", None)
    if windll is None:
        raise NotSupported(
            f"{name} is a Windows call and this is not Windows", hint="the Windows backend runs on Windows only"
        )
    fn = getattr(windll(dll_name, use_last_error=True), name)
    fn.restype = restype
    fn.argtypes = argtypes
    return fn


def _format(code: int) -> str:
    format_error = getattr(ctypes, "FormatError", None)  # Windows only
    return format_error(code).strip() if format_error else f"Windows error {code}"


def _last_error(name: str) -> Win32Failed:
    code = ctypes.get_last_error()  # type: ignore[attr-defined]  # Windows only, use_last_error=True
    return Win32Failed(name, code, _format(code))


def to_softrt_error(err: Win32Failed, target: str) -> SoftRTError:
    """Return the softrt error, with its fix, for a failed Win32 call on *target* (psutil's wrap_exceptions)."""
    if err.winerror in (ERROR_ACCESS_DENIED, ERROR_PRIVILEGE_NOT_HELD):
        return PermissionDenied(err.function, target, hint=ADMIN_HINT)
    if err.winerror == ERROR_INVALID_PARAMETER and err.function == "OpenProcess":
        return NoSuchProcess(f"{target} does not exist (it exited)")  # OpenProcess's answer for a gone pid
    if err.winerror == ERROR_WORKING_SET_QUOTA:
        return SoftRTError(
            f"{err.function} on {target}: {err.text}",
            hint="the working set minimum is too small for the pages to lock; " + ADMIN_HINT,
        )
    return SoftRTError(f"{err.function} on {target} failed: {err.text} (Windows error {err.winerror})")
