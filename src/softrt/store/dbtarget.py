"""Where the run history lives: a SQLite file or a PostgreSQL URL, and how to name it safely (store layer).

``--db`` and ``SOFTRT_DB`` take either a path (SQLite, the default ``<data dir>/history.sqlite``)
or a libpq connection URI, ``postgresql://[user@]host[:port]/dbname[?sslmode=…]`` (PostgreSQL
docs, "Connection Strings", 34.1.1). Nothing of the URI is interpreted here beyond telling it from
a path: libpq reads it, with its environment (``PGPASSFILE``, ``PGSERVICE``, ``PGSSLMODE``…) and
``~/.pgpass``, so a password need never be on a command line.

A password given in the URI anyway never leaves this module in clear: every message names the
database by :func:`redact` (``postgresql://rig:***@lab/softrt``) and passes the server's own
error text through :func:`scrub`.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from urllib.parse import unquote, urlsplit

from ..errors import ConfigError, SoftRTError
from ..platform import data_dir

DB_ENV = "SOFTRT_DB"
DB_NAME = "history.sqlite"
PG_SCHEMES = ("postgresql", "postgres")  # the two prefixes libpq accepts
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
# user:password@ in the authority, and password=… in the query (libpq takes both).
_USERINFO = re.compile(r"(?P<head>^[A-Za-z][A-Za-z0-9+.-]*://[^/?#@]*?:)(?P<secret>[^/?#]*)@")
_QUERY_PASSWORD = re.compile(r"(?P<head>[?&]password=)(?P<secret>[^&#]*)", re.IGNORECASE)


class LabUnreachable(SoftRTError):
    """The lab's history server did not answer (down, no network): a fault, not bad input."""


def default_db_path() -> Path:
    """Return the default history database path, ``<data dir>/history.sqlite``."""
    return data_dir() / DB_NAME


def is_url(target: object) -> bool:
    """True when *target* is a URL (``scheme://…``) rather than a file path."""
    return isinstance(target, str) and _SCHEME.match(target.strip()) is not None


def resolve(target: str | os.PathLike[str] | None) -> str | Path:
    """Return the history *target* names: a PostgreSQL URL (str) or a SQLite path.

    None means ``$SOFTRT_DB``, else the default file. ``sqlite:///abs/path`` is a path too. A URL
    of another scheme is bad input.
    """
    if target is None or (isinstance(target, str) and not target.strip()):
        target = os.environ.get(DB_ENV) or None
        if target is None:
            return default_db_path()
    if not isinstance(target, str):
        return Path(target)
    text = target.strip()
    match = _SCHEME.match(text)
    if match is None:
        return Path(text).expanduser()
    scheme = match.group(1).lower()
    if scheme in PG_SCHEMES:
        return text
    if scheme == "sqlite":
        return Path(unquote(urlsplit(text).path))
    raise ConfigError(
        f"unknown history database {redact(text)}: softrt stores its history in SQLite or PostgreSQL",
        hint="give a file path, or postgresql://user@host/dbname (--db or SOFTRT_DB)",
    )


def local_db_path() -> Path:
    """The rig's own SQLite history: ``$SOFTRT_DB`` when it is a path, else the default file.

    A run is always kept here first (store and forward); a lab database is written after it.
    """
    target = resolve(None)
    return target if isinstance(target, Path) else default_db_path()


def redact(url: str) -> str:
    """*url* with any password replaced by ``***`` (a path is returned as it is)."""
    text = str(url)
    text = _USERINFO.sub(lambda m: m.group("head") + "***@", text)
    return _QUERY_PASSWORD.sub(lambda m: m.group("head") + "***", text)


def secrets(url: str) -> list[str]:
    """The password(s) in *url*, raw and percent-decoded, longest first (what :func:`scrub` hides)."""
    found = [m.group("secret") for m in (_USERINFO.search(url), *_QUERY_PASSWORD.finditer(url)) if m]
    out = {s for raw in found if raw for s in (raw, unquote(raw))}
    return sorted(out, key=len, reverse=True)


def scrub(text: str, url: str) -> str:
    """*text* (a driver's or server's message) with *url* redacted and its password(s) removed."""
    text = str(text).replace(url, redact(url))
    for secret in secrets(url):
        text = text.replace(secret, "***")
    return " ".join(text.split())  # libpq's messages span lines; an error is one line
