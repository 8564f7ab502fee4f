"""Hypothesis fuzz of the bounded readers (issue 22.7): a hostile stats.json, a samples.parquet of any
shape (columns, types, row groups, a damaged footer) and an imported run's histogram.json give a
result or one softrt error line, never a traceback or an allocation the file did not pay for."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from softrt.analysis import RunStats
from softrt.errors import SoftRTError
from softrt.report.load import load_run
from softrt.store.importers import import_file
from softrt.store.late import AGGREGATE_FIELDS, AGGREGATES
from softrt.store.rundir import SAMPLES, STATS, STREAM_COLUMNS, load_run_stats

from ..fuzz import JSON_VALUES, fuzz, reads
from ..synthetic import write_synthetic_run
from .conftest import cyclictest_doc

FEW = fuzz(40)  # each example writes and reads a run directory
HALF = fuzz(30)
NUMBERS = (
    st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False)
    | st.sampled_from([2_000_000_000, -2_000_000_000, 2**53, 10**12, 0, -1])
)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return write_synthetic_run(tmp_path_factory.mktemp("runs"), cycles=600, misses=[(300, 2)])


def _copy(run: Path, tmp: Path) -> Path:
    target = tmp / run.name
    shutil.copytree(run, target)
    return target


def _paths(doc, prefix=()):
    """Every (path, value) in a JSON document, for a mutation to pick one."""
    yield prefix, doc
    items = doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else ()
    for k, v in items:
        yield from _paths(v, (*prefix, k))


@HALF
@given(data=st.data())
def test_fuzz_stats_json(run, data):
    doc = json.loads((run / STATS).read_text())
    for _ in range(data.draw(st.integers(1, 3))):
        path, _ = data.draw(st.sampled_from([p for p in _paths(doc) if p[0]]))
        parent = doc
        for k in path[:-1]:
            parent = parent[k]
        parent[path[-1]] = data.draw(NUMBERS | JSON_VALUES | st.lists(NUMBERS, max_size=4))
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / STATS).write_text(json.dumps(doc))  # NaN, Infinity as json.dumps writes them
        stats = reads(lambda: load_run_stats(Path(tmp), 250_000))
        if isinstance(stats, SoftRTError):
            return
        assert isinstance(stats, RunStats)
        for name in ("period", "latency", "process"):
            hdr = stats.hist[name]
            assert hdr.counts.size <= 50_000 and int(hdr.counts.sum()) == hdr.n


_TYPES = {
    "int64": pa.int64(),
    "int32": pa.int32(),
    "float64": pa.float64(),
    "string": pa.string(),
    "bool": pa.bool_(),
    "null": pa.null(),
}


def _column(kind: str, n: int, rng: np.random.Generator) -> pa.Array:
    values = np.sort(rng.integers(0, 10**12, n))
    if kind in ("int64", "int32", "float64"):
        return pa.array(values.astype(kind) if kind != "int32" else (values % 2**31).astype(np.int32))
    if kind == "string":
        return pa.array([str(v) for v in values])
    if kind == "bool":
        return pa.array(values % 2 == 0)
    return pa.nulls(n)


@FEW
@given(
    columns=st.dictionaries(
        st.sampled_from([*STREAM_COLUMNS, "process_ns", "rtt_ns", "x"]), st.sampled_from(sorted(_TYPES)), max_size=8
    ),
    rows=st.integers(0, 60),
    group=st.integers(1, 25),
    damage=st.lists(st.integers(1, 80), max_size=3),
)
def test_fuzz_samples_parquet_shape_and_footer(run, columns, rows, group, damage):
    with tempfile.TemporaryDirectory() as tmp:
        target = _copy(run, Path(tmp))
        rng = np.random.default_rng(rows)
        table = pa.table({name: _column(kind, rows, rng) for name, kind in columns.items()} or {"x": pa.nulls(rows)})
        pq.write_table(table, target / SAMPLES, row_group_size=group)
        raw = bytearray((target / SAMPLES).read_bytes())
        for back in damage:  # bytes of the footer (its Thrift metadata and its length) changed
            if back < len(raw):
                raw[-back] ^= 0x5A
        (target / SAMPLES).write_bytes(bytes(raw))
        (target / STATS).unlink()  # no fallback: every path must go through the samples file
        view = reads(lambda: load_run(target))
        if isinstance(view, SoftRTError):
            return
        assert view.stats is not None and view.stats.counters["cycles"] <= rows


@FEW
@given(
    labels=st.lists(
        st.sampled_from(["0", "8", "999999", "1000000", "400", "1e12", "1000000000000", "2.5", "-1"])
        | st.integers(0, 10**13).map(str),
        min_size=1,
        max_size=4,
        unique=True,
    ),
    tool=st.sampled_from(["cyclictest", "oslat"]),
    hist_range=st.sampled_from(["", " -h 400", " -h 99999999"]),
    lower=st.lists(NUMBERS | JSON_VALUES, max_size=3),
    width=NUMBERS | JSON_VALUES,
)
# Found by this test in a suite run: widths and bucket starts past int64 (numpy's OverflowError).
@example(labels=["0"], tool="cyclictest", hist_range="", lower=[0], width=2.0**63)
@example(labels=["0"], tool="oslat", hist_range="", lower=[2**70], width=1000)
def test_fuzz_imported_histograms_and_their_histogram_json(labels, tool, hist_range, lower, width):
    thread = {"histogram": {label: 1 for label in labels}, "min": 0, "max": 10, "avg": 1.0, "cpu": 1}
    thread.update({"cycles": len(labels)} if tool == "cyclictest" else {"freq": 2600, "duration": 1.0})
    doc = cyclictest_doc({"0": thread}, cmdline=f"{tool} -m -p 90 -i 250{hist_range} --json=x.json")
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "r.json"
        src.write_text(json.dumps(doc))
        run_dir = reads(lambda: import_file(src, Path(tmp) / "out"))
        if isinstance(run_dir, SoftRTError):
            return
        load_run(run_dir)  # what the import accepted, the report draws
        hist = json.loads((run_dir / "histogram.json").read_text())
        hist["threads"][0].update(lower_ns=lower, counts=[1] * len(lower), width_ns=width)
        (run_dir / "histogram.json").write_text(json.dumps(hist))
        reads(lambda: load_run(run_dir))


@pytest.fixture(scope="module")
def late_run(tmp_path_factory):
    return write_synthetic_run(
        tmp_path_factory.mktemp("late"), cycles=20_000, misses=[(2_600, 3), (9_000, 1)], samples="late"
    )


_META = st.dictionaries(
    st.sampled_from(["t0_ns", "period_ns", "late_threshold_ns", "first_seq", "first_window"]) | st.text(max_size=6),
    st.sampled_from(["0", "-1", "250000", "9" * 30, "1e3", "x", "\xff"])
    | st.binary(max_size=4).map(lambda b: b.decode("latin-1")),
    max_size=5,
)


@FEW
@given(
    columns=st.just({n: "float64" if n.endswith("mean_ns") else "int64" for n in AGGREGATE_FIELDS})  # softrt's
    | st.dictionaries(st.sampled_from([*AGGREGATE_FIELDS, "x"]), st.sampled_from(sorted(_TYPES)), max_size=14),
    rows=st.integers(0, 30),
    meta=_META | st.none(),
    raw_key=st.booleans(),
    damage=st.lists(st.integers(1, 80), max_size=2),
)
def test_fuzz_aggregates_parquet_of_a_late_run(late_run, columns, rows, meta, raw_key, damage):
    """A ``--samples late`` run's aggregates.parquet of any shape, types, metadata (t0_ns, period_ns, …: text
    that is no integer, a key that is no UTF-8) and damaged footer: the report reads it or says one line."""
    with tempfile.TemporaryDirectory() as tmp:
        target = _copy(late_run, Path(tmp))
        rng = np.random.default_rng(rows)
        table = pa.table({name: _column(kind, rows, rng) for name, kind in columns.items()} or {"x": pa.nulls(rows)})
        if meta is not None:
            encoded = {k.encode(): v.encode("utf-8", "surrogateescape") for k, v in meta.items()}
            if raw_key:
                encoded[b"\xff\xfe"] = b"1"
            table = table.replace_schema_metadata(encoded)
        pq.write_table(table, target / AGGREGATES, row_group_size=max(1, rows // 3 or 1))
        raw = bytearray((target / AGGREGATES).read_bytes())
        for back in damage:
            if back < len(raw):
                raw[-back] ^= 0x5A
        (target / AGGREGATES).write_bytes(bytes(raw))
        reads(lambda: load_run(target))
