"""Readers for processes and threads under a root directory (platform layer, read-only).

Flags come from the 9th field of /proc/PID/stat (proc(5)); the bit values are from
include/linux/sched.h and are what tuna's ``cannot_set_affinity()`` tests.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import NamedTuple

from ...cpus import CpuSet
from ...errors import ConfigError
from ..kfiles import kpath, read_text

PF_KTHREAD = 0x00200000  # a kernel thread
PF_NO_SETAFFINITY = 0x04000000  # userland may not change its affinity (per-CPU kthreads)

SCHED_POLICIES = {
    0: "SCHED_OTHER",
    1: "SCHED_FIFO",
    2: "SCHED_RR",
    3: "SCHED_BATCH",
    5: "SCHED_IDLE",
    6: "SCHED_DEADLINE",
}


@dataclass(frozen=True)
class Task:
    """One thread, as /proc/PID/task/TID/{stat,status} describe it."""

    pid: int  # the thread group (process) id
    tid: int
    comm: str
    kthread: bool
    no_setaffinity: bool
    allowed: CpuSet
    policy: int
    rt_priority: int
    starttime: int  # clock ticks after boot; with tid it identifies the thread across pid reuse
    processor: int  # the CPU it last ran on
    run_ticks: int  # utime + stime

    @property
    def movable(self) -> bool:
        """True when its affinity may be changed (not a per-CPU kernel thread)."""
        return not self.no_setaffinity

    @property
    def policy_name(self) -> str:
        """``SCHED_FIFO`` etc."""
        return SCHED_POLICIES.get(self.policy, str(self.policy))

    @property
    def realtime(self) -> bool:
        """True for SCHED_FIFO, SCHED_RR and SCHED_DEADLINE."""
        return self.policy in (1, 2, 6)

    def label(self) -> str:
        """``comm (pid)``, or ``comm (pid/tid)`` for a secondary thread."""
        return f"{self.comm} ({self.pid})" if self.pid == self.tid else f"{self.comm} ({self.pid}/{self.tid})"


class ProcStat(NamedTuple):
    """The fields of /proc/PID/stat softrt reads (proc(5): state, ppid, flags, utime, stime in clock
    ticks, starttime, processor, rt_priority, policy)."""

    comm: str
    state: str
    ppid: int
    flags: int
    utime: int
    stime: int
    starttime: int
    processor: int
    rt_priority: int
    policy: int


def parse_stat(body: str) -> ProcStat | None:
    """Parse /proc/PID/stat; comm may hold spaces and parentheses, so split at the last ')'."""
    head, sep, tail = body.rpartition(")")
    if not sep or "(" not in head:
        return None
    fields = tail.split()
    try:
        return ProcStat(
            comm=head.split("(", 1)[1],
            state=fields[0],
            ppid=int(fields[1]),
            flags=int(fields[6]),
            utime=int(fields[11]),
            stime=int(fields[12]),
            starttime=int(fields[19]),
            processor=int(fields[36]),
            rt_priority=int(fields[37]),
            policy=int(fields[38]),
        )
    except (IndexError, ValueError):
        return None


def _tgid(status: str, default: int) -> int:
    for line in status.splitlines():
        if line.startswith("Tgid:"):
            value = line.split(":", 1)[1].strip()
            return int(value) if value.isdigit() else default
    return default


def allowed_list(status: str) -> CpuSet | None:
    """The CPUs a task may run on, from the text of its /proc/PID/status (``Cpus_allowed_list:``); None
    when absent or not a cpulist."""
    for line in status.splitlines():
        if line.startswith("Cpus_allowed_list:"):
            try:
                return CpuSet.parse(line.split(":", 1)[1])
            except ConfigError:
                return None
    return None


def pids(root: str) -> list[int]:
    """Return the process ids under /proc, sorted."""
    try:
        return sorted(int(n) for n in os.listdir(kpath(root, "/proc")) if n.isdigit())
    except OSError:
        return []


def read_task(root: str, pid: int, tid: int) -> Task | None:
    """Return one thread, or None when it is gone or unreadable (it may exit while we read).

    ``read_task(root, tid, tid)`` works for any thread id: /proc/TID exists for every thread even
    though /proc lists only thread-group leaders; the process id then comes from ``Tgid:``.
    """
    base = f"/proc/{pid}/task/{tid}"
    stat = parse_stat(read_text(root, f"{base}/stat", fallback=""))
    status = read_text(root, f"{base}/status", fallback="")
    allowed = allowed_list(status)
    if stat is None or allowed is None:
        return None
    flags = stat.flags
    return Task(
        _tgid(status, pid),
        tid,
        stat.comm,
        bool(flags & PF_KTHREAD),
        bool(flags & PF_NO_SETAFFINITY),
        allowed,
        stat.policy,
        stat.rt_priority,
        stat.starttime,
        stat.processor,
        stat.utime + stat.stime,
    )


def tasks(root: str) -> list[Task]:
    """Return every thread of every process (threads can have their own affinity)."""
    out = []
    for pid in pids(root):
        try:
            tids = sorted(int(n) for n in os.listdir(kpath(root, f"/proc/{pid}/task")) if n.isdigit())
        except OSError:
            continue  # the process exited
        for tid in tids:
            task = read_task(root, pid, tid)
            if task is not None:
                out.append(task)
    return out


def process_names(root: str) -> dict[str, list[int]]:
    """Return ``{comm: [pid, …]}`` for user processes (kernel threads left out)."""
    names: dict[str, list[int]] = {}
    for pid in pids(root):
        stat = parse_stat(read_text(root, f"/proc/{pid}/stat", fallback=""))
        if stat is None or stat.flags & PF_KTHREAD:
            continue
        names.setdefault(stat.comm, []).append(pid)
    return names


def lineage(root: str, pid: int) -> list[int]:
    """Return *pid* and its ancestors (parent, grandparent, …), init (pid 1) left out.

    Follows the 4th field of /proc/PID/stat (ppid, proc(5)); stops at init, at a process that
    is gone, and after 4096 steps (a loop in a crafted tree).
    """
    chain: list[int] = []
    while pid > 1 and pid not in chain and len(chain) < 4096:
        chain.append(pid)
        stat = parse_stat(read_text(root, f"/proc/{pid}/stat", fallback=""))
        if stat is None:
            break
        pid = stat.ppid
    return chain


def fd_holders(root: str, target: str) -> list[tuple[int, str]]:
    """Return (pid, comm) of every process with an open file descriptor on *target*.

    Used for /dev/cpu_dma_latency: a PM QoS request lasts as long as the descriptor stays open
    (Documentation/power/pm_qos_interface.rst).
    """
    holders = []
    for pid in pids(root):
        fd_dir = kpath(root, f"/proc/{pid}/fd")
        try:
            fds = os.listdir(fd_dir)
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(fd_dir / fd) == target:
                    comm = read_text(root, f"/proc/{pid}/comm", fallback="?")
                    holders.append((pid, comm))
                    break
            except OSError:
                continue
    return holders
