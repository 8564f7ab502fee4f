"""Fixtures for the Windows audit tests."""

from __future__ import annotations

import pytest

from .captures import Captures


@pytest.fixture
def good(tmp_path) -> Captures:
    """A writable copy of the well-tuned Windows machine's outputs."""
    return Captures.copy("good", tmp_path / "good")


@pytest.fixture
def bad(tmp_path) -> Captures:
    """A writable copy of the untuned Windows machine's outputs."""
    return Captures.copy("bad", tmp_path / "bad")
