"""A run directory: ``samples.parquet``, ``summary.json``, ``stats.json``, ``config.json``, ``host.json``.

Layout and schema are documented in docs/run-format.md. JSON files are written to a temporary
name and renamed (rename(2) is atomic), so a reader never sees half a file; the Parquet file is
written row group by row group while the run goes and closed when the run
stops, whatever stopped it.

A full disk must not cost the run (write(2): ENOSPC). Before the run, :func:`check_space` refuses
a run whose samples cannot fit; during it, the directory holds a preallocated reserve
(posix_fallocate(3)) big enough for one row group, the Parquet footer and the JSON files. The
first ENOSPC releases the reserve and retries the same write, so the row group in flight and
the footer still land and the file stays readable; later records are counted, not written.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import secrets
import shutil
import socket
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ..analysis.cycles import CycleView
from ..analysis.stream import RunStats
from ..errors import ConfigError, SoftRTError
from ..ipc.layout import RECORD_DTYPE, RECORD_FIELDS
from ..platform import O_PRIVATE_BINARY, preallocate
from ..platform.outfile import chmod_open
from ..schema.config import DEFAULT_THRESHOLD_NS
from ..schema.runstats import StatsState
from ..schema.summary import Kept, RunSummary
from ..schema.text import printable, safe_name
from .batch import Batch
from .late import AGGREGATES, LateSelector, SecondAggregator
from .space import (  # noqa: F401  (re-exported: callers and tests import them from here)
    ROW_GROUP_ROWS,
    check_free,
    check_space,
    kept_rows,
    reserve_bytes,
    space_needed,
)
from .validate import check_path, load_json, open_parquet

SAMPLES = "samples.parquet"
SUMMARY = "summary.json"
STATS = "stats.json"  # the streaming pass's state: counters and histograms (analysis.stream.RunStats)
#: Columns the streaming pass needs; a samples file without the others still summarises (they read as 0).
STREAM_COLUMNS = ("seq", "cycle", "edge_ns", "detect_ns", "done_ns", "missed")
BATCH_ROWS = 1 << 18  # 2 MB per int64 column
#: The most records softrt reads from one samples file: 24 h at 250 µs (345.6 M) and some. A
#: reader that keeps per-record data has its own, smaller budget (report.load.ROW_BUDGET).
MAX_SAMPLE_ROWS = 1 << 29
_ARROW_SCHEMA = pa.schema([(name, pa.int64()) for name in RECORD_FIELDS])
RESERVE = ".softrt-reserve"


class _Sink:
    """The samples file as pyarrow writes it: on the first ENOSPC the reserve is released and the
    same write is retried, so the row group in flight and the footer still fit."""

    def __init__(self, path: Path, reserve: Path) -> None:
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | O_PRIVATE_BINARY, 0o644)
        self._reserve = reserve
        self._pos = 0
        self.closed = False
        self.disk_full = False

    def release_reserve(self) -> None:
        try:
            os.unlink(self._reserve)
        except FileNotFoundError:
            pass

    def write(self, data) -> int:
        view = memoryview(data).cast("B")
        done = 0
        while done < len(view):
            try:
                done += os.write(self._fd, view[done:])
            except OSError as err:
                if err.errno != errno.ENOSPC or self.disk_full:
                    raise
                self.disk_full = True
                self.release_reserve()
        self._pos += done
        return done

    def tell(self) -> int:
        return self._pos

    def writable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    def flush(self) -> None:
        pass

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            os.close(self._fd)


# Every column is a slowly changing int64 (counters, monotonic times, mostly-zero flags): delta
# encoding (Parquet's DELTA_BINARY_PACKED) then zstd stores a record in about 4.4 bytes instead of
# 31 and writes about 5 times faster than the default dictionary encoding, which gives up on
# columns of distinct values only after trying (docs/benchmarks.md, "Streaming metrics pass").
_WRITER_OPTIONS = {"compression": "zstd", "use_dictionary": False, "column_encoding": "DELTA_BINARY_PACKED"}


def write_json_atomic(target: Path, data: dict) -> Path:
    """Write *data* as JSON to *target* via a temporary file and rename(2).

    The file's data is on the disk (fsync(2)) before the rename, so a power cut leaves the old
    file or the new one, never an empty one (a checkpoint's whole point; ext4 and xfs may
    otherwise commit the rename first). The temporary has a random name and is created
    ``O_EXCL | O_NOFOLLOW`` (tempfile.mkstemp): a link planted in the run directory is never opened.
    """
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(json.dumps(data, indent=2) + "\n")
            f.flush()
            os.fsync(f.fileno())
            chmod_open(f.fileno(), tmp, 0o644)  # as the run's other files (mkstemp makes 0600)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return target


def new_run_id() -> str:
    """Return a sortable, unique run id: ``20261130-071502-host-1a2b``."""
    host = safe_name(socket.gethostname().split(".")[0], fallback="host", max_len=20)  # part of a path
    return f"{time.strftime('%Y%m%d-%H%M%S')}-{host}-{secrets.token_hex(2)}"


def check_writable(base: Path, what: str = "runs", hint: str = "choose another directory with --out-dir") -> None:
    """Raise ConfigError unless files (*what*) can be created in directory *base* (made if needed).

    The probe has a random name, created ``O_EXCL | O_NOFOLLOW`` (tempfile.mkstemp): a link another
    user planted in a shared directory under a predictable name is never followed.
    """
    try:
        base.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".softrt-", suffix=".probe", dir=base)
        os.close(fd)
        os.unlink(probe)
    except OSError as err:
        raise ConfigError(f"cannot write {what} to {base}: {err.strerror or err}", hint=hint) from None


class RunDir:
    """One run's directory, written while the run goes."""

    def __init__(
        self,
        base: Path,
        run_id: str,
        expected_rows: int = 0,
        *,
        samples: str = "all",
        period_ns: int = 0,
        late_threshold_ns: int = 0,
    ) -> None:
        """*samples* ``late`` keeps the late cycles of *late_threshold_ns* with their context in the
        samples file and per-second aggregates beside it (store.late); ``all`` keeps every record."""
        self.run_id = run_id
        self.samples = samples
        self.path = Path(base) / run_id
        self._make()
        reserve = self.path / RESERVE
        try:
            fd = os.open(reserve, os.O_WRONLY | os.O_CREAT | os.O_EXCL | O_PRIVATE_BINARY, 0o600)
            try:
                preallocate(fd, reserve_bytes(kept_rows(expected_rows, samples)))
            finally:
                os.close(fd)
            self._sink = _Sink(self.path / SAMPLES, reserve)
        except OSError as err:
            self.discard()
            raise ConfigError(
                f"cannot reserve space for the run in {base}: {err.strerror or err}",
                hint="free some space or choose another directory with --out-dir",
            ) from None
        except BaseException:  # not a disk error (a bug, Ctrl-C): still no empty run directory left
            self.discard()
            raise
        self._writer: pq.ParquetWriter | None = None
        self._pending: Batch[np.ndarray] = Batch(np.concatenate)
        self.rows = 0  # records in the samples file
        self.unwritten = 0  # records the disk refused: counted, never silently lost
        self.failure: str | None = None  # why records stopped being written
        self.complete = True  # False when the samples file could not be finished (no footer)
        self._select: LateSelector | None = None
        self._aggregate: SecondAggregator | None = None
        if samples == "late":
            self._select = LateSelector(period_ns, late_threshold_ns)
            self._aggregate = SecondAggregator(self.path / AGGREGATES, period_ns, late_threshold_ns)

    def _make(self) -> None:
        try:
            # At most 0755 whatever the umask (mkdir(2) masks, never adds): no other user can plant a
            # link among a run's files (pyarrow opens aggregates.parquet by name, following links).
            self.path.mkdir(mode=0o755, parents=True)
        except OSError as err:
            raise SoftRTError(f"cannot create run directory {self.path}: {err.strerror or err}") from None

    @classmethod
    def of_files(cls, base: Path, run_id: str) -> RunDir:
        """A run directory of JSON files only (an imported result): no samples file, no reserve
        for one (issue 32: every import kept a 2.3 MB reserve and an empty samples.parquet)."""
        rundir = cls.__new__(cls)
        rundir.run_id, rundir.samples, rundir.path = run_id, "none", Path(base) / run_id
        rundir._make()
        return rundir

    def kept(self) -> Kept:
        """What the run keeps on disk, for summary.json's ``samples`` (docs/run-format.md)."""
        if self._select is None:
            return Kept(mode=self.samples, rows=self.rows)
        return Kept(
            mode=self.samples,
            rows=self.rows,
            late_cycles=self._select.late,
            context_records=self._select.context,
            aggregate_seconds=self._aggregate.seconds
            + len(self._aggregate._rows)
            + (self._aggregate._open is not None),
        )

    def write_json(self, name: str, data: dict) -> Path:
        """Write *data* as ``name`` atomically; raise SoftRTError (with the reason) if it cannot be."""
        try:
            return write_json_atomic(self.path / name, data)
        except OSError as err:
            raise SoftRTError(
                f"cannot write {self.path / name}: {err.strerror or err}",
                hint="free some space; the samples written so far are kept",
            ) from None

    def append(self, chunk: np.ndarray | CycleView, flush_rows: int = ROW_GROUP_ROWS) -> None:
        """Queue a chunk of records (or its cycle view, the drainer's: softrt.analysis.cycles); write a
        Parquet row group once *flush_rows* are queued.

        A ``late`` run queues only the late records and their context, and adds every record to
        the per-second aggregates; after a write error every record drained is counted unwritten.
        """
        records = chunk.records if isinstance(chunk, CycleView) else chunk
        if self._select is not None and records.size:
            if self.failure is not None:
                self.unwritten += records.size
                return
            try:
                self._aggregate.add(chunk)
            except (OSError, pa.ArrowException) as err:
                self.unwritten += records.size
                self._fail(f"cannot write {AGGREGATES} at cycle {int(records['seq'][0]):,}: {_why(err)}")
                return
            records = self._select.add(chunk)
        if records.size:
            self._pending.add(records, records.size)
        if self._pending.rows >= flush_rows:
            self.flush()

    def flush(self) -> None:
        """Write every queued record as one row group (after a write error: count them)."""
        chunk = self._pending.take()
        if chunk is None:
            return
        if self.failure is not None:
            self.unwritten += chunk.size
            return
        table = pa.table({name: chunk[name] for name in RECORD_FIELDS}, schema=_ARROW_SCHEMA)
        try:
            self._open_writer().write_table(table, row_group_size=ROW_GROUP_ROWS)
        except (OSError, pa.ArrowException) as err:
            # The writer is unusable after a failed write: the file cannot get its footer.
            self.complete = False
            self.unwritten += chunk.size
            self._fail(f"cannot write {SAMPLES} at cycle {int(chunk['seq'][0]):,}: {_why(err)}")
            return
        self.rows += chunk.size
        if self._sink.disk_full:  # this row group used the reserve: keep the rest for the footer
            self._fail(f"disk full at cycle {int(chunk['seq'][-1]) + 1:,}")

    def _open_writer(self) -> pq.ParquetWriter:
        if self._writer is None:
            self._writer = pq.ParquetWriter(self._sink, _ARROW_SCHEMA, **_WRITER_OPTIONS)
        return self._writer

    def _fail(self, reason: str) -> None:
        self.failure = reason
        self._sink.release_reserve()

    def close(self) -> None:
        """Flush and close the samples file (an empty run still gets a valid, empty file).

        The reserve is released first, so the footer and the JSON files that follow fit.
        """
        try:
            self.flush()
            self._sink.release_reserve()
            if self._aggregate is not None:
                try:
                    self._aggregate.close()
                except (OSError, pa.ArrowException) as err:
                    if self.failure is None:
                        self._fail(f"cannot finish {AGGREGATES}: {_why(err)}")
            if self.complete:
                try:
                    self._open_writer().close()
                except (OSError, pa.ArrowException) as err:
                    self.complete = False
                    self._fail(f"cannot finish {SAMPLES}: {_why(err)}")
        finally:
            self._sink.close()

    def touch(self) -> None:
        """Mark the samples file written now (its row groups come every few seconds): a killed run
        is timed to its last record by this (store.running.last_record_at)."""
        try:
            os.utime(self.path / SAMPLES)
        except OSError:
            pass  # a disk that refuses it costs the run nothing

    def discard(self) -> None:
        """Remove the directory of a run that never started."""
        shutil.rmtree(self.path, ignore_errors=True)


def _why(err: BaseException) -> str:
    """The cause of a write error in words (pyarrow wraps errno in its own message)."""
    if isinstance(err, OSError) and err.errno == errno.ENOSPC:
        return "no space left on device"
    return str(err)


def read_samples(run_path: Path, max_rows: int = MAX_SAMPLE_ROWS) -> np.ndarray:
    """Return a run's records as a RECORD_DTYPE array (at most *max_rows*: ConfigError beyond)."""
    return _concat(list(iter_samples(run_path, max_rows=max_rows)))


def _concat(chunks: list[np.ndarray]) -> np.ndarray:
    return np.concatenate(chunks) if chunks else np.zeros(0, dtype=RECORD_DTYPE)


def open_samples(run_path: Path, max_rows: int = MAX_SAMPLE_ROWS):
    """The run's samples file, its footer checked (store.validate.open_parquet); ConfigError otherwise."""
    return open_parquet(Path(run_path) / SAMPLES, "samples", max_rows, STREAM_COLUMNS)


def iter_samples(run_path: Path, batch_rows: int = BATCH_ROWS, max_rows: int = MAX_SAMPLE_ROWS) -> Iterator[np.ndarray]:
    """Yield a run's records in order, batch by batch (RECORD_DTYPE; columns the file lacks are 0).

    Raises ConfigError when the file is over *max_rows* or not shaped like softrt's (a column of
    STREAM_COLUMNS missing or not integers), SoftRTError when it cannot be read.
    """
    path = Path(run_path) / SAMPLES
    pf = open_samples(run_path, max_rows)
    try:
        names = set(pf.schema_arrow.names)
        columns = [c for c in RECORD_FIELDS if c in names]
        for batch in pf.iter_batches(batch_size=batch_rows, columns=columns):
            out = np.zeros(batch.num_rows, dtype=RECORD_DTYPE)
            for name in columns:
                out[name] = batch.column(name).to_numpy(zero_copy_only=False)
            yield out
    except (OSError, pa.ArrowException, ValueError, TypeError) as err:
        raise SoftRTError(
            f"cannot read samples {path}: {printable(err)[:200]}", hint="the file is corrupt or truncated"
        ) from None


def load_run_stats(
    run_path: Path, period_ns: int, threshold_ns: int = DEFAULT_THRESHOLD_NS, samples_pass: bool = True
) -> RunStats:
    """A run's streaming-pass state: ``stats.json`` when the run stored it, else (with *samples_pass*)
    one pass over its samples, batch by batch (runs recorded before stats.json existed), with the
    late rule of *threshold_ns*."""
    file = Path(run_path) / STATS
    if not samples_pass and not os.path.lexists(file):
        raise SoftRTError(f"{file} is missing", hint="copy the whole run directory, stats.json included")
    if os.path.lexists(file):
        try:  # bounded: size, depth, NaN, 64-bit integers (store.validate), then every bucket key (analysis.hdr)
            return RunStats.of_document(StatsState.from_dict(load_json(file, "run statistics"), file))
        except ConfigError as err:
            raise SoftRTError(err.msg, hint="delete it: softrt then re-reads the samples") from None
        except (ValueError, OverflowError, TypeError) as err:
            raise SoftRTError(
                f"cannot read {file}: {printable(err)}", hint="delete it: softrt then re-reads the samples"
            ) from None
    stats = RunStats(period_ns, threshold_ns)
    for records in iter_samples(run_path):
        stats.add(records)
    return stats


def update_summary(run_path: Path, **fields) -> RunSummary:
    """Set *fields* of a finished run's summary.json (atomically); return the new summary."""
    summary = read_summary(run_path).replace(**fields)
    write_json_atomic(Path(run_path) / SUMMARY, summary.to_dict())
    return summary


def read_summary(run_path: Path) -> RunSummary:
    """Return a run's summary.json, checking its schema version and every field (schema.summary)."""
    path = Path(run_path) / SUMMARY
    data = load_json(path, "run summary")  # bounded: size, depth, numbers (store.validate)
    return RunSummary.read(data, path)


def find_run_dirs(path: Path) -> list[Path]:
    """Return *path* if it is a run directory, else the run directories directly inside it.

    A directory of runs is what ``softrt run --out-dir``/``softrt compare`` leave, and what a lab
    copies from another PC.
    """
    path = Path(path)
    check_path(path, "run directory")
    if (path / SUMMARY).is_file():
        return [path]
    if path.is_dir():
        runs = sorted(p for p in path.iterdir() if (p / SUMMARY).is_file())
        if runs:
            return runs
        raise ConfigError(
            f"no run directory in {path} (no {SUMMARY} in it or its sub-directories)",
            hint="a run that failed to start has no summary.json",
        )
    raise ConfigError(f"no such run directory: {path}", hint="give a run directory or a run id from softrt history")
