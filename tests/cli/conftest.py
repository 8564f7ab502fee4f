"""Fixtures of the command-line tests."""

import pytest


@pytest.fixture
def home(softrt_home, monkeypatch):
    """The test's softrt data directory, with a terminal wide enough for every table column."""
    monkeypatch.setenv("COLUMNS", "160")
    return softrt_home
