"""Which threads ``softrt watch`` follows: ``--pid``, ``--tid`` or ``--comm`` (session layer).

Read from /proc (proc(5): ``/proc/PID/task/TID/stat`` and ``status``) under a ``root`` tree, through
the platform layer's readers (platform.ktasks). Nothing is changed on a thread found here.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from ..errors import ConfigError
from ..platform.kfiles import kpath, read_text
from ..platform.linux.ktasks import Task, parse_stat, read_task, tasks
from ..schema.text import printable

#: At most this many threads are watched at once (each is its own run, attribution and row).
MAX_THREADS = 32
_LIST_HINT = "list the threads with: ps -eLo pid,tid,comm,policy,rtprio"


@dataclass(frozen=True)
class Target:
    """What the user asked to watch: exactly one of a process, a thread or a thread name."""

    pid: int | None = None
    tid: int | None = None
    comm: str | None = None

    def describe(self) -> str:
        return (
            f"--pid {self.pid}"
            if self.pid is not None
            else f"--tid {self.tid}"
            if self.tid is not None
            else f"--comm {printable(self.comm or '')}"
        )


def find_threads(target: Target, root: str = "/", exclude_pid: int | None = None) -> list[Task]:
    """The threads *target* names, in tid order; ConfigError (one line, the fix) when none or too many.

    ``--pid``: every thread of that process; ``--tid``: that thread; ``--comm``: every thread with
    that name (the kernel keeps 15 characters of it), except those of *exclude_pid* (softrt itself).
    """
    given = [x for x in (target.pid, target.tid, target.comm) if x is not None]
    if len(given) != 1:
        raise ConfigError(
            "say which thread to watch with exactly one of --pid, --tid or --comm",
            hint="e.g. softrt watch --comm cyclictest",
        )
    if target.tid is not None:
        task = read_task(root, target.tid, target.tid) if target.tid > 0 else None
        if task is None:
            raise ConfigError(f"no thread {target.tid} is running", hint=_LIST_HINT)
        return [task]
    if target.pid is not None:
        found = _threads_of(root, target.pid) if target.pid > 0 else []
        if not found:
            raise ConfigError(f"no process {target.pid} is running", hint=_LIST_HINT)
        if found[0].pid != target.pid:
            raise ConfigError(
                f"{target.pid} is a thread of process {found[0].pid}, not a process",
                hint=f"watch that thread with --tid {target.pid}",
            )
    else:
        name = target.comm or ""
        if not name or len(name) > 64:
            raise ConfigError(f"--comm {printable(name)[:70]!r} is not a thread name", hint=_LIST_HINT)
        found = [t for t in tasks(root) if t.comm == name[:15] and t.pid != exclude_pid]
        if not found:
            raise ConfigError(f"no thread named {printable(name)!r} is running", hint=_LIST_HINT)
    if len(found) > MAX_THREADS:
        raise ConfigError(
            f"{target.describe()} matches {len(found)} threads; softrt watches at most {MAX_THREADS} at once",
            hint=f"name one with --tid ({_LIST_HINT})",
        )
    return sorted(found, key=lambda t: t.tid)


def _threads_of(root: str, pid: int) -> list[Task]:
    try:
        tids = sorted(int(n) for n in os.listdir(kpath(root, f"/proc/{pid}/task")) if n.isdigit())
    except OSError:
        return []
    return [t for t in (read_task(root, pid, tid) for tid in tids) if t is not None]


def still_running(root: str, task: Task) -> bool:
    """The thread is still there and has not exited (a zombie waiting for its parent has; a reused
    tid has another start time)."""
    stat = parse_stat(read_text(root, f"/proc/{task.pid}/task/{task.tid}/stat", fallback="") or "")
    return stat is not None and stat.starttime == task.starttime and stat.state not in ("Z", "X")
