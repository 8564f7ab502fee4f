"""Findings, the report's verdict and its JSON form."""

from __future__ import annotations

import json

from softrt.audit import Finding, Report, Severity, Status
from softrt.cpus import CpuSet


def _f(id, status, severity, fix="do it"):
    return Finding(
        id=id,
        title=id.title(),
        status=status,
        severity=severity,
        summary=f"{id} summary",
        evidence=("a: 1",),
        why="because",
        fix=fix,
    )


def _report(*findings):
    return Report(CpuSet([3]), CpuSet([0, 1, 2]), list(findings))


def test_ready_when_only_medium_failures_and_warnings():
    r = _report(
        _f("cores.isolation", Status.FAIL, Severity.MEDIUM),
        _f("kernel.preemption", Status.WARN, Severity.HIGH),
        _f("kernel.swap", Status.OK, Severity.LOW),
    )
    assert r.ready
    assert r.verdict.startswith("READY")
    assert "Isolation" in r.verdict or "Cores.Isolation" in r.verdict


def test_not_ready_names_the_most_severe_failure_first():
    r = _report(
        _f("irq.nic", Status.FAIL, Severity.HIGH),
        _f("kernel.preemption", Status.FAIL, Severity.FATAL),
        _f("kernel.swap", Status.WARN, Severity.LOW),
    )
    assert not r.ready
    assert [f.id for f in r.blocking] == ["kernel.preemption", "irq.nic"]
    assert "NOT READY" in r.verdict and "Kernel.Preemption" in r.verdict and "2 fatal/high" in r.verdict
    assert [f.id for f in r.priorities(2)] == ["kernel.preemption", "irq.nic"]


def test_na_never_blocks():
    r = _report(_f("kernel.governor", Status.NA, Severity.HIGH, fix=None))
    assert r.ready and r.counts()["n/a"] == 1


def test_to_dict_is_json_and_complete():
    r = _report(_f("irq.nic", Status.FAIL, Severity.HIGH), _f("kernel.swap", Status.OK, Severity.LOW, fix=None))
    d = json.loads(json.dumps(r.document().to_dict()))
    assert d["ready"] is False and d["rt_cpus"] == "3" and d["housekeeping_cpus"] == "0-2"
    assert d["findings"][0] == {
        "id": "irq.nic",
        "group": "irq",
        "title": "Irq.Nic",
        "status": "fail",
        "severity": "high",
        "summary": "irq.nic summary",
        "evidence": ["a: 1"],
        "why": "because",
        "fix": "do it",
        "tunable": False,
        "reboot": False,
        "unreadable": False,
    }
    assert d["fix_first"] == ["irq.nic"]
    assert d["counts"] == {"ok": 1, "warn": 0, "fail": 1, "n/a": 0}


def test_a_check_s_factory_says_its_id_title_and_severity_once():
    """Found carries the id, the title and the default severity into every finding of its check; a finding may
    name another severity, and n/a is low unless it says otherwise (as not_applicable)."""
    from softrt.audit.model import Found, not_applicable

    found = Found("kernel.swap", "Swap", Severity.MEDIUM)
    assert found.fail("on", ("swap: 1",), why="w", fix="swapoff -a", tunable=True) == Finding(
        id="kernel.swap",
        title="Swap",
        status=Status.FAIL,
        severity=Severity.MEDIUM,
        summary="on",
        evidence=("swap: 1",),
        why="w",
        fix="swapoff -a",
        tunable=True,
    )
    assert found.ok("off").status is Status.OK and found.warn("x", severity=Severity.LOW).severity is Severity.LOW
    assert found(Status.WARN, "x").status is Status.WARN
    assert found.na("no /proc/swaps") == not_applicable("kernel.swap", "Swap", "no /proc/swaps")
    unread = found.unreadable("refused", Severity.HIGH, "ev", reader="root")
    assert (unread.status, unread.severity, unread.evidence, unread.unreadable, unread.reader) == (
        Status.NA,
        Severity.HIGH,
        ("ev",),
        True,
        "root",
    )
