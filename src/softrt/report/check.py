"""The ``softrt check`` taken with a run, as the report shows it (report layer).

``softrt run --check`` keeps the head of the check's report in the run's summary (ready, verdict,
counts, fix_first) and the full report beside it in ``check.json`` (docs/run-format.md,
schema.check.CheckReport), whose findings the report lists.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..errors import ConfigError
from ..schema.summary import RunSummary
from ..schema.text import printable
from ..store.validate import load_json


@dataclass(frozen=True)
class RunCheck:
    """The ``softrt check`` taken with a run, as the report shows it: the summary's ready, verdict
    and counts, and the findings of the full report (``check.json``) where it is there. A value the
    files hold that is not what softrt writes is kept as it is: the page prints it as text."""

    ready: object = None
    verdict: object = None
    counts: object = None  # status -> number of findings
    findings: tuple[dict[str, object], ...] = ()  # check.json's findings (schema.check.Finding)


def read_check(path: Path, summary: RunSummary) -> RunCheck | None:
    """The ``softrt check`` taken with the run (``softrt run --check``): the summary's
    ``check`` {ready, verdict, counts}, with the findings of the full report in ``check.json`` when
    it is there (docs/run-format.md); where the summary has none, the file's own."""
    full: object = {}
    file = path / "check.json"
    if file.is_file():
        try:
            full = load_json(file, "check report")  # bounded (store.validate)
        except ConfigError:
            full = {"verdict": f"check.json is unreadable ({printable(file)})"}
    full = full if isinstance(full, dict) else {}
    raw = full.get("findings")
    findings = tuple(f for f in raw if isinstance(f, dict)) if isinstance(raw, list) else ()
    c = summary.check
    if c is not None:
        return RunCheck(ready=c.ready, verdict=c.verdict, counts=c.counts, findings=findings)
    if not full:
        return None
    return RunCheck(ready=full.get("ready"), verdict=full.get("verdict"), counts=full.get("counts"), findings=findings)
