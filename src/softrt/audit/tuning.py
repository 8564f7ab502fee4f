"""What ``softrt tune`` plans and what applying it did, for both backends (audit layer).

A :class:`Plan` is a list of :class:`Step` (write a kernel file, move a thread, stop a unit on
Linux; a power setting, a service or an adapter's RSS range on Windows), each naming the check it
fixes, plus what only a reboot or a person can change. A :class:`Result` holds one
:class:`~softrt.platform.journal.Outcome` per step applied or reverted.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..cpus import CpuSet
from ..platform import winsettings
from ..platform.journal import Outcome
from .model import Report

FILE, AFFINITY, SERVICE = "file", "affinity", "service"


@dataclass(frozen=True)
class Step:
    """One run-time change.

    ``kind`` is ``file`` (write ``after`` to kernel file ``target``), ``affinity`` (set thread
    ``tid``'s CPUs to the cpulist ``after``) or ``service`` (``systemctl stop`` unit ``target``).
    ``now`` is what was read while planning; apply reads it again just before changing it.
    """

    kind: str
    target: str
    now: str
    after: str
    check: str
    why: str
    tid: int | None = None
    starttime: int | None = None
    comm: str | None = None

    def describe(self) -> str:
        """``/proc/irq/38/smp_affinity``, ``move bash (812)``, ``stop irqbalance.service``."""
        if self.kind == AFFINITY:
            return f"move {self.comm} ({self.target}) to CPUs {self.after}"
        if self.kind == SERVICE:
            return f"systemctl stop {self.target}"
        if self.kind in winsettings.KINDS:  # the exact Windows commands
            return winsettings.command_line(winsettings.commands(self.kind, self.target, self.now, self.after))
        return self.target

    def to_dict(self) -> dict:
        """JSON-ready form (also the state file's entry)."""
        return {k: v for k, v in self.__dict__.items() if v is not None}


@dataclass
class Plan:
    """Everything ``softrt tune`` would do for *rt_cpus*."""

    rt_cpus: CpuSet
    housekeeping: CpuSet
    root: str
    steps: list[Step] = field(default_factory=list)
    kernel_params: list[tuple[str, str]] = field(default_factory=list)  # (parameter, check id)
    manual: list[tuple[str, str]] = field(default_factory=list)  # (check id, fix) applied by nobody
    skipped: list[str] = field(default_factory=list)  # what this plan leaves out, and why
    report: Report | None = None

    @property
    def kernel_cmdline(self) -> str:
        """The parameters to add to the kernel command line (empty when none)."""
        return " ".join(p for p, _ in self.kernel_params)

    def to_dict(self) -> dict:
        """JSON-ready form (``softrt tune --json``)."""
        return {"rt_cpus": str(self.rt_cpus), "housekeeping_cpus": str(self.housekeeping), "root": self.root,
                "steps": [s.to_dict() for s in self.steps], "kernel_cmdline": self.kernel_cmdline,
                "kernel_params": [{"param": p, "check": c} for p, c in self.kernel_params],
                "manual": [{"check": c, "fix": f} for c, f in self.manual], "skipped": self.skipped}


@dataclass
class Result:
    """The outcome of an apply or a revert."""

    state_path: Path
    outcomes: list[Outcome] = field(default_factory=list)
    complete: bool = True
    #: False when an apply changed nothing: no state file is kept then (a later --apply may run).
    saved: bool = True

    def count(self, status: str) -> int:
        """How many outcomes have *status*."""
        return sum(1 for o in self.outcomes if o.status == status)

    def to_dict(self) -> dict:
        """JSON-ready form."""
        return {"state_path": str(self.state_path) if self.saved else None, "complete": self.complete,
                "outcomes": [o.to_dict() for o in self.outcomes]}
