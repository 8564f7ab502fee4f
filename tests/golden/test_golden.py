"""Golden outputs: what softrt shows a user is byte for byte what main showed before issue 29's refactor.

Each case (tests/golden/cases.py) runs a read-only softrt command (or the report's, the import's or the
summary writer's code) in this process over fixed real inputs (tests/golden/inputs/) and compares its
normalised output with the file captured from main (tests/golden/expected/). No real-time loop runs here.
A failure names the case, shows the first lines of the diff and says how to accept an intended change.
"""

from __future__ import annotations

import difflib
import json
import traceback
from pathlib import Path

import pytest

from .cases import (
    ALIASES,
    CASES,
    EXPECTED,
    expected_path,
    read_status,
    status_of,
    stored_cases,
)
from .world import INPUTS, OLDER_SUMMARIES, RERUN, build_world

DIFF_LINES = 40
#: On one pytest-xdist worker, so the world is built once (pyproject.toml: --dist loadgroup).
pytestmark = pytest.mark.xdist_group("golden")


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    return build_world(tmp_path_factory.mktemp("golden") / "w")


def _diff(name: str, expected: str, got: str) -> str:
    lines = list(
        difflib.unified_diff(
            expected.splitlines(keepends=True), got.splitlines(keepends=True), f"expected/{name}", f"now/{name}", n=2
        )
    )
    shown = "".join(lines[:DIFF_LINES])
    more = f"\n... {len(lines) - DIFF_LINES} more diff lines" if len(lines) > DIFF_LINES else ""
    return f"{shown}{more}"


_STATUS = read_status()  # (read once: 159 cases)
#: The cases by folder (one test each: every test costs the suite's autouse fixtures, a tmp_path each).
GROUPS = sorted({name.split("/")[0] for name in CASES})


def _check(world, name: str) -> str | None:
    """None when case *name* prints what main printed, else what differs (named, with a short diff)."""
    target = expected_path(name)
    if not target.is_file():
        return f"golden case {name}: no stored output {target}"
    expected = target.read_bytes().decode("utf-8")
    try:
        result = CASES[name](world)
    except Exception as err:  # noqa: BLE001 (a case that cannot run any more is a failure of its own, not of its group)
        return f"golden case {name}: raised {err!r}:\n" + "".join(traceback.format_exc(limit=-4))
    if result.out != expected:
        return f"golden case {name}: the output changed:\n{_diff(name, expected, result.out)}"
    want = _STATUS.get(name)
    if status_of(result) != want:
        return f"golden case {name}: exit status and stderr {status_of(result)}, stored {want}"
    return None


@pytest.mark.parametrize("group", GROUPS)
def test_golden(world, group):
    """Every case of the folder *group* prints (and exits with, and says on stderr) what main did."""
    failures = [f for name in CASES if name.split("/")[0] == group if (f := _check(world, name)) is not None]
    if failures:
        pytest.fail(f"{len(failures)} golden case(s) changed; {RERUN}:\n\n" + "\n\n".join(failures), pytrace=False)


def test_every_stored_output_has_its_case():
    """No file under expected/ is left over from a case that is gone (capture.py removes them)."""
    orphans = sorted(set(stored_cases()) - (set(CASES) - set(ALIASES)))
    assert not orphans, f"stored outputs without a case: {orphans}; {RERUN}"
    assert set(read_status()) == set(CASES), f"expected/status.json does not list every case; {RERUN}"


def _summaries() -> list[Path]:
    return sorted(
        [
            *INPUTS.glob("runs/*/summary.json"),
            *OLDER_SUMMARIES.glob("*.json"),
            *EXPECTED.glob("import/*-summary.json"),
            *EXPECTED.glob("synthetic/*-summary.json"),
        ]
    )


def test_summaries_read_and_rewrite():
    """Every summary.json of the fixtures reads as the CLI reads it, and what is written reads back the same;
    one written by today's softrt is rewritten byte for byte (an older one is upgraded: older/rewrite-*)."""
    from softrt.schema.summary import RunSummary
    from softrt.store.validate import load_json

    paths = _summaries()
    assert len(paths) >= 20, paths
    for path in paths:
        data = load_json(path, "run summary")  # the CLI's bounded reader (store.rundir.read_summary)
        summary = RunSummary.read(data, path)
        again = RunSummary.read(json.loads(json.dumps(summary.to_dict())), path)
        assert again == summary, f"{path}: reading what was written gives another summary"
        if not path.name.startswith("older-"):
            text = path.read_text(encoding="utf-8")
            assert json.dumps(summary.to_dict(), indent=2) + "\n" == text, (
                f"{path}: not rewritten byte for byte; {RERUN}"
            )
