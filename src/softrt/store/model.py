"""Typed JSON documents: frozen dataclasses read from and written back to JSON objects (store layer).

A :class:`Doc` subclass declares its fields with their types; :meth:`Doc.from_dict` checks every
value against its declared type (a whole number is not a bool nor a float, a count is not
negative, text is made :func:`~softrt.store.validate.printable`) and raises one ConfigError naming
the file and the field; :meth:`Doc.to_dict` gives the same JSON object back. Keys this softrt
does not know (written by a newer minor version) are kept in ``extra`` and written back, so a
document read and written again loses nothing: ``to_dict(from_dict(doc)) == doc``.

Every subclass is made a frozen, keyword-only dataclass. Field options (:func:`opt`,
:func:`count`, :func:`key`, :func:`flatten`): a field is written as ``null`` when it is None
unless it is *omitted* when None (:func:`opt`: a key only some documents have; one a file held
as ``null`` is written back as ``null``, and the file's key order is kept); a ``flatten`` field is a :class:`Doc` whose keys sit in
its parent's object (the summary's metrics). Free-form payloads (host facts, a load's figures)
are typed ``dict`` and kept as they are.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass, field
from functools import cache
from typing import Any, TypeVar

from ..errors import ConfigError
from .validate import INT64_MAX, printable, printable_strings, show_value

T = TypeVar("T", bound="Doc")
_HINT = "the file is corrupt or was not written by softrt"


def opt(default: Any = None, **meta: Any) -> Any:
    """A field only some documents have: omitted from the JSON object when None."""
    return field(default=default, metadata={"omit_none": True, **meta})


def count(*, omit_none: bool = False) -> Any:
    """A whole number that cannot be negative (None when unknown)."""
    return field(default=None, metadata={"min": 0, "omit_none": omit_none})


def many() -> Any:
    """A list, empty by default."""
    return field(default_factory=list)


def obj() -> Any:
    """A free-form object, empty by default."""
    return field(default_factory=dict)


def key(name: str, default: Any = None, **meta: Any) -> Any:
    """A field whose JSON key is not a Python name (``import``, ``from``)."""
    return field(default=default, metadata={"key": name, **meta})


def flatten(cls: type) -> Any:
    """A :class:`Doc` whose keys are written into its parent's object."""
    return field(default_factory=cls, metadata={"flatten": True})


@dataclass(frozen=True, kw_only=True)
class Doc:
    """A JSON object with typed fields; ``extra`` keeps the keys this softrt does not know."""

    extra: dict = field(default_factory=dict, repr=False)
    #: Keys the file held as null that are omitted when None (written back as null).
    nulls: frozenset = field(default=frozenset(), repr=False, compare=False)
    #: The file's key order, kept when it is written again (a document built in code: its fields' order).
    order: tuple = field(default=(), repr=False, compare=False)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        dataclass(frozen=True, kw_only=True)(cls)

    @classmethod
    def from_dict(cls: type[T], doc: object, where: object = "document", path: str = "") -> T:
        """Read *doc* (a parsed JSON object); ConfigError naming *where* and the field when a value
        has the wrong type or range. Missing fields take their defaults."""
        if not isinstance(doc, dict):
            raise _bad(where, path or "the document", f"must be an object, got {_show(doc)}")
        values, known = cls._read(doc, where, path)
        extra = {printable(k): printable_strings(v) for k, v in doc.items() if k not in known}
        nulls = frozenset(k for k in known if k in doc and doc[k] is None)
        return cls(**values, extra=extra, nulls=nulls, order=tuple(printable(k) for k in doc))

    @classmethod
    def _read(cls, doc: dict, where: object, path: str) -> tuple[dict, set]:
        values: dict[str, Any] = {}
        known: set[str] = set()
        for f, hint in _fields(cls):
            if f.metadata.get("flatten"):  # its parent keeps the key order
                inner, inner_known = hint._read(doc, where, path)
                values[f.name] = hint(**inner, nulls=frozenset(k for k in inner_known if k in doc and doc[k] is None))
                known |= inner_known
                continue
            name = f.metadata.get("key", f.name)
            known.add(name)
            if name in doc:
                values[f.name] = _convert(doc[name], hint, where, f"{path}.{name}" if path else name, f.metadata)
        return values, known

    def to_dict(self) -> dict:
        """The JSON object: declared fields in order (None written as null unless omitted), then extra."""
        out: dict[str, Any] = {}
        for f, _ in _fields(type(self)):
            value = getattr(self, f.name)
            if f.metadata.get("flatten"):
                out.update(value.to_dict())
            else:
                name = f.metadata.get("key", f.name)
                if value is not None or not f.metadata.get("omit_none") or name in self.nulls:
                    out[name] = _dump(value)
        out.update(self.extra)
        if self.order:
            out = {**{k: out[k] for k in self.order if k in out}, **out}
        return out

    def replace(self: T, **changes: Any) -> T:
        """A copy with *changes* (the documents are frozen)."""
        return dataclasses.replace(self, **changes)


@cache
def _fields(cls: type) -> tuple[tuple[dataclasses.Field, Any], ...]:
    hints = typing.get_type_hints(cls)
    return tuple((f, hints[f.name]) for f in dataclasses.fields(cls) if f.name not in ("extra", "nulls", "order"))


def _dump(value: Any) -> Any:
    if isinstance(value, Doc):
        return value.to_dict()
    if isinstance(value, (list, tuple)):
        return [_dump(v) for v in value]
    return value


def _convert(value: object, hint: Any, where: object, path: str, meta: typing.Mapping) -> Any:
    """*value* checked against the type *hint* (``X | None``, ``list[X]``, a Doc, a scalar)."""
    args = typing.get_args(hint)
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        if value is None and type(None) in args:
            return None
        kinds = [a for a in args if a is not type(None)]
        if len(kinds) == 1:
            return _convert(value, kinds[0], where, path, meta)
        for kind in kinds:  # e.g. ``str | dict``: the first that fits
            try:
                return _convert(value, kind, where, path, meta)
            except ConfigError:
                continue
        raise _bad(where, path, f"must be {' or '.join(_name(k) for k in kinds)}, got {_show(value)}")
    origin = typing.get_origin(hint)
    if origin is list:
        if not isinstance(value, list):
            raise _bad(where, path, f"must be a list, got {_show(value)}")
        return [_convert(v, args[0], where, f"{path}[{i}]", {}) for i, v in enumerate(value)]
    if isinstance(hint, type) and issubclass(hint, Doc):
        return hint.from_dict(value, where, path)
    if hint is bool:
        if not isinstance(value, bool):
            raise _bad(where, path, f"must be true or false, got {_show(value)}")
        return value
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise _bad(where, path, f"must be a whole number, got {_show(value)}")
        if value < meta.get("min", -INT64_MAX - 1):
            raise _bad(where, path, f"cannot be negative, got {_show(value)}")
        return value
    if hint is float:  # JSON has one number type: an integral float may be written as 3
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise _bad(where, path, f"must be a number, got {_show(value)}")
        return value
    if hint is str:
        if not isinstance(value, str):
            raise _bad(where, path, f"must be text, got {_show(value)}")
        return printable(value)
    if hint is dict or origin is dict:
        if not isinstance(value, dict):
            raise _bad(where, path, f"must be an object, got {_show(value)}")
        return printable_strings(value)
    if hint is Any or hint is object:
        return printable_strings(value)
    raise TypeError(f"{path}: unsupported field type {hint!r}")  # a bug in a Doc declaration


def _name(kind: Any) -> str:
    return {int: "a whole number", float: "a number", str: "text", bool: "true or false", dict: "an object"}.get(
        kind, "a list" if typing.get_origin(kind) is list else "an object")


def _show(value: object) -> str:
    if isinstance(value, (dict, list)):
        return f"a {'object' if isinstance(value, dict) else 'list'}"
    return show_value(value)


def _bad(where: object, path: str, problem: str) -> ConfigError:
    return ConfigError(f"{printable(where)}: {printable(path)[:80]} {problem}", hint=_HINT)
