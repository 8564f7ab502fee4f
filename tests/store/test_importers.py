"""Importing cyclictest/oslat --json results: real output from rt-tests, and edge cases by hand.

The real tools run briefly on CPU 0 without real-time priority, so they do not disturb a
measurement on the RT CPU.
"""

from __future__ import annotations

import json
import shutil
import subprocess

import numpy as np
import pytest

from softrt.errors import ConfigError
from softrt.report.load import load_run
from softrt.store.history import History
from softrt.store.importers import _option, detect_source, import_file

from .conftest import cyclictest_doc

needs_cyclictest = pytest.mark.skipif(shutil.which("cyclictest") is None, reason="rt-tests not installed")
needs_oslat = pytest.mark.skipif(shutil.which("oslat") is None, reason="rt-tests not installed")


def _run(cmd, tmp_path):
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    return json.loads((tmp_path / cmd[-1].split("=", 1)[1]).read_text())


@pytest.fixture(scope="module")
def cyclictest_json(tmp_path_factory):
    """A real cyclictest result with a histogram too small for its tail (so overflows are likely)."""
    d = tmp_path_factory.mktemp("ct")
    doc = _run(["cyclictest", "-q", "-l", "2000", "-i", "200", "-h", "25", "-a", "0", "-t", "2", "--json=ct.json"], d)
    return d / "ct.json", doc


@pytest.fixture(scope="module")
def oslat_json(tmp_path_factory):
    d = tmp_path_factory.mktemp("oslat")
    doc = _run(["oslat", "-q", "-D", "1", "-c", "0", "--json=oslat.json"], d)
    return d / "oslat.json", doc


@needs_cyclictest
def test_real_cyclictest_result(tmp_path, cyclictest_json):
    file, doc = cyclictest_json
    run = import_file(file, tmp_path / "imported")
    summary = json.loads((run / "summary.json").read_text())
    threads = doc["thread"].values()
    assert summary["source"] == "cyclictest" and summary["schema"] == "softrt.summary/1"
    assert summary["cycles"] == sum(t["cycles"] for t in threads)
    lat = summary["latency_us"]
    assert lat["min"] == min(t["min"] for t in threads) and lat["max"] == max(t["max"] for t in threads)
    assert summary["period_us"]["max"] is None and summary["misses"] is None  # does not apply
    assert summary["config"]["period_ns"] == 200_000 and summary["config"]["histogram_range_ns"] == 25_000
    assert summary["host"]["kernel"] == doc["sysinfo"]["release"]
    hist = json.loads((run / "histogram.json").read_text())
    for t, src in zip(hist["threads"], threads):
        # Every sample is either in a bucket or an overflow (cyclictest does not count those in the JSON).
        assert sum(t["counts"]) + t["overflow"] == src["cycles"]
        assert t["overflow"] == src["cycles"] - sum(src["histogram"].values())
    if lat["p50"] is not None:
        assert lat["min"] <= lat["p50"] <= lat["max"]
    overflow = sum(t["overflow"] for t in hist["threads"])
    assert (lat["std"] is None) == (overflow > 0)
    # The report sees the same samples.
    view = load_run(run)
    assert view.period is None and view.series is None
    if sum(sum(t["counts"]) for t in hist["threads"]):
        assert view.latency.total == summary["cycles"]
    else:  # a loaded machine: every sample beyond cyclictest's 25 µs histogram range
        assert view.latency is None and any("no latency histogram" in n for n in view.notes)
    assert (run / "source.json").read_bytes() == file.read_bytes()


@needs_oslat
def test_real_oslat_result(tmp_path, oslat_json):
    file, doc = oslat_json
    run = import_file(file, tmp_path / "imported")
    summary = json.loads((run / "summary.json").read_text())
    t = doc["thread"]["0"]
    assert summary["source"] == "oslat" and summary["config"]["period_ns"] is None
    assert summary["cycles"] == sum(t["histogram"].values())
    assert summary["latency_us"]["max"] == t["max"] and summary["latency_us"]["min"] == t["min"]
    hist = json.loads((run / "histogram.json").read_text())["threads"][0]
    last_key = max(float(k) for k in t["histogram"])
    if t["max"] > last_key:  # the last bucket holds every larger gap ("including overflows")
        assert hist["overflow"] == t["histogram"][max(t["histogram"], key=float)]
        assert hist["overflow_from_ns"] == int(round(last_key * 1000)) - hist["width_ns"]
    else:
        assert hist["overflow"] == 0
    assert load_run(run).latency.total == summary["cycles"]


@needs_cyclictest
def test_import_is_idempotent(tmp_path, cyclictest_json):
    file, _ = cyclictest_json
    a = import_file(file, tmp_path / "imported")
    b = import_file(file, tmp_path / "imported")
    assert a == b and len(list((tmp_path / "imported").iterdir())) == 1
    history = History(tmp_path / "h.sqlite")
    assert history.add_run(a) == history.add_run(b) and len(history) == 1


def test_an_import_keeps_no_reserve_and_no_empty_samples_file(tmp_path, write_doc):
    """Issue 32: every import kept the run writer's 2.3 MB space reserve and an empty samples.parquet."""
    hist = {str(i): 10 for i in range(10, 20)}
    doc = _ct({"0": {"histogram": hist, "cycles": 100, "min": 10, "max": 19, "avg": 14.5, "cpu": 1, "node": 0}})
    run = import_file(write_doc(doc), tmp_path / "i")
    assert sorted(p.name for p in run.iterdir()) == [
        "config.json",
        "histogram.json",
        "host.json",
        "source.json",
        "summary.json",
    ]


def test_percentiles_are_bucket_labels(tmp_path, write_doc):
    hist = {str(i): 10 for i in range(10, 20)}  # 100 samples, 10 per µs from 10 to 19 µs
    doc = _ct({"0": {"histogram": hist, "cycles": 100, "min": 10, "max": 19, "avg": 14.5, "cpu": 1, "node": 0}})
    s = _summary(import_file(write_doc(doc), tmp_path / "i"))
    lat = s["latency_us"]
    assert (lat["p50"], lat["p99"], lat["p99_99"]) == (14.0, 19.0, 19.0)
    assert lat["std"] == pytest.approx(np.std(np.repeat(np.arange(10, 20) + 0.5, 10)))
    assert s["notes"] == []


def test_cyclictest_without_histogram(tmp_path, write_doc):
    doc = _ct(
        {"0": {"histogram": {}, "cycles": 3984, "min": 9, "max": 3937, "avg": 21.1, "cpu": 1, "node": 0}},
        cmdline="cyclictest -q -D 1 -i 250 -m -p 80 --json=x.json",
    )
    s = _summary(import_file(write_doc(doc), tmp_path / "i"))
    assert s["latency_us"]["max"] == 3937.0 and s["latency_us"]["p50"] is None
    assert "without -h" in s["notes"][0]
    view = load_run(tmp_path / "i" / s["run_id"])
    assert view.latency is None and any("no latency histogram" in n for n in view.notes)


def test_cyclictest_nanoseconds_and_threads(tmp_path, write_doc):
    threads = {
        "0": {
            "histogram": {"800": 5, "900": 5},
            "cycles": 10,
            "min": 800,
            "max": 950,
            "avg": 870.0,
            "cpu": 2,
            "node": 0,
        },
        "1": {"histogram": {"1000": 10}, "cycles": 12, "min": 1000, "max": 5000, "avg": 1500.0, "cpu": 3, "node": 0},
    }
    doc = _ct(threads, cmdline="cyclictest -N -t 2 -h 2000 --json=x.json", resolution_in_ns=1)
    s = _summary(import_file(write_doc(doc), tmp_path / "i"))
    assert s["latency_us"]["min"] == 0.8 and s["latency_us"]["max"] == 5.0
    assert s["cycles"] == 22 and [t["overflow"] for t in s["threads"]] == [0, 2]
    assert s["config"]["period_ns"] == 1_000_000  # cyclictest's default interval
    view = load_run(tmp_path / "i" / s["run_id"])
    assert view.latency.total == 22 and view.latency.over_count == 2 and view.latency.width_ns == 1


def test_osadl_command_line_is_understood(tmp_path, write_doc):
    cmd = ["cyclictest", "-l100000000", "-m", "-Sp90", "-i200", "-h400", "-q", "--json=x.json"]
    assert _option(cmd, ("-p",)) == "90" and _option(cmd, ("-i",)) == "200" and _option(cmd, ("-h",)) == "400"
    doc = _ct(
        {"0": {"histogram": {"5": 1}, "cycles": 1, "min": 5, "max": 5, "avg": 5.0, "cpu": 0, "node": 0}},
        cmdline=" ".join(cmd),
    )
    s = _summary(import_file(write_doc(doc), tmp_path / "i"))
    applied = {a["what"]: a["detail"] for a in s["tuning"]["applied"]}
    assert "90" in applied["sched_fifo"] and "mlockall" in applied and "cpu_dma_latency" in applied
    assert s["config"]["period_ns"] == 200_000


def test_foreign_and_broken_files(tmp_path, write_doc):
    with pytest.raises(ConfigError, match="cannot read"):
        import_file(tmp_path / "missing.json", tmp_path / "i")
    bad = tmp_path / "bad.json"
    bad.write_text("{ nope")
    with pytest.raises(ConfigError, match="not valid JSON"):
        import_file(bad, tmp_path / "i")
    with pytest.raises(ConfigError, match="not a cyclictest or oslat"):
        import_file(write_doc({"hello": 1}), tmp_path / "i")
    broken = _ct({"0": {"histogram": {"x": "y"}, "cycles": 1, "min": 1, "max": 1, "avg": 1, "cpu": 0, "node": 0}})
    with pytest.raises(ConfigError, match="malformed histogram"):
        import_file(write_doc(broken, "b.json"), tmp_path / "i")
    missing_max = _ct({"0": {"histogram": {}, "cycles": 1, "min": 1, "avg": 1, "cpu": 0, "node": 0}})
    with pytest.raises(ConfigError, match="max"):
        import_file(write_doc(missing_max, "c.json"), tmp_path / "i")
    assert not (tmp_path / "i").exists() or not any((tmp_path / "i").iterdir())


def test_detect_source_from_structure():
    assert detect_source({"thread": {"0": {"cycles": 1}}}) == "cyclictest"
    assert detect_source({"thread": {"0": {"freq": 2600}}}) == "oslat"
    assert detect_source({"cmdline:": "/usr/bin/oslat -D 1", "thread": {}}) == "oslat"


def _ct(threads, cmdline="cyclictest -m -p 90 -i 250 -h 400 --json=x.json", resolution_in_ns=0):
    return cyclictest_doc(threads, cmdline, resolution_in_ns)


def _summary(run):
    return json.loads((run / "summary.json").read_text())


def test_interrupted_import_leaves_nothing_and_can_be_repeated(tmp_path, write_doc, monkeypatch):
    from softrt.store.rundir import RunDir

    doc = _ct({"0": {"histogram": {"10": 5}, "cycles": 5, "min": 10, "max": 10, "avg": 10.0, "cpu": 1, "node": 0}})
    file = write_doc(doc)
    real = RunDir.write_json

    def interrupted(self, name, data):
        if name == "summary.json":
            raise KeyboardInterrupt
        return real(self, name, data)

    monkeypatch.setattr(RunDir, "write_json", interrupted)
    with pytest.raises(KeyboardInterrupt):
        import_file(file, tmp_path / "i")
    assert list((tmp_path / "i").iterdir()) == []  # no half-written run directory
    monkeypatch.undo()
    run = import_file(file, tmp_path / "i")
    assert [p.name for p in (tmp_path / "i").iterdir()] == [run.name]
    assert _summary(run)["cycles"] == 5 and (run / "source.json").read_bytes() == file.read_bytes()
    # A directory left half-written by an older softrt is replaced, not a dead end.
    (run / "summary.json").unlink()
    again = import_file(file, tmp_path / "i")
    assert again == run and _summary(again)["run_id"] == run.name
