"""Golden outputs: what softrt shows a user is byte for byte what main showed before issue 29's refactor.

Each case (tests/golden/cases.py) runs a read-only softrt command (or the report's, the import's or the
summary writer's code) in this process over fixed real inputs (tests/golden/inputs/) and compares its
normalised output with the file captured from main (tests/golden/expected/). No real-time loop runs here.
A failure names the case, shows the first lines of the diff and says how to accept an intended change.
"""

from __future__ import annotations

import difflib
import json
from pathlib import Path

import pytest

from .cases import (
    ALIASES,
    CASES,
    EXPECTED,
    INPUTS,
    OLDER_SUMMARIES,
    RERUN,
    build_world,
    expected_path,
    read_status,
    status_of,
    stored_cases,
)

DIFF_LINES = 40


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    return build_world(tmp_path_factory.mktemp("golden") / "w")


def _diff(name: str, expected: str, got: str) -> str:
    lines = list(difflib.unified_diff(expected.splitlines(keepends=True), got.splitlines(keepends=True),
                                      f"expected/{name}", f"now/{name}", n=2))
    shown = "".join(lines[:DIFF_LINES])
    more = f"\n... {len(lines) - DIFF_LINES} more diff lines" if len(lines) > DIFF_LINES else ""
    return f"{shown}{more}"


@pytest.mark.parametrize("name", list(CASES))
def test_case(world, name):
    """The case's output (and exit status, stderr) is what main printed."""
    target = expected_path(name)
    assert target.is_file(), f"golden case {name}: no stored output {target}; {RERUN}"
    expected = target.read_bytes().decode("utf-8")
    result = CASES[name](world)
    if result.out != expected:
        pytest.fail(f"golden case {name}: the output changed ({RERUN}):\n{_diff(name, expected, result.out)}",
                    pytrace=False)
    want = read_status().get(name)
    assert status_of(result) == want, f"golden case {name}: exit status/stderr {status_of(result)} != {want}; {RERUN}"


def test_every_stored_output_has_its_case():
    """No file under expected/ is left over from a case that is gone (capture.py removes them)."""
    orphans = sorted(set(stored_cases()) - (set(CASES) - set(ALIASES)))
    assert not orphans, f"stored outputs without a case: {orphans}; {RERUN}"
    assert set(read_status()) == set(CASES), f"expected/status.json does not list every case; {RERUN}"


def _summaries() -> list[Path]:
    return sorted([*INPUTS.glob("runs/*/summary.json"), *OLDER_SUMMARIES.glob("*.json"),
                   *EXPECTED.glob("import/*-summary.json"), *EXPECTED.glob("synthetic/*-summary.json")])


@pytest.mark.parametrize("path", _summaries(), ids=lambda p: p.relative_to(p.parents[2]).as_posix())
def test_summary_reads_and_rewrites(path):
    """Every summary.json of the fixtures reads as the CLI reads it; today's rewrite byte for byte."""
    from softrt.schema.summary import RunSummary
    from softrt.store.validate import load_json

    data = load_json(path, "run summary")  # the CLI's bounded reader (store.rundir.read_summary)
    summary = RunSummary.read(data, path)
    again = RunSummary.read(json.loads(json.dumps(summary.to_dict())), path)
    assert again == summary, f"{path}: reading what was written gives another summary"
    if not path.name.startswith("older-"):  # files of earlier versions are upgraded (older/rewrite-* cases)
        text = path.read_text(encoding="utf-8")
        assert json.dumps(summary.to_dict(), indent=2) + "\n" == text, f"{path}: not rewritten byte for byte; {RERUN}"
