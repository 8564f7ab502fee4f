"""The ``softrt check`` taken with a run, as the report shows it (report layer).

``softrt run --check`` keeps the head of the check's report in the run's summary (ready, verdict,
counts, fix_first) and the full report beside it in ``check.json`` (docs/run-format.md): both are
the document schema.check.CheckReport. The report shows the summary's head with the findings of
``check.json``; a ``check.json`` that does not read is named in one line, not shown in part.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..errors import ConfigError
from ..schema.check import CheckReport
from ..schema.summary import RunSummary
from ..store.validate import load_json


@dataclass(frozen=True)
class RunCheck:
    """The ``softrt check`` taken with a run: its report (the summary's head, with ``check.json``'s
    findings) and, when ``check.json`` is there but does not read, why."""

    report: CheckReport | None  # None: only a check.json that does not read
    unreadable: str | None = None


def read_check(path: Path, summary: RunSummary) -> RunCheck | None:
    """The ``softrt check`` taken with the run (``softrt run --check``): the summary's ``check``
    {ready, verdict, counts} with the findings of ``check.json`` when it is there; where the summary
    has none, the file's own. None when the run was taken without a check."""
    full: CheckReport | None = None
    unreadable = None
    file = path / "check.json"
    if file.is_file():
        try:  # bounded (store.validate), then every finding checked as a document
            full = CheckReport.from_dict(load_json(file, "check report"), file)
        except ConfigError as err:
            unreadable = err.msg
    head = summary.check or full
    if head is None:
        return None if unreadable is None else RunCheck(None, unreadable)
    return RunCheck(head.replace(findings=full.findings) if full else head, unreadable)
