"""``tail.npz``: the tail model's raw material kept with a run (store layer; docs/run-format.md).

The streaming pass keeps the top of the period and latency series with their times
(:class:`softrt.analysis.tail_keep.TailKeeper`), so ``softrt tail RUN`` can refit a run of any
length, also one recorded with ``--samples late``. One numpy archive (numpy's own format, no
pickle): per series ``<series>_values`` and ``<series>_times`` (int64 ns) and
``<series>_meta`` = [threshold, seen, raised, deadline, late, first, last] (the first and last time
offered: the run's span; -1 for none).
"""

from __future__ import annotations

import os
import tempfile
import zipfile
from pathlib import Path

import numpy as np

from ..analysis.tail_keep import TailKeeper
from ..errors import SoftRTError
from ..schema.text import printable

TAIL_KEEP = "tail.npz"
SERIES = ("period", "latency")


def write_tail_keep(run_path: Path, keep: dict[str, TailKeeper]) -> Path:
    """Write *keep* atomically (a temporary file renamed into place)."""
    arrays = {}
    for name, k in keep.items():
        values, times = k.arrays()
        arrays[f"{name}_values"] = values.astype(np.int64)
        arrays[f"{name}_times"] = times.astype(np.int64)
        deadline = -1 if k.deadline is None else k.deadline
        first, last = (-1 if x is None else x for x in (k.first, k.last))
        arrays[f"{name}_meta"] = np.array(
            [k.threshold, k.seen, k.raised, deadline, k.late, first, last], dtype=np.int64
        )
    target = Path(run_path) / TAIL_KEEP
    tmp = None
    try:
        # a random O_EXCL name, as the run directory's other temporaries (never a planted link)
        fd, name = tempfile.mkstemp(prefix=f".{TAIL_KEEP}.", suffix=".tmp", dir=target.parent)
        tmp = Path(name)
        with os.fdopen(fd, "wb") as f:
            np.savez(f, **arrays)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except OSError as err:
        if tmp is not None:
            tmp.unlink(missing_ok=True)
        raise SoftRTError(f"cannot write {target}: {printable(err)[:200]}", hint="free disk space") from None
    return target


def read_tail_keep(run_path: Path) -> dict[str, TailKeeper] | None:
    """The kept series of a run (None: the run has no ``tail.npz``, e.g. one recorded before it)."""
    file = Path(run_path) / TAIL_KEEP
    if not file.is_file():
        return None
    out = {}
    try:
        with np.load(file, allow_pickle=False) as z:
            for name in SERIES:
                if f"{name}_meta" not in z:
                    continue
                meta = [int(x) for x in z[f"{name}_meta"]]
                if len(meta) != 7:
                    raise ValueError(f"{name}: {len(meta)} figures where 7 belong")
                threshold, seen, raised, deadline, late, first, last = meta
                values, times = z[f"{name}_values"], z[f"{name}_times"]
                if values.shape != times.shape or values.ndim != 1:
                    raise ValueError(f"{name}: {values.shape} values, {times.shape} times")
                out[name] = TailKeeper.restore(
                    values,
                    times,
                    threshold=threshold,
                    seen=seen,
                    raised=raised,
                    deadline=None if deadline < 0 else deadline,
                    late=late,
                    first=None if first < 0 else first,
                    last=None if last < 0 else last,
                )
    except (OSError, ValueError, KeyError, zipfile.BadZipFile) as err:
        raise SoftRTError(
            f"cannot read {file}: {printable(err)[:200]}",
            hint="the file is corrupt; softrt tail RUN reads the run's samples.parquet instead when it has one",
        ) from None
    return out
