"""CpuSet: an immutable set of CPU numbers with the kernel's list and mask syntaxes (pure).

List syntax is the kernel's "cpulist" (``0-3,8``, Documentation/admin-guide/cputopology.rst), as
used by isolcpus=, /sys/devices/system/cpu/online and taskset -c. Mask syntax is the comma-grouped
hex of /proc/irq/N/smp_affinity (32 bits a group, most significant first; Documentation/core-api/
irq/irq-affinity.rst).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from .errors import ConfigError


class CpuSet:
    """An immutable, ordered set of CPU numbers."""

    __slots__ = ("_cpus",)

    def __init__(self, cpus: Iterable[int] = ()) -> None:
        cpus = frozenset(int(c) for c in cpus)
        if any(c < 0 for c in cpus):
            raise ConfigError(f"CPU numbers cannot be negative: {sorted(cpus)}")
        object.__setattr__(self, "_cpus", cpus)

    # -- parsing and formatting -------------------------------------------------------------
    @classmethod
    def parse(cls, text: str) -> CpuSet:
        """Parse a cpulist such as ``"0-3,8"`` (empty or whitespace gives the empty set)."""
        cpus: set[int] = set()
        for chunk in text.strip().split(","):
            chunk = chunk.strip()
            if not chunk:
                continue
            # "0-7:2/4" (stride groups, cputopology.rst) is rare; plain ranges cover sysfs output.
            lo, sep, hi = chunk.partition("-")
            try:
                a = int(lo)
                b = int(hi) if sep else a
            except ValueError:
                raise ConfigError(f"invalid CPU list {text!r}", hint="write it like 1 or 2-3 or 1,3") from None
            if b < a or a < 0:
                raise ConfigError(f"invalid CPU range {chunk!r} in {text!r}", hint="ranges go low-high, like 2-3")
            cpus.update(range(a, b + 1))
        return cls(cpus)

    @classmethod
    def from_mask(cls, text: str) -> CpuSet:
        """Parse a /proc/irq/N/smp_affinity style hex mask (``"00000000,0000000f"``)."""
        try:
            value = int(text.strip().replace(",", "") or "0", 16)
        except ValueError:
            raise ConfigError(f"invalid CPU mask {text!r}") from None
        return cls(i for i in range(value.bit_length()) if value >> i & 1)

    def to_mask(self, ncpus: int | None = None) -> str:
        """Format as a comma-grouped hex mask, as /proc/irq/N/smp_affinity accepts."""
        value = sum(1 << c for c in self._cpus)
        width = max(ncpus or 0, max(self._cpus, default=0) + 1)
        groups = max(1, (width + 31) // 32)
        words = [(value >> (32 * g)) & 0xFFFFFFFF for g in reversed(range(groups))]
        return ",".join(f"{w:08x}" for w in words)

    def __str__(self) -> str:
        """Format as a cpulist (``"0-3,8"``)."""
        out: list[str] = []
        cpus = sorted(self._cpus)
        i = 0
        while i < len(cpus):
            j = i
            while j + 1 < len(cpus) and cpus[j + 1] == cpus[j] + 1:
                j += 1
            out.append(str(cpus[i]) if i == j else f"{cpus[i]}-{cpus[j]}")
            i = j + 1
        return ",".join(out)

    def __repr__(self) -> str:
        return f"CpuSet({str(self)!r})"

    # -- set behaviour ----------------------------------------------------------------------
    def __iter__(self) -> Iterator[int]:
        return iter(sorted(self._cpus))

    def __len__(self) -> int:
        return len(self._cpus)

    def __contains__(self, cpu: object) -> bool:
        return cpu in self._cpus

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CpuSet) and self._cpus == other._cpus

    def __hash__(self) -> int:
        return hash(self._cpus)

    def __or__(self, other: CpuSet) -> CpuSet:
        return CpuSet(self._cpus | other._cpus)

    def __and__(self, other: CpuSet) -> CpuSet:
        return CpuSet(self._cpus & other._cpus)

    def __sub__(self, other: CpuSet) -> CpuSet:
        return CpuSet(self._cpus - other._cpus)

    def __le__(self, other: CpuSet) -> bool:
        return self._cpus <= other._cpus

    def isdisjoint(self, other: CpuSet) -> bool:
        """Return True when no CPU is in both sets."""
        return self._cpus.isdisjoint(other._cpus)

    def last(self) -> int:
        """Return the highest-numbered CPU (the default real-time CPU)."""
        if not self._cpus:
            raise ConfigError("the CPU set is empty")
        return max(self._cpus)

    def to_frozenset(self) -> frozenset[int]:
        """Return the CPUs as a frozenset (for os.sched_setaffinity)."""
        return self._cpus
