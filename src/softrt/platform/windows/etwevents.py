"""The NT kernel logger's context-switch, DPC and ISR events, parsed from their MOF payloads (platform layer; pure).

An ETW kernel session (the "NT Kernel Logger", ``EVENT_TRACE_FLAG_CSWITCH | _DPC | _INTERRUPT``; what
``wpr -start CPU`` records and WPA shows) delivers each event as an EVENT_RECORD whose header gives the
provider class GUID, the opcode (the MOF EventType), the version, the timestamp and, in its
BufferContext, the processor the event fired on; ``UserData`` holds the payload. The payload layouts are
Microsoft's documented MOF classes (Microsoft Learn, "CSwitch class", "DPC class", "ISR class" under
"Event Tracing > Event Tracing Reference > MOF classes > Kernel events"):

    CSwitch (Thread_V2, EventType 36; versions 2 to 4 share these 24 bytes)
        uint32 NewThreadId, uint32 OldThreadId, sint8 NewThreadPriority, sint8 OldThreadPriority,
        uint8 PreviousCState, sint8 SpareByte, sint8 OldThreadWaitReason, sint8 OldThreadWaitMode,
        sint8 OldThreadState, sint8 OldThreadWaitIdealProcessor, uint32 NewThreadWaitTime, uint32 Reserved
    DPC (PerfInfo, EventType 66 ThreadDPC, 68 DPC, 69 TimerDPC)
        uint64 InitialTime (WmiTime: when the routine started), pointer Routine
    ISR (PerfInfo, EventType 67)
        uint64 InitialTime, pointer Routine, uint8 ReturnValue, uint16 Vector, uint8 Reserved

A pointer is 8 bytes in a 64-bit kernel's trace (EVENT_HEADER_FLAG_64_BIT_HEADER). A DPC or ISR event is
logged when the routine returns: its header timestamp is the end, InitialTime the start (same clock).
OldThreadState is the KTHREAD_STATE (0 Initialized, 1 Ready, 2 Running, 3 Standby, 4 Terminated,
5 Waiting, 6 Transition, 7 DeferredReady).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

THREAD_GUID = "3d6fa8d1-fe05-11d0-9dda-00c04fd7ba7c"  # Thread_V2's class GUID
PERFINFO_GUID = "ce1dbfb4-137e-4da6-87b0-3f59aa102cbc"  # PerfInfo's class GUID
CSWITCH = 36
THREAD_DPC, ISR, DPC, TIMER_DPC = 66, 67, 68, 69
DPC_OPCODES = frozenset({THREAD_DPC, DPC, TIMER_DPC})
_CSWITCH = struct.Struct("<IIbbBbbbbbII")
RUNNABLE_STATES = frozenset({1, 2, 3, 7})  # Ready, Running, Standby, DeferredReady: switched out while runnable
WAITING = 5


@dataclass(frozen=True)
class EtwRecord:
    """One event as ProcessTrace hands it over: class GUID, opcode, version, timestamp, processor, payload."""

    guid: str
    opcode: int
    version: int
    ts: int  # the session's clock (QPC ticks by default)
    cpu: int
    data: bytes


@dataclass(frozen=True)
class CSwitch:
    ts: int
    cpu: int
    new_tid: int
    old_tid: int
    new_priority: int
    old_priority: int
    old_state: int
    old_wait_reason: int


@dataclass(frozen=True)
class Routine:
    """A DPC or an ISR: it ran from ``start`` to ``end`` on ``cpu``."""

    kind: str  # "dpc" or "isr"
    cpu: int
    start: int
    end: int
    routine: int
    vector: int = -1  # ISRs only


def parse_cswitch(rec: EtwRecord) -> CSwitch:
    """A CSwitch payload (ValueError when shorter than its 24 bytes)."""
    if len(rec.data) < _CSWITCH.size:
        raise ValueError(f"CSwitch payload of {len(rec.data)} bytes, the layout has {_CSWITCH.size}")
    new, old, new_pri, old_pri, _cstate, _spare, reason, _mode, state, _ideal, _wait, _res = _CSWITCH.unpack_from(
        rec.data
    )
    return CSwitch(rec.ts, rec.cpu, new, old, new_pri, old_pri, state, reason)


def parse_routine(rec: EtwRecord, pointer_bytes: int = 8) -> Routine:
    """A DPC or ISR payload (ValueError when short or not one)."""
    ptr = "Q" if pointer_bytes == 8 else "I"
    if rec.opcode in DPC_OPCODES:
        layout = struct.Struct("<Q" + ptr)
    elif rec.opcode == ISR:
        layout = struct.Struct("<Q" + ptr + "BHB")
    else:
        raise ValueError(f"opcode {rec.opcode} is neither a DPC nor an ISR")
    if len(rec.data) < layout.size:
        raise ValueError(
            f"{'ISR' if rec.opcode == ISR else 'DPC'} payload of {len(rec.data)} bytes, the layout has {layout.size}"
        )
    fields = layout.unpack_from(rec.data)
    if rec.opcode == ISR:
        return Routine("isr", rec.cpu, fields[0], rec.ts, fields[1], fields[3])
    return Routine("dpc", rec.cpu, fields[0], rec.ts, fields[1])


def parse(records: list[EtwRecord], pointer_bytes: int = 8) -> tuple[list[CSwitch], list[Routine], int]:
    """The context switches and routines among *records*, and how many records were skipped as malformed."""
    switches, routines, bad = [], [], 0
    for rec in records:
        try:
            if rec.guid == THREAD_GUID and rec.opcode == CSWITCH:
                switches.append(parse_cswitch(rec))
            elif rec.guid == PERFINFO_GUID and (rec.opcode in DPC_OPCODES or rec.opcode == ISR):
                routines.append(parse_routine(rec, pointer_bytes))
        except ValueError:
            bad += 1
    return switches, routines, bad
