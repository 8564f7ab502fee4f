"""What ``softrt check`` finds, as documents: statuses, severities, a finding and the report (schema layer).

A :class:`Finding` is what every check of both audit backends returns (audit.model's ``Found`` makes
it); :class:`CheckReport` is the whole report as ``softrt check --json`` prints it and ``softrt run
--check`` keeps it (``check.json``, docs/run-format.md), built once from the audit's Report.

Severities follow the kernel's real-time configuration checklist
(Documentation/core-api/real-time/kernel-configuration.rst, "Severity: fatal/high/medium/info"),
with *low* in place of *info*. A finding's status says whether this machine meets the expectation;
its severity says how much that matters for a 250 µs cyclic loop.
"""

from __future__ import annotations

import enum
from typing import Any

from .audit import LiveSample
from .doc import Doc, many, obj, opt


class Status(str, enum.Enum):
    """Whether the machine meets a check's expectation."""

    OK = "ok"
    WARN = "warn"
    FAIL = "fail"
    NA = "n/a"  # the check does not apply here, or its source could not be read (reason given)


class Severity(str, enum.Enum):
    """How much a finding matters (kernel-configuration.rst's scale)."""

    FATAL = "fatal"
    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"

    @property
    def rank(self) -> int:
        """0 for fatal … 3 for low (sort key: most important first)."""
        return _RANK[self]


_RANK = {Severity.FATAL: 0, Severity.HIGH: 1, Severity.MEDIUM: 2, Severity.LOW: 3}


class Finding(Doc):
    """The result of one check.

    Attributes:
        id: stable identifier, ``group.name`` (``irq.nic``); scripts key on it.
        group: the output group (``cores``, ``idle``, …): the part of ``id`` before the dot unless given.
        title: what was checked, for people.
        status: ok / warn / fail / n/a.
        severity: how much a failure matters.
        summary: one line saying what was found (for n/a: why it does not apply).
        evidence: what was read, one ``source: value`` string each.
        why: one line on why it matters for a 250 µs loop.
        fix: the exact fix (command, sysctl or kernel parameter); None when nothing to fix.
        tunable: ``softrt tune`` applies the fix at run time.
        reboot: the fix is a kernel command-line parameter (needs a reboot).
        unreadable: (n/a only) its source exists on such a machine but could not be read here (a
            tool missing or refused, a file unreadable), as opposed to "does not apply here".
        reader: (unreadable only) what would read it: elevation, a working PowerShell, powercfg…
            (None: the backend's privilege, root or Administrator).
    """

    id: str
    group: str = ""
    title: str
    status: Status
    severity: Severity
    summary: str
    evidence: tuple[str, ...] = ()
    why: str = ""
    fix: str | None = None
    tunable: bool = False
    reboot: bool = False
    unreadable: bool = False
    reader: str | None = opt()

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.group:
            object.__setattr__(self, "group", self.id.split(".", 1)[0])

    @property
    def blocking(self) -> bool:
        """True when this finding alone makes a 250 µs loop not expected to hold."""
        return self.status is Status.FAIL and self.severity.rank <= Severity.HIGH.rank

    @property
    def unknown(self) -> bool:
        """True when this finding keeps the verdict from READY without failing: a fatal check that is
        n/a, or a high one that could not be read (what it would have said is not known)."""
        return self.status is Status.NA and (
            self.severity is Severity.FATAL or (self.unreadable and self.severity is Severity.HIGH)
        )


class CheckReport(Doc):
    """``softrt check --json`` and a run's ``check.json``: the verdict, its counts and every finding."""

    rt_cpus: str | None = None
    housekeeping_cpus: str | None = None
    ready: bool | None = None
    unknown: list[str] = many()  # the ids of the fatal/high checks that could not be told
    verdict: str | None = None
    counts: dict[str, int] = obj()  # findings per status
    fix_first: list[str] = many()
    groups: dict[str, str] = obj()  # output group -> its heading, in output order
    findings: list[Finding] = many()
    sample: LiveSample | None = None
    root: str | None = None
    meta: dict[str, Any] | None = opt()
