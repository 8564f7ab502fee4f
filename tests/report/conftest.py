"""Fixtures for the report tests: synthetic run directories and rt-tests JSON documents."""

from __future__ import annotations

import pytest

from softrt.report.synthetic import write_synthetic_run




@pytest.fixture
def synth_run(tmp_path):
    """Factory: a synthetic run directory (40,000 cycles by default, misses during a move)."""
    def make(**kw):
        kw.setdefault("cycles", 40_000)
        kw.setdefault("misses", [(2_600, 3), (9_000, 1), (30_000, 12)])
        return write_synthetic_run(tmp_path / "runs", **kw)
    return make
