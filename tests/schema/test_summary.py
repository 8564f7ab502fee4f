"""schema.summary / schema.doc: the typed run summary.

Fixtures (tests/fixtures/summaries): summary.json files written by softrt itself. ``run``,
``checkpoint``, ``compare-round`` (with a load), ``import-*`` by today's softrt; ``older-<commit>``
by earlier versions (each commit checked out into a temporary directory and run for 1 s), which
must keep loading. Hypothesis fuzz of the reader (read_summary, History.add_run, the history
listing and the terminal rendering) with hostile summary.json files.
"""

from __future__ import annotations

import io
import json
import re
import tempfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console

from softrt.cli.render import render_summary
from softrt.cli.show import render_imported
from softrt.errors import ConfigError
from softrt.schema.summary import SCHEMA, STATUSES, Metrics, RunSummary
from softrt.schema.text import printable
from softrt.store.history import History
from softrt.store.rundir import read_summary, update_summary

from ..fuzz import JSON_VALUES, fuzz
from ..fuzz import one_line as _one_line
from ..synthetic import write_synthetic_run

FIXTURES = Path(__file__).parent.parent / "fixtures" / "summaries"
CURRENT = ["run", "checkpoint", "compare-round", "import-cyclictest", "import-oslat"]
OLDER = sorted(p.stem for p in FIXTURES.glob("older-*.json"))


def _doc(name: str) -> dict:
    return json.loads((FIXTURES / f"{name}.json").read_text())


def _render(summary: RunSummary) -> str:
    out = io.StringIO()
    view = render_summary(summary, "x") if summary.origin == "softrt" else render_imported(summary, "x")
    Console(file=out, width=120).print(view)
    return out.getvalue()


def test_fixtures_cover_every_kind_of_summary():
    assert len(OLDER) >= 5
    kinds = {RunSummary.read(_doc(n)).origin for n in CURRENT}
    assert kinds == {"softrt", "cyclictest", "oslat"}
    assert RunSummary.read(_doc("checkpoint")).running
    assert RunSummary.read(_doc("compare-round")).loads


@pytest.mark.parametrize("name", CURRENT)
def test_current_files_round_trip_exactly(name):
    """What today's softrt writes reads back and is written again unchanged, key order included."""
    doc = _doc(name)
    summary = RunSummary.read(doc, name)
    assert summary.to_dict() == doc
    assert list(summary.to_dict()) == list(doc)
    assert RunSummary.from_dict(summary.to_dict()) == summary
    assert json.dumps(summary.to_dict(), indent=2) == json.dumps(doc, indent=2)


@pytest.mark.parametrize("name", OLDER)
def test_older_files_load(name):
    """Summaries written by earlier versions of softrt load, render, and round trip through the model."""
    summary = RunSummary.read(_doc(name), name)
    assert summary.run_id and summary.metrics.cycles and summary.metrics.period_us.max is not None
    assert RunSummary.from_dict(summary.to_dict()) == summary
    assert "Cycle (µs)" in _render(summary)


def test_older_why_late_reads_as_today():
    """Before the trace's figures moved to ``trace``, ``tracing`` was an object with ``status``."""
    old = [n for n in OLDER if isinstance((_doc(n).get("why_late") or {}).get("tracing"), dict)]
    assert old, "no fixture with the older why_late shape"
    for name in old:
        why = RunSummary.read(_doc(name)).why_late
        assert why.on and why.trace is not None and why.trace.events_read is not None
        assert "Why cycles were late" in _render(RunSummary.read(_doc(name)))


def test_typed_access():
    s = RunSummary.read(_doc("run"))
    doc = _doc("run")
    assert s.metrics.period_us.p99_99 == doc["period_us"]["p99_99"]
    assert s.metrics.misses.missed_updates == doc["misses"]["missed_updates"]
    assert s.config.period_ns == doc["config"]["period_ns"] and s.hostname == doc["host"]["hostname"]
    assert s.tuning.system_changes[0].path == doc["tuning"]["system_changes"][0]["path"]
    assert s.why_late.worst[0].window.start == doc["why_late"]["worst"][0]["window"]["from"]
    assert s.motion_impact.max_deviation_counts == doc["motion"]["max_deviation_counts"]


def test_unknown_fields_are_kept():
    """A newer minor version's fields survive a read and a write (update_summary, the history)."""
    doc = _doc("run")
    doc["ethercat"] = {"dc": {"sync0_ns": 250000}}
    doc["misses"]["lost_frames"] = 3
    s = RunSummary.read(doc)
    assert s.to_dict() == doc
    assert s.extra == {"ethercat": {"dc": {"sync0_ns": 250000}}}


def test_update_summary_keeps_the_file(tmp_path):
    run = tmp_path / "r"
    run.mkdir()
    doc = _doc("run")
    (run / "summary.json").write_text(json.dumps(doc))
    new = update_summary(run, notes=["a note"], compare_round=2)
    assert json.loads((run / "summary.json").read_text()) == {**doc, "notes": ["a note"], "compare_round": 2}
    assert read_summary(run) == new


def test_failed_status_reads_with_its_reason():
    doc = {**_doc("run"), "status": "failed", "partial_reason": "EtherCAT bus lost: no frame came back"}
    s = RunSummary.read(doc)
    assert s.state == "failed" and s.partial_reason.startswith("EtherCAT") and "failed" in STATUSES
    assert "FAILED: EtherCAT bus lost" in _render(s)


def test_a_newer_major_version_is_refused(tmp_path):
    run = tmp_path / "r"
    run.mkdir()
    (run / "summary.json").write_text(json.dumps({**_doc("run"), "schema": "softrt.summary/2"}))
    with pytest.raises(ConfigError, match=r"written by a newer softrt .*softrt.summary/2") as info:
        read_summary(run)
    _one_line(info.value)
    assert "upgrade softrt" in info.value.hint


def test_a_newer_minor_version_is_read():
    s = RunSummary.read({**_doc("run"), "schema": "softrt.summary/1.4"})
    assert s.schema == "softrt.summary/1.4" and s.to_dict()["schema"] == "softrt.summary/1.4"
    assert SCHEMA == "softrt.summary/1"


@pytest.mark.parametrize(
    "field,value,match",
    [
        ("config", [], "config must be an object"),
        ("host", "x", "host must be an object"),
        ("cycles", -1, "cycles cannot be negative"),
        ("cycles", True, "cycles must be a whole number"),
        ("cycles", 1.5, "cycles must be a whole number"),
        ("run_id", "../x", "run_id"),
        ("run_id", None, "run_id"),
        ("misses", {"missed_updates": "3"}, "misses.missed_updates must be a whole number"),
        ("period_us", {"max": [1]}, "period_us.max must be a number"),
        ("period_us", None, "period_us must be an object"),
        ("mode", "fast", "mode must be one of"),
        ("status", "done", "status must be one of"),
        ("notes", "x", "notes must be a list"),
        ("notes", [1], r"notes\[0\] must be text"),
        ("tuning", {"applied": [1]}, r"tuning.applied\[0\] must be an object"),
        ("threads", {"0": {}}, "threads must be a list"),
        ("why_late", {"tracing": "on", "worst": [{"seq": "x"}]}, r"why_late.worst\[0\].seq must be a whole number"),
        ("ring", {"overflows": 2**40 + 0.5}, "ring.overflows must be a whole number"),
        ("supervisor", {"pid": -3}, "supervisor.pid cannot be negative"),
        ("loads", [{"name": "fio", "achieved": []}], r"loads\[0\].achieved must be an object"),
    ],
)
def test_mistyped_fields_are_one_clear_error(field, value, match):
    doc = {**_doc("run"), field: value}
    with pytest.raises(ConfigError, match=match) as info:
        RunSummary.read(doc, "s.json")
    assert str(info.value).startswith("s.json: ")
    _one_line(info.value)


@pytest.mark.parametrize(
    "field,value,refused",
    [
        ("period_us", {"max": 1e308}, "period_us.max is out of range"),
        ("slack_us", {"min": -9.3e15}, "slack_us.min is out of range"),
        ("elapsed_s", 1e300, "elapsed_s is out of range"),
        (
            "why_late",
            {"tracing": "on", "culprits": [{"total_us": 1e20}]},
            "why_late.culprits[0].total_us is out of range",
        ),
        ("board", {"rtt_us": {"max": 1e16}}, "board.rtt_us.max is out of range"),
        ("period_us", {"max": 9.2e15}, None),  # 292 years in µs: absurd, but still a time in int64 ns
        ("motion", {"max_velocity_step_counts_per_s": 1e300}, None),  # a rate, not a time
    ],
    ids=["period-max-1e308", "slack-min", "elapsed-s", "culprit-total", "round-trip", "at-the-bound", "a-rate"],
)
def test_a_time_past_int64_ns_is_refused(field, value, refused):
    """Issue 32: ``period_us.max = 1e308`` was accepted and listed as one 400-digit number. Every time the
    summary holds (``within``, or a float field named for its unit: ``_ns``, ``_us``, ``_ms``, ``_s``) is
    bounded by int64 nanoseconds."""
    doc = {"schema": SCHEMA, "run_id": "r1", field: value}
    if refused is None:
        RunSummary.read(doc)
        return
    with pytest.raises(ConfigError, match=re.escape(f"s.json: {refused} (")) as info:
        RunSummary.read(doc, "s.json")
    _one_line(info.value)


def test_large_counts_and_missing_optional_fields_are_fine():
    doc = {"schema": SCHEMA, "run_id": "r1", "cycles": 10**18}
    s = RunSummary.read(doc)
    assert s.metrics.cycles == 10**18 and s.why_late is None and s.state == "complete" and s.metrics.misses is None
    assert RunSummary.from_dict(s.to_dict()) == s


def test_every_string_is_made_printable():
    doc = {
        "schema": SCHEMA,
        "run_id": "r1",
        "scenario": "\x1b]0;title\x07x",
        "host": {"hostname": "a\x1b[2Jb"},
        "notes": ["n\x9bm"],
        "unknown\x1b": "v\x1b",
    }
    s = RunSummary.read(doc)
    assert s.scenario == "?]0;title?x" and s.hostname == "a?[2Jb" and s.notes == ["n?m"]
    assert s.extra == {"unknown?": "v?"}


def test_metrics_are_the_streaming_pass_figures():
    """The same block in a summary and in compare's pooled figures."""
    m = Metrics.from_dict(
        {
            k: v
            for k, v in _doc("run").items()
            if k
            in (
                "cycles",
                "records_expected",
                "records_missing",
                "period_us",
                "process_us",
                "latency_us",
                "slack_us",
                "misses",
            )
        }
    )
    assert m == RunSummary.read(_doc("run")).metrics


# -- fuzz: hostile summary.json files through read_summary, History.add_run and the renderers ------------
@pytest.fixture(scope="module")
def good_summary(tmp_path_factory) -> dict:
    run = write_synthetic_run(tmp_path_factory.mktemp("runs"), cycles=300, misses=[(100, 2)], why_late=True)
    return json.loads((run / "summary.json").read_text())


_FIELDS = [
    "run_id",
    "scenario",
    "source",
    "status",
    "mode",
    "started_at",
    "partial_reason",
    "config",
    "host",
    "tuning",
    "cycles",
    "records_missing",
    "period_us",
    "latency_us",
    "misses",
    "ring",
    "board",
    "motion",
    "notes",
    "threads",
    "loads",
    "config.period_ns",
    "config.motion",
    "host.hostname",
    "misses.missed_updates",
    "misses.note",
    "period_us.max",
    "tuning.applied",
    "tuning.system_changes",
    "ring.overflows",
    "schema",
    "why_late",
    "why_late.tracing",
    "why_late.culprits",
    "why_late.worst",
    "why_late.trace",
    "samples",
    "check",
    "supervisor",
    "elapsed_s",
    "motion.max_run_deviation_counts",
    "slack_us.min",
    "rtt_us",
]


def _set(doc: dict, dotted: str, value) -> None:
    *parents, last = dotted.split(".")
    for key in parents:
        if not isinstance(doc.get(key), dict):
            doc[key] = {}
        doc = doc[key]
    doc[last] = value


def _tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


@fuzz(50)  # each example writes a run directory and a history
@given(mutations=st.lists(st.tuples(st.sampled_from(_FIELDS), JSON_VALUES), min_size=1, max_size=3))
def test_fuzz_summary_reader(good_summary, mutations):
    """Any summary.json: read into the model, added to the history, listed and rendered with printable
    text, or one ConfigError line; nothing is written but the history database. What reads also
    round trips (the model's to_dict reads back as the same model)."""
    doc = json.loads(json.dumps(good_summary))
    for field, value in mutations:
        _set(doc, field, value)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        run = tmp / "run"
        run.mkdir()
        (run / "summary.json").write_text(json.dumps(doc))  # json.dumps writes NaN and huge integers as given
        before = _tree(tmp)
        history = History(tmp / "db" / "history.sqlite")
        try:
            summary = read_summary(run)
            run_id = history.add_run(run)
        except Exception as err:  # noqa: BLE001 - the property: only softrt's own one-line errors
            _one_line(err)
            assert _tree(tmp) - before <= {"db", "db/history.sqlite"}
            return
        assert RunSummary.from_dict(summary.to_dict()) == summary
        record = history.get(run_id)
        assert record.summary == summary
        for text in (record.run_id, record.host, record.scenario, record.status, record.mode):
            assert text is None or printable(text) == text
        from softrt.cli.history import history_table

        out = io.StringIO()
        Console(file=out, width=100).print(history_table(history.list_runs()))
        assert "\x1b" not in out.getvalue()
        assert "\x1b" not in _render(summary)
        assert _tree(tmp) - before <= {"db", "db/history.sqlite"}


def test_a_drive_without_an_error_code_object_is_a_valid_board():
    """bring-up reports None for an axis whose drive lacks 0x603F (ethercat.preop.read_identity);
    the summary model must take the slave's report as the master writes it."""
    from softrt.ethercat.bringup import SlaveInfo
    from softrt.schema.device import Board, Slave

    info = SlaveInfo(
        0,
        "drive",
        0x0EC0FFEE,
        0x402,
        True,
        True,
        [],
        [],
        identity=Slave(vendor_id=0x0EC0FFEE, error_register=0, error_codes=[None, 0x2310]),
    )
    board = Board.from_dict({"slaves": [info.report()]}, "summary.json", "board")
    assert board.slaves[0].error_codes == [None, 0x2310]
    assert Board.from_dict(board.to_dict()) == board


@pytest.mark.parametrize(
    "drop",
    [
        ("status",),
        ("partial_reason",),
        ("ring",),
        ("board",),
        ("records_expected",),
        ("period_us",),
        ("tuning", "recovered_from_earlier_runs"),
        ("misses", "overruns"),
    ],
)
def test_a_file_lacking_a_field_is_written_back_without_it(drop):
    """An older writer's file (a key it did not have yet) reads and writes back unchanged: nothing is added."""
    doc = _doc("run")
    parent = doc
    for name in drop[:-1]:
        parent = parent[name]
    del parent[drop[-1]]
    summary = RunSummary.read(doc, "older")
    assert summary.to_dict() == doc
    assert summary.replace(status="partial").to_dict()["status"] == "partial"  # a value set later is written
