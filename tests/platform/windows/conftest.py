"""The Windows backend's tests run on Linux against ``FakeWin32``, a recording stand-in for
softrt.platform.windows._win32.Win32 (fixture ``fake_win32``).

It keeps the little state the calls read back (priority class, masks, working set, sections,
locks), records every call as ``(name, *args)`` and fails a call on request with a Windows error
code, the way Windows reports it (GetLastError). Nothing here decides what the backend does.
"""

from __future__ import annotations

import mmap
import os
from pathlib import Path

import pytest

from softrt.platform.windows import _win32 as K

TEXTS = {
    K.ERROR_ACCESS_DENIED: "Access is denied.",
    K.ERROR_PRIVILEGE_NOT_HELD: "A required privilege is not held by the client.",
    K.ERROR_INVALID_PARAMETER: "The parameter is incorrect.",
    K.ERROR_FILE_NOT_FOUND: "The system cannot find the file specified.",
    K.ERROR_WORKING_SET_QUOTA: "Insufficient quota to complete the requested service.",
}
PSEUDO_PROCESS, PSEUDO_THREAD = -1, -2  # (HANDLE)-1 and (HANDLE)-2, as Windows returns them


class FakeWin32:
    """Same public methods as :class:`softrt.platform.windows._win32.Win32`; ``calls`` is what was asked."""

    def __init__(
        self, section_dir: Path, cpus: int = 4, admin: bool = True, fail: dict[str, int] | None = None
    ) -> None:
        self.calls: list[tuple] = []
        self.fail = dict(fail or {})
        self.admin = admin
        self.section_dir = section_dir
        self.system_mask = (1 << cpus) - 1
        self.process_mask = self.system_mask
        self.thread_mask = self.system_mask
        self.priority_class = K.NORMAL_PRIORITY_CLASS
        self.thread_priority = 0
        self.working_set = (200 << 10, 1380 << 10, 0)  # Windows' defaults: 200 KiB, 1380 KiB, no hard limits
        self.timer_periods: list[int] = []
        self.open_handles: set[int] = set()
        self.sections: set[str] = set()
        self.locked: set[tuple[int, int]] = set()
        self._next_handle = 0x100
        self.counter_values: dict[str, list[tuple[str, float]]] = {}
        self._counters: dict[int, str] = {}
        self.registry = {
            (K.CURRENT_VERSION_KEY, "CurrentBuildNumber"): "22631",
            (K.CURRENT_VERSION_KEY, "UBR"): 4460,
            (K.CURRENT_VERSION_KEY, "DisplayVersion"): "23H2",
            (K.PROCESSOR_KEY, "ProcessorNameString"): "Intel(R) Core(TM) i7-8700 CPU @ 3.20GHz   ",
        }

    def _call(self, name: str, *args) -> None:
        self.calls.append((name, *args))
        code = self.fail.get(name)
        if code:
            raise K.Win32Failed(name, code, TEXTS.get(code, ""))

    def _handle(self) -> int:
        self._next_handle += 4
        self.open_handles.add(self._next_handle)
        return self._next_handle

    def GetCurrentProcess(self) -> int:  # noqa: N802
        self._call("GetCurrentProcess")
        return PSEUDO_PROCESS

    def GetCurrentThread(self) -> int:  # noqa: N802
        self._call("GetCurrentThread")
        return PSEUDO_THREAD

    def OpenProcess(self, access, inherit, pid):  # noqa: N802
        self._call("OpenProcess", access, inherit, pid)
        return self._handle()

    def CloseHandle(self, handle):  # noqa: N802
        self._call("CloseHandle", handle)
        self.open_handles.discard(handle)

    def GetPriorityClass(self, process):  # noqa: N802
        self._call("GetPriorityClass", process)
        return self.priority_class

    def SetPriorityClass(self, process, priority_class):  # noqa: N802
        self._call("SetPriorityClass", process, priority_class)
        # Without SeIncreaseBasePriorityPrivilege Windows grants HIGH instead of REALTIME, silently.
        granted_high = priority_class == K.REALTIME_PRIORITY_CLASS and not self.admin
        self.priority_class = K.HIGH_PRIORITY_CLASS if granted_high else priority_class

    def GetProcessAffinityMask(self, process):  # noqa: N802
        self._call("GetProcessAffinityMask", process)
        return self.process_mask, self.system_mask

    def SetProcessAffinityMask(self, process, mask):  # noqa: N802
        self._call("SetProcessAffinityMask", process, mask)
        if not mask or mask & ~self.system_mask:
            raise K.Win32Failed("SetProcessAffinityMask", K.ERROR_INVALID_PARAMETER, TEXTS[K.ERROR_INVALID_PARAMETER])
        self.process_mask = mask

    def SetThreadAffinityMask(self, thread, mask):  # noqa: N802
        self._call("SetThreadAffinityMask", thread, mask)
        before, self.thread_mask = self.thread_mask, mask
        return before

    def GetThreadPriority(self, thread):  # noqa: N802
        self._call("GetThreadPriority", thread)
        return self.thread_priority

    def SetThreadPriority(self, thread, priority):  # noqa: N802
        self._call("SetThreadPriority", thread, priority)
        if priority not in (-15, -2, -1, 0, 1, 2, 15) and self.priority_class != K.REALTIME_PRIORITY_CLASS:
            raise K.Win32Failed("SetThreadPriority", K.ERROR_INVALID_PARAMETER, TEXTS[K.ERROR_INVALID_PARAMETER])
        self.thread_priority = priority

    def read_registry(self, key, name):
        """HKLM values as a Windows 11 23H2 machine has them (REG_SZ as str, REG_DWORD as int)."""
        self.calls.append(("read_registry", key, name))
        return self.registry.get((key, name))

    def GetProcessWorkingSetSizeEx(self, process):  # noqa: N802
        self._call("GetProcessWorkingSetSizeEx", process)
        return self.working_set

    def SetProcessWorkingSetSizeEx(self, process, low, high, flags):  # noqa: N802
        self._call("SetProcessWorkingSetSizeEx", process, low, high, flags)
        self.working_set = (low, high, flags & (K.QUOTA_LIMITS_HARDWS_MIN_ENABLE | K.QUOTA_LIMITS_HARDWS_MAX_ENABLE))

    def VirtualLock(self, address, size):  # noqa: N802
        self._call("VirtualLock", address, size)

    def VirtualUnlock(self, address, size):  # noqa: N802
        self._call("VirtualUnlock", address, size)

    def timeBeginPeriod(self, period_ms):  # noqa: N802
        self._call("timeBeginPeriod", period_ms)
        self.timer_periods.append(period_ms)

    def timeEndPeriod(self, period_ms):  # noqa: N802
        self._call("timeEndPeriod", period_ms)
        self.timer_periods.remove(period_ms)

    def CreateWaitableTimerExW(self, flags, access):  # noqa: N802
        self._call("CreateWaitableTimerExW", flags, access)
        return self._handle()

    def SetWaitableTimer(self, timer, due_100ns):  # noqa: N802
        self._call("SetWaitableTimer", timer, due_100ns)

    def WaitForSingleObject(self, handle, timeout_ms):  # noqa: N802
        self._call("WaitForSingleObject", handle, timeout_ms)
        return 0  # WAIT_OBJECT_0 at once: the loop then spins to the edge (the fake keeps no time)

    def CreateJobObjectW(self):  # noqa: N802
        self._call("CreateJobObjectW")
        return self._handle()

    def SetInformationJobObject(self, job, limit_flags):  # noqa: N802
        self._call("SetInformationJobObject", job, limit_flags)

    def AssignProcessToJobObject(self, job, process):  # noqa: N802
        self._call("AssignProcessToJobObject", job, process)

    def OpenFileMappingW(self, access, name):  # noqa: N802
        self._call("OpenFileMappingW", access, name)
        if name not in self.sections:
            raise K.Win32Failed("OpenFileMappingW", K.ERROR_FILE_NOT_FOUND, TEXTS[K.ERROR_FILE_NOT_FOUND])
        return self._handle()

    def map_pagefile(self, name, size):
        """A file per section name, so every mapping of one name shares its bytes (as a section does)."""
        self.calls.append(("map_pagefile", name, size))
        path = self.section_dir / name
        self.sections.add(name)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            if os.fstat(fd).st_size < size:
                os.ftruncate(fd, size)
            return mmap.mmap(fd, size)
        finally:
            os.close(fd)

    def get_osfhandle(self, fd):
        self.calls.append(("get_osfhandle", fd))
        return fd

    # performance counters: ``self.counter_values`` maps an English path to its instances' (name, value)
    def PdhOpenQueryW(self):  # noqa: N802
        self._call("PdhOpenQueryW")
        return self._handle()

    def PdhAddEnglishCounterW(self, query, path):  # noqa: N802
        self._call("PdhAddEnglishCounterW", query, path)
        if path not in self.counter_values:
            raise K.Win32Failed("PdhAddEnglishCounterW", 0xC0000BB9, "PDH status 0xC0000BB9")  # PDH_CSTATUS_NO_COUNTER
        handle = self._handle()
        self._counters[handle] = path
        return handle

    def PdhCollectQueryData(self, query):  # noqa: N802
        self._call("PdhCollectQueryData", query)

    def PdhGetFormattedCounterArrayW(self, counter):  # noqa: N802
        self._call("PdhGetFormattedCounterArrayW", counter)
        return [(name, K.PDH_CSTATUS_VALID_DATA, value) for name, value in self.counter_values[self._counters[counter]]]

    def PdhCloseQuery(self, query):  # noqa: N802
        self._call("PdhCloseQuery", query)
        self.open_handles.discard(query)
        self.open_handles -= set(self._counters)

    def LockFileEx(self, handle, flags, offset, length):  # noqa: N802
        self._call("LockFileEx", handle, flags, offset, length)
        key = (os.fstat(handle).st_ino, offset)
        if key in self.locked:
            return False
        self.locked.add(key)
        return True


@pytest.fixture
def fake_win32(tmp_path):
    """Return a factory of FakeWin32 (keyword arguments as its constructor), sections under tmp_path."""

    def make(**kwargs) -> FakeWin32:
        return FakeWin32(tmp_path, **kwargs)

    return make
