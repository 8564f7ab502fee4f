"""The history on a PostgreSQL server, for a lab of many rigs (store layer; psycopg 3).

The URL is handed to libpq untouched, so its conventions hold: ``~/.pgpass`` or ``PGPASSFILE``
for the password, ``PGSERVICE``/``pg_service.conf``, ``sslmode`` and the other ``PG*`` variables
(PostgreSQL docs, "libpq – Environment Variables", "The Password File"). softrt adds only
``application_name`` and, unless the URL or ``PGCONNECT_TIMEOUT`` sets one, a ``connect_timeout``.

Many rigs write at once: a run is one ``INSERT … ON CONFLICT (run_id) DO UPDATE`` (atomic under
READ COMMITTED: PostgreSQL docs, "INSERT", "ON CONFLICT Clause"), so a row is never lost nor
doubled; the layout is made or migrated once, under a transaction-level advisory lock; a
serialization failure or deadlock (SQLSTATE class 40) is retried.

Errors become one line, the URL redacted and the server's text scrubbed of the password
(store.dbtarget): bad credentials, an unknown database, missing privileges and a newer layout are
bad input (ConfigError); a server that does not answer is :class:`LabUnreachable`.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable
from typing import Any, TypeVar

from ..errors import ConfigError, SoftRTError
from .dbtarget import LabUnreachable, redact, scrub
from .dialect import DB_SCHEMA_VERSION, PG, Engine

T = TypeVar("T")

RETRIES = 8
CONNECT_TIMEOUT_MAX_S = 10  # libpq waits this long for a server that does not answer (minimum 2 s)
_LOST_NETWORK = {
    "keepalives": 1,
    "keepalives_idle": 10,
    "keepalives_interval": 5,
    "keepalives_count": 3,
    "tcp_user_timeout": 30_000,
}
_LOCK_KEY = 0x736F667472740001  # pg_advisory_xact_lock key of softrt's layout changes ("softrt" + 1)
_SCHEMA_TABLE = "softrt_schema"
_AUTH_STATES = {"28P01", "28000"}  # invalid_password, invalid_authorization_specification
# libpq reports a refused login while connecting, before any SQLSTATE (PostgreSQL's auth.c messages).
_AUTH_WORDS = (
    "password authentication failed",
    "no password supplied",
    "authentication failed for user",
    "pg_hba.conf",
    'role "',
)
_FIX_URL = "write it as postgresql://user@host[:port]/dbname[?sslmode=require]"
_FIX_AUTH = (
    "check the user, and the password in ~/.pgpass or PGPASSFILE (never in the URL), or the server's pg_hba.conf"
)


def _psycopg():
    try:
        import psycopg
    except ImportError:
        raise ConfigError(
            "a postgresql:// history needs psycopg 3, which is not installed",
            hint="bash scripts/setup installs it (or pip install 'psycopg[binary]')",
        ) from None
    return psycopg


class PgEngine(Engine):
    """A history on a PostgreSQL server (its tables made on first write, by a role that may)."""

    dialect = PG

    def __init__(self, url: str, timeout_s: float) -> None:
        super().__init__(redact(url), timeout_s)
        self._url = url

    def run(self, fn: Callable[[Any], T], *, write: bool, empty: T | None = None) -> T | None:
        """Return ``fn(conn)`` in one transaction (retried on a serialization failure or deadlock);
        *empty* when reading a database that has no softrt tables yet."""
        psycopg = _psycopg()
        for attempt in range(RETRIES):
            try:
                with self._connect(psycopg) as conn:
                    version = self._check_version(conn, write=write)
                    if version == 0 and not write:
                        return empty
                    with conn.transaction():
                        return fn(conn)
            except (psycopg.errors.SerializationFailure, psycopg.errors.DeadlockDetected):
                if attempt == RETRIES - 1:
                    raise LabUnreachable(
                        f"the lab history {self.where} stayed busy after {RETRIES} tries",
                        hint="run it again (softrt push resends what is missing)",
                    ) from None
                time.sleep(random.uniform(0.01, 0.05) * (attempt + 1))
            except psycopg.Error as err:
                raise self._error(err) from None
        raise AssertionError("unreachable")  # pragma: no cover

    def check_url(self) -> dict[str, Any]:
        """The URL's parameters as libpq reads them (keyword -> value: psycopg.conninfo.conninfo_to_dict);
        ConfigError for a malformed one (nothing is sent)."""
        psycopg = _psycopg()
        try:
            info = psycopg.conninfo.conninfo_to_dict(self._url)
        except psycopg.ProgrammingError as err:
            raise ConfigError(
                f"cannot read the history URL {self.where}: {scrub(err, self._url)}", hint=_FIX_URL
            ) from None
        port = str(info.get("port") or "")
        if port and not all(p.isdigit() and 0 < int(p) < 65536 for p in port.split(",")):
            raise ConfigError(
                f"cannot read the history URL {self.where}: the port {port!r} is no port number", hint=_FIX_URL
            )
        return info

    def _connect(self, psycopg):
        """A connection in autocommit (each transaction is explicit); libpq reads the URL."""
        extra: dict[str, Any] = {"application_name": "softrt", "autocommit": True}
        info = self.check_url()
        if "connect_timeout" not in info and not os.environ.get("PGCONNECT_TIMEOUT"):
            extra["connect_timeout"] = int(min(CONNECT_TIMEOUT_MAX_S, max(2, self.timeout_s)))
        # A network lost in the middle of a statement: without these a push from cron would wait on
        # the dead connection for TCP's own ~15 min (libpq "Parameter Key Words"; tcp(7) TCP_USER_TIMEOUT).
        for key, value in _LOST_NETWORK.items():
            if key not in info:
                extra[key] = value
        return psycopg.connect(self._url, **extra)

    def _check_version(self, conn, *, write: bool) -> int:
        """Return the layout version (0: no tables yet); a writer migrates an older one under a lock."""
        version = self._version(conn)
        self.refuse_newer(
            version,
            f"the lab history {self.where}",
            "upgrade softrt on this rig; the run stays in the local history (softrt push sends it later)",
        )
        if version < DB_SCHEMA_VERSION and write:
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_KEY,))
                version = self._version(conn)  # another rig may have migrated it meanwhile
                if version > DB_SCHEMA_VERSION:
                    return self._check_version(conn, write=write)
                if version == 0:
                    conn.execute(
                        f"CREATE TABLE IF NOT EXISTS {_SCHEMA_TABLE} (id INTEGER PRIMARY KEY "
                        "CHECK (id = 1), version INTEGER NOT NULL)"
                    )
                self.migrate(version, conn.execute)
                conn.execute(
                    f"INSERT INTO {_SCHEMA_TABLE} (id, version) VALUES (1, %s) "
                    "ON CONFLICT (id) DO UPDATE SET version = excluded.version",
                    (DB_SCHEMA_VERSION,),
                )
        return version

    @staticmethod
    def _version(conn) -> int:
        if conn.execute("SELECT to_regclass(%s)", (_SCHEMA_TABLE,)).fetchone()[0] is None:
            return 0
        row = conn.execute(f"SELECT version FROM {_SCHEMA_TABLE} WHERE id = 1").fetchone()
        return 0 if row is None else int(row[0])

    def _error(self, err: Exception) -> SoftRTError:
        """One line for a psycopg error: what went wrong, with the URL redacted, and the fix."""
        state = getattr(err, "sqlstate", None) or ""
        text = scrub(str(err).strip() or type(err).__name__, self._url)
        if state in _AUTH_STATES or any(words in text for words in _AUTH_WORDS):
            return ConfigError(f"the lab history {self.where} refused the login: {text}", hint=_FIX_AUTH)
        if state == "3D000" or ("database" in text and "does not exist" in text):
            return ConfigError(
                f"the lab history {self.where} does not exist: {text}",
                hint="create it on the server (README, A lab of many machines) or fix the URL",
            )
        if state == "42501":
            return ConfigError(
                f"the lab history {self.where}: this role lacks a privilege: {text}",
                hint="grant the rig's role what the README lists (A lab of many machines); the "
                "tables are made by the owner's first softrt history --db URL",
            )
        if state.startswith("08") or not state:
            if "invalid" in text and ("URI" in text or "option" in text or "integer value" in text):
                return ConfigError(f"cannot read the history URL {self.where}: {text}", hint=_FIX_URL)
            return LabUnreachable(
                f"cannot reach the lab history {self.where}: {text}",
                hint="check the server runs and this rig reaches it; runs stay in this rig's "
                "history and softrt push sends them when it answers",
            )
        return SoftRTError(
            f"the lab history {self.where} failed: {text}",
            hint="see the server's log; softrt push resends what is missing",
        )
