"""Apply a tune plan, journalling every previous value first; revert it exactly (audit layer).

The undo design is tuna's (``isolate_cpus()`` returns the previous affinities): every change
keeps what it replaced. Here the previous value goes to the state file *before* the change, and
revert writes it back and reads it again to verify it, byte for byte for kernel files.
"""

from __future__ import annotations

import errno
import os
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ...cpus import CpuSet
from ...errors import ConfigError
from ...platform._files import kpath, write_raw
from .. import procs, sysinfo
from . import state
from .plan import AFFINITY, FILE, SERVICE, Plan

Writer = Callable[[Path, str], None]
Runner = Callable[[list[str]], tuple[int, str]]


def write_kernel_file(path: Path, value: str) -> None:
    """Write *value* as ``echo value > path`` does (one write(2), trailing newline)."""
    write_raw(path, value + "\n")


def run_command(argv: list[str]) -> tuple[int, str]:
    """Run a command (systemctl); return (exit status, stdout + stderr)."""
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as err:
        return 127, str(err)
    return done.returncode, (done.stdout + done.stderr).strip()


@dataclass
class Outcome:
    """What happened to one step or one entry."""

    target: str
    status: str  # applied | skipped | failed | restored | gone | mismatch
    detail: str = ""

    def to_dict(self) -> dict:
        """JSON-ready form."""
        return dict(self.__dict__)


@dataclass
class Result:
    """The outcome of an apply or a revert."""

    state_path: Path
    outcomes: list[Outcome] = field(default_factory=list)
    complete: bool = True
    #: False when an apply changed nothing: no state file is kept then (a later --apply may run).
    saved: bool = True

    def count(self, status: str) -> int:
        """How many outcomes have *status*."""
        return sum(1 for o in self.outcomes if o.status == status)

    def to_dict(self) -> dict:
        """JSON-ready form."""
        return {"state_path": str(self.state_path) if self.saved else None, "complete": self.complete,
                "outcomes": [o.to_dict() for o in self.outcomes]}


class _CountingJournal:
    """The state writer, counting the entries appended (none: nothing was changed)."""

    def __init__(self, writer: state.StateWriter) -> None:
        self.writer, self.entries = writer, 0

    def append(self, record: dict) -> None:
        self.writer.append(record)
        self.entries += 1


def _restore_value(raw: str) -> str:
    """What to write to get *raw* back: ``"[always] madvise never\\n"`` → ``always``."""
    return sysinfo.selected_word(raw.strip()) or ""


def _read_raw(root: str, rel: str) -> str:
    return kpath(root, rel).read_bytes().decode("ascii", errors="surrogateescape")


def _same(rel: str, readback: str, wanted: str) -> bool:
    """Does a kernel file now hold *wanted*? (masks compare as sets, selectors by their choice)."""
    got = readback.strip()
    try:
        if rel.endswith(("smp_affinity", "workqueue/cpumask")):
            return CpuSet.from_mask(got) == CpuSet.from_mask(wanted)
        if rel.endswith("watchdog_cpumask"):
            return CpuSet.parse(got) == CpuSet.parse(wanted)
    except ConfigError:
        return False
    return sysinfo.selected_word(got) == wanted


def _why_failed(rel: str, err: OSError) -> str:
    # EPERM: a managed interrupt, placed by its driver (irq_can_set_affinity_usr() in
    # kernel/irq/proc.c); EIO: the interrupt chip refused the new mask.
    if err.errno in (errno.EPERM, errno.EIO) and rel.startswith("/proc/irq/"):
        return (f"the kernel refused ({err.strerror}): a managed or per-CPU interrupt; "
                "isolcpus=managed_irq,domain,<rt> keeps managed ones off at boot")
    return f"{err.strerror or err}"


def _require_root(root: str, what: str) -> None:
    if os.path.realpath(root) == "/" and os.geteuid() != 0:
        raise ConfigError(f"softrt tune {what} changes kernel settings and needs root", hint="run it with sudo")


def apply_plan(plan: Plan, state_path: Path | None = None, writer: Writer = write_kernel_file,
               runner: Runner = run_command) -> Result:
    """Apply every step of *plan*, saving each previous value in the state file first.

    Steps that the kernel refuses (a managed IRQ, a thread that exited) are reported as
    skipped or failed and the rest goes on; every attempted change stays revertible.

    Raises:
        ConfigError: not root, or a previous tune is still applied (exit status 2, nothing changed).
    """
    _require_root(plan.root, "--apply")
    path = state_path or state.default_path()
    writer_ = state.StateWriter(path, {"root": os.path.realpath(plan.root), "rt_cpus": str(plan.rt_cpus),
                                       "housekeeping": str(plan.housekeeping), "boot_id": state.boot_id(plan.root)})
    journal = _CountingJournal(writer_)
    result = Result(path)
    try:
        for step in plan.steps:
            handler = {FILE: _apply_file, AFFINITY: _apply_affinity, SERVICE: _apply_service}[step.kind]
            outcome = handler(plan.root, step, journal, writer, runner)
            result.outcomes.append(outcome)
            if outcome.status == "failed":
                result.complete = False
    finally:
        writer_.close()
        if journal.entries == 0:  # every entry precedes its change: none, nothing changed
            path.unlink(missing_ok=True)
            result.saved = False
    return result


def _apply_file(root, step, journal, writer, runner) -> Outcome:
    try:
        raw = _read_raw(root, step.target)
    except OSError as err:
        return Outcome(step.target, "skipped", f"unreadable: {err.strerror}")
    if _same(step.target, raw, step.after):
        return Outcome(step.target, "skipped", "already set")
    journal.append({"kind": FILE, "target": step.target, "before": raw, "restore": _restore_value(raw),
                    "after": step.after, "check": step.check})
    try:
        writer(kpath(root, step.target), step.after)
        readback = _read_raw(root, step.target)
    except OSError as err:
        return Outcome(step.target, "failed", _why_failed(step.target, err))
    if not _same(step.target, readback, step.after):
        return Outcome(step.target, "failed", f"reads back {readback.strip()!r}, not {step.after!r}")
    return Outcome(step.target, "applied", f"{raw.strip()} -> {step.after}")


def _same_thread(root: str, pid: int, tid: int, starttime: int | None) -> bool:
    task = procs.read_task(root, pid, tid)
    return task is not None and (starttime is None or task.starttime == starttime)


def _apply_affinity(root, step, journal, writer, runner) -> Outcome:
    label = f"{step.comm} ({step.target}/{step.tid})"
    if not _same_thread(root, int(step.target), step.tid, step.starttime):
        return Outcome(label, "skipped", "the thread exited")
    try:
        before = CpuSet(os.sched_getaffinity(step.tid))
    except OSError:
        return Outcome(label, "skipped", "the thread exited")
    journal.append({"kind": AFFINITY, "target": step.target, "tid": step.tid, "starttime": step.starttime,
                    "comm": step.comm, "before": str(before), "after": step.after, "check": step.check})
    try:
        os.sched_setaffinity(step.tid, CpuSet.parse(step.after).to_frozenset())
    except OSError as err:
        if err.errno == errno.ESRCH:
            return Outcome(label, "skipped", "the thread exited")
        return Outcome(label, "failed", f"sched_setaffinity: {err.strerror}")
    return Outcome(label, "applied", f"CPUs {before} -> {step.after}")


def _apply_service(root, step, journal, writer, runner) -> Outcome:
    rc, out = runner(["systemctl", "is-active", step.target])
    if out.strip() != "active":
        return Outcome(step.target, "skipped", f"not active ({out.strip() or rc})")
    journal.append({"kind": SERVICE, "target": step.target, "before": "active", "check": step.check})
    rc, out = runner(["systemctl", "stop", step.target])
    if rc != 0:
        return Outcome(step.target, "failed", f"systemctl stop: {out or rc}")
    return Outcome(step.target, "applied", "stopped until reboot or revert")


def revert(root: str = "/", state_path: Path | None = None, writer: Writer = write_kernel_file,
           runner: Runner = run_command) -> Result:
    """Put back every value the state file saved, newest first, and verify each by reading it back.

    The state file is deleted when everything reads back as before (threads that exited and
    IRQs that went away count as fine); otherwise it is kept and the mismatches are reported.

    Raises:
        ConfigError: no state, a corrupt or foreign state file, or not root (nothing changed).
    """
    root = str(root)
    path = state_path or state.default_path()
    _header, entries = state.load(path, root)
    _require_root(root, "--revert")
    result = Result(path)
    for entry in reversed(entries):
        handler = {FILE: _revert_file, AFFINITY: _revert_affinity, SERVICE: _revert_service}.get(entry["kind"])
        if handler is None:
            raise ConfigError(f"the tune state {path} has an unknown entry kind {entry['kind']!r}")
        outcome = handler(root, entry, writer, runner)
        result.outcomes.append(outcome)
        if outcome.status in ("failed", "mismatch"):
            result.complete = False
    if result.complete:
        path.unlink()
    return result


def _revert_file(root, entry, writer, runner) -> Outcome:
    target = entry["target"]
    if not kpath(root, target).exists():
        return Outcome(target, "gone", "no longer exists (the IRQ or CPU went away)")
    try:
        if _read_raw(root, target) == entry["before"]:
            # Never changed (the write was refused, or interrupted before it): nothing to write.
            return Outcome(target, "restored", entry["before"].strip())
        writer(kpath(root, target), entry["restore"])
        readback = _read_raw(root, target)
    except OSError as err:
        return Outcome(target, "failed", f"{err.strerror or err}")
    if readback != entry["before"]:
        return Outcome(target, "mismatch", f"reads {readback.strip()!r}, saved {entry['before'].strip()!r}")
    return Outcome(target, "restored", entry["before"].strip())


def _revert_affinity(root, entry, writer, runner) -> Outcome:
    label = f"{entry.get('comm')} ({entry['target']}/{entry['tid']})"
    if not _same_thread(root, int(entry["target"]), entry["tid"], entry.get("starttime")):
        return Outcome(label, "gone", "the thread exited")
    wanted = CpuSet.parse(entry["before"])
    try:
        os.sched_setaffinity(entry["tid"], wanted.to_frozenset())
        now = CpuSet(os.sched_getaffinity(entry["tid"]))
    except OSError as err:
        if err.errno == errno.ESRCH:
            return Outcome(label, "gone", "the thread exited")
        return Outcome(label, "failed", f"sched_setaffinity: {err.strerror}")
    if now != wanted:
        return Outcome(label, "mismatch", f"CPUs {now}, saved {wanted}")
    return Outcome(label, "restored", f"CPUs {wanted}")


def _revert_service(root, entry, writer, runner) -> Outcome:
    unit = entry["target"]
    rc, out = runner(["systemctl", "start", unit])
    if rc != 0:
        return Outcome(unit, "failed", f"systemctl start: {out or rc}")
    rc, out = runner(["systemctl", "is-active", unit])
    if out.strip() != entry["before"]:
        return Outcome(unit, "mismatch", f"is {out.strip()!r}, was {entry['before']!r}")
    return Outcome(unit, "restored", "started again")
