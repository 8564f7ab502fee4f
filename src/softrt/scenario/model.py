"""Scenario and LoadSpec: what one column of ``softrt compare`` runs."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..cpus import CpuSet
from ..errors import ConfigError
from ..platform import get_platform

PLACEMENTS = ("housekeeping", "all")


@dataclass(frozen=True)
class LoadSpec:
    """One background load and where it runs: "housekeeping", "all", or a CPU list."""

    name: str
    cpus: str = "housekeeping"

    def resolve_cpus(self, rt_cpus: CpuSet, online: CpuSet) -> CpuSet:
        """Return the CPUs this load is placed on."""
        if self.cpus == "housekeeping":
            return online - rt_cpus
        if self.cpus == "all":
            return online
        cpus = CpuSet.parse(self.cpus, limit=get_platform().cpu_limit())  # bounded by the possible CPUs
        if not cpus <= online:
            raise ConfigError(
                f"load {self.name!r} is placed on CPUs {cpus - online}, which are not online",
                hint=f"online CPUs: {online}",
            )
        return cpus


@dataclass(frozen=True)
class Scenario:
    """A named run configuration with its loads (durations in ns; None: the command's default)."""

    name: str
    description: str = ""
    profile: str = "rt"
    wait: str = "spin"
    device: str = "virtual"
    duration_ns: int | None = None
    loads: tuple[LoadSpec, ...] = field(default_factory=tuple)
    loads_on_rt_cpus: bool = False  # the seed's caveat, declared on purpose
    trace: bool | None = None  # None: the command's --trace/--no-trace
    trace_mode: str | None = None  # "auto", "full" or "lean"; None: the command's --trace-mode
    samples: str | None = None  # "all" or "late"; None: the command's --samples
    dc_lock: bool = False  # EtherCAT: phase-lock the host cycle to the drives' SYNC0
    dc_shift_ns: int = 0  # with dc_lock: the frame this long after SYNC0 (negative: before)
    ecat_drives: str | None = None  # an EtherCAT drive description (TOML); relative to the scenario file
    source: str = "built-in"

    @property
    def tuned(self) -> bool:
        """True for scenarios that apply the real-time profile (what --require judges)."""
        return self.profile == "rt"
