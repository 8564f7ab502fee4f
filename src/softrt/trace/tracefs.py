"""tracefs: find (or mount) it, and private instances on it (trace layer, a part).

Sources: Documentation/trace/ftrace.rst ("The File System", "Instances": every directory made
under ``instances/`` is a separate ring buffer with its own events, ``tracing_cpumask``,
``trace_clock`` and ``buffer_size_kb``, removed with rmdir, which fails with EBUSY while a reader
holds it open), Documentation/trace/events.rst (``events/<system>/<event>/enable`` and ``filter``).
softrt never touches the top-level (global) buffer: somebody else may be tracing with it.

When tracefs is not mounted and we are root, it is mounted where trace-cmd and libtracefs mount
it (/sys/kernel/tracing), recorded, and unmounted afterwards.

Every instance softrt makes and every mount carries proof that softrt made it: a marker in
softrt's state directory (``trace/instance-<name>.json``, ``trace/mount-<pid>.json``; this user's
directory, files 0600 created O_EXCL | O_NOFOLLOW) naming the instance or the mount and the process
that made it by ``BOOT_ID/PID/START`` (platform ``process_identity``). If softrt is killed, the next
command (:func:`sweep_orphans`) removes what a marker names once its process is gone: an instance
without a marker is not softrt's (whatever its name) and is left alone, and the only mount a marker
can name is /sys/kernel/tracing, unmounted only while tracefs is what is mounted there. A marker
that is not one softrt wrote is set aside (``trace/failed/``) and reported, and nothing in it is done.
"""

from __future__ import annotations

import errno
import json
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from ..cpus import CpuSet
from ..errors import ConfigError
from ..platform import get_platform, journal, state_dir
from ..platform.kfiles import kpath, read_text, write_raw
from ..platform.linux import kfacts
from ..schema.summary import SystemChange

MOUNT_POINT = "/sys/kernel/tracing"
INSTANCE_PREFIX = "softrt-"  # softrt-<pid> (a run), softrt-check-<pid> (check's sample)
_NAME = re.compile(r"softrt-[a-z0-9-]{1,40}")
MARKER_FORMAT = "softrt-trace-marker"
#: Tries (20 ms apart) to rmdir an instance while a reader still holds it open (EBUSY).
REMOVE_TRIES = 100


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
    marker: Path | None = None
    restored: bool = False
    note: str | None = field(default=None, repr=False)

    def undo(self) -> None:
        from ..platform.linux.mounts import umount

        try:
            umount(self.path)
            self.restored = True
        except Exception as err:  # noqa: BLE001  # busy: another tracer (e.g. a concurrent `softrt check`) still uses it
            self.restored = False
            self.note = f"{err}; the next softrt command unmounts it (its marker stays)"
        if self.restored and self.marker is not None:
            self.marker.unlink(missing_ok=True)

    def to_change(self) -> SystemChange:
        """The run's system-change record, as the journal's entries are."""
        note = {"note": self.note} if self.note and not self.restored else {}
        return SystemChange.build(
            path=str(self.path),
            before="tracefs not mounted",
            during="tracefs mounted",
            why="the run's trace needs tracefs",
            restored=self.restored,
            verified=self.restored,
            **note,
        )


def _markers() -> Path:
    return state_dir() / "trace"


def _mark(kind: str, what: str, marker: Path) -> None:
    """Write softrt's marker for the instance or mount *what*, before it is made (a kill right after
    leaves it marked)."""
    journal.secure_dir(state_dir())
    journal.secure_dir(marker.parent)
    identity = get_platform().process_identity()
    journal.create_private(
        marker,
        json.dumps({"format": MARKER_FORMAT, "version": 1, "kind": kind, "what": what, "identity": identity}) + "\n",
    )


class Marker(NamedTuple):
    """A marker's content: an ``instance`` or a ``mount``, *what* it names, its maker's identity."""

    kind: str
    what: str
    identity: str


def _read_marker(marker: Path) -> Marker:
    """The marker's content, checked; ConfigError (JournalError) when softrt did not write it."""
    try:
        doc = json.loads(journal.read_own(marker, "trace marker"))
    except (ValueError, RecursionError):
        raise ConfigError(f"the trace marker {marker} is not JSON") from None
    kind = doc.get("kind") if isinstance(doc, dict) else None
    identity = doc.get("identity") if isinstance(doc, dict) else None
    named = (
        kind == "instance"
        and isinstance(doc.get("what"), str)
        and _NAME.fullmatch(doc["what"])
        and marker.name == f"instance-{doc['what']}.json"
    )
    mount = kind == "mount" and doc.get("what") == MOUNT_POINT and re.fullmatch(r"mount-\d+\.json", marker.name)
    if not (
        doc.get("format") == MARKER_FORMAT
        and doc.get("version") == 1
        and isinstance(identity, str)
        and identity.count("/") == 2
        and (named or mount)
    ):
        raise ConfigError(f"the trace marker {marker} is not one softrt writes")
    return Marker("instance" if named else "mount", doc["what"], identity)


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
    from ..platform.linux.mounts import mount

    marker = _markers() / f"mount-{os.getpid()}.json"
    if os.path.lexists(marker):  # this pid's, from a process of the same pid that is gone
        _sweep_one(marker, None)
    _mark("mount", MOUNT_POINT, marker)  # first, so a kill right after the mount is still cleaned up
    try:
        mount("nodev", MOUNT_POINT, "tracefs")
    except Exception as err:  # noqa: BLE001 - the marker goes, whatever failed; raised as TracingUnavailable
        marker.unlink(missing_ok=True)
        raise TracingUnavailable(f"tracefs could not be mounted at {MOUNT_POINT}: {err}") from None
    found = find()
    if found is None:
        raise TracingUnavailable(f"tracefs mounted at {MOUNT_POINT} has no instances directory")
    return found, Mounted(MOUNT_POINT, marker)


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
        self.marker = _markers() / f"instance-{name}.json"
        self.left: str | None = None  # why the instance could not be removed, and the fix

    @classmethod
    def create(cls, tracefs: Path, name: str, cpus: CpuSet, buffer_kb: int, other_kb: int = 16) -> Instance:
        """Make the instance (marked as softrt's first), limited to *cpus*, mono clock, *buffer_kb*
        per traced CPU; tracing off. Raises OSError (ConfigError: a state directory not this user's)."""
        inst = cls(tracefs, name)
        if os.path.lexists(inst.marker):  # this name's, from a process of this pid that is gone
            _sweep_one(inst.marker, tracefs)
        _mark("instance", name, inst.marker)
        try:
            inst.path.mkdir()
        except BaseException:
            inst.marker.unlink(missing_ok=True)
            raise
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

    def lost(self, cpus: CpuSet | list[int]) -> int:
        """Events the ring buffers of *cpus* lost: overwritten unread, or dropped (ftrace.rst, "per_cpu")."""
        return sum(
            stats.get("overrun", 0) + stats.get("commit overrun", 0) + stats.get("dropped events", 0)
            for stats in map(self.stats, cpus)
        )

    def remove(self) -> bool:
        """Stop the instance, disable its events and delete it (retrying while a reader still holds
        it: EBUSY); True when it is gone. Otherwise :attr:`left` says why and how to remove it by
        hand, its marker stays, and the next softrt command tries again."""
        why = remove_instance(self.path, events=self.enabled)
        if why is None:
            self.marker.unlink(missing_ok=True)
            self.left = None
            return True
        self.left = (
            f"trace instance {self.path} could not be removed ({why}); its tracing and events are off; "
            f"remove it by hand: rmdir {self.path}"
        )
        return False

    def left_change(self, why: str) -> SystemChange:
        """An instance :meth:`remove` could not remove, as a system change like the journal's
        (*why*: what it traced for)."""
        return SystemChange.build(
            path=str(self.path),
            before="no trace instance",
            during="softrt's trace instance",
            why=why,
            restored=False,
            verified=False,
            note=self.left,
        )


class Holder:
    """What a trace holds on the system, its instance and a tracefs mount, given back by :meth:`release`
    (the run's :class:`.session.TraceSession` and the watch's :class:`.watch.WatchTrace`)."""

    #: What the trace was for, said in the system change of an instance that could not be removed.
    purpose = "softrt's trace"

    def __init__(self) -> None:
        self.instance: Instance | None = None
        self.left: Instance | None = None  # an instance that could not be removed
        self.mounted: Mounted | None = None

    def release(self) -> None:
        """Remove the instance and unmount what was mounted (idempotent); an instance that stays is
        kept in :attr:`left`, said in the system changes, never silently left tracing."""
        if self.instance is not None:
            if not self.instance.remove():
                self.left = self.instance
            self.instance = None
        if self.mounted is not None and not self.mounted.restored:
            self.mounted.undo()

    def system_changes(self) -> list[SystemChange]:
        """The system changes the trace made (a tracefs mount; an instance it could not remove), as the
        journal's are."""
        out = [self.mounted.to_change()] if self.mounted is not None else []
        if self.left is not None:
            out.append(self.left.left_change(self.purpose))
        return out


def remove_instance(path: Path, tries: int | None = None, events: list[str] = ()) -> str | None:
    """Turn an instance off, disable its events, rmdir it; return None when it is gone, else why not.

    Tracing and every event are switched off before the rmdir, so an instance that cannot be
    removed (a reader holds it: EBUSY) does not go on tracing: an enabled raw_syscalls event slows
    every system call of every task (TIF_SYSCALL_TRACEPOINT) whatever its filter.
    """
    for rel in ("tracing_on", "events/enable", *(f"events/{e.replace(':', '/', 1)}/enable" for e in events)):
        try:
            write_raw(path / rel, "0")
        except OSError:
            pass
    why = "busy"
    for _ in range(REMOVE_TRIES if tries is None else tries):
        try:
            path.rmdir()
            return None
        except FileNotFoundError:
            return None
        except OSError as err:
            if err.errno != errno.EBUSY:
                return err.strerror or str(err)
            why = "busy: a reader still holds it open"
            time.sleep(0.02)
    return why


def sweep_orphans() -> list[str]:
    """Remove the instances (and a tracefs mount) that softrt processes now gone marked as theirs.

    Call it where the restore journals are recovered (the start of every softrt command).
    Returns what was removed or set aside, for the caller to report.

    Raises:
        ConfigError: softrt's state directory is not this user's (a symlink, another user's).
    """
    done: list[str] = []
    markers = _markers()
    if not get_platform().caps.kernel_trace or not os.path.lexists(markers):
        return done
    journal.secure_dir(state_dir())
    journal.secure_dir(markers)
    tracefs = find()
    for marker in sorted(markers.glob("*")):
        if marker.name != "failed":
            done.extend(_sweep_one(marker, tracefs))
    return done


def _sweep_one(marker: Path, tracefs: Path | None) -> list[str]:
    """Undo what one marker names if its process is gone; return what was done, for the report."""
    try:
        doc = _read_marker(marker)
    except FileNotFoundError:
        return []  # removed by its process while we looked
    except ConfigError as err:
        dest = journal.set_aside(marker, err.msg)
        return [
            f"trace marker {marker.name}, which softrt did not write (nothing it names was touched; "
            f"set aside as {dest})"
        ]
    this_boot = journal.boot_id()
    boot, pid, _start = doc.identity.split("/")
    if boot == this_boot and pid.isdigit() and get_platform().process_identity(int(pid)) == doc.identity:
        return []  # its process is alive
    if boot != this_boot:  # a reboot removed the instance and the mount already
        marker.unlink(missing_ok=True)
        return []
    if doc.kind == "instance":
        path = tracefs / "instances" / doc.what if tracefs is not None else None
        if path is not None and path.is_dir():
            if remove_instance(path, tries=5) is not None:
                return []  # still held open: left marked, and tried again by the next command
            marker.unlink(missing_ok=True)
            return [f"trace instance {doc.what}"]
        marker.unlink(missing_ok=True)
        return []
    if not any(mp == MOUNT_POINT and kind == "tracefs" for _, mp, kind in kfacts.mounts("/")):
        marker.unlink(missing_ok=True)  # unmounted since (by hand, or by another tool)
        return []
    mounted = Mounted(MOUNT_POINT, marker)
    mounted.undo()
    return [f"tracefs mount at {MOUNT_POINT}"] if mounted.restored else []
