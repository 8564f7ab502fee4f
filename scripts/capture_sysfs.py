#!/usr/bin/env python3
"""Capture the /proc, /sys and /etc files softrt's audit reads into a small tree for tests.

    sudo python scripts/capture_sysfs.py tests/fixtures/sysfs/<machine-name>

Then ``softrt check --root tests/fixtures/sysfs/<machine-name>`` audits the captured machine, and
tests feed the tree to ``softrt.audit.run_checks(..., root=...)``. Only the files the checks read
are copied (a few hundred KB at most): process names and affinities, but no command lines,
environments or host names. The kernel configuration is cut down to the options the audit uses.
Directories that would be empty (IRQ action names, /run/systemd/system) get a ``.keep`` file,
because git does not store empty directories.
"""

from __future__ import annotations

import argparse
import glob
import gzip
import os
import re
import shutil
import sys
from pathlib import Path

from softrt.cpus import CpuSet

FILES = [
    "/proc/cmdline",
    "/proc/interrupts",
    "/proc/swaps",
    "/proc/irq/default_smp_affinity",
    "/proc/sys/kernel/osrelease",
    "/proc/sys/kernel/version",
    "/proc/sys/kernel/random/boot_id",
    "/proc/sys/kernel/sched_rt_runtime_us",
    "/proc/sys/kernel/sched_rt_period_us",
    "/proc/sys/kernel/watchdog",
    "/proc/sys/kernel/soft_watchdog",
    "/proc/sys/kernel/nmi_watchdog",
    "/proc/sys/kernel/watchdog_cpumask",
    "/proc/sys/kernel/watchdog_thresh",
    "/proc/sys/kernel/timer_migration",
    "/proc/sys/kernel/numa_balancing",
    "/proc/sys/vm/swappiness",
    "/sys/devices/system/cpu/online",
    "/sys/devices/system/cpu/present",
    "/sys/devices/system/cpu/possible",
    "/sys/devices/system/cpu/isolated",
    "/sys/devices/system/cpu/nohz_full",
    "/sys/devices/system/cpu/cpuidle/current_driver",
    "/sys/devices/system/cpu/smt/control",
    "/sys/devices/system/cpu/smt/active",
    "/sys/devices/system/cpu/cpufreq/boost",
    "/sys/devices/system/cpu/intel_pstate/no_turbo",
    "/sys/devices/system/node/online",
    "/sys/devices/system/clocksource/clocksource0/current_clocksource",
    "/sys/devices/system/clocksource/clocksource0/available_clocksource",
    "/sys/devices/virtual/workqueue/cpumask",
    "/sys/kernel/realtime",
    "/sys/kernel/mm/ksm/run",
    "/sys/kernel/mm/transparent_hugepage/enabled",
    "/sys/kernel/mm/transparent_hugepage/defrag",
    "/sys/kernel/debug/sched/preempt",
    "/etc/default/irqbalance",
    "/etc/sysconfig/irqbalance",
    "/etc/tuned/active_profile",
    "/etc/apt/apt.conf.d/20auto-upgrades",
]
GLOBS = [
    "/proc/irq/[0-9]*/smp_affinity",
    "/proc/irq/[0-9]*/smp_affinity_list",
    "/proc/irq/[0-9]*/effective_affinity",
    "/proc/irq/[0-9]*/effective_affinity_list",
    "/sys/devices/system/cpu/cpu[0-9]*/cpuidle/state[0-9]*/name",
    "/sys/devices/system/cpu/cpu[0-9]*/cpuidle/state[0-9]*/latency",
    "/sys/devices/system/cpu/cpu[0-9]*/cpuidle/state[0-9]*/disable",
    "/sys/devices/system/cpu/cpu[0-9]*/cpufreq/scaling_governor",
    "/sys/devices/system/cpu/cpu[0-9]*/cpufreq/scaling_driver",
    "/sys/devices/system/cpu/cpu[0-9]*/cpufreq/scaling_available_governors",
    "/sys/devices/system/cpu/cpu[0-9]*/topology/core_cpus_list",
    "/sys/devices/system/cpu/cpu[0-9]*/topology/thread_siblings_list",
    "/sys/kernel/debug/sched/fair_server/cpu[0-9]*/runtime",
    "/var/lib/systemd/timers/stamp-*",
]
KCONFIG = re.compile(
    r"^(# )?CONFIG_(PREEMPT\w*|HZ\w*|NO_HZ\w*|RT_GROUP_SCHED|RCU_NOCB_CPU|CPU_IDLE\w*|CPU_FREQ\w*|"
    r"LOCKUP_DETECTOR|SOFTLOCKUP_DETECTOR|HARDLOCKUP_DETECTOR|TRANSPARENT_HUGEPAGE\w*|KSM|"
    r"NUMA_BALANCING\w*|CPU_ISOLATION|CPUSETS|TRACING|EFI_DISABLE_RUNTIME|IRQSOFF_TRACER|"
    r"PREEMPT_TRACER|PROVE_LOCKING)[ =]"
)
STATUS_KEYS = ("Name:", "Tgid:", "Pid:", "PPid:", "Cpus_allowed:", "Cpus_allowed_list:")
PROC_MOUNT_TYPES = {"cgroup2", "tracefs", "debugfs", "proc", "sysfs"}


class Capture:
    """Copies files from the live system into *out*, keeping the absolute layout."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.count = 0

    def dest(self, rel: str) -> Path:
        path = self.out / rel.lstrip("/")
        path.parent.mkdir(parents=True, exist_ok=True)
        return path

    def put(self, rel: str, data: bytes) -> None:
        self.dest(rel).write_bytes(data)
        self.count += 1

    def copy(self, rel: str, filter_text=None) -> bool:
        try:
            with open(rel, "rb") as fh:
                data = fh.read(1 << 20)
        except OSError:
            return False
        if filter_text is not None:
            data = filter_text(data.decode(errors="replace")).encode()
        self.put(rel, data)
        return True

    def link(self, rel: str) -> None:
        try:
            target = os.readlink(rel)
        except OSError:
            return
        path = self.dest(rel)
        if path.is_symlink() or path.exists():
            path.unlink()
        path.symlink_to(target)
        self.count += 1

    def keep(self, rel: str) -> None:
        self.put(f"{rel}/.keep", b"")


def capture_processes(cap: Capture) -> None:
    """stat and a trimmed status of every thread; fd links to /dev/cpu_dma_latency."""
    keep_status = lambda text: "".join(ln + "\n" for ln in text.splitlines() if ln.startswith(STATUS_KEYS))  # noqa: E731
    for pid in sorted(int(p) for p in os.listdir("/proc") if p.isdigit()):
        if not cap.copy(f"/proc/{pid}/stat"):
            continue
        cap.copy(f"/proc/{pid}/comm")
        cap.copy(f"/proc/{pid}/status", keep_status)
        try:
            tids = sorted(int(t) for t in os.listdir(f"/proc/{pid}/task") if t.isdigit())
        except OSError:
            tids = []
        for tid in tids:
            cap.copy(f"/proc/{pid}/task/{tid}/stat")
            cap.copy(f"/proc/{pid}/task/{tid}/status", keep_status)
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}") == "/dev/cpu_dma_latency":
                    cap.link(f"/proc/{pid}/fd/{fd}")
            except OSError:
                pass
    cap.put("/proc/self/status", f"Cpus_allowed_list:\t{_cpulist(os.sched_getaffinity(0))}\n".encode())


def _cpulist(cpus) -> str:
    return str(CpuSet(cpus))


def capture_irq_names(cap: Capture) -> None:
    """IRQ action names are empty directories under /proc/irq/N."""
    for path in glob.glob("/proc/irq/[0-9]*/*/"):
        cap.keep(path.rstrip("/"))


def capture_net(cap: Capture) -> None:
    """/sys/class/net links and, for each device, the interrupts of the hardware behind it."""
    for path in glob.glob("/sys/class/net/*"):
        cap.link(path)
        real = Path(path).resolve()
        if "virtual" in real.parts:
            cap.keep(str(real))
            continue
        cap.keep(str(real))
        for node in [real, *real.parents]:
            if str(node) in ("/sys/devices", "/"):
                break
            if (node / "msi_irqs").is_dir():
                for irq in os.listdir(node / "msi_irqs"):
                    cap.copy(str(node / "msi_irqs" / irq))
                break
            if (node / "irq").is_file():
                cap.copy(str(node / "irq"))
                break


def capture_systemd(cap: Capture) -> None:
    """*.wants links (enabled units), masks, and whether systemd is running."""
    for base in ("/etc/systemd/system", "/usr/lib/systemd/system", "/run/systemd/system"):
        for path in glob.glob(f"{base}/*.wants/*") + glob.glob(f"{base}/*.requires/*"):
            cap.link(path) if os.path.islink(path) else cap.put(path, b"")
        for path in glob.glob(f"{base}/*"):
            if os.path.islink(path) and os.readlink(path) == "/dev/null":
                cap.link(path)
    if os.path.isdir("/run/systemd/system"):
        cap.keep("/run/systemd/system")


def capture_cgroup(cap: Capture) -> None:
    """cgroup-v2 cpuset partitions (depth ≤ 3, as the audit reads them)."""
    mounts = [ln.split() for ln in Path("/proc/mounts").read_text().splitlines()]
    cap.put(
        "/proc/mounts", "".join(" ".join(m) + "\n" for m in mounts if len(m) > 2 and m[2] in PROC_MOUNT_TYPES).encode()
    )
    for m in mounts:
        if len(m) > 2 and m[2] == "cgroup2":
            base = m[1]
            cap.copy(f"{base}/cpuset.cpus.isolated")
            for depth in range(4):
                for path in glob.glob(base + "/*" * depth + "/cpuset.cpus.partition"):
                    cap.copy(path)
                    cap.copy(path.replace("cpuset.cpus.partition", "cpuset.cpus.effective"))


def capture_kconfig(cap: Capture) -> None:
    """The kernel configuration, cut down to the options the audit reads."""
    release = os.uname().release
    for src in ("/proc/config.gz", f"/boot/config-{release}"):
        try:
            body = gzip.open(src, "rt").read() if src.endswith(".gz") else Path(src).read_text()
        except (OSError, EOFError):
            continue
        kept = "".join(ln + "\n" for ln in body.splitlines() if KCONFIG.match(ln))
        if src.endswith(".gz"):
            cap.put(src, gzip.compress(kept.encode(), mtime=0))
        else:
            cap.put(src, kept.encode())
        return


def capture_dma_latency(cap: Capture) -> None:
    """/dev/cpu_dma_latency's current value (4 bytes; reading it changes nothing)."""
    try:
        with open("/dev/cpu_dma_latency", "rb") as fh:
            cap.put("/dev/cpu_dma_latency", fh.read(4))
    except OSError:
        pass


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="directory to create, e.g. tests/fixtures/sysfs/my-pc")
    parser.add_argument("--force", action="store_true", help="replace an existing directory")
    args = parser.parse_args(argv)
    if args.out.exists():
        if not args.force:
            print(f"{args.out} exists (use --force to replace it)", file=sys.stderr)
            return 2
        shutil.rmtree(args.out)
    cap = Capture(args.out)
    for rel in FILES:
        cap.copy(rel)
    for pattern in GLOBS:
        for rel in sorted(glob.glob(pattern)):
            cap.copy(rel)
    capture_irq_names(cap)
    capture_net(cap)
    capture_systemd(cap)
    capture_cgroup(cap)
    capture_kconfig(cap)
    capture_processes(cap)
    capture_dma_latency(cap)
    size = sum(p.stat().st_size for p in args.out.rglob("*") if p.is_file() and not p.is_symlink())
    print(f"captured {cap.count} files ({size / 1024:.0f} KB) into {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
