"""A run directory: ``samples.parquet``, ``summary.json``, ``config.json``, ``host.json``.

Layout and schema are documented in docs/run-format.md. JSON files are written to a temporary
name and renamed (rename(2) is atomic), so a reader never sees half a file; the Parquet file is
written row group by row group while the run goes and closed when the run
stops, whatever stopped it.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ..errors import ConfigError, SoftRTError
from ..ipc.layout import RECORD_DTYPE, RECORD_FIELDS
from .validate import check_summary, load_json, printable, safe_name

SCHEMA = "softrt.summary/1"
SUMMARY_MAJOR = 1
SAMPLES = "samples.parquet"
SUMMARY = "summary.json"
_ARROW_SCHEMA = pa.schema([(name, pa.int64()) for name in RECORD_FIELDS])


def write_json_atomic(target: Path, data: dict) -> Path:
    """Write *data* as JSON to *target* via a temporary file and rename(2)."""
    tmp = target.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n")
    os.replace(tmp, target)
    return target


def new_run_id() -> str:
    """Return a sortable, unique run id: ``20261130-071502-host-1a2b``."""
    host = safe_name(socket.gethostname().split(".")[0], fallback="host", max_len=20)  # part of a path
    return f"{time.strftime('%Y%m%d-%H%M%S')}-{host}-{secrets.token_hex(2)}"


def check_writable(base: Path, what: str = "runs", hint: str = "choose another directory with --out-dir") -> None:
    """Raise ConfigError unless files (*what*) can be created in directory *base* (made if needed)."""
    try:
        base.mkdir(parents=True, exist_ok=True)
        probe = base / f".softrt-probe-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as err:
        raise ConfigError(f"cannot write {what} to {base}: {err.strerror or err}", hint=hint) from None


class RunDir:
    """One run's directory, written while the run goes."""

    def __init__(self, base: Path, run_id: str) -> None:
        self.run_id = run_id
        self.path = Path(base) / run_id
        try:
            self.path.mkdir(parents=True)
        except OSError as err:
            raise SoftRTError(f"cannot create run directory {self.path}: {err.strerror or err}") from None
        self._writer: pq.ParquetWriter | None = None
        self._pending: list[np.ndarray] = []
        self._pending_rows = 0
        self.rows = 0

    def write_json(self, name: str, data: dict) -> Path:
        """Write *data* as ``name`` atomically."""
        return write_json_atomic(self.path / name, data)

    def append(self, records: np.ndarray, flush_rows: int = 65536) -> None:
        """Queue *records*; write a Parquet row group once *flush_rows* are queued."""
        if records.size:
            self._pending.append(records)
            self._pending_rows += records.size
        if self._pending_rows >= flush_rows:
            self.flush()

    def flush(self) -> None:
        """Write every queued record as one row group."""
        if not self._pending:
            return
        chunk = np.concatenate(self._pending)
        self._pending, self._pending_rows = [], 0
        table = pa.table({name: chunk[name] for name in RECORD_FIELDS}, schema=_ARROW_SCHEMA)
        if self._writer is None:
            self._writer = pq.ParquetWriter(self.path / SAMPLES, _ARROW_SCHEMA, compression="zstd")
        self._writer.write_table(table)
        self.rows += chunk.size

    def close(self) -> None:
        """Flush and close the samples file (an empty run still gets a valid, empty file)."""
        self.flush()
        if self._writer is None:
            self._writer = pq.ParquetWriter(self.path / SAMPLES, _ARROW_SCHEMA, compression="zstd")
        self._writer.close()


    def discard(self) -> None:
        """Remove the directory of a run that never started."""
        shutil.rmtree(self.path, ignore_errors=True)


def read_samples(run_path: Path) -> np.ndarray:
    """Return a run's records as a RECORD_DTYPE array."""
    path = Path(run_path) / SAMPLES
    try:
        table = pq.read_table(path, columns=list(RECORD_FIELDS))
    except (OSError, pa.ArrowException) as err:
        raise SoftRTError(f"cannot read samples {path}: {err}") from None
    out = np.empty(table.num_rows, dtype=RECORD_DTYPE)
    for name in RECORD_FIELDS:
        out[name] = table.column(name).to_numpy()
    return out


def update_summary(run_path: Path, **fields) -> dict:
    """Add *fields* to a finished run's summary.json (atomically); return the new summary."""
    summary = read_summary(run_path)
    summary.update(fields)
    write_json_atomic(Path(run_path) / SUMMARY, summary)
    return summary


def read_summary(run_path: Path) -> dict:
    """Return a run's summary.json, checking its schema."""
    path = Path(run_path) / SUMMARY
    data = load_json(path, "run summary")  # bounded: size, depth, numbers (store.validate)
    if not isinstance(data, dict) or not str(data.get("schema", "")).startswith("softrt.summary/"):
        schema = data.get("schema") if isinstance(data, dict) else None
        raise ConfigError(f"{printable(path)} is not a softrt summary (schema {printable(repr(schema))[:60]})",
                          hint="give a run directory written by softrt run, compare or import")
    check_summary_version(data, path)
    return check_summary(data, path)


def check_summary_version(summary: dict, where: Path | str) -> None:
    """Raise ConfigError for a summary of a newer major version than this softrt reads."""
    schema = str(summary.get("schema", ""))
    try:
        major = int(schema.split("/", 1)[1].split(".", 1)[0])
    except (IndexError, ValueError):
        raise ConfigError(f"{printable(where)}: unreadable summary schema {printable(repr(schema))[:60]}",
                          hint="expected softrt.summary/<major>") from None
    if major > SUMMARY_MAJOR:
        raise ConfigError(f"{printable(where)} was written by a newer softrt (summary schema {printable(schema)[:60]}; "
                          "this softrt reads "
                          f"softrt.summary/{SUMMARY_MAJOR})", hint="upgrade softrt to read it")

