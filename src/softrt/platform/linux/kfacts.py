"""Readers for kernel and CPU facts under a root directory (platform layer, read-only).

Every function takes ``root`` and reads through :mod:`softrt.platform.kfiles`, so tests feed
captured trees. A missing or unreadable file gives ``None`` (or an empty result); the checks turn
that into "not applicable" with the reason, never a crash.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping
from dataclasses import dataclass

from ...cpus import CpuSet
from ...errors import ConfigError
from ..kfiles import kpath, read_bytes, read_gzip_text, read_text

CPU_DIR = "/sys/devices/system/cpu"

# isolcpus= flags (Documentation/admin-guide/kernel-parameters.txt); no flag means "domain".
ISOLCPUS_FLAGS = ("nohz", "domain", "managed_irq")


def text(root: str, rel: str) -> str | None:
    """Return the stripped text of *rel*, or None when it is missing or unreadable."""
    return read_text(root, rel, fallback=None)


def cpulist(root: str, rel: str) -> CpuSet | None:
    """Return the cpulist in *rel* (``"0-3,8"``), or None when missing or not a cpulist.

    Some kernels print ``(null)`` for an empty nohz_full; that reads as the empty set.
    """
    value = text(root, rel)
    if value is None:
        return None
    if value in ("(null)", ""):
        return CpuSet()
    try:
        return CpuSet.parse(value)
    except ConfigError:
        return None


def online_cpus(root: str) -> CpuSet | None:
    """Return the online CPUs (Documentation/admin-guide/cputopology.rst)."""
    return cpulist(root, f"{CPU_DIR}/online")


def cpu_times(root: str) -> dict[int, list[int]]:
    """Return /proc/stat per-CPU counters in USER_HZ ticks (proc(5): user nice system idle iowait irq
    softirq steal …)."""
    out = {}
    for line in (text(root, "/proc/stat") or "").splitlines():
        name, _, rest = line.partition(" ")
        if name.startswith("cpu") and name[3:].isdigit():
            out[int(name[3:])] = [int(v) for v in rest.split()]
    return out


# -- kernel command line -----------------------------------------------------------------------
def cmdline(root: str) -> dict[str, str] | None:
    """Return the kernel parameters from /proc/cmdline as ``{name: value}`` ("" for flags).

    Arguments after ``--`` belong to init and are dropped; a repeated parameter keeps its last
    value, as most kernel parameter handlers do.
    """
    raw = text(root, "/proc/cmdline")
    if raw is None:
        return None
    try:
        words = shlex.split(raw)
    except ValueError:  # an unbalanced quote: fall back to plain splitting
        words = raw.split()
    params: dict[str, str] = {}
    for word in words:
        if word == "--":
            break
        name, _, value = word.partition("=")
        params[name] = value
    return params


def parse_isolcpus(value: str) -> tuple[CpuSet, tuple[str, ...]]:
    """Split ``isolcpus=managed_irq,domain,2-3`` into (CPUs, flags); no flag means domain."""
    parts = value.split(",")
    flags = []
    while parts and parts[0] in ISOLCPUS_FLAGS:
        flags.append(parts.pop(0))
    try:
        cpus = CpuSet.parse(",".join(parts))
    except ConfigError:
        cpus = CpuSet()
    return cpus, tuple(flags) or ("domain",)


def cmdline_cpus(params: Mapping[str, str] | None, name: str) -> CpuSet | None:
    """Return the cpulist of a parameter such as ``nohz_full=`` or ``rcu_nocbs=`` (None if absent)."""
    if not params or name not in params:
        return None
    try:
        return CpuSet.parse(params[name])
    except ConfigError:
        return None


# -- kernel build configuration ----------------------------------------------------------------
def kernel_release(root: str) -> str | None:
    """Return ``uname -r`` as /proc/sys/kernel/osrelease has it."""
    return text(root, "/proc/sys/kernel/osrelease")


def kernel_version_tuple(root: str) -> tuple[int, int] | None:
    """Return (major, minor) of the running kernel, or None."""
    release = kernel_release(root)
    if not release:
        return None
    try:
        major, minor = release.split(".")[:2]
        return int(major), int("".join(ch for ch in minor if ch.isdigit()) or 0)
    except ValueError:
        return None


def kconfig(root: str) -> tuple[dict[str, str], str] | None:
    """Return the running kernel's build configuration and where it was read.

    /proc/config.gz exists with CONFIG_IKCONFIG_PROC; distributions ship /boot/config-<release>.
    Unset options (``# CONFIG_X is not set``) are left out, so ``.get()`` is None for them.
    """
    candidates = ["/proc/config.gz"]
    release = kernel_release(root)
    if release:
        candidates.append(f"/boot/config-{release}")
    for rel in candidates:
        try:  # bounded, also decompressed (platform.kfiles)
            body = read_gzip_text(root, rel) if rel.endswith(".gz") else read_bytes(root, rel).decode(errors="replace")
        except OSError:
            continue
        config = {}
        for line in body.splitlines():
            if line.startswith("CONFIG_") and "=" in line:
                key, _, value = line.partition("=")
                config[key] = value.strip().strip('"')
        return config, rel
    return None


# -- idle states, frequency, topology -----------------------------------------------------------
@dataclass(frozen=True)
class IdleState:
    """One cpuidle state of one CPU (Documentation/admin-guide/pm/cpuidle.rst, "sysfs")."""

    cpu: int
    index: int
    name: str
    exit_latency_us: int
    disabled: bool
    path: str  # the state's directory, e.g. /sys/devices/system/cpu/cpu1/cpuidle/state2

    @property
    def is_poll(self) -> bool:
        """True for the polling pseudo-state (exit latency 0, never halts the CPU)."""
        return self.name.upper() == "POLL" or self.exit_latency_us == 0


def idle_states(root: str, cpu: int) -> list[IdleState] | None:
    """Return the cpuidle states of *cpu*, or None when there is no cpuidle directory."""
    base = f"{CPU_DIR}/cpu{cpu}/cpuidle"
    try:
        names = sorted(os.listdir(kpath(root, base)), key=lambda n: int(n[5:]) if n[5:].isdigit() else 0)
    except OSError:
        return None
    states = []
    for name in names:
        if not name.startswith("state") or not name[5:].isdigit():
            continue
        path = f"{base}/{name}"
        latency = text(root, f"{path}/latency")
        disable = text(root, f"{path}/disable")
        if latency is None or disable is None or not latency.isdigit():
            continue
        states.append(
            IdleState(cpu, int(name[5:]), text(root, f"{path}/name") or name, int(latency), disable != "0", path)
        )
    return states


def cpuidle_driver(root: str) -> str | None:
    """Return the cpuidle driver ("intel_idle", "acpi_idle", "haltpoll", "none"), or None."""
    return text(root, f"{CPU_DIR}/cpuidle/current_driver")


@dataclass(frozen=True)
class CpuFreq:
    """cpufreq facts of one CPU (Documentation/admin-guide/pm/cpufreq.rst)."""

    cpu: int
    driver: str | None
    governor: str | None
    available: tuple[str, ...]
    path: str


def cpufreq(root: str, cpu: int) -> CpuFreq | None:
    """Return the cpufreq policy facts of *cpu*, or None without a cpufreq driver."""
    base = f"{CPU_DIR}/cpu{cpu}/cpufreq"
    governor = text(root, f"{base}/scaling_governor")
    if governor is None:
        return None
    available = tuple((text(root, f"{base}/scaling_available_governors") or "").split())
    return CpuFreq(cpu, text(root, f"{base}/scaling_driver"), governor, available, f"{base}/scaling_governor")


def thread_siblings(root: str, cpu: int) -> CpuSet | None:
    """Return the hardware threads sharing *cpu*'s core, including *cpu* itself."""
    return cpulist(root, f"{CPU_DIR}/cpu{cpu}/topology/core_cpus_list") or cpulist(
        root, f"{CPU_DIR}/cpu{cpu}/topology/thread_siblings_list"
    )


def selected_word(value: str | None) -> str | None:
    """Return the bracketed choice of a sysfs selector: ``"always [madvise] never"`` → ``madvise``."""
    if not value:
        return None
    if "[" in value and "]" in value:
        return value.split("[", 1)[1].split("]", 1)[0]
    return value.strip()


# -- mounts ------------------------------------------------------------------------------------
def mounts(root: str) -> list[tuple[str, str, str]]:
    """Return /proc/mounts as (source, mount point, type) rows."""
    rows = []
    for line in (text(root, "/proc/mounts") or "").splitlines():
        parts = line.split()
        if len(parts) >= 3:
            # /proc/mounts escapes spaces as \040 (proc(5)).
            rows.append((parts[0], parts[1].replace("\\040", " "), parts[2]))
    return rows


def mount_point(root: str, fstype: str) -> str | None:
    """Return the first mount point of a file system type (tracefs, debugfs, cgroup2), or None."""
    return next((mp for _, mp, kind in mounts(root) if kind == fstype), None)
