"""tracefs: find (or mount) it, and private instances on it (trace layer, a part).

Sources: Documentation/trace/ftrace.rst ("The File System", "Instances": every directory made
under ``instances/`` is a separate ring buffer with its own events, ``tracing_cpumask``,
``trace_clock`` and ``buffer_size_kb``, removed with rmdir, which fails with EBUSY while a reader
holds it open), Documentation/trace/events.rst (``events/<system>/<event>/enable`` and ``filter``).
softrt never touches the top-level (global) buffer: somebody else may be tracing with it.

When tracefs is not mounted and we are root, it is mounted where trace-cmd and libtracefs mount
it (/sys/kernel/tracing), recorded, and unmounted afterwards. A marker file in softrt's state
directory names the process that mounted it, so that if softrt is killed the next command
removes its instances and the mount (:func:`sweep_orphans`).
"""

from __future__ import annotations

import errno
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

from ..cpus import CpuSet
from ..platform import get_platform, kfacts, state_dir
from ..platform.kfiles import kpath, read_text, write_raw

MOUNT_POINT = "/sys/kernel/tracing"
INSTANCE_PREFIX = "softrt-"  # softrt-<pid> (a run), softrt-check-<pid> (check's sample)
_OURS = re.compile(r"^softrt-(?:check-)?(\d+)$")


class TracingUnavailable(Exception):
    """Tracing cannot be used here; ``str()`` is the reason, said plainly."""


def find(root: str = "/") -> Path | None:
    """Return the mounted tracefs directory (from /proc/mounts), or None.

    The standard mount point wins over any other (a tool may mount tracefs privately for a
    moment, and unmount it under our feet); then debugfs's ``tracing`` (older kernels).
    """
    rows = [(mp, kind) for _, mp, kind in kfacts.mounts(root)]
    points = [m for m, kind in rows if kind == "tracefs"]
    if any(m == "/sys/kernel/debug" and kind == "debugfs" for m, kind in rows):
        points.append("/sys/kernel/debug/tracing")
    points.sort(key=lambda m: m != MOUNT_POINT)
    for mp in points:
        path = kpath(root, mp)
        try:
            if (path / "instances").is_dir():
                return path
        except PermissionError:
            # tracefs is mode 0700 (root only): it is mounted, but not ours to use. Return it, so
            # that the caller says "no permission for tracefs" rather than "not mounted".
            return path
    return None


@dataclass
class Mounted:
    """tracefs mounted by this process (a system change, undone by :meth:`undo`)."""

    path: str
    restored: bool = False

    def undo(self) -> None:
        from ..platform.mounts import umount

        try:
            umount(self.path)
            self.restored = True
        except Exception:  # busy: another tracer (e.g. a concurrent `softrt check`) still uses it
            self.restored = False
        if self.restored:
            _marker().unlink(missing_ok=True)

    def to_change(self) -> dict:
        """The run's system-change record, in the shape of the journal's entries."""
        return {"path": self.path, "before": "tracefs not mounted", "during": "tracefs mounted",
                "why": "the run's trace needs tracefs", "restored": self.restored, "verified": self.restored}


def _marker() -> Path:
    return state_dir() / "trace" / f"mounted-{os.getpid()}"


def find_or_mount() -> tuple[Path, Mounted | None]:
    """Return tracefs, mounting it (as root) when it is not mounted; raise TracingUnavailable."""
    found = find()
    # Another tool's private mount elsewhere may go away during the run: as root, use the
    # standard one (mounting it), as libtracefs does.
    if found is not None and (str(found) in (MOUNT_POINT, "/sys/kernel/debug/tracing") or os.geteuid() != 0):
        return found, None
    if "tracefs" not in (read_text("/", "/proc/filesystems", fallback="") or ""):
        raise TracingUnavailable("this kernel has no tracefs (CONFIG_TRACING off)")
    if os.geteuid() != 0:
        raise TracingUnavailable(f"tracefs is not mounted (mount it at {MOUNT_POINT}, or run as root)")
    from ..platform.mounts import mount

    marker = _marker()
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.write_text(MOUNT_POINT)  # first, so a kill right after the mount is still cleaned up
    try:
        mount("nodev", MOUNT_POINT, "tracefs")
    except Exception as err:
        marker.unlink(missing_ok=True)
        raise TracingUnavailable(f"tracefs could not be mounted at {MOUNT_POINT}: {err}") from None
    found = find()
    if found is None:
        raise TracingUnavailable(f"tracefs mounted at {MOUNT_POINT} has no instances directory")
    return found, Mounted(MOUNT_POINT)


def event_dirs(tracefs: Path) -> dict[str, Path]:
    """Return ``{"system:event": directory}`` for every event this kernel has."""
    out = {}
    events = tracefs / "events"
    for system in events.iterdir() if events.is_dir() else ():
        if system.is_dir():
            for ev in system.iterdir():
                if (ev / "enable").exists():
                    out[f"{system.name}:{ev.name}"] = ev
    return out


class Instance:
    """A private tracefs instance (its own ring buffer); :meth:`remove` deletes it."""

    def __init__(self, tracefs: Path, name: str) -> None:
        self.tracefs = tracefs
        self.name = name
        self.path = tracefs / "instances" / name
        self.enabled: list[str] = []

    @classmethod
    def create(cls, tracefs: Path, name: str, cpus: CpuSet, buffer_kb: int, other_kb: int = 16) -> Instance:
        """Make the instance, limited to *cpus*, mono clock, *buffer_kb* per traced CPU; tracing off."""
        inst = cls(tracefs, name)
        inst.path.mkdir()
        try:
            inst.write("tracing_on", "0")
            inst.write("tracing_cpumask", cpus.to_mask())
            # mono: CLOCK_MONOTONIC, the clock of the loop's records (ftrace.rst, "trace_clock").
            inst.write("trace_clock", "mono")
            # The irq-info column (irqs-off, need-resched, ...) is not used: shorter lines to parse.
            if (inst.path / "options/irq-info").exists():
                inst.write("options/irq-info", "0")
            # A new instance gets a full-size buffer on every CPU; big ones on the traced CPUs only.
            inst.write("buffer_size_kb", str(other_kb))
            for cpu in cpus:
                inst.write(f"per_cpu/cpu{cpu}/buffer_size_kb", str(buffer_kb))
        except BaseException:
            inst.remove()
            raise
        return inst

    def write(self, rel: str, value: str) -> None:
        write_raw(self.path / rel, value)

    def enable(self, event: str, filter_expr: str | None = None) -> None:
        """Enable ``system:event`` (with a filter, events.rst section 5); OSError as raised."""
        system, _, name = event.partition(":")
        if filter_expr is not None:
            self.write(f"events/{system}/{name}/filter", filter_expr)
        self.write(f"events/{system}/{name}/enable", "1")
        self.enabled.append(event)

    def stats(self, cpu: int) -> dict[str, int]:
        """Return ``per_cpu/cpuN/stats`` (entries, overrun, commit overrun, dropped events, ...)."""
        out = {}
        text = read_text("/", str(self.path / f"per_cpu/cpu{cpu}/stats"), fallback="") or ""
        for line in text.splitlines():
            key, _, value = line.partition(":")
            if value.strip().isdigit():
                out[key.strip()] = int(value)
        return out

    def remove(self) -> None:
        """Stop and delete the instance (retrying while a reader still holds it: EBUSY)."""
        remove_instance(self.path)


def remove_instance(path: Path, tries: int = 100) -> bool:
    """Turn an instance off and rmdir it; return True when it is gone."""
    for rel, value in (("tracing_on", "0"), ("events/enable", "0")):
        try:
            write_raw(path / rel, value)
        except OSError:
            pass
    for _ in range(tries):
        try:
            path.rmdir()
            return True
        except FileNotFoundError:
            return True
        except OSError as err:
            if err.errno != errno.EBUSY:
                return False
            time.sleep(0.02)
    return False


def sweep_orphans() -> list[str]:
    """Remove softrt instances (and a tracefs mount) left by softrt processes that are gone.

    Call it where the restore journals are recovered (the start of every softrt command).
    Returns what was removed, for the caller to report.
    """
    removed: list[str] = []
    if not get_platform().caps.kernel_trace:
        return removed
    tracefs = find()
    if tracefs is not None and os.access(tracefs / "instances", os.W_OK):
        for inst in sorted((tracefs / "instances").iterdir()):
            m = _OURS.match(inst.name)
            if m and not psutil.pid_exists(int(m.group(1))) and remove_instance(inst, tries=5):
                removed.append(f"trace instance {inst.name}")
    markers = state_dir() / "trace"
    for marker in sorted(markers.glob("mounted-*")) if markers.is_dir() else ():
        pid = marker.name.removeprefix("mounted-")
        if pid.isdigit() and psutil.pid_exists(int(pid)):
            continue
        mounted = Mounted(read_text("/", str(marker), fallback=MOUNT_POINT) or MOUNT_POINT)
        if find() is not None:
            mounted.undo()
        if mounted.restored or find() is None:
            marker.unlink(missing_ok=True)
            removed.append(f"tracefs mount at {mounted.path}")
    return removed
