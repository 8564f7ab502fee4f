"""Readers for interrupts under a root directory (audit layer, read-only).

/proc/irq/N/smp_affinity is where an IRQ may go, effective_affinity where the interrupt
controller actually sends it (Documentation/core-api/irq/irq-affinity.rst); /proc/interrupts
gives names and per-CPU counts. Some IRQs cannot be moved from user space at all: managed ones
(spread over the CPUs by their driver, e.g. NVMe and virtio-blk queues), per-CPU ones and those
marked no-balancing (irq_can_set_affinity_usr() in kernel/irq/manage.c); a write to their
smp_affinity fails with EIO (EPERM on newer kernels), and :func:`movable` tells them apart.
Network-card queues are found from the device behind each /sys/class/net interface (its PCI
function's msi_irqs/ directory, or its legacy ``irq`` file).
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from ...cpus import CpuSet
from ...errors import ConfigError
from ...platform.kfiles import kpath, read_bytes, read_text


@dataclass(frozen=True)
class Irq:
    """One device interrupt line."""

    number: int
    name: str  # the action names ("eth0-TxRx-0"), or the chip name when the line has none
    affinity: CpuSet | None
    effective: CpuSet | None
    counts: dict[int, int] = field(default_factory=dict)  # CPU -> interrupts so far
    nic: str | None = None  # the network interface this IRQ serves, if any
    movable: bool = True  # False: the kernel keeps it where it is until a reboot (managed or per-CPU)

    def label(self) -> str:
        """``IRQ 38 virtio2-input.0 (eth0)``."""
        nic = f" ({self.nic})" if self.nic and self.nic not in self.name else ""
        return f"IRQ {self.number} {self.name}{nic}"


def _mask(text: str | None) -> CpuSet | None:
    if text is None:
        return None
    try:
        return CpuSet.from_mask(text)
    except ConfigError:
        return None


#: The irq_data states (kernel/irq/debugfs.c, /sys/kernel/debug/irq/irqs/N "dstate") under which
#: irq_can_set_affinity_usr() refuses a user's mask.
_FIXED_STATES = ("IRQD_AFFINITY_MANAGED", "IRQD_PER_CPU", "IRQD_NO_BALANCING")


def movable(root: str, number: int) -> bool:
    """Can user space move IRQ *number* (write its smp_affinity)?

    The kernel exposes it in two places: its debugfs entry lists the IRQ's states (only with
    CONFIG_GENERIC_IRQ_DEBUGFS and a debugfs that is not locked down), and register_irq_proc()
    in kernel/irq/proc.c gives smp_affinity its owner-write bit only when
    irq_can_set_affinity_usr() allows a change (newer kernels; older ones make every
    smp_affinity 0644, and then only the write's EIO tells). Unknown is movable.
    """
    states = read_text(root, f"/sys/kernel/debug/irq/irqs/{number}", fallback="") or ""
    if any(word in _FIXED_STATES for word in states.split()):
        return False
    try:
        mode = os.stat(kpath(root, f"/proc/irq/{number}/smp_affinity")).st_mode
    except OSError:
        return True
    return bool(mode & stat.S_IWUSR)


def interrupts_table(root: str) -> dict[str, tuple[dict[int, int], str]]:
    """Parse /proc/interrupts into ``{irq: ({cpu: count}, description)}``.

    The header names the CPU columns (only online CPUs appear); device lines end with the chip,
    the hardware IRQ and the action names; per-CPU lines (LOC, NMI, …) have a description instead.
    """
    lines = (read_text(root, "/proc/interrupts", fallback="") or "").splitlines()
    if not lines:
        return {}
    cpus = [int(c[3:]) for c in lines[0].split() if c.startswith("CPU") and c[3:].isdigit()]
    table = {}
    for line in lines[1:]:
        label, sep, rest = line.partition(":")
        if not sep:
            continue
        words = rest.split()
        counts = {}
        for cpu, word in zip(cpus, words):
            if not word.isdigit():
                break
            counts[cpu] = int(word)
        table[label.strip()] = (counts, " ".join(words[len(counts) :]))
    return table


def nic_irqs(root: str) -> dict[int, str]:
    """Return ``{irq: interface}`` for the interrupts of physical network interfaces."""
    out: dict[int, str] = {}
    net = kpath(root, "/sys/class/net")
    top = kpath(root, "/sys/devices").resolve()
    try:
        names = sorted(os.listdir(net))
    except OSError:
        return out
    for name in names:
        try:
            device = (net / name).resolve()
        except OSError:
            continue
        if "virtual" in device.parts:  # lo, bridges, tunnels: no hardware interrupts
            continue
        for node in [device, *device.parents]:
            if node == top or top not in node.parents:
                break
            found = _irqs_of_device(node)
            if found:
                for irq in found:
                    out.setdefault(irq, name)
                break
    return out


def _irqs_of_device(node: Path) -> list[int]:
    try:
        msi = [int(n) for n in os.listdir(node / "msi_irqs") if n.isdigit()]
        if msi:
            return msi
    except OSError:
        pass
    try:
        irq = int(read_bytes("/", str(node / "irq")).strip())
        return [irq] if irq > 0 else []
    except (OSError, ValueError):
        return []


def irqs(root: str) -> list[Irq]:
    """Return every IRQ that has a /proc/irq/N directory, with names, masks and counts."""
    table = interrupts_table(root)
    nics = nic_irqs(root)
    try:
        numbers = sorted(int(n) for n in os.listdir(kpath(root, "/proc/irq")) if n.isdigit())
    except OSError:
        return []
    out = []
    for n in numbers:
        base = f"/proc/irq/{n}"
        counts, description = table.get(str(n), ({}, ""))
        try:  # action names are the subdirectories of /proc/irq/N (kernel/irq/proc.c)
            actions = sorted(e.name for e in os.scandir(kpath(root, base)) if e.is_dir())
        except OSError:
            actions = []
        name = ",".join(actions) or (description.split()[-1] if description else "?")
        nic = nics.get(n) or next((nic for nic in set(nics.values()) if nic in name), None)
        out.append(
            Irq(
                n,
                name,
                _mask(read_text(root, f"{base}/smp_affinity", fallback=None)),
                _mask(read_text(root, f"{base}/effective_affinity", fallback=None)),
                counts,
                nic,
                movable(root, n),
            )
        )
    return out


def default_affinity(root: str) -> CpuSet | None:
    """Return /proc/irq/default_smp_affinity (the mask new IRQs start with)."""
    return _mask(read_text(root, "/proc/irq/default_smp_affinity", fallback=None))
