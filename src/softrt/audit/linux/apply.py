"""Apply a tune plan, journalling every previous value first; revert it exactly (audit layer).

The undo design is tuna's (``isolate_cpus()`` returns the previous affinities): every change
keeps what it replaced. Here the previous value goes to the state file (a
:mod:`softrt.platform.journal`) *before* the change, and revert writes it back and reads it again
to verify it, byte for byte for kernel files. Every kernel file written, on apply and on revert,
passes the platform's one allow-list check (:mod:`softrt.platform.linux.writable`).

Apply and revert on this machine hold the machine's real-time lock: a spin run switches RT
throttling off for its duration and restores it at its end, so a tune applied under it would
either miss that setting or have it restored under its feet (issue 12). Tune is refused until the
run ends.
"""

from __future__ import annotations

import errno
import os
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from ...cpus import CpuSet
from ...errors import ConfigError, NoSuchProcess, SoftRTError
from ...platform import get_platform, journal, lock_rt_loop, lock_stop_hint
from ...platform.journal import Outcome
from ...platform.kfiles import read_raw
from ...platform.linux import kfacts, ktasks, writable
from .. import state
from ..plan import AFFINITY, FILE, SERVICE, Plan, Result

Writer = Callable[[Path, str], None]
Runner = Callable[[list[str]], tuple[int, str]]


#: Write *value* as ``echo value > path`` does (one write(2), trailing newline).
write_kernel_file = writable.write_line


def run_command(argv: list[str]) -> tuple[int, str]:
    """Run a command (systemctl); return (exit status, stdout + stderr)."""
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as err:
        return 127, str(err)
    return done.returncode, (done.stdout + done.stderr).strip()


class _CountingJournal:
    """The state file, counting the entries appended (none: nothing was changed)."""

    def __init__(self, writer: journal.Journal) -> None:
        self.writer, self.entries = writer, 0

    def append(self, record: dict) -> None:
        self.writer.append(record)
        self.entries += 1


def _restore_value(raw: str) -> str:
    """What to write to get *raw* back: ``"[always] madvise never\\n"`` → ``always``."""
    return kfacts.selected_word(raw.strip()) or ""


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
    return kfacts.selected_word(got) == wanted


def _kernel_keeps_irq(rel: str, err: OSError) -> bool:
    """Did the kernel refuse an IRQ mask because user space may not move that IRQ at all?

    write_irq_affinity() in kernel/irq/proc.c fails before parsing the mask when
    irq_can_set_affinity_usr() says no (a managed, per-CPU or no-balancing IRQ): EIO, EPERM on
    newer kernels. An older kernel's plan cannot see it (:func:`softrt.audit.linux.irqs.movable`), so
    the refusal is the kernel saying the change is a reboot's, not a failed run-time change.
    """
    return err.errno in (errno.EPERM, errno.EIO) and rel.startswith("/proc/irq/") and rel.endswith("/smp_affinity")


#: What to add to the kernel command line for an IRQ the kernel keeps (kernel-parameters.txt).
KEEPS_IRQ = (
    "the kernel does not move this IRQ at run time (managed or per-CPU); "
    "isolcpus=managed_irq,domain,<RT CPUs> keeps managed ones off them from the next boot"
)


def _require_root(root: str, what: str) -> None:
    if os.path.realpath(root) == "/" and os.geteuid() != 0:
        raise ConfigError(f"softrt tune {what} changes kernel settings and needs root", hint="run it with sudo")


@contextmanager
def _no_run_in_progress(root: str, what: str) -> Iterator[None]:
    """Hold the machine's real-time lock (that of ``softrt run``) while tuning this machine."""
    if os.path.realpath(root) != "/":
        yield  # a captured tree: no run can be using it
        return
    fd, holder = lock_rt_loop()
    if fd is None:
        raise ConfigError(
            f"a real-time softrt run is in progress (pid {holder}); softrt tune {what} is refused until it ends",
            hint="the run switches RT throttling off and restores it when it ends, under any tune "
            f"made meanwhile; run softrt tune {what} after it. {lock_stop_hint(holder)}",
        )
    try:
        yield
    finally:
        os.close(fd)


def apply_plan(
    plan: Plan, state_path: Path | None = None, writer: Writer = write_kernel_file, runner: Runner = run_command
) -> Result:
    """Apply every step of *plan*, saving each previous value in the state file first.

    Steps that the kernel refuses (a managed IRQ, a thread that exited) are reported as
    skipped or failed and the rest goes on; every attempted change stays revertible.

    Raises:
        ConfigError: not root, or a previous tune is still applied (exit status 2, nothing changed).
    """
    _require_root(plan.root, "--apply")
    path = state_path or state.default_path()
    with _no_run_in_progress(plan.root, "--apply"):
        writer_ = state.create(
            path,
            plan.root,
            rt_cpus=str(plan.rt_cpus),
            housekeeping=str(plan.housekeeping),
            boot_id=state.boot_id(plan.root),
        )
        entries = _CountingJournal(writer_)
        result = Result(path)
        try:
            for step in plan.steps:
                handler = {FILE: _apply_file, AFFINITY: _apply_affinity, SERVICE: _apply_service}[step.kind]
                outcome = handler(plan.root, step, entries, writer, runner)
                result.outcomes.append(outcome)
                if outcome.status == "failed":
                    result.complete = False
        finally:
            writer_.close()
            if entries.entries == 0:  # every entry precedes its change: none, nothing changed
                path.unlink(missing_ok=True)
                result.saved = False
    return result


def _apply_file(root, step, entries, writer, runner) -> Outcome:
    try:
        path = writable.check(root, step.target, step.after)
        raw = read_raw(path)
    except ConfigError as err:
        return Outcome(target=step.target, status="skipped", detail=f"refused: {err.msg}")
    except OSError as err:
        return Outcome(target=step.target, status="skipped", detail=f"unreadable: {err.strerror}")
    if _same(step.target, raw, step.after):
        return Outcome(target=step.target, status="skipped", detail="already set")
    try:
        entries.append(
            {
                "kind": FILE,
                "target": step.target,
                "before": raw,
                "restore": _restore_value(raw),
                "after": step.after,
                "check": step.check,
            }
        )
    except ConfigError as err:  # what it holds now could not be written back: leave it alone
        return Outcome(target=step.target, status="skipped", detail=f"refused: {err.msg}")
    try:
        writer(path, step.after)
        readback = read_raw(path)
    except OSError as err:
        if _kernel_keeps_irq(step.target, err):
            return Outcome(target=step.target, status="skipped", detail=KEEPS_IRQ)
        return Outcome(target=step.target, status="failed", detail=err.strerror or str(err))
    if not _same(step.target, readback, step.after):
        return Outcome(
            target=step.target, status="failed", detail=f"reads back {readback.strip()!r}, not {step.after!r}"
        )
    return Outcome(target=step.target, status="applied", detail=f"{raw.strip()} -> {step.after}")


def _same_thread(root: str, pid: int, tid: int, starttime: int | None) -> bool:
    task = ktasks.read_task(root, pid, tid)
    return task is not None and (starttime is None or task.starttime == starttime)


def _apply_affinity(root, step, entries, writer, runner) -> Outcome:
    label = f"{step.comm} ({step.target}/{step.tid})"
    if not _same_thread(root, int(step.target), step.tid, step.starttime):
        return Outcome(target=label, status="skipped", detail="the thread exited")
    plat = get_platform()
    try:
        before = plat.get_affinity(step.tid)
    except NoSuchProcess:
        return Outcome(target=label, status="skipped", detail="the thread exited")
    except SoftRTError as err:
        return Outcome(target=label, status="skipped", detail=err.msg)
    try:
        entries.append(
            {
                "kind": AFFINITY,
                "target": step.target,
                "tid": step.tid,
                "starttime": step.starttime,
                "comm": step.comm,
                "before": str(before),
                "after": step.after,
                "check": step.check,
            }
        )
    except ConfigError as err:  # what it has now could not be put back: leave it alone
        return Outcome(target=label, status="skipped", detail=f"refused: {err.msg}")
    try:
        plat.set_affinity(CpuSet.parse(step.after), step.tid)
    except NoSuchProcess:
        return Outcome(target=label, status="skipped", detail="the thread exited")
    except SoftRTError as err:
        return Outcome(target=label, status="failed", detail=f"sched_setaffinity: {err.msg}")
    return Outcome(target=label, status="applied", detail=f"CPUs {before} -> {step.after}")


def _apply_service(root, step, entries, writer, runner) -> Outcome:
    rc, out = runner(["systemctl", "is-active", step.target])
    if out.strip() != "active":
        return Outcome(target=step.target, status="skipped", detail=f"not active ({out.strip() or rc})")
    entries.append({"kind": SERVICE, "target": step.target, "before": "active", "check": step.check})
    rc, out = runner(["systemctl", "stop", step.target])
    if rc != 0:
        return Outcome(target=step.target, status="failed", detail=f"systemctl stop: {out or rc}")
    return Outcome(target=step.target, status="applied", detail="stopped until reboot or revert")


def revert(
    root: str = "/", state_path: Path | None = None, writer: Writer = write_kernel_file, runner: Runner = run_command
) -> Result:
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
    with _no_run_in_progress(root, "--revert"):
        for entry in reversed(entries):
            handler = {FILE: _revert_file, AFFINITY: _revert_affinity, SERVICE: _revert_service}[entry["kind"]]
            outcome = handler(root, entry, writer, runner)
            result.outcomes.append(outcome)
            if outcome.status in ("failed", "mismatch"):
                result.complete = False
        if result.complete:
            path.unlink()
    return result


def _revert_file(root, entry, writer, runner) -> Outcome:
    outcome = journal.restore_file(root, entry, writer)
    # A revert's question is whether the file holds its value from before: one never changed does.
    return (
        outcome
        if outcome.status != "unchanged"
        else Outcome(target=outcome.target, status="restored", detail=outcome.detail)
    )


def _revert_affinity(root, entry, writer, runner) -> Outcome:
    label = f"{entry.get('comm')} ({entry['target']}/{entry['tid']})"
    if not _same_thread(root, int(entry["target"]), entry["tid"], entry.get("starttime")):
        return Outcome(target=label, status="gone", detail="the thread exited")
    wanted = CpuSet.parse(entry["before"])
    plat = get_platform()
    try:
        plat.set_affinity(wanted, entry["tid"])
        now = plat.get_affinity(entry["tid"])
    except NoSuchProcess:
        return Outcome(target=label, status="gone", detail="the thread exited")
    except SoftRTError as err:
        return Outcome(target=label, status="failed", detail=f"sched_setaffinity: {err.msg}")
    if now != wanted:
        return Outcome(target=label, status="mismatch", detail=f"CPUs {now}, saved {wanted}")
    return Outcome(target=label, status="restored", detail=f"CPUs {wanted}")


def _revert_service(root, entry, writer, runner) -> Outcome:
    unit = entry["target"]
    rc, out = runner(["systemctl", "start", unit])
    if rc != 0:
        return Outcome(target=unit, status="failed", detail=f"systemctl start: {out or rc}")
    rc, out = runner(["systemctl", "is-active", unit])
    if out.strip() != entry["before"]:
        return Outcome(target=unit, status="mismatch", detail=f"is {out.strip()!r}, was {entry['before']!r}")
    return Outcome(target=unit, status="restored", detail="started again")
