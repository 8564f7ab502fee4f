"""Windows CPU sets, hybrid cores, SMT siblings and power throttling, read from the raw Win32 buffers (platform layer).

Each logical processor's efficiency class, physical core and flags come from
``GetSystemCpuSetInformation`` (Microsoft Learn: "GetSystemCpuSetInformation function (processthreadsapi.h)"
and "SYSTEM_CPU_SET_INFORMATION structure (winnt.h)"): one 32-byte record per logical processor::

    offset  0 DWORD Size, 4 DWORD Type (0 = CpuSetInformation), 8 DWORD Id, 12 WORD Group,
           14 BYTE LogicalProcessorIndex, 15 BYTE CoreIndex, 16 BYTE LastLevelCacheIndex,
           17 BYTE NumaNodeIndex, 18 BYTE EfficiencyClass,
           19 BYTE AllFlags (bit 0 Parked, 1 Allocated, 2 AllocatedToTargetProcess, 3 RealTime),
           20 DWORD Reserved / BYTE SchedulingClass, 24 DWORD64 AllocationTag

"CPU Sets with higher numerical values of [EfficiencyClass] have home processors that are faster but less
power-efficient": on Intel hybrid parts the P-cores have the higher class. Logical processors sharing a
``(Group, CoreIndex)`` are SMT siblings. The buffer is parsed in pure Python from bytes, so a capture of it
(``cpu_sets.hex`` in a ``softrt check --root`` directory) and test fixtures read the same way on Linux.

Power throttling (EcoQoS) of a process: ``GetProcessInformation(ProcessPowerThrottling)`` fills
PROCESS_POWER_THROTTLING_STATE {ULONG Version, ControlMask, StateMask} (Microsoft Learn:
"PROCESS_POWER_THROTTLING_STATE structure (processthreadsapi.h)"): EXECUTION_SPEED (1) absent from
ControlMask means the system decides (it throttles a background or minimized process); in ControlMask
and StateMask, throttling is on; in ControlMask only, it is off.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from ...cpus import CpuSet
from ...errors import SoftRTError
from .. import IS_WINDOWS

RECORD = struct.Struct("<IIIHBBBBBBIQ")  # SYSTEM_CPU_SET_INFORMATION, 32 bytes
CPU_SET_INFORMATION = 0
FLAG_PARKED, FLAG_REALTIME = 0x1, 0x8
PROCESS_POWER_THROTTLING = 4  # PROCESS_INFORMATION_CLASS ProcessPowerThrottling
THROTTLING_STATE = struct.Struct("<III")
THROTTLE_EXECUTION_SPEED = 0x1
PROCESS_POWER_THROTTLING_CURRENT_VERSION = 1


@dataclass(frozen=True)
class CpuSetInfo:
    """One logical processor's CPU set record."""

    id: int
    group: int
    index: int  # LogicalProcessorIndex within the group
    core: int  # CoreIndex: SMT siblings share it
    efficiency_class: int
    parked: bool
    realtime: bool  # reserved for real-time work (the Soft Real-Time cores)

    @property
    def cpu(self) -> int:
        """The logical processor number as softrt counts them (group 0 only: 64 per group)."""
        return self.group * 64 + self.index


def parse_cpu_sets(raw: bytes) -> list[CpuSetInfo]:
    """The records of a GetSystemCpuSetInformation buffer, walked by each record's Size.

    Raises:
        ValueError: a record shorter than its layout or a Size that does not advance.
    """
    out, offset = [], 0
    while offset < len(raw):
        if len(raw) - offset < 8:
            raise ValueError(f"CPU set buffer: {len(raw) - offset} trailing bytes at offset {offset}")
        size, kind = struct.unpack_from("<II", raw, offset)
        if size < 8 or offset + size > len(raw):
            raise ValueError(f"CPU set record at offset {offset}: Size {size} does not fit the {len(raw)}-byte buffer")
        if kind == CPU_SET_INFORMATION:
            if size < RECORD.size:
                raise ValueError(f"CPU set record at offset {offset}: Size {size} < {RECORD.size}")
            _, _, id_, group, lp, core, _llc, _numa, eff, flags, _sched, _tag = RECORD.unpack_from(raw, offset)
            out.append(CpuSetInfo(id_, group, lp, core, eff, bool(flags & FLAG_PARKED), bool(flags & FLAG_REALTIME)))
        offset += size
    return out


@dataclass(frozen=True)
class Topology:
    """The hybrid and SMT layout the CPU sets describe."""

    sets: tuple[CpuSetInfo, ...]

    @property
    def top_class(self) -> int:
        """The most performant efficiency class on the machine."""
        return max(s.efficiency_class for s in self.sets)

    @property
    def hybrid(self) -> bool:
        """More than one efficiency class (P- and E-cores)."""
        return len({s.efficiency_class for s in self.sets}) > 1

    def performance(self) -> CpuSet:
        """The logical processors of the top efficiency class (every one on a non-hybrid machine)."""
        return CpuSet(s.cpu for s in self.sets if s.efficiency_class == self.top_class)

    def efficiency(self) -> CpuSet:
        """The logical processors below the top efficiency class (the E-cores)."""
        return CpuSet(s.cpu for s in self.sets if s.efficiency_class != self.top_class)

    def siblings(self, cpu: int) -> CpuSet:
        """The other logical processors on *cpu*'s physical core (empty without SMT)."""
        mine = next((s for s in self.sets if s.cpu == cpu), None)
        if mine is None:
            return CpuSet()
        return CpuSet(s.cpu for s in self.sets if (s.group, s.core) == (mine.group, mine.core) and s.cpu != cpu)

    def realtime(self) -> CpuSet:
        """The logical processors Windows flags as real-time (reserved)."""
        return CpuSet(s.cpu for s in self.sets if s.realtime)

    def efficiency_of(self, cpu: int) -> int | None:
        """*cpu*'s efficiency class, None when it has no record."""
        return next((s.efficiency_class for s in self.sets if s.cpu == cpu), None)


def topology(raw: bytes) -> Topology:
    """The topology of a GetSystemCpuSetInformation buffer (ValueError when it holds no processor)."""
    sets = parse_cpu_sets(raw)
    if not sets:
        raise ValueError("the CPU set buffer holds no CpuSetInformation record")
    return Topology(tuple(sets))


def parse_throttling(raw: bytes) -> str:
    """``on``, ``off`` or ``system`` (the system decides, and throttles in the background) of a
    PROCESS_POWER_THROTTLING_STATE buffer."""
    _version, control, state = THROTTLING_STATE.unpack_from(raw)
    if not control & THROTTLE_EXECUTION_SPEED:
        return "system"
    return "on" if state & THROTTLE_EXECUTION_SPEED else "off"


def system_cpu_sets() -> bytes:
    """This machine's GetSystemCpuSetInformation buffer (Windows 10 and later).

    Raises:
        SoftRTError: not Windows, or the call failed (its Win32 error).
    """
    if not IS_WINDOWS:
        raise SoftRTError("GetSystemCpuSetInformation exists only on Windows", hint="read a capture with --root")
    import ctypes

    kernel32 = ctypes.WinDLL("kernel32", use_last_error=True)
    if not hasattr(kernel32, "GetSystemCpuSetInformation"):
        raise SoftRTError("GetSystemCpuSetInformation is not in kernel32.dll", hint="Windows 10 or later has it")
    need = ctypes.c_uint32(0)
    kernel32.GetSystemCpuSetInformation(None, 0, ctypes.byref(need), None, 0)
    if not need.value:
        raise SoftRTError(
            f"GetSystemCpuSetInformation failed (Win32 error {ctypes.get_last_error()})",
            hint="Windows 10 or later has CPU sets",
        )
    buf = ctypes.create_string_buffer(need.value)
    if not kernel32.GetSystemCpuSetInformation(buf, need, ctypes.byref(need), None, 0):
        raise SoftRTError(
            f"GetSystemCpuSetInformation failed (Win32 error {ctypes.get_last_error()})",
            hint="Windows 10 or later has CPU sets",
        )
    return buf.raw[: need.value]


def process_throttling() -> bytes:
    """This process's PROCESS_POWER_THROTTLING_STATE (GetProcessInformation, Windows 8 and later).

    Raises:
        SoftRTError: not Windows, or the call failed.
    """
    if not IS_WINDOWS:
        raise SoftRTError("power throttling exists only on Windows", hint="read it on the Windows machine")
    import ctypes

    kernel32 = ctypes.WinDLL("kernel32", use_last_error=True)
    if not hasattr(kernel32, "GetProcessInformation"):  # Wine 8 lacks it
        raise SoftRTError("GetProcessInformation is not in kernel32.dll", hint="Windows 8 or later has it")
    kernel32.GetCurrentProcess.restype = ctypes.c_void_p
    buf = ctypes.create_string_buffer(THROTTLING_STATE.pack(PROCESS_POWER_THROTTLING_CURRENT_VERSION, 0, 0))
    if not kernel32.GetProcessInformation(
        ctypes.c_void_p(kernel32.GetCurrentProcess()), PROCESS_POWER_THROTTLING, buf, THROTTLING_STATE.size
    ):
        raise SoftRTError(
            f"GetProcessInformation(ProcessPowerThrottling) failed (Win32 error {ctypes.get_last_error()})",
            hint="Windows 10 1709 or later reports power throttling",
        )
    return buf.raw[: THROTTLING_STATE.size]
