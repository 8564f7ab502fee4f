"""A single-producer, single-consumer ring of cycle records in shared memory.

The worker (producer) never blocks: when the ring is full it drops the record and counts an
overflow, which the supervisor reports. The header's slots are int64 read and written through a
``memoryview`` cast (about 30 ns a slot, no allocation); a record is stored with one
``struct.pack_into``. Ordering relies on x86-TSO: the
record's stores become visible before the WRITE_IDX store that publishes them.
"""

from __future__ import annotations

import os
import re
import secrets
import struct
from pathlib import Path

import numpy as np

from ..errors import ConfigError, SoftRTError
from ..platform import get_platform, journal, maker_alive, state_dir
from . import layout as L

SLOT_BYTES = 8


def _size_bytes(capacity: int) -> int:
    return (L.HEADER_SLOTS + capacity * L.RECORD_SLOTS) * SLOT_BYTES


class Ring:
    """The shared-memory segment: created by the supervisor, attached by the worker."""

    def __init__(self, name: str, mm, owner: bool) -> None:
        self.name = name
        self._mm = mm
        self._owner = owner
        self.slots = memoryview(mm).cast("q")
        self.header = self.slots[: L.HEADER_SLOTS]
        if self.header[L.H_MAGIC] != L.MAGIC:
            raise SoftRTError(f"shared memory {name} is not a softrt ring (layout version mismatch)")
        self.capacity = self.header[L.H_CAPACITY]
        self._reader: RingReader | None = None

    @classmethod
    def create(cls, capacity: int = 1 << 16) -> Ring:
        """Create a ring of *capacity* records (a power of two) with mode 0600."""
        if capacity <= 0 or capacity & (capacity - 1):
            raise SoftRTError(f"ring capacity must be a power of two, got {capacity}")
        remove_stale()
        name = f"softrt-{os.getpid()}-{secrets.token_hex(4)}"
        marker = _mark(name)  # before the segment: a kill in between leaves it marked, never unmarked
        try:
            mm = get_platform().open_shared_memory(name, _size_bytes(capacity), create=True)
        except BaseException:
            marker.unlink(missing_ok=True)
            raise
        slots = memoryview(mm).cast("q")
        slots[L.H_CAPACITY] = capacity
        slots[L.H_MAGIC] = L.MAGIC
        slots.release()
        return cls(name, mm, owner=True)

    @classmethod
    def attach(cls, name: str) -> Ring:
        """Attach to the ring *name* created by the supervisor."""
        plat = get_platform()
        probe = plat.open_shared_memory(name, L.HEADER_SLOTS * SLOT_BYTES, create=False)
        capacity = memoryview(probe).cast("q")[L.H_CAPACITY]
        probe.close()
        return cls(name, plat.open_shared_memory(name, _size_bytes(capacity), create=False), owner=False)

    @property
    def mapping(self):
        """The shared mapping itself (the worker locks it in RAM: VirtualLock on Windows)."""
        return self._mm

    def writer(self) -> RingWriter:
        """Return the producer side (the worker)."""
        return RingWriter(self)

    def reader(self) -> RingReader:
        """Return the consumer side (the supervisor); there is one per ring."""
        if self._reader is None:
            self._reader = RingReader(self)
        return self._reader

    def close(self) -> None:
        """Unmap, and remove the segment if this side created it."""
        self._reader = None  # drops the numpy view that exports the mapping
        try:
            self.header.release()
            self.slots.release()
            self._mm.close()  # BufferError while a view lives on (a traceback's frame may hold one)
        finally:  # the segment goes in any case: unlinking a mapped one is allowed (shm_unlink(3))
            if self._owner:
                get_platform().remove_shared_memory(self.name)
                (_markers() / self.name).unlink(missing_ok=True)


_NAME = re.compile(r"softrt-(\d+)-[0-9a-f]{8}")


def _markers() -> Path:
    return state_dir() / "rings"


def _mark(name: str) -> Path:
    """Write the marker naming ring *name* and its maker (``process_identity``); return its path."""
    marker = _markers() / name
    journal.secure_dir(state_dir())
    journal.secure_dir(marker.parent)
    journal.create_private(marker, (get_platform().process_identity() or "") + "\n")
    return marker


def remove_stale() -> list[str]:
    """Remove the ring segments this user's softrt processes, now gone, marked as theirs; return their names.

    A supervisor that was SIGKILLed leaves its segment in /dev/shm (POSIX shared memory lives until
    shm_unlink(3)). Only this state directory's markers are read: a segment is removed when the
    process that marked it (boot id, pid and start time: a reused pid is not its maker) is gone, so
    another user's, or another test's, live or dead ring is never touched here.
    """
    markers = _markers()
    if not os.path.lexists(markers):
        return []
    plat = get_platform()
    journal.secure_dir(markers)
    present = set(plat.list_shared_memory("softrt-"))
    removed = []
    for marker in sorted(markers.iterdir()):
        found = _NAME.fullmatch(marker.name)
        if found is None:
            continue  # failed/, or a file softrt did not write: never acted on
        try:
            identity = journal.read_own(marker, "ring marker").decode(errors="replace").strip()
        except FileNotFoundError:
            continue  # its process closed the ring while we looked
        except ConfigError as err:
            journal.set_aside(marker, err.msg)
            continue
        if maker_alive(int(found.group(1)), identity):
            continue
        if marker.name in present:
            plat.remove_shared_memory(marker.name)
            removed.append(marker.name)
        marker.unlink(missing_ok=True)
    return removed


class RingWriter:
    """Producer side: ``put`` one record per cycle, never blocking."""

    __slots__ = ("_buf", "_cap", "_hdr", "_mask", "_pack")

    def __init__(self, ring: Ring) -> None:
        self._buf = ring._mm
        self._hdr = ring.header
        self._cap = ring.capacity
        self._mask = ring.capacity - 1
        # One struct.pack_into stores the whole record: about half the cost of ten slot stores.
        self._pack = struct.Struct(f"<{L.RECORD_SLOTS}q").pack_into

    def put(
        self,
        seq: int,
        cycle: int,
        edge_ns: int,
        detect_ns: int,
        write_ns: int,
        done_ns: int,
        missed: int,
        flags: int,
        rtt_ns: int,
        wkc: int,
    ) -> None:
        """Append one record, or count an overflow when the supervisor has fallen behind."""
        hdr = self._hdr
        w = hdr[2]  # H_WRITE_IDX (literal: this is the hot path)
        if w - hdr[3] >= self._cap:  # H_READ_IDX
            hdr[4] += 1  # H_OVERFLOWS
            return
        # Byte offset of slot HEADER_SLOTS + index * RECORD_SLOTS (16 and 10, literal here).
        self._pack(
            self._buf,
            (16 + (w & self._mask) * 10) * 8,
            seq,
            cycle,
            edge_ns,
            detect_ns,
            write_ns,
            done_ns,
            missed,
            flags,
            rtt_ns,
            wkc,
        )
        hdr[2] = w + 1


class RingReader:
    """Consumer side: ``drain`` copies out every published record as a structured array."""

    def __init__(self, ring: Ring) -> None:
        self._hdr = ring.header
        self._cap = ring.capacity
        self._records = np.frombuffer(
            ring.slots.obj, dtype=L.RECORD_DTYPE, count=ring.capacity, offset=L.HEADER_SLOTS * SLOT_BYTES
        )

    def drain(self) -> np.ndarray:
        """Return (a copy of) the records published since the last drain, oldest first."""
        w = self._hdr[L.H_WRITE_IDX]
        r = self._hdr[L.H_READ_IDX]
        if w == r:
            return self._records[:0].copy()
        i, j = r % self._cap, w % self._cap
        if j > i:
            out = self._records[i:j].copy()
        else:  # wrapped around the end of the buffer
            out = np.concatenate([self._records[i:], self._records[:j]])
        self._hdr[L.H_READ_IDX] = w  # frees the slots for the producer
        return out

    @property
    def overflows(self) -> int:
        """Records the producer dropped because the ring was full."""
        return self._hdr[L.H_OVERFLOWS]
