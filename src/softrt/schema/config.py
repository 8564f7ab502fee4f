"""RunConfig: what one run does, in integer nanoseconds (schema layer: a typed value, no checks).

The checks against this machine and its files (CPUs, devices, disk space) are session.config's
``validate``; everything below the session reads this type.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..units import NS_PER_S, NS_PER_US

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
    late_threshold_ns: int = DEFAULT_THRESHOLD_NS  # a cycle is late when its period exceeds nominal + this
    require: str | None = None  # --require: what the verdict judges (None: the seed's, analysis.verdict)
    keep_late: int = 100  # the worst late cycles kept with their causes
    samples: str | None = None  # "all" or "late" (store.late); None: "late" for runs longer than 1 h
    dc_lock: bool = False  # EtherCAT: phase-lock the host cycle to the drives' SYNC0
    dc_shift_ns: int = 0  # with dc_lock: the frame this long after SYNC0 (negative: before)
    ecat_drives: str | None = None  # a drive description (TOML, ethercat.drives) for --device ethercat:IFACE

    def to_dict(self) -> dict:
        """Return a JSON-ready dict (config.json)."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        out["out_dir"] = str(self.out_dir)
        if dataclasses.is_dataclass(self.motion):
            out["motion"] = dataclasses.asdict(self.motion)
        return out
