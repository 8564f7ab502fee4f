"""The command line's side of the reader fuzz (issue 32.7): a hostile input through the command that reads
it either works (exit status 0, or 1 where the command says what it could not do) or is one
``softrt: error:`` line on stderr with exit status 2: never a traceback, within bounded time and memory.
The readers themselves are fuzzed where they live (tests/store, tests/schema, tests/scenario,
tests/audit); these go through ``softrt show``, ``history``, ``import``, ``report`` and ``tune --revert``."""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import sqlite3
import tempfile
from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from softrt.schema.text import printable
from softrt.store.history import _COLUMNS, History

from ..fuzz import JSON_VALUES, bounded, fuzz, one_error_line
from ..schema.test_summary import _FIELDS, _set
from ..store.test_history_fuzz import SQL_VALUES
from ..store.test_importers_fuzz import documents
from ..synthetic import write_synthetic_run

_spec = importlib.util.spec_from_file_location(
    "softrt_audit_trees", Path(__file__).parent.parent / "audit" / "trees.py"
)
trees = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(trees)


def _command(run_cli, *args: str, may_fail: bool = False) -> int:
    """Run ``softrt ARGS``; check the property; return the exit status."""
    with bounded():
        code, out, err = run_cli(*args)
    assert "Traceback" not in out + err, err
    # A huge figure is refused, never shown as a 400-digit number ("100,000,000,…" in history's table).
    assert not re.search(r"\d{1,3}(?:,\d{3}){12}", out + err), out[-600:]
    if code == 2:
        one_error_line(code, out, err)
    else:
        assert code == 0 or (may_fail and code == 1), (args, code, err[-600:])
    return code


@pytest.fixture(scope="module")
def good_run(tmp_path_factory):
    return write_synthetic_run(tmp_path_factory.mktemp("runs"), cycles=300, misses=[(100, 2)], why_late=True)


@fuzz(15)
@given(mutations=st.lists(st.tuples(st.sampled_from(_FIELDS), JSON_VALUES), min_size=1, max_size=3))
@example(mutations=[("period_us.max", 1e308)])  # issue 32: history listed one 400-digit number
def test_fuzz_show_and_history_add_of_a_hostile_summary(run_cli, home, good_run, mutations):
    doc = json.loads((good_run / "summary.json").read_text())
    for field, value in mutations:
        _set(doc, field, value)
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / good_run.name
        shutil.copytree(good_run, run)
        (run / "summary.json").write_text(json.dumps(doc))
        _command(run_cli, "show", str(run))
        _command(run_cli, "history", "add", "--db", str(Path(tmp) / "h.sqlite"), str(run))
        _command(run_cli, "history", "--db", str(Path(tmp) / "h.sqlite"))


@fuzz(12)
@given(changes=st.lists(st.tuples(st.sampled_from(_COLUMNS), SQL_VALUES), min_size=1, max_size=3))
def test_fuzz_history_and_show_of_hostile_rows(run_cli, home, good_run, changes):
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "h.sqlite"
        History(db).add_run(good_run)
        with sqlite3.connect(db) as conn:
            for column, value in changes:
                if column.endswith("path") and isinstance(value, str):
                    # A path is kept as it is (it must name its directory); the terminal is kept clean of
                    # it where every string is printed, the render layer (issue 32.4), tested there.
                    value = printable(value)
                conn.execute(f"UPDATE OR IGNORE runs SET {column} = ?", (value,))
        for args in (("history",), ("history", "--json"), ("show", "last"), ("show", "last", "--json")):
            _command(run_cli, *args, "--db", str(db))


@fuzz(25)
@given(doc=documents() | st.binary(max_size=200))
def test_fuzz_import_of_a_hostile_result(run_cli, home, doc):
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "result.json"
        if isinstance(doc, bytes):
            src.write_bytes(doc)
        else:
            src.write_text(json.dumps(doc))
        _command(run_cli, "import", str(src), "--db", str(Path(tmp) / "h.sqlite"))


def test_report_of_a_run_whose_samples_and_stats_are_damaged(run_cli, home, good_run, tmp_path):
    """``report`` reads a damaged samples.parquet's run from its stats.json (tests/report/test_load.py, fuzzed
    in tests/store/test_readers_fuzz.py); with both damaged it is one line, exit 2, and no file."""
    run = tmp_path / good_run.name
    shutil.copytree(good_run, run)
    (run / "samples.parquet").write_bytes((good_run / "samples.parquet").read_bytes()[:500])
    (run / "stats.json").write_text('{"schema": "softrt.stats/1", "period": [1e999]}')
    assert _command(run_cli, "report", str(run), "-o", str(tmp_path / "r.html")) == 2
    assert not (tmp_path / "r.html").exists()


_ENTRY = st.fixed_dictionaries(
    {"kind": st.sampled_from(["file", "affinity", "service"]) | JSON_VALUES},
    optional={
        "target": st.sampled_from(
            ["/proc/sys/kernel/sched_rt_runtime_us", "/proc/irq/38/smp_affinity", "/etc/passwd", "/proc/self/root/x"]
        )
        | JSON_VALUES,
        "before": st.sampled_from(["950000", "3", "0-99999999999"]) | JSON_VALUES,
        "tid": st.integers(-2, 2**40) | JSON_VALUES,
    },
)


@pytest.fixture(scope="module")
def captured_vm(tmp_path_factory):
    """The files of the captured VM that the state entries above name (the whole tree is 4 MB)."""
    tree = tmp_path_factory.mktemp("vm") / "vm"
    for name in (
        "proc/sys/kernel/sched_rt_runtime_us",
        "proc/irq/38/smp_affinity",
        "sys/devices/system/cpu/possible",
        "sys/devices/system/cpu/online",
    ):
        (tree / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(trees.CAPTURED / name, tree / name)
    return tree


@fuzz(20)
@given(entries=st.lists(_ENTRY, max_size=3), tail=st.sampled_from(["", '{"kind": "fi', "\x00\xff"]))
def test_fuzz_tune_revert_of_a_hostile_state_file(run_cli, state_dir, captured_vm, entries, tail):
    """On a captured tree (never this machine): what the state names is restored there, or refused."""
    from softrt.audit import state
    from softrt.platform import journal

    vm = captured_vm  # one copy for every example (4 MB): what a revert writes there is the tree's own business
    with tempfile.TemporaryDirectory() as tmp:
        header = {
            "format": state.FORMAT,
            "version": journal.VERSION,
            "created": 1.0,
            "host": "pc",
            "pid": 1,
            "root": str(vm),
        }
        file = Path(tmp) / "tune-state.jsonl"
        file.write_text("".join(json.dumps(x) + "\n" for x in [header, *entries]) + tail)
        _command(run_cli, "tune", "--revert", "--root", str(vm), "--state-file", str(file), may_fail=True)


@pytest.mark.parametrize("ref", ["a" * 300, "a/" * 2100], ids=["name-too-long", "path-too-long"])
@pytest.mark.parametrize("command", ["show", "report", "history add"])
def test_a_run_reference_too_long_to_be_a_path(run_cli, home, command, ref):
    """Found by the deep profile through a history row's path: ``is_dir()`` raises ENAMETOOLONG (a traceback)."""
    assert "is too long to be a path" in one_error_line(*run_cli(*command.split(), ref))
