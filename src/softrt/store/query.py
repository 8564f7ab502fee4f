"""``softrt query``: DuckDB over the history's index and the archive's Parquet files, offline (store layer).

DuckDB (duckdb.org) reads the index through its scanners, attached READ_ONLY (DuckDB docs,
"SQLite Extension", "PostgreSQL Extension": ``ATTACH … (TYPE sqlite|postgres, READ_ONLY)``), and
the archive's run folders as Hive partitions (``rig=<id>/date=<YYYY-MM-DD>/<run id>/``, store.archive;
DuckDB docs, "Hive Partitioning"). Its views:

- ``runs``: the index's rows, with the provenance and verdict read out of each stored summary
  (``rig``, ``rig_label``, ``kernel``, ``cpu_model``, ``microcode``, ``bios_version``, ``preemption``,
  ``cmdline``, ``late_cycles``, ``meets``);
- ``samples``: every archived run's ``samples.parquet`` with ``rig``, ``date`` and ``run_id``.

DuckDB would download its extensions from its own server at first use; softrt never lets it. The
``duckdb-extension-sqlite``/``-postgres``/``-httpfs`` packages (pinned with ``duckdb``) ship the
files; each is loaded from its package's file, under the name DuckDB expects (``LOAD '<dir>/
sqlite_scanner.duckdb_extension'``: a link made in a private temporary directory, a copy where no
link can be made, gone once loaded; nothing is installed in ``~/.duckdb``). DuckDB's auto-install,
auto-load and community extensions are off, its extension directory and repository are paths that
hold nothing, and the configuration is locked before the user's SQL runs (``lock_configuration``).
DuckDB checks every extension's signature when it loads.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import tempfile
from pathlib import Path

from ..errors import ConfigError
from .dbtarget import scrub
from .history import History

EXTENSIONS = {"sqlite": "sqlite_scanner", "postgres": "postgres_scanner", "httpfs": "httpfs"}
NO_REPOSITORY = "/nonexistent/softrt-never-downloads"
_FIELDS = {
    "rig_label": "$.provenance.rig_label",
    "kernel": "$.host.kernel",
    "cpu_model": "$.host.cpu_model",
    "microcode": "$.provenance.microcode",
    "bios_version": "$.provenance.bios_version",
    "preemption": "$.host.preemption",
    "cmdline": "$.host.cmdline",
}


def literal(text: str) -> str:
    """*text* as an SQL string literal (DuckDB's ATTACH and table functions take no parameters for these)."""
    if "\0" in text:
        raise ConfigError("a path or URL holds a NUL character", hint="give a plain path")
    return "'" + text.replace("'", "''") + "'"


def identifier(name: str) -> str:
    """*name* as a quoted SQL identifier."""
    return '"' + str(name).replace('"', '""') + '"'


def extension_file(name: str) -> Path:
    """The ``.duckdb_extension`` file the ``duckdb-extension-<name>`` package ships for this DuckDB."""
    import duckdb

    spec = importlib.util.find_spec(f"duckdb_extension_{name}")
    version = duckdb.__version__
    path = (
        Path(spec.origin).parent / "extensions" / f"v{version}" / f"{name}.duckdb_extension"
        if spec is not None and spec.origin
        else None
    )
    if path is None or not path.is_file():
        raise ConfigError(
            f"DuckDB's {name} extension for duckdb {version} is not installed",
            hint=f"pip install duckdb=={version} duckdb-extension-{name}=={version} "
            "(softrt never downloads extensions)",
        )
    return path


def connect(history: History, archive: str | None = None):
    """A DuckDB connection with the views ``runs`` (the index, read-only) and ``samples`` (the archive)."""
    try:
        import duckdb
    except ImportError:
        raise ConfigError(
            "softrt query needs DuckDB",
            hint="pip install 'duckdb==1.5.5' and its extension packages (scripts/setup installs them)",
        ) from None
    if archive and not archive.startswith("s3://") and not Path(archive).is_dir():
        raise ConfigError(f"no archive directory at {archive}", hint="give the lab's --archive PATH")
    con = duckdb.connect(
        ":memory:",
        config={
            "autoinstall_known_extensions": False,
            "autoload_known_extensions": False,
            "allow_community_extensions": False,
            "extension_directory": NO_REPOSITORY,
        },
    )
    try:
        con.execute(f"SET custom_extension_repository = {literal(NO_REPOSITORY)}")
        _attach_index(con, history)
        if archive:
            _archive_views(con, archive)
        con.execute("SET lock_configuration = true")
    except (duckdb.Error, ConfigError) as err:
        con.close()
        if isinstance(err, ConfigError):
            raise
        # DuckDB's postgres scanner may quote the connection string: never its password.
        text = scrub(str(err), history.url) if history.url else " ".join(str(err).split())
        raise ConfigError(
            f"cannot open the history for DuckDB: {text[:300]}", hint="check --db and --archive"
        ) from None
    return con


def _load(con, name: str) -> None:
    """Load the package's extension file under the name DuckDB takes its entry point from."""
    source = extension_file(name)
    with tempfile.TemporaryDirectory(prefix="softrt-duckdb-") as tmp:
        target = Path(tmp) / f"{EXTENSIONS[name]}.duckdb_extension"
        try:
            os.symlink(source, target)
        except OSError:  # no symbolic links here (Windows without the privilege): a copy
            shutil.copyfile(source, target)
        con.execute(f"LOAD {literal(str(target))}")


def _attach_index(con, history: History) -> None:
    if history.engine == "pg":
        _load(con, "postgres")
        con.execute(f"ATTACH {literal(history.url or '')} AS idx (TYPE postgres, READ_ONLY)")
        # The server's current schema (the URL's search_path, else public) holds softrt's tables.
        (schema,) = con.execute("SELECT * FROM postgres_query('idx', 'SELECT current_schema()')").fetchone()
        table = f"idx.{identifier(schema)}.runs"
    else:
        path = Path(history.path)
        if not path.is_file():
            raise ConfigError(f"no history database at {path}", hint="softrt run stores runs there; or give --db")
        _load(con, "sqlite")
        con.execute(f"ATTACH {literal(str(path))} AS idx (TYPE sqlite, READ_ONLY)")
        table = "idx.runs"
    extracted = ", ".join(f"json_extract_string(summary_json, {literal(p)}) AS {name}" for name, p in _FIELDS.items())
    con.execute(
        "CREATE VIEW runs AS SELECT *, coalesce(json_extract_string(summary_json, '$.provenance.rig_id'), "
        f"'host:' || host) AS rig, {extracted}, "
        "TRY_CAST(json_extract(summary_json, '$.late_cycles') AS BIGINT) AS late_cycles, "
        f"TRY_CAST(json_extract(summary_json, '$.verdict.meets') AS BOOLEAN) AS meets FROM {table}"
    )


def _archive_views(con, archive: str) -> None:
    if archive.startswith("s3://"):
        _load(con, "httpfs")  # credentials: DuckDB's own (CREATE SECRET), as the README says
        root = archive.rstrip("/")
    else:
        path = Path(archive)
        if not path.is_dir():
            raise ConfigError(f"no archive directory at {archive}", hint="give the lab's --archive PATH")
        root = str(path)
        if not any(path.glob("rig=*/date=*/*/samples.parquet")):
            con.execute(
                "CREATE VIEW samples AS SELECT NULL::VARCHAR AS rig, NULL::DATE AS date, "
                "NULL::VARCHAR AS run_id WHERE false"
            )  # an empty archive: the view still exists
            return
    pattern = literal(f"{root}/rig=*/date=*/*/samples.parquet")
    con.execute(
        f"CREATE VIEW samples AS SELECT * EXCLUDE (filename), "
        f"regexp_extract(filename, '([^/\\\\]+)[/\\\\]samples\\.parquet$', 1) AS run_id "
        f"FROM read_parquet({pattern}, hive_partitioning = true, "
        f"hive_types = {{'rig': VARCHAR, 'date': DATE}}, filename = true, union_by_name = true)"
    )


def run(con, sql: str, max_rows: int, url: str | None = None) -> tuple[list[str], list[tuple], bool]:
    """The columns and up to *max_rows* rows of the user's *sql*, and whether more were left out
    (an error is one line, without the password of *url*, the index's PostgreSQL URL)."""
    import duckdb

    try:
        cur = con.execute(sql)
        rows = cur.fetchmany(max_rows + 1)
        columns = [d[0] for d in cur.description or []]
    except duckdb.Error as err:
        text = scrub(str(err), url) if url else " ".join(str(err).split())
        raise ConfigError(
            f"query failed: {text[:300]}", hint="the views are runs (the index) and samples (the archive's Parquet)"
        ) from None
    return columns, rows[:max_rows], len(rows) > max_rows
