"""schema.doc: every document type reads back what it writes, and checks itself when built in code.

The round trip ``from_dict(to_dict(x)) == x`` is held for every :class:`Doc` subclass (those of
``softrt.schema`` and the few other layers declare) by one Hypothesis test, whose documents are drawn from the
fields' declared types and ranges (with keys a newer softrt may write, kept in ``extra``).
"""

from __future__ import annotations

import dataclasses
import enum
import importlib
import pkgutil
import types
import typing

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import softrt.schema
from softrt.errors import ConfigError
from softrt.schema.doc import Doc, _bound, _fields
from softrt.schema.summary import Metrics, RunSummary, Stats
from softrt.schema.why_late import Culprit

for _mod in pkgutil.iter_modules(softrt.schema.__path__):
    importlib.import_module(f"softrt.schema.{_mod.name}")
# The documents other layers declare: softrt compare's (its comparison.json), the noise the fleet
# commands write, the simulator's control replies, softrt tune's plan and outcomes.
for _mod in (
    "softrt.scenario.compare",
    "softrt.analysis.regress",
    "softrt.ecatsim.replies",
    "softrt.audit.plan",
    "softrt.platform.journal",
):
    importlib.import_module(_mod)


def _all_docs(cls: type = Doc) -> list[type]:
    out = []
    for sub in cls.__subclasses__():
        out += [sub, *_all_docs(sub)]
    return sorted(set(out), key=lambda c: f"{c.__module__}.{c.__qualname__}")


DOCS = _all_docs()
_TEXT = st.text(st.characters(codec="utf-8", categories=("L", "N", "P", "Zs")), max_size=8)
_SCALARS = st.none() | st.booleans() | st.integers(-(10**6), 10**6) | _TEXT
_FREE = st.dictionaries(_TEXT, _SCALARS | st.lists(_SCALARS, max_size=2), max_size=2)


def _value(hint: object, minimum: int | None, bound: float | None) -> st.SearchStrategy:
    """Values of a field typed *hint* (and its range), as a producer gives them."""
    args = typing.get_args(hint)
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        return st.one_of(*(st.none() if a is type(None) else _value(a, minimum, bound) for a in args))
    if typing.get_origin(hint) is list:
        return st.lists(_value(args[0], None, None), max_size=2)
    if typing.get_origin(hint) is tuple:
        return st.lists(_value(args[0], None, None), max_size=2).map(tuple)
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return st.sampled_from(list(hint))
    if isinstance(hint, type) and issubclass(hint, Doc):
        return st.deferred(lambda: _doc(hint))
    if hint is bool:
        return st.booleans()
    if hint is int:
        return st.integers(0 if minimum is not None else -(2**63), 2**63 - 1)
    if hint is float:
        limit = bound if bound is not None else 1e300
        return st.floats(-limit, limit, allow_nan=False) | st.integers(-(10**6), 10**6)
    if hint is str:
        return _TEXT
    if hint is dict or typing.get_origin(hint) is dict:
        return _FREE
    return _SCALARS  # Any


def _required(f: dataclasses.Field) -> bool:
    return f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING


@st.composite
def _doc(draw: st.DrawFn, cls: type, flattened: bool = False) -> Doc:
    values = {}
    for f, hint in _fields(cls):
        if f.metadata.get("flatten"):
            values[f.name] = draw(_doc(hint, flattened=True))
        elif _required(f) or draw(st.booleans()):  # else its default
            values[f.name] = draw(_value(hint, f.metadata.get("min"), _bound(f)))
    # A flattened document's unknown keys are its parent's (they share one JSON object).
    extra = {} if flattened else draw(st.dictionaries(st.sampled_from(["zz_newer", "zz_later"]), _SCALARS, max_size=1))
    return cls(**values, extra=extra)


@pytest.mark.parametrize("cls", DOCS, ids=lambda c: c.__qualname__)
@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_every_document_reads_back_what_it_writes(cls: type, data: st.DataObject) -> None:
    doc = data.draw(_doc(cls))
    assert cls.from_dict(doc.to_dict()) == doc
    assert cls.from_dict(doc.to_dict()).to_dict() == doc.to_dict()


def test_a_document_built_in_code_is_checked_as_one_read() -> None:
    for bad, message in (
        (dict(cycles=-1), "cycles cannot be negative, got -1"),
        (dict(cycles=True), "cycles must be a whole number, got True"),
    ):
        with pytest.raises(ConfigError, match=message):
            Metrics(**bad)
    with pytest.raises(ConfigError, match=r"^Stats: max is out of range \(1e\+300; at most 9.22e\+15 in magnitude\)"):
        Stats(max=1e300)
    with pytest.raises(ConfigError, match=r"RunSummary: metrics must be a Metrics"):
        RunSummary(metrics={"cycles": 1})
    assert Culprit(name="a\x1b[2Jb").name == "a?[2Jb"  # text made printable as a reader makes it


def test_build_writes_the_keys_given_in_their_order() -> None:
    stats = Stats.build(mean=1.0, min=0.5, max=2.0, std=0.1, p50=1.0, p1=0.6)
    assert list(stats.to_dict()) == ["mean", "min", "max", "std", "p50", "p1"]  # no p99: not given
    summary = RunSummary.build(run_id="r", metrics=Metrics.build(cycles=2), host={}, future_key=1)
    assert list(summary.to_dict()) == ["run_id", "cycles", "host", "future_key"]
    assert RunSummary.from_dict(summary.to_dict()).to_dict() == summary.to_dict()


def test_an_enum_field_is_written_as_its_value_and_read_back_as_its_member() -> None:
    from softrt.schema.check import Finding, Severity, Status

    f = Finding(id="irq.nic", title="NIC", status=Status.WARN, severity=Severity.HIGH, summary="s", evidence=["a"])
    assert f.group == "irq" and f.evidence == ("a",)  # a frozen list, whatever it was built from
    written = f.to_dict()
    assert (written["status"], written["severity"], written["evidence"]) == ("warn", "high", ["a"])
    assert Finding.from_dict(written) == f and Finding.from_dict(written).status is Status.WARN
    with pytest.raises(ConfigError, match=r"^check.json: status must be one of ok, warn, fail, n/a, got 'bad'"):
        Finding.from_dict({**written, "status": "bad"}, "check.json")


def test_a_field_without_a_default_that_a_file_lacks_is_named() -> None:
    from softrt.schema.check import Finding

    with pytest.raises(ConfigError, match=r"^check.json: findings\[0\].summary is missing"):
        Finding.from_dict({"id": "a.b", "title": "t", "status": "ok", "severity": "low"}, "check.json", "findings[0]")


def test_a_list_of_numbers_is_checked_item_by_item_also_on_its_fast_path() -> None:
    from softrt.schema.runstats import Histogram

    ok = dict(n=2, sum_ns=3, m2_ns2=0.5, min_ns=1, max_ns=2, keys=[1, 2], counts=[1, 1])
    assert Histogram.from_dict(ok).to_dict() == ok
    keys = [1, 2]
    built = Histogram(**{**ok, "keys": keys})
    keys.append(3)
    assert built.keys == [1, 2]  # the document's own list, not the caller's
    for bad, message in (([1, True], r"keys\[1\] must be a whole number, got True"), ([1, 2.0], r"keys\[1\] must")):
        with pytest.raises(ConfigError, match=message):
            Histogram.from_dict({**ok, "keys": bad})
        with pytest.raises(ConfigError, match=message):
            Histogram(**{**ok, "keys": bad})
