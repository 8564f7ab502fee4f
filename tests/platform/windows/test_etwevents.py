"""NT kernel logger CSwitch, DPC and ISR payloads parsed from bytes (platform.windows.etwevents).

The payloads are laid out by ctypes from the MOF class declarations on Microsoft Learn ("CSwitch class",
"DPC class", "ISR class": Event Tracing Reference > MOF classes > Kernel events), with a 64-bit kernel's
8-byte pointers, not by the struct formats the parser reads; they were not recorded on a real machine.
"""

from __future__ import annotations

import ctypes

import pytest

from softrt.platform.windows import etwevents as E

b, B = ctypes.c_int8, ctypes.c_uint8


class CSwitchMof(ctypes.Structure):
    _pack_ = 1
    _fields_ = [
        ("NewThreadId", ctypes.c_uint32),
        ("OldThreadId", ctypes.c_uint32),
        ("NewThreadPriority", b),
        ("OldThreadPriority", b),
        ("PreviousCState", B),
        ("SpareByte", b),
        ("OldThreadWaitReason", b),
        ("OldThreadWaitMode", b),
        ("OldThreadState", b),
        ("OldThreadWaitIdealProcessor", b),
        ("NewThreadWaitTime", ctypes.c_uint32),
        ("Reserved", ctypes.c_uint32),
    ]


class DpcMof(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("InitialTime", ctypes.c_uint64), ("Routine", ctypes.c_uint64)]


class IsrMof(ctypes.Structure):
    _pack_ = 1
    _fields_ = [
        ("InitialTime", ctypes.c_uint64),
        ("Routine", ctypes.c_uint64),
        ("ReturnValue", B),
        ("Vector", ctypes.c_uint16),
        ("Reserved", B),
    ]


def cswitch(ts, cpu, new, old, new_pri, old_pri, old_state, version=2):
    data = bytes(
        CSwitchMof(
            NewThreadId=new,
            OldThreadId=old,
            NewThreadPriority=new_pri,
            OldThreadPriority=old_pri,
            OldThreadState=old_state,
            OldThreadWaitReason=6 if old_state == 5 else 0,
        )
    )
    return E.EtwRecord(E.THREAD_GUID, E.CSWITCH, version, ts, cpu, data)


def dpc(start, end, cpu, routine, opcode=E.DPC):
    return E.EtwRecord(E.PERFINFO_GUID, opcode, 2, end, cpu, bytes(DpcMof(start, routine)))


def isr(start, end, cpu, routine, vector):
    return E.EtwRecord(E.PERFINFO_GUID, E.ISR, 2, end, cpu, bytes(IsrMof(start, routine, 1, vector)))


def test_layout_sizes_are_the_documented_ones():
    assert (ctypes.sizeof(CSwitchMof), ctypes.sizeof(DpcMof), ctypes.sizeof(IsrMof)) == (24, 16, 20)


def test_cswitch_dpc_and_isr_fields():
    recs = [
        cswitch(100, 3, 4, 1000, 31, 28, 1, version=4),
        dpc(200, 250, 3, 0xFFFFF80712345678, E.TIMER_DPC),
        isr(300, 310, 3, 0xFFFFF80700001000, 0x91),
        E.EtwRecord(E.THREAD_GUID, 1, 3, 400, 3, b"\0" * 8),
    ]  # a thread start: not ours, skipped
    switches, routines, bad = E.parse(recs)
    assert switches == [E.CSwitch(100, 3, 4, 1000, 31, 28, 1, 0)] and bad == 0
    assert routines == [
        E.Routine("dpc", 3, 200, 250, 0xFFFFF80712345678),
        E.Routine("isr", 3, 300, 310, 0xFFFFF80700001000, 0x91),
    ]


@pytest.mark.parametrize(
    "rec",
    [
        E.EtwRecord(E.THREAD_GUID, E.CSWITCH, 2, 1, 0, b"\0" * 23),
        E.EtwRecord(E.PERFINFO_GUID, E.ISR, 2, 1, 0, bytes(19)),
    ],
)
def test_a_short_payload_is_counted_not_raised(rec):
    assert E.parse([rec]) == ([], [], 1)
