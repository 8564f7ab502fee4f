"""RunConfig: what one run does, in integer nanoseconds (schema layer), and the range checks of its values.

The range checks of a configuration's own values live here, beside the type, for ``softrt run``
and ``softrt watch`` alike (each raises one ConfigError naming the option and an example). The
checks against this machine and its files (CPUs, devices, disk space) and against other layers'
names (wait strategies, sample modes, requirements) are session.config's ``resolve_plan``;
everything below the session reads this type.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..units import NS_PER_S, NS_PER_US, format_duration_s, format_ns
from .doc import Doc, count, opt

PROFILES = ("rt", "none")
MIN_PERIOD_NS = 5 * NS_PER_US  # below this a CPython loop cannot even read the clock twice reliably
MAX_PERIOD_NS = 1 * NS_PER_S
#: A safety bound on --duration (a typo such as 72d for 72h), not a limit on long runs: 24-72 h
#: qualification runs are normal (issue 10); raise it with --max-duration.
DEFAULT_MAX_DURATION_NS = 7 * 86400 * NS_PER_S
MAX_KEEP_LATE = 100_000  # late cycles kept with their causes in summary.json
#: ``--late-threshold``'s default, its one home: a cycle is late when its period exceeds nominal + this
#: (analysis.cycles.LateRule; ``softrt run``, ``compare`` and ``watch``).
DEFAULT_THRESHOLD_NS = 20 * NS_PER_US
#: The same as --late-threshold's default text.
DEFAULT_THRESHOLD_TEXT = f"{DEFAULT_THRESHOLD_NS // NS_PER_US}us"
#: What a run's trace records (--trace-mode; docs/trace.md, "Lean tracing"): auto is lean for a
#: sleeping loop (whose wake-up pays for each event: ~1.9 µs of its median with the full trace, ~0.6
#: lean) and full for the others (a spinning or polling loop has no wake-up path to lengthen).
TRACE_MODES = ("auto", "full", "lean")


def effective_trace_mode(trace_mode: str, wait: str) -> str:
    """``full`` or ``lean``: what a run with *trace_mode* and *wait* records (``auto`` decided)."""
    if trace_mode == "auto":
        return "lean" if wait == "sleep" else "full"
    return trace_mode


@dataclass(frozen=True)
class RunConfig:
    """One run of the cyclic test (times in integer nanoseconds)."""

    period_ns: int = 250 * NS_PER_US
    duration_ns: int = 10 * NS_PER_S
    cpu: int | None = None  # None: the highest-numbered online CPU allowed to us
    priority: int = 80
    profile: str = "rt"
    wait: str = "spin"
    device: str = "virtual"  # or "ethercat:IFACE"
    bus_timeout_ns: int = 10_000_000  # EtherCAT: no valid frame for this long fails the run (bus lost)
    margin_ns: int = 50 * NS_PER_US  # hybrid: sleep until this long before the edge, then spin
    axes: int = 1
    motion: Any = None  # softrt.motion.MotionConfig; None: its defaults with ``axes``
    out_dir: Path = Path("softrt-runs")
    max_duration_ns: int = DEFAULT_MAX_DURATION_NS
    scenario: str = "run"
    check: bool = False  # take a `softrt check` of the RT CPU before the run (stored with it)
    trace: bool = True  # trace the RT CPU and explain late cycles (where tracefs is usable)
    trace_mode: str = "auto"  # "full", "lean" (no timer interrupt or wake-up recorded), "auto": TRACE_MODES
    late_threshold_ns: int = DEFAULT_THRESHOLD_NS  # a cycle is late when its period exceeds nominal + this
    require: str | None = None  # --require: what the verdict judges (None: the seed's, analysis.verdict)
    keep_late: int = 100  # the worst late cycles kept with their causes
    samples: str | None = None  # "all" or "late" (store.late); None: "late" for runs longer than 1 h
    dc_lock: bool = False  # EtherCAT: phase-lock the host cycle to the drives' SYNC0
    dc_shift_ns: int = 0  # with dc_lock: the frame this long after SYNC0 (negative: before)
    ecat_drives: str | None = None  # a drive description (TOML, ethercat.drives) for --device ethercat:IFACE

    def document(self) -> Config:
        """This configuration as the summary's and config.json's document: every field, in order, by
        keyword (the output directory as text, the motion as its fields), checked once when built."""
        return Config.build(**{f.name: _json_value(getattr(self, f.name)) for f in dataclasses.fields(self)})


def _json_value(value: object) -> object:
    """A field's value as JSON holds it: a path as text, the motion as its own JSON form
    (MotionConfig.to_dict: an unlimited jerk is null, since JSON has no infinity, RFC 8259 section 6)."""
    if isinstance(value, Path):
        return str(value)
    to_dict = getattr(value, "to_dict", None)
    return to_dict() if callable(to_dict) else value


class Config(Doc):
    """A run's configuration as summary.json and config.json hold it: :meth:`RunConfig.document`'s,
    a watch's own options, or an imported tool's command line (files written before hold fewer keys)."""

    period_ns: int | None = count(omit_none=True)
    duration_ns: int | None = count(omit_none=True)
    cpu: int | None = opt()
    priority: int | None = opt()
    profile: str | None = opt()
    wait: str | None = opt()
    device: str | None = opt()
    margin_ns: int | None = opt()
    axes: int | None = count(omit_none=True)
    motion: dict[str, Any] | None = opt()  # motion.config.MotionConfig's fields
    out_dir: str | None = opt()
    max_duration_ns: int | None = opt()
    scenario: str | None = opt()
    check: bool | None = opt()
    trace: bool | None = opt()
    trace_mode: str | None = opt()  # "auto", "full" or "lean" (--trace-mode; files written before: full)
    late_threshold_ns: int | None = opt()
    require: str | None = opt()  # --require (None: the seed's requirement)
    keep_late: int | None = opt()
    samples: str | None = opt()  # "all", "late" (--samples)
    tool: str | None = opt()  # imports: "cyclictest" or "oslat", its command line and version
    cmdline: str | None = opt()
    version: str | None = opt()
    threads: int | None = opt()
    cpus: list[int | None] | None = opt()
    histogram_range_ns: int | None = opt()
    bus_timeout_ns: int | None = opt()  # EtherCAT runs (RunConfig's fields past the summary's first ones)
    dc_lock: bool | None = opt()
    dc_shift_ns: int | None = opt()
    ecat_drives: str | None = opt()


def check_period_ns(period_ns: int, example: str = "e.g. --period 250us") -> None:
    """The loop's period: MIN_PERIOD_NS to MAX_PERIOD_NS."""
    if not MIN_PERIOD_NS <= period_ns <= MAX_PERIOD_NS:
        raise ConfigError(
            f"period {format_ns(period_ns)} is out of range",
            hint=f"use {format_ns(MIN_PERIOD_NS, digits=0)} to {format_ns(MAX_PERIOD_NS, 'ms', 0)}, {example}",
        )


def check_duration(duration_ns: int, max_duration_ns: int) -> None:
    """Raise ConfigError unless 0 < *duration_ns* <= *max_duration_ns* (--duration, --max-duration)."""
    if duration_ns <= 0:
        raise ConfigError(
            f"duration must be positive, got {format_ns(duration_ns, 's', 3)}", hint="e.g. --duration 10s"
        )
    if duration_ns > max_duration_ns:
        raise ConfigError(
            f"duration {_long(duration_ns)} exceeds the safety bound of {_long(max_duration_ns)} (--max-duration)",
            hint=f"check --duration, or raise the bound explicitly, e.g. --max-duration "
            f"{-(-duration_ns // (86400 * NS_PER_S))}d",
        )


def _long(ns: int) -> str:
    """A duration for the safety-bound message: "259,200 s (3 d 00 h)"."""
    text = format_ns(ns, "s", 0)
    return f"{text} ({format_duration_s(ns / NS_PER_S)})" if ns >= 120 * NS_PER_S else text


def check_late_threshold_ns(threshold_ns: int) -> None:
    """The late threshold: more than 0, at most MAX_PERIOD_NS."""
    if not 0 < threshold_ns <= MAX_PERIOD_NS:
        raise ConfigError(
            f"late threshold {format_ns(threshold_ns)} is out of range",
            hint="use more than 0 and at most 1 s, e.g. --late-threshold 20us",
        )


def check_keep_late(keep_late: int) -> None:
    """The late cycles kept with their causes: 0 to MAX_KEEP_LATE."""
    if not 0 <= keep_late <= MAX_KEEP_LATE:
        raise ConfigError(f"--keep-late must be 0 to {MAX_KEEP_LATE:,}, got {keep_late}", hint="e.g. --keep-late 100")


def check_timing(config: RunConfig) -> None:
    """A run's timing: its period, its duration (at least two periods), its priority and profile."""
    check_period_ns(config.period_ns)
    check_duration(config.duration_ns, config.max_duration_ns)
    if config.duration_ns < 2 * config.period_ns:
        raise ConfigError("duration must cover at least two periods", hint="lengthen --duration")
    if not 1 <= config.priority <= 99:
        raise ConfigError(f"priority {config.priority} is outside SCHED_FIFO's 1-99", hint="e.g. --priority 80")
    if config.profile not in PROFILES:
        raise ConfigError(f"unknown profile {config.profile!r}", hint=f"use one of {', '.join(PROFILES)}")


def check_bus(config: RunConfig) -> None:
    """An EtherCAT run's bus timeout and distributed-clock options."""
    if not 0 < config.bus_timeout_ns <= MAX_PERIOD_NS * 10:
        raise ConfigError(
            f"bus timeout {format_ns(config.bus_timeout_ns)} is out of range",
            hint="use more than 0 and at most 10 s, e.g. --bus-timeout 10ms",
        )
    if config.dc_lock and not config.device.startswith("ethercat:"):
        raise ConfigError(
            "--dc-lock needs an EtherCAT device (distributed clocks)",
            hint="use --device ethercat:IFACE, or drop --dc-lock",
        )
    if not abs(config.dc_shift_ns) < config.period_ns:
        raise ConfigError(
            f"--dc-shift {format_ns(config.dc_shift_ns)} must be shorter than the period",
            hint="e.g. --dc-shift -50us (the frame 50 µs before SYNC0)",
        )
