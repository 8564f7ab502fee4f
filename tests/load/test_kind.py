"""One module per load kind: the table the kinds fill is what the registry and the parser read."""

from __future__ import annotations

import pkgutil

import pytest

from softrt.load import LOAD_NAMES, kinds
from softrt.load.kind import KINDS, LoadKind, register


def test_every_kind_module_registers_the_kind_it_is_named_for():
    modules = {m.name for m in pkgutil.iter_modules(kinds.__path__)}
    assert modules == set(KINDS) == set(LOAD_NAMES)
    assert LOAD_NAMES == ("disk", "cpu", "memory", "network", "churn", "gpu", "video")  # listed by rank


def test_a_kind_is_registered_once_with_one_way_to_make_it():
    with pytest.raises(ValueError, match="twice"):
        register(LoadKind("cpu", 1, make=lambda cpus, backend, **kw: None))
    with pytest.raises(ValueError, match="either"):
        register(LoadKind("nothing", 1))
    assert "nothing" not in KINDS
