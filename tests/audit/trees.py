"""Fixture trees for the audit: the captured machine, and a synthetic one built file by file.

``Tree`` writes kernel files under a temporary root the way /proc and /sys show them (one value
and a newline). ``build_good`` makes a well-tuned 4-CPU PREEMPT_RT machine with CPU 3 reserved;
tests break one thing at a time to get the bad state of each check.
"""

from __future__ import annotations

import gzip
import shutil
import struct
from pathlib import Path

from softrt.cpus import CpuSet

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "sysfs"
CAPTURED = FIXTURES / "debian12-vm-2cpu"

GOOD_CONFIG = """\
CONFIG_PREEMPT_RT=y
CONFIG_PREEMPTION=y
CONFIG_HZ_1000=y
CONFIG_HZ=1000
CONFIG_NO_HZ_COMMON=y
CONFIG_NO_HZ_FULL=y
CONFIG_RCU_NOCB_CPU=y
CONFIG_CPU_IDLE=y
CONFIG_CPU_FREQ=y
CONFIG_CPU_FREQ_DEFAULT_GOV_PERFORMANCE=y
# CONFIG_RT_GROUP_SCHED is not set
CONFIG_LOCKUP_DETECTOR=y
"""


class Tree:
    """A directory that looks like /proc, /sys and /etc to the audit."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def __str__(self) -> str:
        return str(self.root)

    def path(self, rel: str) -> Path:
        return self.root / rel.lstrip("/")

    def set(self, rel: str, content: str | bytes) -> Tree:
        """Write a file; text gets the trailing newline kernel files have."""
        path = self.path(rel)
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.is_symlink():
            path.unlink()
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content if content.endswith("\n") else content + "\n")
        return self

    def read(self, rel: str) -> str:
        return self.path(rel).read_text()

    def rm(self, rel: str) -> Tree:
        path = self.path(rel)
        if path.is_symlink() or path.is_file():
            path.unlink()
        elif path.is_dir():
            shutil.rmtree(path)
        return self

    def link(self, rel: str, target: str) -> Tree:
        path = self.path(rel)
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.is_symlink() or path.exists():
            path.unlink()
        path.symlink_to(target)
        return self

    def keep(self, rel: str) -> Tree:
        """Create a directory (with a .keep file, as captured trees have)."""
        return self.set(f"{rel}/.keep", "")

    def kconfig(self, body: str) -> Tree:
        return self.set("/proc/config.gz", gzip.compress(body.encode(), mtime=0))

    def task(
        self,
        pid: int,
        comm: str,
        allowed: str,
        *,
        tid: int | None = None,
        kthread: bool = False,
        percpu: bool = False,
        policy: int = 0,
        rt_priority: int = 0,
        starttime: int = 100,
        processor: int = 0,
    ) -> Tree:
        """Add a thread (and its process's own stat/status when it is the leader)."""
        tid = tid or pid
        flags = (0x00200000 if kthread else 0) | (0x04000000 if percpu else 0) | 0x40
        after = [
            "S",
            "1",
            str(pid),
            str(pid),
            "0",
            "-1",
            str(flags),
            *["0"] * 4,
            "5",
            "3",
            *["0"] * 4,
            "1",
            "0",
            str(starttime),
            *["0"] * 16,
            str(processor),
            str(rt_priority),
            str(policy),
            "0",
            "0",
            "0",
        ]
        stat = f"{tid} ({comm}) " + " ".join(after)
        status = f"Name:\t{comm}\nTgid:\t{pid}\nPid:\t{tid}\nCpus_allowed_list:\t{allowed}\n"
        if tid == pid:
            self.set(f"/proc/{pid}/stat", stat).set(f"/proc/{pid}/status", status).set(f"/proc/{pid}/comm", comm)
        return self.set(f"/proc/{pid}/task/{tid}/stat", stat).set(f"/proc/{pid}/task/{tid}/status", status)

    def irq(self, n: int, name: str, affinity: str, effective: str | None = None) -> Tree:
        """Add /proc/irq/N with masks (hex) and an action directory."""
        self.set(f"/proc/irq/{n}/smp_affinity", affinity)
        self.set(f"/proc/irq/{n}/smp_affinity_list", str(CpuSet.from_mask(affinity)))
        if effective is not None:
            self.set(f"/proc/irq/{n}/effective_affinity", effective)
        return self.keep(f"/proc/irq/{n}/{name}")

    def idle_state(self, cpu: int, index: int, name: str, latency: int, disabled: bool) -> Tree:
        base = f"/sys/devices/system/cpu/cpu{cpu}/cpuidle/state{index}"
        return (
            self.set(f"{base}/name", name)
            .set(f"{base}/latency", str(latency))
            .set(f"{base}/disable", "1" if disabled else "0")
        )


def build_good(root: Path) -> Tree:
    """A well-tuned machine: 4 CPUs, CPU 3 reserved for the loop, PREEMPT_RT, nothing left on CPU 3."""
    t = Tree(root)
    t.set(
        "/proc/cmdline",
        "BOOT_IMAGE=/boot/vmlinuz-6.12.0-rt-amd64 root=/dev/sda1 ro isolcpus=managed_irq,domain,3 "
        "nohz_full=3 rcu_nocbs=3 irqaffinity=0-2 processor.max_cstate=1 intel_idle.max_cstate=1 nosmt -- quiet",
    )
    t.set("/proc/sys/kernel/osrelease", "6.12.0-rt-amd64")
    t.set("/proc/sys/kernel/version", "#1 SMP PREEMPT_RT Debian 6.12.0-1 (2025-01-01)")
    t.set("/proc/sys/kernel/random/boot_id", "5e1f0c3a-0000-4000-8000-000000000001")
    t.set("/sys/kernel/realtime", "1")
    t.kconfig(GOOD_CONFIG)
    cpu = "/sys/devices/system/cpu"
    for name, value in (
        ("online", "0-3"),
        ("present", "0-3"),
        ("possible", "0-3"),
        ("isolated", "3"),
        ("nohz_full", "3"),
        ("cpuidle/current_driver", "intel_idle"),
        ("smt/control", "off"),
        ("intel_pstate/no_turbo", "1"),
    ):
        t.set(f"{cpu}/{name}", value)
    for c in range(4):
        t.idle_state(c, 0, "POLL", 0, False)
        t.idle_state(c, 1, "C1", 1, c == 3)
        t.idle_state(c, 2, "C6", 133, c == 3)
        t.set(f"{cpu}/cpu{c}/cpufreq/scaling_governor", "performance")
        t.set(f"{cpu}/cpu{c}/cpufreq/scaling_available_governors", "performance powersave")
        t.set(f"{cpu}/cpu{c}/cpufreq/scaling_driver", "intel_pstate")
        t.set(f"{cpu}/cpu{c}/topology/core_cpus_list", str(c))
    t.set("/sys/devices/system/clocksource/clocksource0/current_clocksource", "tsc")
    t.set("/sys/devices/system/clocksource/clocksource0/available_clocksource", "tsc hpet acpi_pm")
    t.set("/sys/devices/system/node/online", "0")
    t.set("/sys/devices/virtual/workqueue/cpumask", "7")
    t.set("/sys/kernel/mm/ksm/run", "0")
    t.set("/sys/kernel/mm/transparent_hugepage/enabled", "always [madvise] never")
    t.set("/sys/kernel/mm/transparent_hugepage/defrag", "always defer defer+madvise [madvise] never")
    for name, value in (
        ("sched_rt_runtime_us", "-1"),
        ("sched_rt_period_us", "1000000"),
        ("watchdog", "1"),
        ("soft_watchdog", "1"),
        ("nmi_watchdog", "0"),
        ("watchdog_cpumask", "0-2"),
        ("watchdog_thresh", "10"),
        ("timer_migration", "0"),
        ("numa_balancing", "0"),
    ):
        t.set(f"/proc/sys/kernel/{name}", value)
    t.set("/proc/sys/vm/swappiness", "10")
    t.set("/proc/swaps", "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority")
    t.set(
        "/proc/mounts",
        "proc /proc proc rw 0 0\ncgroup2 /sys/fs/cgroup cgroup2 rw 0 0\ndebugfs /sys/kernel/debug debugfs rw 0 0",
    )
    t.set("/proc/filesystems", "nodev\tproc\nnodev\tdebugfs\nnodev\ttracefs")
    for c in range(4):  # the fair server (Linux 6.12+): off on the RT CPU
        t.set(f"/sys/kernel/debug/sched/fair_server/cpu{c}/runtime", "0" if c == 3 else "50000000")
        t.set(f"/sys/kernel/debug/sched/fair_server/cpu{c}/period", "1000000000")
    t.set("/proc/self/status", "Cpus_allowed_list:\t0-3")
    # Interrupts: the NIC's queues and an NVMe queue on the housekeeping CPUs.
    t.set("/proc/irq/default_smp_affinity", "7")
    t.set(
        "/proc/interrupts",
        "           CPU0       CPU1       CPU2       CPU3\n"
        " 120:       100        200        300          0  PCI-MSIX-0000:00:1f.6   0-edge      eth0-TxRx-0\n"
        " 121:        50          0          0          0  PCI-MSIX-0000:01:00.0   1-edge      nvme0q1\n"
        " LOC:      1000       1000       1000       1000   Local timer interrupts\n",
    )
    t.irq(120, "eth0-TxRx-0", "1", "1").irq(121, "nvme0q1", "4", "4")
    t.link("/sys/class/net/eth0", "../../devices/pci0000:00/0000:00:1f.6/net/eth0")
    t.keep("/sys/devices/pci0000:00/0000:00:1f.6/net/eth0")
    t.set("/sys/devices/pci0000:00/0000:00:1f.6/msi_irqs/120", "msix")
    t.link("/sys/class/net/lo", "../../devices/virtual/net/lo")
    t.keep("/sys/devices/virtual/net/lo")
    # Tasks: init and kthreadd on the housekeeping CPUs, a per-CPU kthread and the RT app on CPU 3.
    t.task(1, "systemd", "0-2")
    t.task(2, "kthreadd", "0-2", kthread=True)
    t.task(30, "ksoftirqd/3", "3", kthread=True, percpu=True, processor=3)
    t.task(500, "rtapp", "3", policy=1, rt_priority=80, processor=3)
    t.task(500, "rtapp-worker", "3", tid=501, policy=1, rt_priority=80, processor=3)
    t.set("/dev/cpu_dma_latency", struct.pack("=i", 0))
    t.link("/proc/500/fd/3", "/dev/cpu_dma_latency")
    # systemd is running; nothing that updates or balances IRQs is enabled.
    t.keep("/run/systemd/system")
    t.link("/etc/systemd/system/multi-user.target.wants/ssh.service", "/lib/systemd/system/ssh.service")
    return t


def files_under(root: Path) -> dict[str, bytes]:
    """Every regular file's bytes, keyed by path relative to *root* (for "nothing changed" asserts)."""
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file() and not p.is_symlink()}


def kernel_writer(path: Path, value: str) -> None:
    """Write to a tree file the way the kernel would take it, for apply/revert on trees.

    Selector files ("always [madvise] never") move the brackets; masks keep the kernel's width;
    /proc/irq/N/smp_affinity also updates smp_affinity_list and effective_affinity (first CPU),
    as the x86 vector allocator would.
    """
    old = path.read_text().strip()
    if "[" in old:
        words = [w.strip("[]") for w in old.split()]
        if value not in words:
            raise OSError(22, "Invalid argument")
        path.write_text(" ".join(f"[{w}]" if w == value else w for w in words) + "\n")
        return
    if path.name in ("smp_affinity", "default_smp_affinity", "cpumask", "effective_affinity"):
        cpus = CpuSet.from_mask(value)
        if not cpus:
            raise OSError(22, "Invalid argument")
        path.write_text(f"{int(cpus.to_mask().replace(',', ''), 16):0{len(old)}x}\n")
        if path.name == "smp_affinity":
            (path.parent / "smp_affinity_list").write_text(f"{cpus}\n")
            if (path.parent / "effective_affinity").exists():
                first = CpuSet([min(cpus)])
                (path.parent / "effective_affinity").write_text(f"{int(first.to_mask(), 16):0{len(old)}x}\n")
        return
    path.write_text(value + "\n")
