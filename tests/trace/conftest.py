"""Until the attribution (issue 9, item 2) is merged, the run's trace feeds the minimal stand-in
in this directory; once ``softrt.analysis.attribution`` exists, the real one is used."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest


@pytest.fixture
def attribution(monkeypatch):
    """The attribution module the run will use (the real one when it exists)."""
    try:
        return importlib.import_module("softrt.analysis.attribution")
    except ImportError:
        sys.path.insert(0, str(Path(__file__).parent))
        import minimal_attributor

        monkeypatch.setitem(sys.modules, "softrt.analysis.attribution", minimal_attributor)
        return minimal_attributor
