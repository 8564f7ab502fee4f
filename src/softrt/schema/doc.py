"""Typed JSON documents: frozen dataclasses read from and written back to JSON objects (store layer).

A :class:`Doc` subclass declares its fields with their types; :meth:`Doc.from_dict` checks every
value against its declared type (a whole number is not a bool nor a float, a count is not
negative, text is made :func:`~softrt.store.validate.printable`) and raises one ConfigError naming
the file and the field; :meth:`Doc.to_dict` gives the same JSON object back. Keys this softrt
does not know (written by a newer minor version) are kept in ``extra`` and written back, so a
document read and written again loses nothing and gains nothing: ``to_dict(from_dict(doc)) ==
doc``, also for a file written by an older version (a key it lacks is not added while its field
keeps its default).

A document built in code is checked as one read from disk (:meth:`Doc.__post_init__` runs the same
checks, with the same messages, naming the class), so a producer returns documents and nobody reads
its output back "to check it". :meth:`Doc.build` builds one by keyword whose JSON object holds
exactly the keys given, in that order (None written as null), as a reader of that object would
get it: what a writer glued as a dict before is built this way with the same bytes;
:func:`present` leaves out the keys a document holds only sometimes.

Every subclass is made a frozen, keyword-only dataclass. Field options (:func:`opt`,
:func:`count`, :func:`key`, :func:`flatten`): a field is written as ``null`` when it is None
unless it is *omitted* when None (:func:`opt`: a key only some documents have; one a file held
as ``null`` is written back as ``null``, and the file's key order is kept); a ``flatten`` field
is a :class:`Doc` whose keys sit in its parent's object (the summary's metrics). Free-form
payloads (host facts, a load's figures) are typed ``dict`` and kept as they are. An
:class:`enum.Enum` field (a finding's status) is written as its value and read back as its member;
a ``tuple[X, ...]`` field is a list that cannot change.

JSON (RFC 8259) has one number type (section 6): a ``float`` field accepts ``3`` and keeps it as
written; an ``int`` field accepts only whole numbers (``3.0`` is refused, as ``true`` is).
"""

from __future__ import annotations

import contextvars
import dataclasses
import enum
import re
import sys
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from typing import Any, TypeVar

from ..errors import ConfigError
from .text import printable, printable_strings, show_value

T = TypeVar("T", bound="Doc")
R = TypeVar("R")
#: How a field's JSON value is checked and converted: (value, where, path) -> the field's value.
Converter = Callable[[object, object, str], Any]
#: Set while :meth:`Doc.from_dict` reads: its values are checked as they are converted, so the
#: documents it builds skip :meth:`Doc.__post_init__`'s second check (a summary holds tens of
#: thousands of values).
_READING: contextvars.ContextVar[bool] = contextvars.ContextVar("softrt_doc_reading", default=False)
_HINT = "the file is corrupt or was not written by softrt"
#: The longest time a document holds: int64 nanoseconds (about 292 years), as every clock softrt reads
#: gives it (clock_gettime(2)'s struct timespec as one count). A time past it is no measurement but a
#: corrupt or hostile file (``period_us.max = 1e308``), refused when read.
MAX_NS = 2**63 - 1
MAX_US = MAX_NS / 1_000
#: A float field named for its unit (``_ns``, ``_us``, ``_ms``, ``_s``: the house rule) is a time,
#: bounded by MAX_NS in that unit; ``_per_s`` is a rate, not a time.
_TIME_UNIT = re.compile(r"(?<!_per)_(ns|us|ms|s)$")
_NS_PER_UNIT = {"ns": 1, "us": 1_000, "ms": 1_000_000, "s": 1_000_000_000}


def present(**values: Any) -> dict[str, Any]:
    """The keywords whose value is not None, for :meth:`Doc.build`: keys a document holds only
    sometimes (absent, not null, when there is nothing to say)."""
    return {name: value for name, value in values.items() if value is not None}


def opt(default: Any = None, **meta: Any) -> Any:
    """A field only some documents have: omitted from the JSON object when None."""
    return field(default=default, metadata={"omit_none": True, **meta})


def count(*, omit_none: bool = False) -> Any:
    """A whole number that cannot be negative (None when unknown)."""
    return field(default=None, metadata={"min": 0, "omit_none": omit_none})


def within(bound: float, *, omit_none: bool = False) -> Any:
    """A number (None when unknown) whose magnitude is at most *bound*: a figure past it is no
    measurement but a corrupt or hostile file, refused when read."""
    return field(default=None, metadata={"bound": bound, "omit_none": omit_none})


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


if typing.TYPE_CHECKING:  # (mypy checks as Python 3.10, whose typing lacks it)
    from typing_extensions import dataclass_transform
elif sys.version_info >= (3, 11):
    from typing import dataclass_transform
else:  # Python 3.10: only type checkers read it (PEP 681)

    def dataclass_transform(**_: Any) -> Callable[[type], type]:
        return lambda cls: cls


# PEP 681: every subclass is made a frozen keyword-only dataclass (__init_subclass__), which a type
# checker sees only through this marker.
@dataclass_transform(kw_only_default=True, frozen_default=True, field_specifiers=(field,))
@dataclass(frozen=True, kw_only=True)
class Doc:
    """A JSON object with typed fields; ``extra`` keeps the keys this softrt does not know."""

    extra: dict[str, Any] = field(default_factory=dict, repr=False)
    #: Keys the file held as null that are omitted when None (written back as null).
    nulls: frozenset[str] = field(default=frozenset(), repr=False, compare=False)
    #: The file's key order, kept when it is written again (a document built in code: its fields' order).
    order: tuple[str, ...] = field(default=(), repr=False, compare=False)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        dataclass(frozen=True, kw_only=True)(cls)

    def __post_init__(self) -> None:
        """Check every field as :meth:`from_dict` does (same messages, naming the class), so a document
        built in code is as valid as one read from disk; text is made printable as a reader makes it.
        Documents :meth:`from_dict` builds were checked as they were read: not twice."""
        if _READING.get():
            return
        where = type(self).__name__
        for name, key, convert, inner in _plan(type(self)):
            value = getattr(self, name)
            if inner is not None:
                if not isinstance(value, inner):
                    raise _bad(where, name, f"must be a {inner.__name__}, got {_show(value)}")
                continue
            checked = convert(value, where, key)
            if checked is not value:
                object.__setattr__(self, name, checked)
        if self.extra:
            object.__setattr__(self, "extra", {printable(k): printable_strings(v) for k, v in self.extra.items()})

    @classmethod
    def build(cls: type[T], **values: Any) -> T:
        """A document built in code whose JSON object holds the keys given, in the order given, as a
        reader of that object would get it: a default field not given is not written, one given as
        None is written as null; a flattened document's keys sit where it is given. Keywords that
        are not fields go to ``extra``."""
        names = {f.name: (f.metadata.get("key", f.name), bool(f.metadata.get("flatten"))) for f, _ in _fields(cls)}
        fields: dict[str, Any] = {}
        extra: dict[str, Any] = {}
        order: list[str] = []
        for name, value in values.items():
            if name not in names:
                extra[name] = value
                order.append(name)
                continue
            fields[name] = value
            json_key, flat = names[name]
            order.extend(value.to_dict() if flat else (json_key,))
        nulls = frozenset(names[n][0] for n, v in fields.items() if v is None)  # given as null: written as null
        return cls(**fields, extra=extra, nulls=nulls, order=tuple(order))

    @classmethod
    def from_dict(cls: type[T], doc: object, where: object = "document", path: str = "") -> T:
        """Read *doc* (a parsed JSON object); ConfigError naming *where* and the field when a value
        has the wrong type or range, or when a field without a default is missing. Missing fields
        take their defaults."""
        if not isinstance(doc, dict):
            raise _bad(where, path or "the document", f"must be an object, got {_show(doc)}")
        token = _READING.set(True)
        try:
            values, known = cls._read(doc, where, path)
            extra = {printable(k): printable_strings(v) for k, v in doc.items() if k not in known}
            return cls(**values, extra=extra, nulls=_nulls(doc, known), order=tuple(printable(k) for k in doc))
        finally:
            _READING.reset(token)

    @classmethod
    def _read(cls, doc: dict[str, Any], where: object, path: str) -> tuple[dict[str, Any], frozenset[str]]:
        values: dict[str, Any] = {}
        for name, key, convert, inner in _plan(cls):
            if inner is not None:  # flattened: its keys are in *doc*, whose key order its parent keeps
                inner_values, _ = inner._read(doc, where, path)
                values[name] = inner(
                    **inner_values, nulls=_nulls(doc, _keys(inner)), order=tuple(k for k in doc if k in _keys(inner))
                )
            elif key in doc:
                values[name] = convert(doc[key], where, f"{path}.{key}" if path else key)
            elif key in _required(cls):  # (a dataclass would raise TypeError, naming no file)
                raise _bad(where, f"{path}.{key}" if path else key, "is missing")
        return values, _keys(cls)

    def to_dict(self) -> dict[str, Any]:
        """The JSON object: declared fields in order (None written as null unless omitted), then extra."""
        out: dict[str, Any] = {}
        read = frozenset(self.order)
        for f, _ in _fields(type(self)):
            value = getattr(self, f.name)
            if f.metadata.get("flatten"):
                out.update(value.to_dict())
            else:
                key = f.metadata.get("key", f.name)
                if read and key not in read and _is_default(f, value):
                    continue  # a key the file lacked (an older writer) and nothing set since: still absent
                if value is not None or not f.metadata.get("omit_none") or key in self.nulls:
                    out[key] = _dump(value)
        out.update(self.extra)
        if self.order:
            out = {**{k: out[k] for k in self.order if k in out}, **out}
        return out

    def replace(self: T, **changes: Any) -> T:
        """A copy with *changes* (the documents are frozen)."""
        return dataclasses.replace(self, **changes)


def _per_class(make: Callable[[type], R]) -> Callable[[type], R]:
    """*make*'s result cached per class (functools.cache does the same, but mypy does not take a
    dataclass as Hashable: its instances' ``__hash__`` hides the class object's)."""
    made: dict[type, R] = {}

    def get(cls: type) -> R:
        if cls not in made:
            made[cls] = make(cls)
        return made[cls]

    return get


@_per_class
def _fields(cls: type) -> tuple[tuple[dataclasses.Field[Any], Any], ...]:
    hints = typing.get_type_hints(cls)
    return tuple((f, hints[f.name]) for f in dataclasses.fields(cls) if f.name not in ("extra", "nulls", "order"))


@_per_class
def _plan(cls: type) -> tuple[tuple[str, str, Converter, type[Doc] | None], ...]:
    """How *cls* reads a JSON object: (field, key, converter, flattened Doc or None) per field."""
    return tuple(
        (
            f.name,
            f.metadata.get("key", f.name),
            _converter(hint, f.metadata.get("min"), _bound(f)),
            hint if f.metadata.get("flatten") else None,
        )
        for f, hint in _fields(cls)
    )


def _bound(f: dataclasses.Field[Any]) -> float | None:
    """The largest magnitude a number field takes: :func:`within`'s, else a time's (by its unit)."""
    if "bound" in f.metadata:
        bound: float = f.metadata["bound"]
        return bound
    unit = _TIME_UNIT.search(f.name)
    return MAX_NS / _NS_PER_UNIT[unit.group(1)] if unit else None


@_per_class
def _required(cls: type) -> frozenset[str]:
    """The JSON keys of *cls*'s fields that have no default: a file must hold them."""
    missing = dataclasses.MISSING
    return frozenset(
        f.metadata.get("key", f.name)
        for f, _ in _fields(cls)
        if f.default is missing and f.default_factory is missing and not f.metadata.get("flatten")
    )


@_per_class
def _keys(cls: type) -> frozenset[str]:
    """The JSON keys *cls* reads (a flattened Doc's included)."""
    return frozenset[str]().union(*(_keys(inner) if inner is not None else {key} for _, key, _, inner in _plan(cls)))


def _is_default(f: dataclasses.Field[Any], value: Any) -> bool:
    if f.default is not dataclasses.MISSING:
        return bool(value == f.default)
    return f.default_factory is not dataclasses.MISSING and bool(value == f.default_factory())


def _nulls(doc: dict[str, Any], keys: frozenset[str]) -> frozenset[str]:
    return frozenset(k for k, v in doc.items() if v is None and k in keys)


def _dump(value: Any) -> Any:
    if isinstance(value, Doc):
        return value.to_dict()
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, (list, tuple)):
        if all(type(v) in _PLAIN for v in value):  # a histogram's buckets: thousands of numbers
            return list(value)
        return [_dump(v) for v in value]
    return value


#: The JSON values :func:`_dump` writes as they are.
_PLAIN = frozenset((int, float, str, bool, type(None)))


@cache
def _converter(
    hint: Any, minimum: int | None = None, bound: float | None = None
) -> Callable[[object, object, str], Any]:
    """A function checking a value against *hint* (and a number's magnitude against *bound*), made
    once per type (reading a summary with a hundred late cycles checks tens of thousands of values)."""
    args = typing.get_args(hint)
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        nullable = type(None) in args
        kinds = [a for a in args if a is not type(None)]
        convs = [_converter(k, minimum, bound) for k in kinds]

        def union(value: object, where: object, path: str) -> Any:
            if value is None and nullable:
                return None
            if len(convs) == 1:
                return convs[0](value, where, path)
            for conv in convs:  # e.g. ``str | dict``: the first that fits
                try:
                    return conv(value, where, path)
                except ConfigError:
                    continue
            raise _bad(where, path, f"must be {' or '.join(_name(k) for k in kinds)}, got {_show(value)}")

        return union
    if typing.get_origin(hint) is list:
        item = _converter(args[0])
        # A list of plain numbers (a histogram's buckets: thousands) is checked in one pass.
        plain = {int: (int,), float: (int, float)}.get(args[0])

        def many(value: object, where: object, path: str) -> list[Any]:
            if not isinstance(value, list):
                raise _bad(where, path, f"must be a list, got {_show(value)}")
            if plain is not None and all(type(v) in plain for v in value):
                return list(value)  # a copy, as below: the caller's list is not the document's
            try:
                return [item(v, where, path) for v in value]
            except ConfigError:  # again, naming the item that is wrong
                return [item(v, where, f"{path}[{i}]") for i, v in enumerate(value)]

        return many
    if typing.get_origin(hint) is tuple and len(args) == 2 and args[1] is Ellipsis:  # a frozen list
        items = _converter(list[args[0]])  # type: ignore[valid-type]
        return lambda value, where, path: tuple(items(list(value) if isinstance(value, tuple) else value, where, path))
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return _member(hint)
    if isinstance(hint, type) and issubclass(hint, Doc):  # a document built in code was checked when built
        return lambda value, where, path: value if isinstance(value, hint) else hint.from_dict(value, where, path)
    if hint is bool:
        return _scalar(lambda v: isinstance(v, bool), "must be true or false")
    if hint is int:
        whole = _scalar(lambda v: isinstance(v, int) and not isinstance(v, bool), "must be a whole number")
        if minimum is None:
            return whole

        def count(value: object, where: object, path: str) -> int:
            checked: int = whole(value, where, path)
            if checked < minimum:
                raise _bad(where, path, f"cannot be negative, got {_show(value)}")
            return checked

        return count
    if hint is float:  # JSON has one number type: an integral float may be written as 3
        number = _scalar(lambda v: isinstance(v, (int, float)) and not isinstance(v, bool), "must be a number")
        if bound is None:
            return number

        def figure(value: object, where: object, path: str) -> float:
            # (not abs(v) <= bound: NaN compares false both ways, so it is refused too)
            checked: float = number(value, where, path)
            if not -bound <= checked <= bound:
                raise _bad(where, path, f"is out of range ({_show(value)}; at most {bound:.3g} in magnitude)")
            return checked

        return figure
    if hint is str:
        text = _scalar(lambda v: isinstance(v, str), "must be text")
        return lambda value, where, path: printable(text(value, where, path))
    if hint is dict or typing.get_origin(hint) is dict:
        obj = _scalar(lambda v: isinstance(v, dict), "must be an object")
        return lambda value, where, path: printable_strings(obj(value, where, path))
    if hint is Any or hint is object:
        return lambda value, where, path: printable_strings(value)
    raise TypeError(f"unsupported field type {hint!r}")  # a bug in a Doc declaration


def _member(kind: type[enum.Enum]) -> Converter:
    """An enum field: written as its member's value (a text enum: its text), read back as the member."""
    values = ", ".join(str(m.value) for m in kind)

    def member(value: object, where: object, path: str) -> Any:
        if isinstance(value, kind):
            return value
        try:
            return kind(value)
        except ValueError:
            raise _bad(where, path, f"must be one of {values}, got {_show(value)}") from None

    return member


def _scalar(fits: Callable[[object], bool], problem: str) -> Callable[[object, object, str], Any]:
    def check(value: object, where: object, path: str) -> Any:
        if not fits(value):
            raise _bad(where, path, f"{problem}, got {_show(value)}")
        return value

    return check


def _name(kind: Any) -> str:
    return {int: "a whole number", float: "a number", str: "text", bool: "true or false", dict: "an object"}.get(
        kind, "a list" if typing.get_origin(kind) is list else "an object"
    )


def _show(value: object) -> str:
    if isinstance(value, (dict, list)):
        return f"a {'object' if isinstance(value, dict) else 'list'}"
    return show_value(value)


def _bad(where: object, path: str, problem: str) -> ConfigError:
    return ConfigError(f"{printable(where)}: {printable(path)[:80]} {problem}", hint=_HINT)
