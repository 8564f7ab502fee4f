"""Validating a RunConfig (schema.config) and resolving it, once, into the run's plan (session layer).

:func:`resolve_plan` checks a configuration before anything is started or written and settles what
the run derives from it (the RT CPU and the housekeeping CPUs by cpus.choose_cpus, the device's
options, the motion profile, the sample policy of store.late) into one frozen :class:`RunPlan` that
the rest of the run only reads (issue 29: the run chose its CPUs four times before).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from ..analysis.require import parse_requirements
from ..board import DeviceOptions, check_device_spec
from ..cpus import CpuSet, choose_cpus
from ..errors import ConfigError
from ..loop.cyclic import WAITS
from ..motion.config import MAX_AXES
from ..platform import performance_cpus
from ..schema.config import (
    TRACE_MODES,
    RunConfig,
    check_bus,
    check_keep_late,
    check_late_threshold_ns,
    check_timing,
)
from ..schema.text import printable
from ..store.late import MODES as SAMPLE_MODES
from ..store.late import resolve_mode
from ..store.rundir import check_space
from ..store.validate import read_bounded
from ..units import format_ns


@dataclass(frozen=True)
class RunPlan:
    """A run's configuration checked and resolved once; the run reads it, never derives it again."""

    #: The configuration with its defaults resolved: ``cpu`` (None for ``--profile none``, whose loop
    #: is not pinned), ``samples`` and, for the seed's motion test, ``motion``.
    config: RunConfig
    #: The real-time CPU (``--cpu``, or the default of cpus.choose_cpus): the loop's under ``--profile
    #: rt``, and the one ``--check`` audits.
    rt_cpu: int
    #: The other online CPUs allowed to this process: the supervisor's, the loads' and the kernel's.
    housekeeping: CpuSet
    #: What the device is opened with (board.open_device; EtherCAT: bus timeout, DC lock, drives).
    device_options: DeviceOptions | None  # None: a device that takes none (the virtual board)

    @property
    def motion(self):  # softrt.motion.MotionConfig, or None for a user's own step
        return self.config.motion

    @property
    def samples(self) -> str | None:
        """The samples kept: ``all`` or ``late`` (store.late)."""
        return self.config.samples


def validate(config: RunConfig, online: CpuSet, allowed: CpuSet) -> RunConfig:
    """Check *config*; return it with defaults resolved (cpu, samples). Raise ConfigError."""
    return resolve_plan(config, online, allowed, motion=False).config


def resolve_plan(config: RunConfig, online: CpuSet, allowed: CpuSet, *, motion: bool = True) -> RunPlan:
    """Check *config* against this machine's *online* and *allowed* CPUs and resolve it (with the
    seed's *motion* test, its motion profile too); raise ConfigError before anything starts."""
    _check(config)
    options = device_options(config)  # a bad drive description is bad input before anything starts
    cpu, housekeeping = choose_cpus(online, allowed, config.cpu, None if config.cpu is not None else performance_cpus())
    if config.profile == "rt" and not housekeeping:
        # A SCHED_FIFO task spinning on every CPU we may use would starve the kernel's work there
        # and the supervisor, which must drain the ring from a housekeeping CPU.
        raise ConfigError(
            f"CPU {cpu} is the only CPU this process may use; softrt keeps one housekeeping CPU free",
            hint="widen the CPU affinity (taskset, cgroup cpuset) or use --profile none",
        )
    config = dataclasses.replace(
        config, cpu=cpu if config.profile == "rt" else None, samples=resolve_mode(config.samples, config.duration_ns)
    )
    if motion:
        config = resolve_motion(config)
    return RunPlan(config=config, rt_cpu=cpu, housekeeping=housekeeping, device_options=options)


def _check(config: RunConfig) -> None:
    """Check a RunConfig's own values (ConfigError naming the option and its fix)."""
    check_timing(config)
    if config.wait not in WAITS:
        raise ConfigError(f"unknown wait strategy {config.wait!r}", hint=f"use one of {', '.join(WAITS)}")
    if config.wait == "hybrid" and not 0 < config.margin_ns < config.period_ns:
        raise ConfigError(
            f"hybrid margin {format_ns(config.margin_ns)} must be between 0 and the period", hint="e.g. --margin 50us"
        )
    check_late_threshold_ns(config.late_threshold_ns)
    if config.trace_mode not in TRACE_MODES:
        raise ConfigError(f"unknown --trace-mode {config.trace_mode!r}", hint=f"use one of {', '.join(TRACE_MODES)}")
    check_keep_late(config.keep_late)
    if config.samples is not None and config.samples not in SAMPLE_MODES:
        raise ConfigError(f"unknown --samples value {config.samples!r}", hint=f"use one of {', '.join(SAMPLE_MODES)}")
    if config.require is not None:
        parse_requirements(config.require)  # what the verdict judges: bad input before anything starts
    check_device_spec(config.device)
    check_bus(config)
    if not 1 <= config.axes <= MAX_AXES:
        raise ConfigError(f"axes must be 1 to {MAX_AXES}, got {config.axes}", hint="e.g. --axes 1")


def device_options(config: RunConfig) -> DeviceOptions | None:
    """Return the options the device is opened with (``board.open_device``; EtherCAT: the bus
    timeout, the DC phase lock, the drive description; None for the virtual board); raise ConfigError."""
    if config.ecat_drives is not None and not config.device.startswith("ethercat:"):
        raise ConfigError(
            "--ecat-drives describes EtherCAT drives, but the device is " + repr(config.device),
            hint="add --device ethercat:IFACE, or leave out --ecat-drives",
        )
    if not config.device.startswith("ethercat:"):
        return None
    drives = None
    if config.ecat_drives is not None:
        from ..ethercat.drives import MAX_FILE_BYTES, load_drives

        raw = read_bounded(
            config.ecat_drives,
            "drive description",
            max_bytes=MAX_FILE_BYTES,
            hint="give a drive description: a few lines of TOML (docs/ethercat.md, 'Drive descriptions')",
        )
        drives = load_drives(raw, printable(config.ecat_drives))
    return DeviceOptions(config.bus_timeout_ns, config.dc_lock, config.dc_shift_ns, drives)


def disk_estimate(config: RunConfig) -> tuple[str, int]:
    """Check *config* and its disk space as the run will (ConfigError when it would be refused);
    return what it keeps (``all``/``late``) and the bytes it is estimated to need
    (store.rundir.space_needed), for the command line to say before a long run starts."""
    from ..platform import get_platform

    plat = get_platform()
    config = validate(config, plat.online_cpus(), plat.allowed_cpus())
    needed = check_space(Path(config.out_dir), config.duration_ns // config.period_ns, config.samples, config.period_ns)
    return config.samples, needed


def resolve_motion(config: RunConfig) -> RunConfig:
    """Return *config* with a MotionConfig for its axes (the seed's motion test)."""
    from ..motion import MotionConfig

    motion = config.motion if config.motion is not None else MotionConfig(axes=config.axes)
    if motion.axes != config.axes:
        motion = dataclasses.replace(motion, axes=config.axes)
    # Before anything is recorded: a move the run cannot count in int64 cycles is bad input, not a crash later.
    motion.check_run(config.period_ns, config.max_duration_ns // config.period_ns)
    return dataclasses.replace(config, motion=motion)
