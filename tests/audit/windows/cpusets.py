"""Win32 buffers built from Microsoft's documented layouts, for the hybrid/SMT/EcoQoS tests.

The records are laid out by ctypes from the C declarations on Microsoft Learn, "SYSTEM_CPU_SET_INFORMATION
structure (winnt.h)" and "PROCESS_POWER_THROTTLING_STATE structure (processthreadsapi.h)", not by the
offsets softrt's parser (platform/windows/wincpusets.py) reads: ctypes applies the C alignment rules itself, so a wrong
offset in the parser fails these tests. The machines are the seed's i5-14500 (6 P-cores with Hyper-Threading,
8 E-cores: Windows numbers the P-cores first, an SMT pair on consecutive numbers, P-cores EfficiencyClass 1,
E-cores 0) with HT on (20 logical processors) and off (14), and a 14-core machine of one class without SMT.
They were not captured on a real machine.
"""

from __future__ import annotations

import ctypes

from softrt.cpus import CpuSet

c_ubyte, c_ushort, c_uint, c_ulonglong = ctypes.c_ubyte, ctypes.c_ushort, ctypes.c_uint32, ctypes.c_uint64


class CpuSetRecord(ctypes.Structure):
    """SYSTEM_CPU_SET_INFORMATION with its CpuSet union member, as winnt.h declares it."""

    _fields_ = [
        ("Size", c_uint),
        ("Type", c_uint),
        ("Id", c_uint),
        ("Group", c_ushort),
        ("LogicalProcessorIndex", c_ubyte),
        ("CoreIndex", c_ubyte),
        ("LastLevelCacheIndex", c_ubyte),
        ("NumaNodeIndex", c_ubyte),
        ("EfficiencyClass", c_ubyte),
        ("AllFlags", c_ubyte),
        ("Reserved", c_uint),
        ("AllocationTag", c_ulonglong),
    ]


class ThrottlingState(ctypes.Structure):
    """PROCESS_POWER_THROTTLING_STATE."""

    _fields_ = [("Version", c_uint), ("ControlMask", c_uint), ("StateMask", c_uint)]


def cpu_sets(cores: list[tuple[int, int]], realtime: CpuSet = CpuSet()) -> bytes:
    """A GetSystemCpuSetInformation buffer: *cores* lists (core index, efficiency class) per logical processor."""
    out = b""
    for lp, (core, eff) in enumerate(cores):
        rec = CpuSetRecord(
            Size=ctypes.sizeof(CpuSetRecord),
            Type=0,
            Id=0x100 + lp,
            Group=0,
            LogicalProcessorIndex=lp,
            CoreIndex=core,
            EfficiencyClass=eff,
            AllFlags=0x8 if lp in realtime else 0,
        )
        out += bytes(rec)
    return out


def i5_14500(ht: bool) -> list[tuple[int, int]]:
    """6 P-cores (class 1; two logical processors each with HT) then 8 E-cores (class 0)."""
    p = [(core, 1) for core in range(6) for _ in range(2 if ht else 1)]
    return p + [(core, 0) for core in range(6, 14)]


def uniform(n: int) -> list[tuple[int, int]]:
    """*n* cores of one class, no SMT."""
    return [(core, 0) for core in range(n)]


def throttling(control: int, state: int) -> bytes:
    return bytes(ThrottlingState(1, control, state))
