"""Fixtures for the audit tests (the trees themselves are built in trees.py)."""

from __future__ import annotations

import shutil

import pytest

from .trees import CAPTURED, Tree, build_good


@pytest.fixture
def good(tmp_path) -> Tree:
    """A fresh copy of the well-tuned synthetic machine."""
    return build_good(tmp_path / "good")


@pytest.fixture
def captured(tmp_path) -> Tree:
    """A writable copy of the tree captured on the Debian 12 VM (scripts/capture_sysfs.py)."""
    dest = tmp_path / "captured"
    shutil.copytree(CAPTURED, dest, symlinks=True)
    return Tree(dest)
