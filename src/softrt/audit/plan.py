"""The tune model both audit backends share: a :class:`Plan` of :class:`Step` and its :class:`Result` (audit layer).

``softrt tune`` plans run-time changes (Linux: kernel files, thread affinities, systemd units; Windows:
power, RSS and service settings, :mod:`softrt.platform.windows.winsettings`), applies them and reverts them
from a state file. The model is neutral so that neither backend imports the other (issue 29); the
kernel command line it names is Documentation/admin-guide/kernel-parameters.txt's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..cpus import CpuSet
from ..platform.journal import Outcome
from ..platform.windows import winsettings
from ..schema.doc import Doc, many, opt
from .model import Finding, Report, Severity

FILE, AFFINITY, SERVICE = "file", "affinity", "service"


class Step(Doc):
    """One run-time change (a step of ``softrt tune --json``'s plan).

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
    tid: int | None = opt()
    starttime: int | None = opt()
    comm: str | None = opt()

    def describe(self) -> str:
        """``/proc/irq/38/smp_affinity``, ``move bash (812)``, ``stop irqbalance.service``."""
        if self.kind == AFFINITY:
            return f"move {self.comm} ({self.target}) to CPUs {self.after}"
        if self.kind == SERVICE:
            return f"systemctl stop {self.target}"
        if self.kind in winsettings.KINDS:  # the exact Windows commands
            return winsettings.command_line(winsettings.commands(self.kind, self.target, self.now, self.after))
        return self.target


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
    fixed_irqs: list[str] = field(default_factory=list)  # IRQs on the RT CPUs that only a reboot moves
    notes: list[str] = field(default_factory=list)  # the trade-offs of steps it takes
    report: Report | None = None

    @property
    def unreadable(self) -> list[Finding]:
        """The checks that could not be read, most severe first: nothing is planned for them (issue 34)."""
        found = self.report.findings if self.report is not None else []
        return sorted((f for f in found if f.unreadable), key=lambda f: f.severity.rank)

    @property
    def blind(self) -> bool:
        """True when a fatal or high check is unknown: "no change needed" cannot be said."""
        return bool(self.report is not None and self.report.unknown)

    @property
    def kernel_cmdline(self) -> str:
        """The parameters to add to the kernel command line (empty when none)."""
        return " ".join(p for p, _ in self.kernel_params)

    def document(self) -> TunePlan:
        """The plan as ``softrt tune --json`` prints it."""
        return TunePlan(
            rt_cpus=str(self.rt_cpus),
            housekeeping_cpus=str(self.housekeeping),
            root=self.root,
            steps=list(self.steps),
            kernel_cmdline=self.kernel_cmdline,
            kernel_params=[KernelParam(param=p, check=c) for p, c in self.kernel_params],
            manual=[ManualFix(check=c, fix=f) for c, f in self.manual],
            skipped=self.skipped,
            reboot_only_irqs=self.fixed_irqs,
            notes=self.notes,
            unknown=[f.id for f in self.report.unknown] if self.report is not None else [],
            unreadable=[
                UnreadableCheck(check=f.id, severity=f.severity, summary=f.summary, reader=f.reader)
                for f in self.unreadable
            ],
        )


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

    def document(self) -> TuneResult:
        """The outcome as ``softrt tune --json`` prints it (the state file's path None when none was kept)."""
        return TuneResult(
            state_path=str(self.state_path) if self.saved else None, complete=self.complete, outcomes=self.outcomes
        )


class KernelParam(Doc):
    """A kernel command-line parameter the plan asks for, and the check that wants it."""

    param: str
    check: str


class ManualFix(Doc):
    """A fix nobody applies at run time: the check and its fix, to do by hand."""

    check: str
    fix: str


class UnreadableCheck(Doc):
    """A check that could not be read: nothing is planned for it."""

    check: str
    severity: Severity
    summary: str
    reader: str | None = None


class TunePlan(Doc):
    """``softrt tune --json``'s plan: every step, the kernel parameters, what is left to do by hand."""

    rt_cpus: str
    housekeeping_cpus: str
    root: str
    steps: list[Step] = many()
    kernel_cmdline: str = ""
    kernel_params: list[KernelParam] = many()
    manual: list[ManualFix] = many()
    skipped: list[str] = many()
    reboot_only_irqs: list[str] = many()
    notes: list[str] = many()
    unknown: list[str] = many()
    unreadable: list[UnreadableCheck] = many()


class TuneResult(Doc):
    """``softrt tune --json``'s outcome of an apply or a revert."""

    state_path: str | None = None
    complete: bool = True
    outcomes: list[Outcome] = many()


#: The kinds of change, in the order a summary lists them (:func:`change_kind`).
KINDS = (
    "IRQ affinity",
    "default IRQ affinity",
    "kernel settings",
    "idle states",
    "CPU governor",
    "threads",
    "services",
    "settings",
)
_SHORT_PREFIXES = (
    "/proc/sys/kernel/",
    "/proc/sys/",
    "/sys/devices/virtual/",
    "/sys/devices/system/",
    "/sys/kernel/mm/",
    "/sys/kernel/",
)


def change_kind(target: str) -> str:
    """The kind of change an outcome's *target* names (a kernel file, ``comm (pid/tid)``, a unit)."""
    if target == "/proc/irq/default_smp_affinity":
        return "default IRQ affinity"
    if target.startswith("/proc/irq/"):
        return "IRQ affinity"
    if "/cpuidle/" in target:
        return "idle states"
    if "/cpufreq/" in target:
        return "CPU governor"
    if target.startswith("/"):
        return "kernel settings"
    if target.endswith((".service", ".timer")):
        return "services"
    if target.endswith(")") and "/" in target.rpartition("(")[2]:
        return "threads"
    return "settings"  # Windows: registry values, services by name (audit/tune/windows.py)


def short_target(target: str) -> str:
    """``sched_rt_runtime_us`` for ``/proc/sys/kernel/sched_rt_runtime_us`` (kernel settings in a summary)."""
    for prefix in _SHORT_PREFIXES:
        if target.startswith(prefix):
            return target[len(prefix) :]
    return target
