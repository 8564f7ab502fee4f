"""CpuSet: an immutable set of CPU numbers with the kernel's list and mask syntaxes (pure).

List syntax is the kernel's "cpulist" (``0-3,8``, Documentation/admin-guide/cputopology.rst), as
used by isolcpus=, /sys/devices/system/cpu/online and taskset -c. Mask syntax is the comma-grouped
hex of /proc/irq/N/smp_affinity (32 bits a group, most significant first; Documentation/core-api/
irq/irq-affinity.rst).

Every parser is bounded: a CPU number at or above *limit* (default :data:`MAX_CPUS`; callers pass
the machine's possible CPUs from the platform layer) is refused before anything is allocated, so
``"0-99999999999"`` or a mask of a million hex digits is one ConfigError, not an OOM kill.
:func:`choose_cpus` is the one place that picks the default real-time CPU and the housekeeping CPUs.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from .errors import ConfigError, InvalidCpu

#: The largest CPU count any Linux kernel can be built for (NR_CPUS: "range 2 8192" for
#: MAXSMP in arch/x86/Kconfig); no CPU number at or above it can exist.
MAX_CPUS = 8192
_CHUNK_RE = re.compile(r"\s*([0-9]+)\s*(?:-\s*([0-9]+)\s*)?")
_HEX_RE = re.compile(r"[0-9a-fA-F]*")


class CpuSet:
    """An immutable, ordered set of CPU numbers."""

    __slots__ = ("_cpus",)
    _cpus: frozenset[int]  # set once in __init__ (object.__setattr__), never after

    def __init__(self, cpus: Iterable[int] = ()) -> None:
        cpus = frozenset(int(c) for c in cpus)
        if any(c < 0 for c in cpus):
            raise ConfigError(f"CPU numbers cannot be negative: {sorted(cpus)}")
        object.__setattr__(self, "_cpus", cpus)

    # -- parsing and formatting -------------------------------------------------------------
    @classmethod
    def parse(cls, text: str, limit: int = MAX_CPUS) -> CpuSet:
        """Parse a cpulist such as ``"0-3,8"`` (empty or whitespace gives the empty set).

        Every CPU number must be below *limit* (checked before the range is expanded).
        """
        if not isinstance(text, str):
            raise ConfigError(f"invalid CPU list {text!r}", hint="write it like 1 or 2-3 or 1,3")
        cpus: set[int] = set()
        for chunk in text.strip().split(","):
            if not chunk.strip():
                continue
            # "0-7:2/4" (stride groups, cputopology.rst) is rare; plain ranges cover sysfs output.
            m = _CHUNK_RE.fullmatch(chunk)
            if not m:
                raise ConfigError(f"invalid CPU list {_short(text)!r}", hint="write it like 1 or 2-3 or 1,3")
            # Thousands of digits would make int() itself refuse (sys.int_info.str_digits_check_threshold).
            a, b = (int(g) if len(g) <= 12 else limit for g in (m.group(1), m.group(2) or m.group(1)))
            if b < a:
                raise ConfigError(
                    f"invalid CPU range {chunk.strip()!r} in {_short(text)!r}", hint="ranges go low-high, like 2-3"
                )
            if b >= limit:
                raise ConfigError(
                    f"CPU list {_short(text)!r} names CPUs that cannot exist on this machine",
                    hint=f"CPU numbers go from 0 to {limit - 1}",
                )
            cpus.update(range(a, b + 1))
        return cls(cpus)

    @classmethod
    def from_mask(cls, text: str, limit: int = MAX_CPUS) -> CpuSet:
        """Parse a /proc/irq/N/smp_affinity style hex mask (``"00000000,0000000f"``).

        A bit at or above *limit* is refused before the number is converted.
        """
        digits = text.strip().replace(",", "") if isinstance(text, str) else None
        if digits is None or not _HEX_RE.fullmatch(digits):
            raise ConfigError(
                f"invalid CPU mask {_short(str(text))!r}", hint="write it like 0000000f or 00000001,00000000"
            )
        digits = digits.lstrip("0")
        if len(digits) > (limit + 3) // 4 or (digits and int(digits, 16).bit_length() > limit):
            raise ConfigError(
                f"CPU mask {_short(text)!r} names CPUs that cannot exist on this machine",
                hint=f"CPU numbers go from 0 to {limit - 1}",
            )
        value = int(digits or "0", 16)
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
        """Return the CPUs as a frozenset (for sched_setaffinity(2))."""
        return self._cpus


def _short(text: str, width: int = 40) -> str:
    """*text* cut to *width* characters for an error message (a hostile list can be megabytes)."""
    return text if len(text) <= width else text[:width] + "…"


def choose_cpus(
    online: CpuSet, allowed: CpuSet, rt: int | None = None, preferred: CpuSet | None = None
) -> tuple[int, CpuSet]:
    """Return (real-time CPU, housekeeping CPUs) for one real-time loop: the one rule softrt uses.

    The real-time CPU is *rt*, or by default the highest-numbered CPU that is both online and
    allowed to this process (the last CPU, as cyclictest users and isolcpus= setups expect); the
    housekeeping CPUs are the other online, allowed CPUs (where the supervisor, the loads and
    the kernel's own work go). Raises ConfigError when no CPU is usable and InvalidCpu when *rt* is
    offline or not allowed. An empty housekeeping set is returned as is: whether that is allowed
    depends on the profile (see session.config.validate). *preferred* (a hybrid CPU's performance cores)
    narrows the default to its highest usable CPU: Windows and Linux number the P-cores first, so the last
    CPU of all is an E-core there.
    """
    usable = online & allowed
    if not usable:
        raise ConfigError(
            f"no online CPU is allowed to this process (online {online}, allowed {allowed})",
            hint="widen the CPU affinity (taskset, cgroup cpuset)",
        )
    if rt is None:
        rt = ((usable & preferred) or usable).last() if preferred else usable.last()
    elif rt not in online:
        raise InvalidCpu(rt, usable, "does not exist or is offline")
    elif rt not in allowed:
        raise InvalidCpu(rt, usable, "is not allowed to this process (cgroup cpuset or affinity)")
    return rt, usable - CpuSet([rt])
