"""The history's engines for the tests: SQLite always, PostgreSQL when ``SOFTRT_TEST_PG`` names a server.

``scripts/ci-postgres`` starts a real server (Debian's packages, a temporary cluster) and sets
``SOFTRT_TEST_PG`` to a URL of a role that may create schemas; each test then gets a schema of its own
(libpq's ``options=-csearch_path=…``), dropped afterwards. Without it the PostgreSQL cases are not
generated at all, so the main suite neither grows nor lists skips; the harness runs them with ``-m pg``.
"""

from __future__ import annotations

import os
import uuid
from contextlib import contextmanager
from urllib.parse import quote

import pytest

PG_ENV = "SOFTRT_TEST_PG"


def engines() -> list:
    """The parameters of a test that runs on every engine: sqlite, and pg (marker ``pg``) when a server is given."""
    out = [pytest.param("sqlite", id="sqlite")]
    if os.environ.get(PG_ENV):
        out.append(pytest.param("pg", id="pg", marks=pytest.mark.pg))
    return out


def with_option(url: str, option: str) -> str:
    """*url* with one more query parameter."""
    return url + ("&" if "?" in url else "?") + option


@contextmanager
def pg_schema():
    """Yield a URL whose tables land in a fresh schema of the test server (dropped at the end)."""
    import psycopg

    base = os.environ[PG_ENV]
    name = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {name}")
    try:
        yield with_option(base, "options=" + quote(f"-csearch_path={name}"))
    finally:
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {name} CASCADE")
