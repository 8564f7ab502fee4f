"""What an audit finds: the report, its verdict, and how a check says what it found (audit layer, pure).

The statuses, severities and the finding are the schema's documents (:mod:`softrt.schema.check`,
re-exported here); a check declares its finding once (:func:`declare`) and reports through
:class:`Found`; :class:`Report` judges the findings and is written as a :class:`CheckReport`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from ..cpus import CpuSet
from ..schema.audit import LiveSample
from ..schema.check import CheckReport, Finding, Severity, Status

__all__ = [
    "GROUPS",
    "LOOP_PERIOD_US",
    "Check",
    "Finding",
    "Found",
    "Report",
    "Severity",
    "Status",
    "crashed",
    "declare",
    "not_applicable",
]

LOOP_PERIOD_US = 250  # the seed's EtherCAT cycle; every "why" line is written against it


#: Output groups, in the order ``softrt check`` prints them (the seed's four points plus the rest).
GROUPS: dict[str, str] = {
    "cores": "Reserved cores",
    "idle": "(1) CPU idle states",
    "services": "(2) Disturbing services",
    "updates": "(3) Updates and maintenance",
    "irq": "(4) Interrupts",
    "kernel": "Kernel and CPU",
}


def not_applicable(
    id: str,
    title: str,
    reason: str,
    severity: Severity = Severity.LOW,
    *evidence: str,
    unreadable: bool = False,
    reader: str | None = None,
) -> Finding:
    """Return an n/a finding that says why (a missing file, no such hardware, …); *unreadable* when
    the source exists on such a machine but could not be read here, *reader* what would read it."""
    return Finding(
        id=id,
        title=title,
        status=Status.NA,
        severity=severity,
        summary=reason,
        evidence=tuple(evidence),
        unreadable=unreadable,
        reader=reader or None,
    )


@dataclass(frozen=True)
class Found:
    """One check's findings, its id and title said once (:func:`declare` makes it and hands it to the
    check), then ``found.ok(summary, evidence)``, ``found.fail(..., fix=...)``,
    ``found(status, ...)`` for a status computed at run time, and ``found.na(reason)``.

    *severity* is what ok/warn/fail findings carry unless one says ``severity=``; an n/a finding is
    low unless it names its own, as :func:`not_applicable`.
    """

    id: str
    title: str
    severity: Severity = Severity.LOW

    def __call__(
        self, status: Status, summary: str, evidence: Iterable[str] = (), *, severity: Severity | None = None, **kw: Any
    ) -> Finding:
        if not kw.get("reader"):
            kw.pop("reader", None)  # "" as None: the backend's own privilege reads it
        return Finding(
            id=self.id,
            title=self.title,
            status=status,
            severity=severity or self.severity,
            summary=summary,
            evidence=tuple(evidence),
            **kw,
        )

    def ok(self, summary: str, evidence: Iterable[str] = (), **kw: Any) -> Finding:
        return self(Status.OK, summary, evidence, **kw)

    def warn(self, summary: str, evidence: Iterable[str] = (), **kw: Any) -> Finding:
        return self(Status.WARN, summary, evidence, **kw)

    def fail(self, summary: str, evidence: Iterable[str] = (), **kw: Any) -> Finding:
        return self(Status.FAIL, summary, evidence, **kw)

    def na(
        self,
        reason: str,
        severity: Severity = Severity.LOW,
        *evidence: str,
        unreadable: bool = False,
        reader: str | None = None,
    ) -> Finding:
        """n/a, saying why (:func:`not_applicable`)."""
        return not_applicable(self.id, self.title, reason, severity, *evidence, unreadable=unreadable, reader=reader)

    def unreadable(
        self, reason: str, severity: Severity = Severity.LOW, *evidence: str, reader: str | None = None
    ) -> Finding:
        """n/a because the source exists on such a machine but could not be read here; *reader* would read it."""
        return self.na(reason, severity, *evidence, unreadable=True, reader=reader)


#: A check as the runners call it: the machine's facts (Linux: a Context, Windows: WinFacts) -> its finding.
Check = Callable[[Any], Finding]


def declare(id: str, title: str, severity: Severity) -> Callable[[Callable[[Any, Found], Finding]], Check]:
    """A check bound to its finding, said once: ``@declare("irq.nic", "Network-card IRQs", Severity.HIGH)``
    over ``def check_nic(ctx, found)``. The runners call the check with the facts alone and it reports
    through *found* (:class:`Found`); if it raises, :func:`crashed` reports it under the same id, title
    and severity, so a fatal or high check that could not be read keeps the verdict from READY."""
    found = Found(id, title, severity)

    def bind(check: Callable[[Any, Found], Finding]) -> Check:
        @functools.wraps(check)
        def run(facts: Any) -> Finding:
            return check(facts, found)

        run.found = found  # type: ignore[attr-defined]
        return run

    return bind


def crashed(check: Check, err: Exception) -> Finding:
    """The finding of a check whose source exists but could not be parsed: n/a, unreadable, saying why,
    under the check's own id, title and severity (:func:`declare`)."""
    found: Found = check.found  # type: ignore[attr-defined]
    return found.unreadable(f"could not be read: {err}", found.severity)


@dataclass
class Report:
    """Every finding for one set of real-time CPUs, and the verdict.

    Attributes:
        rt_cpus: the CPUs the loop will run on.
        housekeeping: every other online CPU (where everything else should run).
        findings: in output order (group, then check order).
        sample: the live sample (``None`` when not taken).
    """

    rt_cpus: CpuSet
    housekeeping: CpuSet
    findings: list[Finding]
    sample: LiveSample | None = None
    root: str = "/"
    meta: dict = field(default_factory=dict)

    @property
    def blocking(self) -> list[Finding]:
        """Failures of fatal or high severity, most severe first."""
        return sorted((f for f in self.findings if f.blocking), key=lambda f: f.severity.rank)

    @property
    def unknown(self) -> list[Finding]:
        """Fatal checks that are n/a and high ones that could not be read, most severe first."""
        return sorted((f for f in self.findings if f.unknown), key=lambda f: f.severity.rank)

    @property
    def ready(self) -> bool:
        """True when no fatal or high-severity check fails and none of them is unknown."""
        return not self.blocking and not self.unknown

    def priorities(self, limit: int = 3) -> list[Finding]:
        """The findings to fix first: failures then warnings, by severity."""
        order = {Status.FAIL: 0, Status.WARN: 1}
        todo = [f for f in self.findings if f.status in order and f.fix]
        todo.sort(key=lambda f: (order[f.status], f.severity.rank))
        return todo[:limit]

    @property
    def verdict(self) -> str:
        """One line: can a 250 µs loop be expected to hold here, and what matters most to fix."""
        cpus = (
            f"CPU {self.rt_cpus}"
            if len(self.rt_cpus) == 1
            else f"CPUs {self.rt_cpus}"
            if self.rt_cpus
            else "the RT CPU (unknown)"
        )
        if self.ready:
            lesser = [f for f in self.findings if f.status in (Status.WARN, Status.FAIL)]
            first = self.priorities(1)
            tail = f"; {len(lesser)} lesser issue(s) remain, first: {first[0].title}" if first else ""
            return (
                f"READY: a {LOOP_PERIOD_US} µs loop can be expected to hold on {cpus}{tail}. "
                f"Confirm with a measurement (softrt run)."
            )
        if not self.blocking:
            first = self.unknown[0]
            return (
                f"UNKNOWN: whether a {LOOP_PERIOD_US} µs loop can hold on {cpus} cannot be told: "
                f"{len(self.unknown)} fatal/high check(s) could not be read. First: {first.title} ({first.summary})."
            )
        first = self.blocking[0]
        unknown = f" {len(self.unknown)} more could not be read." if self.unknown else ""
        return (
            f"NOT READY: a {LOOP_PERIOD_US} µs loop cannot be expected to hold on {cpus}: "
            f"{len(self.blocking)} fatal/high problem(s). Fix first: {first.title} ({first.summary}).{unknown}"
        )

    def counts(self) -> dict[str, int]:
        """Number of findings per status."""
        out = {s.value: 0 for s in Status}
        for f in self.findings:
            out[f.status.value] += 1
        return out

    def document(self) -> CheckReport:
        """The report as ``softrt check --json`` prints it and a run's ``check.json`` holds it."""
        return CheckReport(
            rt_cpus=str(self.rt_cpus),
            housekeeping_cpus=str(self.housekeeping),
            ready=self.ready,
            unknown=[f.id for f in self.unknown],
            verdict=self.verdict,
            counts=self.counts(),
            fix_first=[f.id for f in self.priorities()],
            groups=dict(GROUPS),
            findings=list(self.findings),
            sample=self.sample,
            root=self.root,
            meta=self.meta or None,
        )
