"""Hypothesis fuzz of ``softrt import``'s reader: hostile cyclictest/oslat JSON gives a run directory that
reads back, or one ConfigError line; nothing is written outside the output directory, and no directory is
left half-made (issue 12, defect 9)."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from softrt.errors import SoftRTError
from softrt.schema.text import is_safe_name, printable
from softrt.store.history import load_run_summary
from softrt.store.importers import import_file

from ..fuzz import fuzz, reads
from .conftest import cyclictest_doc

FUZZ = fuzz(100)
DOCS = fuzz(60)  # each accepted example writes a run directory

HOSTILE_TEXT = st.text(max_size=12) | st.sampled_from(["a/b/../../c", "\x1b[2J\x1b]0;pwn\x07", "[/x]", "..", ""])
NUMBERS = (
    st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats()
    | st.booleans()
    | st.none()
    | st.sampled_from([2**63, 2**63 - 1, -1, 0])
)
VALUES = st.recursive(
    NUMBERS | HOSTILE_TEXT,
    lambda c: st.lists(c, max_size=3) | st.dictionaries(HOSTILE_TEXT, c, max_size=3),
    max_leaves=8,
)


def _valid_thread(tool: str) -> dict:
    t = {"histogram": {"8": 3, "9": 1, "12": 2}, "min": 8, "max": 12, "avg": 9.1, "cpu": 1}
    t.update({"cycles": 6} if tool == "cyclictest" else {"freq": 2600, "duration": 1.0})
    return t


_THREAD_KEYS = ["histogram", "min", "max", "avg", "cpu", "cycles", "freq", "duration"]
_HIST_KEYS = st.sampled_from(["0", "8", "1.5", "nan", "inf", "-3", "1e300", "x"]) | HOSTILE_TEXT


@st.composite
def documents(draw):
    """A valid cyclictest/oslat result with zero to three hostile changes."""
    tool = draw(st.sampled_from(["cyclictest", "oslat"]))
    names = draw(st.lists(st.sampled_from(["0", "1", "²"]) | HOSTILE_TEXT, min_size=1, max_size=2, unique=True))
    threads = {n: _valid_thread(tool) for n in names}
    cmd = draw(
        st.sampled_from(
            [
                f"{tool} -m -p 90 -i 250 -h 400",
                f'{tool} "unterminated',
                f"{tool} -h 99999999999",
                f"{tool} -W 0 -i -5",
                f"{tool} -W 500",
                "",
            ]
        )
        | HOSTILE_TEXT
    )
    doc = cyclictest_doc(threads, cmdline=cmd)
    doc["sysinfo"]["nodename"] = draw(HOSTILE_TEXT | NUMBERS)
    for _ in range(draw(st.integers(0, 3))):
        where = draw(st.sampled_from(["thread", "histogram", "top"]))
        t = threads[draw(st.sampled_from(names))]
        if where == "thread":
            t[draw(st.sampled_from(_THREAD_KEYS))] = draw(NUMBERS | VALUES)
        elif where == "histogram" and isinstance(t.get("histogram"), dict):
            t["histogram"][draw(_HIST_KEYS)] = draw(NUMBERS)
        else:
            doc[
                draw(
                    st.sampled_from(
                        ["sysinfo", "start_time", "return_code", "rt_test_version:", "resolution_in_ns", "thread"]
                    )
                )
            ] = draw(VALUES)
    return doc


def _tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


@DOCS
@given(doc=documents())
def test_fuzz_import(doc):
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        src = tmp / "result.json"
        src.write_text(json.dumps(doc))  # NaN, Infinity and huge integers as json.dumps writes them
        out = tmp / "out"
        run = reads(lambda: import_file(src, out))
        if isinstance(run, SoftRTError):
            assert not out.exists() or not any(out.iterdir())  # nothing half-written
            assert _tree(tmp) <= {"result.json", "out"}
            return
        assert run.parent == out and is_safe_name(run.name)
        assert [p.name for p in out.iterdir()] == [run.name]  # one run directory, nothing else
        summary = load_run_summary(run)  # what was written reads back
        host = summary.hostname
        assert host is None or printable(host) == host


@FUZZ
@given(raw=st.binary(max_size=300))
def test_fuzz_import_bytes(raw):
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "r.json"
        src.write_bytes(raw)
        reads(lambda: import_file(src, Path(tmp) / "out"))
