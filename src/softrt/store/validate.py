"""Reading what softrt did not write itself: bounded JSON, printable text, safe names (store layer).

A run directory, an imported cyclictest/oslat result or a copied history can come from anywhere,
so every file is read the same way: at most :data:`MAX_JSON_BYTES`, nested at most
:data:`MAX_JSON_DEPTH` deep, no NaN/Infinity (RFC 8259 section 6: "Numeric values that cannot be
represented ... (such as Infinity and NaN) are not permitted"), every integer inside SQLite's
signed 64-bit INTEGER (sqlite.org/datatype3.html) and every float finite. A file that breaks one
of these rules is one ConfigError naming the file and the field (exit status 2), never a
traceback; the summary's field types are checked by its model (schema.doc, schema.summary).

Parquet files (samples, aggregates) go through :func:`open_parquet`: their footer is parsed with
small Thrift limits and their metadata is checked against a row budget, a row-group size and the
column types before a single value is decoded, so a small file that claims (or holds, highly
compressed) hundreds of millions of rows is refused up front instead of filling memory.

Two helpers for what is shown or used as a name: :func:`printable` drops control characters
(terminal escape sequences in a nodename must not reach the terminal), :func:`safe_name` maps a
name onto ``[A-Za-z0-9._-]`` before it becomes part of a path (a nodename with ``/`` must not
become a directory).
"""

from __future__ import annotations

import functools
import inspect
import json
import math
import os
import stat
import typing
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..platform import O_PRIVATE_BINARY
from ..platform.kfiles import file_kind
from ..schema.summary import MAX_US
from ..schema.text import is_safe_name, printable, show_value

#: The largest JSON file softrt reads (a cyclictest histogram of 64 threads x 10,000 buckets is ~10 MB).
MAX_JSON_BYTES = 64 * 1024 * 1024
#: The deepest nesting softrt reads; its own files nest 4 levels, rt-tests' 4.
MAX_JSON_DEPTH = 32
#: SQLite INTEGER is a signed 64-bit number (and so is every numpy count softrt computes).
INT64_MAX = 2**63 - 1

#: A Parquet footer of softrt's holds a few hundred bytes per row group and column; these bound the
#: footer's strings and lists (pyarrow's defaults are 100 MB and 1 M).
THRIFT_STRING_LIMIT = 1 << 20
THRIFT_CONTAINER_LIMIT = 1 << 17
#: The most rows of one row group decoded at a time (softrt writes 16,384; 8 MB per int64 column).
MAX_ROW_GROUP_ROWS = 1 << 20

_HINT = "the file is corrupt or was not written by softrt"


def _depth_limit(pq) -> dict[str, int]:
    """A footer's schema nests at most 4 deep (softrt's are flat) where pyarrow has the limit; older
    ones (pyproject allows 14+; 17 under Wine has none) read the schema within the two limits above,
    and the column check below refuses a nested one."""
    return {"schema_depth_limit": 4} if "schema_depth_limit" in inspect.signature(pq.ParquetFile).parameters else {}


def _where(path: object) -> str:
    return printable(path)


def _reject_constant(name: str) -> None:
    raise ValueError(f"{name} is not a number JSON allows")


def parse_json(raw: bytes | str, where: object, *, max_depth: int = MAX_JSON_DEPTH) -> object:
    """Parse *raw* as strict JSON (bounded, see the module docstring); ConfigError naming *where*."""
    try:
        doc = json.loads(raw, parse_constant=_reject_constant)
    except RecursionError:
        raise ConfigError(
            f"{_where(where)}: JSON nested too deeply (more than {max_depth} levels)", hint=_HINT
        ) from None
    except ValueError as err:  # JSONDecodeError, UnicodeDecodeError, an integer of > 4300 digits, NaN
        raise ConfigError(f"{_where(where)} is not valid JSON ({printable(err)})", hint=_HINT) from None
    check_values(doc, where, max_depth=max_depth)
    return doc


def read_bounded(
    path: Path | str, what: str = "file", *, max_bytes: int = MAX_JSON_BYTES, hint: str | None = None
) -> bytes:
    """Return the bytes of the regular file *path*, at most *max_bytes*; ConfigError otherwise.

    Opened with O_NONBLOCK and checked with fstat(2): a FIFO or a device named like a result file
    (``summary.json -> /dev/zero``) is refused instead of blocking or reading forever.
    """
    path = Path(path)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | O_PRIVATE_BINARY)
    except OSError as err:
        raise ConfigError(f"cannot read {what} {_where(path)}: {err.strerror or err}", hint=hint) from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise ConfigError(f"{what} {_where(path)} is {file_kind(mode)}, not a regular file", hint=hint)
        with os.fdopen(fd, "rb", closefd=False) as f:
            raw = f.read(max_bytes + 1)
    except OSError as err:
        raise ConfigError(f"cannot read {what} {_where(path)}: {err.strerror or err}", hint=hint) from None
    finally:
        os.close(fd)
    if len(raw) > max_bytes:
        size = f"{max_bytes // (1024 * 1024)} MiB" if max_bytes >= 1024 * 1024 else f"{max_bytes // 1024} KiB"
        raise ConfigError(
            f"{what} {_where(path)} is larger than {size}", hint=hint or "softrt does not read files this large"
        )
    return raw


def path_kind(path: Path | str) -> str | None:
    """What *path* is, following links without opening it (stat(2) neither blocks on a FIFO nor
    reads a device): :func:`file_kind`, "a link to nothing", or None when nothing is there."""
    try:
        return file_kind(os.stat(path).st_mode)
    except (OSError, ValueError):  # ValueError: a NUL byte in the path
        return "a link to nothing" if os.path.islink(path) else None


def load_json(
    path: Path | str, what: str = "file", *, max_bytes: int = MAX_JSON_BYTES, max_depth: int = MAX_JSON_DEPTH
) -> object:
    """Read and parse the JSON file *path* (bounded); ConfigError for anything wrong with it."""
    return parse_json(read_bounded(path, what, max_bytes=max_bytes), path, max_depth=max_depth)


def check_values(doc: object, where: object, *, max_depth: int = MAX_JSON_DEPTH) -> None:
    """Raise ConfigError if *doc* nests deeper than *max_depth*, or holds an integer outside
    64 bits or a float that is not finite (``1e999`` parses as infinity)."""
    stack: list[tuple[object, int, str]] = [(doc, 1, "")]
    while stack:
        value, depth, key = stack.pop()
        if isinstance(value, (dict, list)):
            if depth > max_depth:
                raise ConfigError(f"{_where(where)}: JSON nested too deeply (more than {max_depth} levels)", hint=_HINT)
            items = value.items() if isinstance(value, dict) else enumerate(value)
            stack.extend((v, depth + 1, f"{key}.{k}" if isinstance(value, dict) else f"{key}[{k}]") for k, v in items)
        elif isinstance(value, bool) or value is None or isinstance(value, str):
            continue
        elif isinstance(value, int):
            if not -INT64_MAX - 1 <= value <= INT64_MAX:
                raise ConfigError(f"{_where(where)}: {_key(key)} is out of range ({show_value(value)})", hint=_HINT)
        elif isinstance(value, float) and not math.isfinite(value):
            raise ConfigError(f"{_where(where)}: {_key(key)} is not a finite number ({value})", hint=_HINT)


def _key(key: str) -> str:
    return printable(key.lstrip(".") or "the document")[:80]


def open_parquet(path: Path | str, what: str, max_rows: int, columns: Iterable[str] = (), *, floats: bool = False):
    """Open the Parquet file *path* for reading, after checking what its footer claims.

    At most *max_rows* rows in all, row groups of at most :data:`MAX_ROW_GROUP_ROWS`, and each of
    *columns* present and of integers (with *floats*: of numbers).

    Raises:
        ConfigError: a file that is unreadable, too large, or not shaped like softrt's (one line,
            naming the file; a file over the row budget says so with the figures).
    """
    # (pyarrow imported here: ~35 ms that the JSON readers, e.g. the EtherCAT simulator's, never need)
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = Path(path)
    try:
        pf = pq.ParquetFile(
            path,
            thrift_string_size_limit=THRIFT_STRING_LIMIT,
            thrift_container_size_limit=THRIFT_CONTAINER_LIMIT,
            **_depth_limit(pq),
        )
        meta = pf.metadata
        rows = meta.num_rows
        groups = [meta.row_group(i).num_rows for i in range(meta.num_row_groups)]
        schema = pf.schema_arrow
    except (OSError, pa.ArrowException, ValueError, MemoryError) as err:
        raise ConfigError(f"cannot read {what} {_where(path)}: {printable(err)[:200]}", hint=_HINT) from None
    if rows > max_rows:
        raise ConfigError(
            f"{what} {_where(path)} holds {rows:,} rows, more than softrt reads ({max_rows:,})", hint=_HINT
        )
    if rows < 0 or sum(groups) != rows or any(not 0 <= g <= MAX_ROW_GROUP_ROWS for g in groups):
        raise ConfigError(
            f"{what} {_where(path)} has row groups softrt does not write "
            f"(more than {MAX_ROW_GROUP_ROWS:,} rows, or not adding up)",
            hint=_HINT,
        )
    for name in columns:
        index = schema.get_field_index(name)
        if index < 0:
            raise ConfigError(f"{what} {_where(path)} lacks the column {name}", hint=_HINT)
        kind = schema.field(index).type
        if not (pa.types.is_integer(kind) or (floats and pa.types.is_floating(kind))):
            raise ConfigError(f"{what} {_where(path)}: column {name} is {printable(kind)}, not numbers", hint=_HINT)
    return pf


def check_row(record: type, row: dict[str, object], where: object) -> dict[str, Any]:
    """Return the history row *row* (column -> SQLite value) checked against the dataclass
    *record*'s field types, its text made printable; ConfigError naming the run and the column.

    A history database can be copied from another PC or edited with the sqlite3 shell, and SQLite
    stores any value in any column ("type affinity", sqlite.org/datatype3.html section 3): a
    listing must not meet text where it counts cycles, a blob where it prints a host, or a
    ``period_max_us`` of 1e308 (a µs figure past int64 ns is no measurement, as in summary.json).
    Counts (``int``) are never negative; ``str`` columns are text, made printable; ``Path`` ones
    text without NUL, kept as they are (the render layer cleans what it prints).
    """
    hints = _hints(record)
    run_id = row.get("run_id")
    if not is_safe_name(run_id):
        raise ConfigError(f"{_where(where)}: a row's run_id is not a run id ({show_value(run_id)})", hint=_ROW_HINT)
    out = dict(row)
    for name, value in row.items():
        kinds = typing.get_args(hints[name]) or (hints[name],) if name in hints else ()
        if value is None and (type(None) in kinds or not kinds):
            continue
        problem = _column_problem(value, kinds)
        if problem:
            raise ConfigError(
                f"{_where(where)}: run {run_id}, column {name} {problem} ({show_value(value)})", hint=_ROW_HINT
            )
        if isinstance(value, str) and str in kinds:  # a path stays as it is: it must name its directory
            out[name] = printable(value)
    return out


@functools.cache
def _hints(record: type) -> Mapping[str, Any]:
    """*record*'s field types, once (evaluating them costs ~50 µs, a history holds thousands of rows)."""
    return typing.get_type_hints(record)


_ROW_HINT = (
    "a damaged or hand-edited history: move it away (runs stay in their directories; re-add them with "
    "softrt history add) or set SOFTRT_HOME"
)


def _column_problem(value: object, kinds: tuple) -> str | None:
    """What is wrong with a column's *value* for a field of the types *kinds* (None: nothing)."""
    if str in kinds or Path in kinds:
        if not isinstance(value, str):
            return "is not text"
        return _path_problem(value) if Path in kinds else None
    if int in kinds:
        if isinstance(value, bool) or not isinstance(value, int):
            return "is not a whole number"
        return "is negative" if value < 0 else None
    if float in kinds:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return "is not a number"
        return None if -MAX_US <= value <= MAX_US else f"is out of range (at most {MAX_US:.3g} µs in magnitude)"
    return None


#: The longest path and file name the system opens (Linux's PATH_MAX and NAME_MAX, limits.h; Windows'
#: long paths and NTFS names are within them): a longer one is ENAMETOOLONG wherever it is used.
MAX_PATH_BYTES = 4096
MAX_NAME_BYTES = 255


def _path_problem(value: str) -> str | None:
    """What keeps *value* from being a path this system can open (None: nothing)."""
    if "\0" in value:
        return "holds a NUL byte"
    try:
        raw = os.fsencode(value)
    except UnicodeEncodeError:  # a lone surrogate no file system name holds
        return "is not a file name this system holds"
    if len(raw) >= MAX_PATH_BYTES or any(len(part) > MAX_NAME_BYTES for part in raw.split(os.fsencode(os.sep))):
        return "is too long to be a path"
    return None


def check_path(path: Path | str, what: str = "path") -> None:
    """Raise ConfigError when *path* (a run directory or reference the user gave, or a file read
    names) cannot be a path on this system: a NUL byte, or longer than PATH_MAX/NAME_MAX, which
    every stat or open would refuse with ENAMETOOLONG (not an error pathlib's is_file() swallows)."""
    problem = _path_problem(str(path))
    if problem:
        shown = printable(str(path))
        raise ConfigError(
            f"{what} {shown[:60]}{'…' if len(shown) > 60 else ''} {problem}",
            hint="give a run directory or a run id from softrt history",
        )
