"""Fixtures for the report tests: synthetic run directories and rt-tests JSON documents."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from softrt.report import build_report
from softrt.store.importers import import_file

from ..synthetic import write_synthetic_run


def write_cyclictest_run(tmp_path):
    """An imported cyclictest result (a histogram, no samples) in *tmp_path*/imported."""
    hist = {str(i): int(1000 / (i - 5) ** 2) + 1 for i in range(6, 60)}
    doc = {
        "file_version": 1,
        "cmdline:": "cyclictest -m -p 90 -i 250 -h 60 --json=x.json",
        "rt_test_version:": "2.40",
        "start_time": "Sun, 29 Nov 2026 10:00:00 +0000",
        "end_time": "Sun, 29 Nov 2026 10:10:00 +0000",
        "return_code": 0,
        "sysinfo": {
            "sysname": "Linux",
            "nodename": "otherpc",
            "release": "6.1.0-rt",
            "version": "#1",
            "machine": "x86_64",
            "realtime": 1,
        },
        "num_threads": 1,
        "resolution_in_ns": 0,
        "thread": {
            "0": {
                "histogram": hist,
                "cycles": sum(hist.values()) + 2,
                "min": 6,
                "max": 480,
                "avg": 9.5,
                "cpu": 3,
                "node": 0,
            }
        },
    }
    f = tmp_path / "ct.json"
    f.write_text(json.dumps(doc))
    return import_file(f, tmp_path / "imported")


@pytest.fixture(scope="session")
def shared_report(tmp_path_factory):
    """One report of two synthetic runs, an imported cyclictest result and a broken run, built once (a
    report draws six plots) and read by the tests of its plots and tables, of its self-containment,
    of the broken run's note, of its why-late section (test_build.py) and in a browser (test_chromium.py)."""
    d = tmp_path_factory.mktemp("report")
    # a: its why_late block made by the real Attributor from a synthetic trace; b: tracing unavailable
    a = write_synthetic_run(
        d / "runs", cycles=40_000, misses=[(2_600, 3), (9_000, 1), (30_000, 12)], seed=1, why_late=True
    )
    b = write_synthetic_run(
        d / "runs",
        cycles=40_000,
        misses=[(20_000, 58)],
        seed=2,
        scenario="untuned",
        host="pc-b",
        why_late="unavailable: tracefs not mounted and not root",
    )
    imported = write_cyclictest_run(d)
    bad = write_synthetic_run(d / "runs", cycles=5_000, seed=9)
    (bad / "samples.parquet").write_bytes(b"not parquet at all")
    (bad / "stats.json").unlink()  # else the report draws it from stats.json (issue 32)
    out = d / "report.html"
    result = build_report([a, b, imported, bad], out)
    return SimpleNamespace(a=a, b=b, imported=imported, bad=bad, result=result, path=out, html=out.read_text())


@pytest.fixture
def synth_run(tmp_path):
    """Factory: a synthetic run directory (40,000 cycles by default, misses during a move)."""

    def make(**kw):
        kw.setdefault("cycles", 40_000)
        kw.setdefault("misses", [(2_600, 3), (9_000, 1), (30_000, 12)])
        return write_synthetic_run(tmp_path / "runs", **kw)

    return make
