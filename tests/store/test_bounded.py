"""What softrt reads but did not write is bounded before it is allocated (issue 22.2): stats.json,
Parquet footers and row budgets, imported histogram labels. Each probe runs in a child whose
address space is capped, so a reader that would ask for gigabytes fails the test instead of the
machine."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from softrt.errors import ConfigError, SoftRTError
from softrt.report import load as report_load
from softrt.store.importers import import_file
from softrt.store.rundir import STATS, load_run_stats
from softrt.store.validate import open_parquet

from ..child import in_child
from ..synthetic import write_synthetic_run
from .conftest import cyclictest_doc

LIMIT = 512 << 20  # more address space for the child: a small run fits, 15 GiB does not


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return write_synthetic_run(tmp_path_factory.mktemp("runs"), cycles=4_000, misses=[(1_000, 2)])


def _error_of(fn, *args) -> str:
    try:
        fn(*args)
    except SoftRTError as err:
        return str(err)
    return "read"


@pytest.mark.parametrize("change", ["key_2e9", "nan", "min_above_buckets", "not_a_list"])
def test_a_hostile_stats_json_is_one_line_before_anything_is_allocated(tmp_path, run, change):
    doc = json.loads((run / STATS).read_text())
    hist = doc["series_ns"]["period"]
    if change == "key_2e9":  # the probe: the dense array from key 0 to 2e9 is 14.9 GiB
        hist["keys"] = [0, 2_000_000_000]
        hist["counts"] = [hist["n"] - 1, 1]
    elif change == "nan":
        hist["m2_ns2"] = float("nan")
    elif change == "min_above_buckets":
        hist["min_ns"] = hist["max_ns"] + 1
    else:
        hist["keys"] = {"0": 1}
    target = tmp_path / "run"
    target.mkdir()
    (target / STATS).write_text(json.dumps(doc))  # json.dumps writes NaN as RFC 8259 forbids
    said = in_child(_error_of, load_run_stats, target, 250_000, max_memory=LIMIT)
    assert said.startswith(f"cannot read {target / STATS}") or str(target / STATS) in said, said
    assert "\n" not in said


def test_a_parquet_footer_over_the_row_budget_or_of_other_types_is_refused_unread(tmp_path):
    path = tmp_path / "samples.parquet"
    pq.write_table(
        pa.table(
            {"seq": pa.array(np.arange(100, dtype=np.int64)), "cycle": pa.array(np.arange(100, dtype=np.float64))}
        ),
        path,
        row_group_size=10,
    )
    with pytest.raises(ConfigError, match="holds 100 rows, more than softrt reads \\(99\\)"):
        open_parquet(path, "samples", 99, ["seq"])
    with pytest.raises(ConfigError, match="column cycle is double, not numbers"):
        open_parquet(path, "samples", 100, ["seq", "cycle"])
    with pytest.raises(ConfigError, match="lacks the column edge_ns"):
        open_parquet(path, "samples", 100, ["edge_ns"])
    assert open_parquet(path, "samples", 100, ["cycle"], floats=True).metadata.num_rows == 100
    raw = path.read_bytes()
    path.write_bytes(raw[:-12] + (2**31 - 1).to_bytes(4, "little") + raw[-8:])  # a footer claiming 2 GB
    with pytest.raises(ConfigError, match="cannot read samples"):
        open_parquet(path, "samples", 100)


def test_a_run_over_the_report_budget_is_drawn_from_an_envelope_and_stats_json_and_says_so_first(run, monkeypatch):
    monkeypatch.setattr(report_load, "ROW_BUDGET", 1_000)  # the 4,000-cycle run stands for a 24 h one
    view = report_load.load_run(run)
    assert view.notes[0].startswith(
        "samples.parquet holds 4,000 cycles, more than the report keeps one by one "
        "(1,000): the period over time was read by row group"
    )
    assert view.period is not None and view.period.total == view.stats.hist["period"].n
    assert view.series is not None and view.series.n == 3_999 and view.motion is not None


def test_an_imported_label_beyond_the_tools_range_is_refused(tmp_path, write_doc):
    huge = cyclictest_doc(
        {"0": {"histogram": {"8": 3, str(10**12): 1}, "cycles": 4, "min": 8, "max": 10**12, "avg": 9.0, "cpu": 1}},
        cmdline="cyclictest -m -p 90 -i 250 --json=x.json",
    )
    with pytest.raises(
        ConfigError, match="histogram bucket 1e\\+12 is not one of cyclictest's \\(whole numbers 0 to 999,999\\)"
    ):
        import_file(write_doc(huge), tmp_path / "out")
    ranged = cyclictest_doc(
        {"0": {"histogram": {"8": 3, "400": 1}, "cycles": 4, "min": 8, "max": 400, "avg": 9.0, "cpu": 1}}
    )  # -h 400: buckets 0-399
    with pytest.raises(ConfigError, match="bucket 400 is not one of cyclictest's \\(whole numbers 0 to 399\\)"):
        import_file(write_doc(ranged), tmp_path / "out")


def test_a_histogram_json_spanning_more_than_the_tools_write_is_refused_by_the_report(tmp_path, write_doc):
    run_dir = import_file(
        write_doc(
            cyclictest_doc({"0": {"histogram": {"8": 3}, "cycles": 3, "min": 8, "max": 8, "avg": 8.0, "cpu": 1}})
        ),
        tmp_path / "out",
    )
    hist = json.loads((run_dir / "histogram.json").read_text())
    hist["threads"][0]["lower_ns"] = [0, 10**18]  # 10^15 buckets of 1 µs
    hist["threads"][0]["counts"] = [2, 1]
    (run_dir / "histogram.json").write_text(json.dumps(hist))
    said = in_child(_error_of, report_load.load_run, run_dir, max_memory=LIMIT)
    assert "the histogram spans more than 1,000,000 buckets" in said and "\n" not in said
