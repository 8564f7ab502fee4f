"""Every thread of this process on given CPUs (platform layer, Linux).

sched_setaffinity(2) acts on one thread: given a thread id it sets that thread's mask only, and a
new thread takes its creator's mask ("A thread created by pthread_create(3) inherits a copy of
its creator's CPU affinity mask", sched_setaffinity(2) NOTES). Moving a whole process therefore
means moving each of ``/proc/self/task/*`` (proc(5)): the threads a library started before
(pyarrow's ``jemalloc_bg_thd``), the metrics server's, a device's helper. A thread created during
the walk by a thread not yet moved may be missed, so the walk repeats until a pass moves nothing.
"""

from __future__ import annotations

import errno
import os
import threading
from collections.abc import Collection

from ...cpus import CpuSet
from ..base import ThreadPins
from ..kfiles import read_text

TASKS = "/proc/self/task"
MAX_PASSES = 8  # a pass that moves nothing ends the walk; a process creating threads faster is named


def _tids() -> list[int]:
    try:
        return sorted(int(name) for name in os.listdir(TASKS) if name.isdigit())
    except OSError:
        return []


def thread_name(tid: int) -> str:
    """The thread's name (``comm``, proc(5)), or ``?`` when it has gone."""
    return read_text("/", f"{TASKS}/{tid}/comm", fallback="") or "?"


def _why(err: OSError) -> str:
    if err.errno in (errno.EPERM, errno.EACCES):
        return f"{err.strerror} (run as root or grant CAP_SYS_NICE)"
    if err.errno == errno.EINVAL:
        return f"{err.strerror} (its cpuset does not hold these CPUs)"
    return err.strerror or str(err)


def pin_threads(cpus: CpuSet, keep: Collection[int] = ()) -> ThreadPins:
    """Put every thread of this process but those in *keep* (thread ids) on *cpus*; threads whose
    mask already lies within *cpus* are left as they are. Returns what was done, with the threads
    that could not be moved (and why) and the undo (each moved thread back to its own mask)."""
    target = cpus.to_frozenset()
    previous: dict[int, frozenset[int]] = {}
    failed: dict[int, str] = {}
    for _ in range(MAX_PASSES):
        moved = 0
        for tid in _tids():
            if tid in keep or tid in failed:
                continue
            try:
                mask = frozenset(os.sched_getaffinity(tid))
                if mask <= target:
                    continue
                os.sched_setaffinity(tid, target)
            except OSError as err:
                if err.errno != errno.ESRCH:  # ESRCH: it exited meanwhile
                    failed[tid] = f"thread {tid} ({thread_name(tid)}): {_why(err)}"
                continue
            previous.setdefault(tid, mask)
            moved += 1
        if not moved:
            break
    else:
        failed[-1] = f"threads were still being created after {MAX_PASSES} passes over {TASKS}"
    return ThreadPins(
        cpus=cpus,
        threads=len([t for t in _tids() if t not in keep]),
        failed=list(failed.values()),
        undo=lambda: _restore(previous, target, keep),
    )


def _restore(previous: dict[int, frozenset[int]], target: frozenset[int], keep: Collection[int]) -> None:
    """Each moved thread back to its own mask; a thread started meanwhile on *target* to the mask of
    the thread that undoes (the process is as it was before, for what it does next)."""
    try:
        fallback = previous.get(threading.get_native_id(), frozenset(os.sched_getaffinity(0)))
    except OSError:
        return
    for tid in _tids():
        if tid in keep:
            continue
        try:
            if tid in previous:
                os.sched_setaffinity(tid, previous[tid])
            elif frozenset(os.sched_getaffinity(tid)) == target:
                os.sched_setaffinity(tid, fallback)
        except OSError:
            pass  # it exited, or its cpuset changed: nothing of softrt's to put back


def masks(pid: int | None = None) -> dict[int, tuple[str, CpuSet]]:
    """Every thread of process *pid* (None: this one): its name and allowed CPUs (``Cpus_allowed_list``
    of ``/proc/<pid>/task/<tid>/status``, proc(5)); threads that exit while read are left out."""
    base = TASKS if pid is None else f"/proc/{pid}/task"
    out = {}
    try:
        tids = [int(n) for n in os.listdir(base) if n.isdigit()]
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"{base}/{tid}/status") as fh:
                fields = dict(line.split(":", 1) for line in fh if ":" in line)
        except OSError:
            continue
        out[tid] = (fields.get("Name", "?").strip(), CpuSet.parse(fields.get("Cpus_allowed_list", "").strip()))
    return out
