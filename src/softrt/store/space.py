"""A run's disk budget (layer 4, store): what a run of so many records needs on disk, and the
refusal up front when its directory has not that much free (statvfs(3), via shutil.disk_usage).

Split from :mod:`.rundir`, which holds back :func:`reserve_bytes` (posix_fallocate(3)) while the run
writes, so that a full disk (write(2): ENOSPC) still lets its last row group, footer and JSON land.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from ..errors import ConfigError
from ..ipc.layout import RECORD_DTYPE

ROW_GROUP_ROWS = 16384  # 4 s at 250 µs; bounds the bytes one row group needs from the reserve

#: Bytes per row of samples.parquet: 5.7 measured (a 30 s, 250 µs run on the 2-CPU VM, delta +
#: zstd, docs/benchmarks.md) plus three quarters again for runs whose jitter compresses worse. The
#: estimate only decides the refusal up front; a run that outgrows it is still kept by the reserve.
BYTES_PER_ROW = 10
#: aggregates.parquet of a late run: 12 columns a second, zstd; 27 measured on the synthetic 24 h run.
AGG_BYTES_PER_SECOND = 50
#: A late run's estimate allows this share (‰) of the cycles to be late cycles or their context.
LATE_KEPT_SHARE_PERMILLE = 10
#: A row group can never need more than its raw int64 columns.
_RAW_ROW_GROUP_BYTES = ROW_GROUP_ROWS * RECORD_DTYPE.itemsize
_FOOTER_BYTES_PER_ROW_GROUP = 4096  # 2,195 measured for one row group of ten int64 columns
_JSON_BYTES = 1 << 20  # summary, config, host and check.json with room to spare


def _mb(n_bytes: int) -> str:
    return f"{n_bytes / 1e6:,.1f} MB"


def reserve_bytes(rows: int) -> int:
    """Bytes held back for a run of *rows*: one raw row group, the footer, the JSON files."""
    return _RAW_ROW_GROUP_BYTES + (rows // ROW_GROUP_ROWS + 1) * _FOOTER_BYTES_PER_ROW_GROUP + _JSON_BYTES


def space_needed(rows: int, samples: str = "all", period_ns: int = 250_000) -> int:
    """Bytes a run of *rows* records needs on disk (samples estimate plus the reserve).

    A ``late`` run (store.late) keeps one aggregate row a second and the late cycles with their
    context; the estimate allows :data:`LATE_KEPT_SHARE_PERMILLE` ‰ of the cycles for those.
    """
    kept = kept_rows(rows, samples)
    if samples == "late":
        seconds = rows * period_ns // 1_000_000_000 + 1
        return seconds * AGG_BYTES_PER_SECOND + kept * BYTES_PER_ROW + reserve_bytes(kept)
    return rows * BYTES_PER_ROW + reserve_bytes(rows)


def kept_rows(rows: int, samples: str = "all") -> int:
    """Rows of samples.parquet expected for a run of *rows* records (a late run: the allowance)."""
    return -(-rows * LATE_KEPT_SHARE_PERMILLE // 1000) if samples == "late" else rows


def check_space(base: Path, rows: int, samples: str = "all", period_ns: int = 250_000) -> int:
    """Raise ConfigError with the figures unless *base* has room for a run of *rows* records;
    return the bytes the run is estimated to need."""
    return check_free(base, space_needed(rows, samples, period_ns))


def check_free(base: Path, needed: int) -> int:
    """Raise ConfigError with the figures unless *base* has *needed* bytes free; return *needed*."""
    probe = Path(base).absolute()
    while not probe.exists() and probe != probe.parent:  # not made yet: the disk it will be on
        probe = probe.parent
    try:
        free = shutil.disk_usage(probe).free
    except OSError as err:
        raise ConfigError(
            f"cannot find the free space in {base}: {err.strerror or err}",
            hint="choose another directory with --out-dir",
        ) from None
    if free < needed:
        raise ConfigError(
            f"not enough disk space: the run needs ~{_mb(needed)} in {base}, {_mb(free)} free",
            hint="free some space, shorten --duration, keep late cycles only (--samples late), "
            "or choose another directory with --out-dir",
        )
    return needed
