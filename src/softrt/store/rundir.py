"""A run directory: ``samples.parquet``, ``summary.json``, ``stats.json``, ``config.json``, ``host.json``.

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
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ..analysis.stream import RunStats
from ..errors import ConfigError, SoftRTError
from ..ipc.layout import RECORD_DTYPE, RECORD_FIELDS

SCHEMA = "softrt.summary/1"
SUMMARY_MAJOR = 1
SAMPLES = "samples.parquet"
SUMMARY = "summary.json"
STATS = "stats.json"  # the streaming pass's state: counters and histograms (analysis.stream.RunStats)
#: Columns the streaming pass needs; a samples file without the others still summarises (they read as 0).
STREAM_COLUMNS = ("seq", "cycle", "edge_ns", "detect_ns", "done_ns", "missed")
BATCH_ROWS = 1 << 18  # 2 MB per int64 column
_ARROW_SCHEMA = pa.schema([(name, pa.int64()) for name in RECORD_FIELDS])
# Every column is a slowly changing int64 (counters, monotonic times, mostly-zero flags): delta
# encoding (Parquet's DELTA_BINARY_PACKED) then zstd stores a record in about 4.4 bytes instead of
# 31 and writes about 5 times faster than the default dictionary encoding, which gives up on
# columns of distinct values only after trying (docs/benchmarks.md, "Streaming metrics pass").
_WRITER_OPTIONS = {"compression": "zstd", "use_dictionary": False, "column_encoding": "DELTA_BINARY_PACKED"}


def write_json_atomic(target: Path, data: dict) -> Path:
    """Write *data* as JSON to *target* via a temporary file and rename(2)."""
    tmp = target.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n")
    os.replace(tmp, target)
    return target


def new_run_id() -> str:
    """Return a sortable, unique run id: ``20261130-071502-host-1a2b``."""
    host = socket.gethostname().split(".")[0][:20] or "host"
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
            self._writer = pq.ParquetWriter(self.path / SAMPLES, _ARROW_SCHEMA, **_WRITER_OPTIONS)
        self._writer.write_table(table)
        self.rows += chunk.size

    def close(self) -> None:
        """Flush and close the samples file (an empty run still gets a valid, empty file)."""
        self.flush()
        if self._writer is None:
            self._writer = pq.ParquetWriter(self.path / SAMPLES, _ARROW_SCHEMA, **_WRITER_OPTIONS)
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


def iter_samples(run_path: Path, batch_rows: int = BATCH_ROWS) -> Iterator[np.ndarray]:
    """Yield a run's records in order, batch by batch (RECORD_DTYPE; columns the file lacks are 0).

    Raises SoftRTError when the file is missing, unreadable or lacks a column of STREAM_COLUMNS.
    """
    path = Path(run_path) / SAMPLES
    try:
        pf = pq.ParquetFile(path)
        names = set(pf.schema_arrow.names)
        missing = [c for c in STREAM_COLUMNS if c not in names]
        if missing:
            raise SoftRTError(f"samples file {path} lacks column(s) {', '.join(missing)}")
        columns = [c for c in RECORD_FIELDS if c in names]
        for batch in pf.iter_batches(batch_size=batch_rows, columns=columns):
            out = np.zeros(batch.num_rows, dtype=RECORD_DTYPE)
            for name in columns:
                out[name] = batch.column(name).to_numpy(zero_copy_only=False)
            yield out
    except (OSError, pa.ArrowException, ValueError) as err:
        raise SoftRTError(f"cannot read samples {path}: {err}", hint="the file is corrupt or truncated") from None


def load_run_stats(run_path: Path, period_ns: int) -> RunStats:
    """A run's streaming-pass state: ``stats.json`` when the run stored it, else one pass over its
    samples, batch by batch (runs recorded before stats.json existed)."""
    file = Path(run_path) / STATS
    if file.is_file():
        try:
            return RunStats.from_dict(json.loads(file.read_text()))
        except (OSError, ValueError) as err:
            raise SoftRTError(f"cannot read {file}: {err}", hint="delete it: softrt then re-reads the samples") \
                from None
    stats = RunStats(period_ns)
    for records in iter_samples(run_path):
        stats.add(records)
    return stats


def update_summary(run_path: Path, **fields) -> dict:
    """Add *fields* to a finished run's summary.json (atomically); return the new summary."""
    summary = read_summary(run_path)
    summary.update(fields)
    write_json_atomic(Path(run_path) / SUMMARY, summary)
    return summary


def read_summary(run_path: Path) -> dict:
    """Return a run's summary.json, checking its schema."""
    path = Path(run_path) / SUMMARY
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise SoftRTError(f"cannot read {path}: {err}") from None
    if not str(data.get("schema", "")).startswith("softrt.summary/"):
        raise SoftRTError(f"{path} is not a softrt summary (schema {data.get('schema')!r})")
    check_summary_version(data, path)
    return data


def check_summary_version(summary: dict, where: Path | str) -> None:
    """Raise ConfigError for a summary of a newer major version than this softrt reads."""
    schema = str(summary.get("schema", ""))
    try:
        major = int(schema.split("/", 1)[1].split(".", 1)[0])
    except (IndexError, ValueError):
        raise ConfigError(f"{where}: unreadable summary schema {schema!r}",
                          hint="expected softrt.summary/<major>") from None
    if major > SUMMARY_MAJOR:
        raise ConfigError(f"{where} was written by a newer softrt (summary schema {schema}; this softrt reads "
                          f"softrt.summary/{SUMMARY_MAJOR})", hint="upgrade softrt to read it")

