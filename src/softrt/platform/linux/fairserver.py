"""The fair server of Linux 6.12+: its per-CPU runtime, and why it cannot be read (platform layer).

Since Linux 6.12 a SCHED_DEADLINE server runs SCHED_OTHER tasks for ``runtime`` of every ``period``
on each CPU, ahead of SCHED_FIFO tasks (commits "sched/fair: Add trivial fair server" and
"sched/fair: Fair server interface": ``/sys/kernel/debug/sched/fair_server/cpuN/{runtime,period}``
in ns, 50 ms of 1 s by default; Documentation/scheduler/sched-deadline.rst). A runtime of 0 turns
it off on that CPU. The files live in debugfs, which may be unmounted, absent (CONFIG_DEBUG_FS
off) or locked: kernel lockdown and ``debugfs=`` refuse even root (EPERM), as on the benchmark VM.

When debugfs is not mounted here, root can still read the files without changing the machine: a
child process mounts debugfs in a mount namespace of its own (unshare(2) CLONE_NEWNS, mount(2)),
which disappears with it.
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from dataclasses import dataclass, field

from ...schema.summary import FairServer as FairServerMode
from ..kfiles import kpath, read_text
from . import kfacts

DEBUGFS = "/sys/kernel/debug"
DIR = f"{DEBUGFS}/sched/fair_server"
RUNTIME = DIR + "/cpu{cpu}/runtime"
PERIOD = DIR + "/cpu{cpu}/period"
DEFAULT_RUNTIME_NS, DEFAULT_PERIOD_NS = 50_000_000, 1_000_000_000
FIRST_KERNEL = (6, 12)

# Run by a child: a private mount namespace, debugfs mounted over /sys/kernel/debug there, each
# file read (its text, or its errno's name), printed as JSON. Nothing outside the child changes.
_PROBE = r"""
import ctypes, ctypes.util, errno, json, os, sys
libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
CLONE_NEWNS, MS_REC, MS_PRIVATE = 0x00020000, 0x4000, 0x40000
out = {}
if libc.unshare(CLONE_NEWNS) or libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None) \
        or libc.mount(b"none", sys.argv[1].encode(), b"debugfs", 0, None):
    out["mount"] = errno.errorcode.get(ctypes.get_errno(), "EIO")
else:
    for path in sys.argv[2:]:
        try:
            with open(path) as fh:
                out[path] = fh.read().strip()
        except OSError as err:
            out[path] = errno.errorcode.get(err.errno, "EIO")
print(json.dumps(out))
"""


@dataclass(frozen=True)
class FairServer:
    """The fair server on some CPUs: ``present`` (the kernel has one), the values read, or why not."""

    present: bool
    runtime_ns: dict[int, int] = field(default_factory=dict)
    period_ns: dict[int, int] = field(default_factory=dict)
    unreadable: str = ""  # why the values are not known ("debugfs is locked down: ...")
    #: "mounted" at /sys/kernel/debug (softrt tune can write there), "not mounted", "locked" (the kernel
    #: refuses the files even to root) or "absent" (no debugfs, or no fair_server in it)
    debugfs: str = "absent"

    def in_force(self, cpu: int) -> bool:
        """It can take the CPU from a real-time task: present and its runtime not 0 (unknown: the default)."""
        return self.present and self.runtime_ns.get(cpu, DEFAULT_RUNTIME_NS) > 0

    def mode(self, cpu: int) -> FairServerMode:
        """The run's ``tuning.fair_server`` (docs/run-format.md): in force on *cpu*, and what says so."""
        known = cpu in self.runtime_ns
        why = {"locked": "debugfs is locked down", "not mounted": "debugfs is not mounted"}.get(
            self.debugfs, self.unreadable
        )
        return FairServerMode.build(  # (unreadable written as null when known, as it always was)
            cpu=cpu,
            in_force=self.in_force(cpu),
            runtime_ns=self.runtime_ns.get(cpu),
            period_ns=self.period_ns.get(cpu),
            unreadable=None if known else why,
        )

    def describe(self, cpu: int) -> str:
        """``runtime 50 ms of every 1000 ms`` or why it is not known, with the kernel's default."""
        if cpu in self.runtime_ns:
            runtime = self.runtime_ns[cpu]
            period = self.period_ns.get(cpu, DEFAULT_PERIOD_NS)
            return "runtime 0: off" if runtime == 0 else f"runtime {runtime / 1e6:g} ms of every {period / 1e6:g} ms"
        return (
            f"runtime unknown ({self.unreadable}); the kernel's default is "
            f"{DEFAULT_RUNTIME_NS / 1e6:g} ms of every {DEFAULT_PERIOD_NS / 1e6:g} ms"
        )


def _debugfs_mounted(root: str) -> bool:
    return any(point == DEBUGFS and kind == "debugfs" for _, point, kind in kfacts.mounts(root))


def _probe(paths: list[str]) -> dict[str, str]:
    """Read *paths* with debugfs mounted in a private mount namespace (root only); {} if the child fails."""
    try:
        done = subprocess.run(
            [sys.executable, "-c", _PROBE, DEBUGFS, *paths], capture_output=True, text=True, timeout=20, check=False
        )
        return json.loads(done.stdout or "{}")
    except (OSError, subprocess.SubprocessError, ValueError):
        return {}


def _root() -> bool:
    """Root on Linux; Windows' Python has no geteuid (and no fair server)."""
    return hasattr(os, "geteuid") and os.geteuid() == 0


def read(root: str, cpus) -> FairServer:
    """Read the fair server's runtime and period on *cpus* under *root* (a tree: its files as they are).

    This machine's own ("/") only on Linux: under Wine, "/" is the Linux host's, not Windows'.
    """
    root = str(root)
    if not sys.platform.startswith("linux") and os.path.realpath(root) == os.path.realpath("/"):
        return FairServer(False)
    version = kfacts.kernel_version_tuple(root)
    if version is None or version < FIRST_KERNEL:
        return FairServer(False)
    mounted = _debugfs_mounted(root)
    texts: dict[str, str] = {}
    for cpu in cpus:
        for path in (RUNTIME.format(cpu=cpu), PERIOD.format(cpu=cpu)):
            try:
                texts[path] = kpath(root, path).read_text().strip()
            except PermissionError:
                texts[path] = "EPERM"
            except OSError as err:
                texts[path] = errno.errorcode.get(err.errno or 0, "EIO")
    live = os.path.realpath(root) == "/"
    if not mounted and live and _root() and any(v == "ENOENT" for v in texts.values()):
        texts.update(_probe(list(texts)) or {})
    runtime, period, why, state = {}, {}, "", "mounted" if mounted else "not mounted"
    for cpu in cpus:
        for path, into in ((RUNTIME.format(cpu=cpu), runtime), (PERIOD.format(cpu=cpu), period)):
            value = texts.get(path, "")
            if value.isdigit():
                into[cpu] = int(value)
            elif not why:
                if value in ("EPERM", "EACCES"):
                    state, why = ("locked", _locked(path)) if _root() else (state, f"reading {path} needs root")
                else:
                    state, why = _missing(root, mounted, texts.get("mount") or value)
    return FairServer(True, runtime, period, why, state)


def _locked(path: str) -> str:
    return (
        f"debugfs is locked down: the kernel refuses {path} even to root (EPERM; kernel lockdown, or "
        "debugfs= on the kernel command line)"
    )


def _missing(root: str, mounted: bool, error: str) -> tuple[str, str]:
    if "debugfs" not in (read_text(root, "/proc/filesystems", fallback="") or ""):
        return "absent", "this kernel has no debugfs (CONFIG_DEBUG_FS off)"
    if mounted:
        return "absent", f"no {DIR} in debugfs ({error})"
    if not _root() or os.path.realpath(root) != "/":
        return "not mounted", f"debugfs is not mounted at {DEBUGFS}"
    return "not mounted", f"debugfs could not be mounted to read {DIR} ({error})"
