"""The history in one SQLite file, the default (store layer, standard library only).

One connection per operation, one transaction per write; writers on the same machine wait for each
other up to ``timeout_s`` (sqlite3's ``timeout``: SQLite's busy handler). The layout version is
``PRAGMA user_version`` (SQLite docs, "PRAGMA user_version"). SQLite's locking needs a local file
system: a history shared by many rigs belongs in PostgreSQL (SQLite docs, "SQLite Over a Network").
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

from ..errors import ConfigError
from ..platform.owned import check_own_file, secure_dir
from .dialect import DB_SCHEMA_VERSION, SQLITE, Engine

T = TypeVar("T")


class SqliteEngine(Engine):
    """A history database file (created with its tables on first write)."""

    dialect = SQLITE

    def __init__(self, path: Path, timeout_s: float) -> None:
        super().__init__(str(path), timeout_s)
        self.path = path

    def run(self, fn: Callable[[sqlite3.Connection], T], *, write: bool, empty: T | None = None) -> T | None:
        """Return ``fn(conn)`` in one transaction; *empty* when reading a history with no tables yet."""
        with self._connect(write=write) as conn:
            return empty if conn is None else fn(conn)

    @contextmanager
    def _connect(self, *, write: bool) -> Iterator[sqlite3.Connection | None]:
        """Yield a connection (None when reading a database that does not exist yet, or has no tables yet).

        The database's directory and the way to it must be this user's (platform.owned, as the
        state directory), and the database a regular file of this user's: SQLite opens it and its
        journal by name, so nothing on the way may be another user's to swap for a link.
        """
        if not os.path.lexists(self.path) and not write:
            yield None
            return
        secure_dir(self.path.parent, "the history database's directory")
        check_own_file(self.path, "the history database")
        try:
            conn = sqlite3.connect(self.path, timeout=self.timeout_s)
        except sqlite3.Error as err:
            raise ConfigError(
                f"cannot open the history database {self.path}: {err}", hint="set SOFTRT_HOME or use --db PATH"
            ) from None
        try:
            if self._check_version(conn, write=write) == 0 and not write:
                yield None  # made by a softrt killed before it gave it its tables: no runs yet
            else:
                with conn:
                    yield conn
        except sqlite3.DatabaseError as err:
            if getattr(err, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL:  # the database is fine, its disk is not
                raise ConfigError(
                    f"cannot write the history database {self.path}: {err}",
                    hint="free space on its disk, or set SOFTRT_HOME to a directory on another",
                ) from None
            raise ConfigError(
                f"history database {self.path} is unusable: {err}",
                hint="move it away (runs stay in their directories; re-add them with "
                "softrt history add) or use --db PATH",
            ) from None
        finally:
            conn.close()

    def _check_version(self, conn: sqlite3.Connection, *, write: bool) -> int:
        """Return the database's layout version (0: never given its tables); a writer migrates it."""
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        self.refuse_newer(
            version, f"history database {self.path}", "upgrade softrt, or use another database with --db / SOFTRT_HOME"
        )
        if version < DB_SCHEMA_VERSION and write:
            # BEGIN IMMEDIATE: one writer migrates, the others wait for it and find the new version.
            conn.isolation_level = None
            try:
                conn.execute("BEGIN IMMEDIATE")
                version = conn.execute("PRAGMA user_version").fetchone()[0]
                self.migrate(version, conn.execute)
                if version < DB_SCHEMA_VERSION:
                    conn.execute(f"PRAGMA user_version = {int(DB_SCHEMA_VERSION)}")
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            finally:
                conn.isolation_level = ""  # back to sqlite3's implicit transactions for `with conn`
        return version
