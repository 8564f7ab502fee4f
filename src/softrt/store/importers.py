"""Import cyclictest and oslat ``--json`` results as softrt run directories (store layer).

What the tools write, and how it is read, is :mod:`.importers_parse`.

The run directory gets ``summary.json`` (schema softrt.summary/1 with ``"source"`` set to the
tool, ``latency_us`` computed from the histogram, the metrics that do not apply set to null),
``histogram.json`` (schema softrt.histogram/1, below), ``config.json``, ``host.json`` and the
original file as ``source.json``. Percentiles are the tool's own bucket labels (cyclictest: the
truncated value, oslat: the rounded-up value) and are null when they lie beyond the histogram.

``histogram.json``::

    {"schema": "softrt.histogram/1", "metric": "latency", "source": "cyclictest",
     "threads": [{"thread": "0", "cpu": 1, "samples": 4000, "width_ns": 1000,
                  "lower_ns": [8000, ...], "counts": [1, ...],
                  "overflow": 0, "overflow_from_ns": 400000, "min_ns": 8000, "max_ns": 232000,
                  "mean_ns": 18900.0}]}
"""

from __future__ import annotations

import hashlib
import os
import secrets
import shutil
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from ..errors import ConfigError
from ..platform import data_dir
from ..platform.owned import secure_dir
from ..schema.host import HostFacts
from ..schema.summary import SCHEMA, Config, Imported, Metrics, RunSummary, Stats, ThreadResult, Tuned, Tuning
from ..schema.text import printable, safe_name
from .history import HISTOGRAM
from .importers_parse import (
    CYCLICTEST_HIST_MAX,
    OSLAT_MAX_BUCKETS,
    SOURCES,
    _cmdline,
    _flag,
    _int,
    _iso,
    _option,
    _text,
    _threads,
    check_histograms,
    detect_source,
)
from .rundir import RunDir
from .validate import check_values, parse_json, read_bounded

__all__ = [
    "CYCLICTEST_HIST_MAX",
    "HISTOGRAM_SCHEMA",
    "OSLAT_MAX_BUCKETS",
    "SOURCES",
    "build_summary",
    "check_histograms",
    "default_import_dir",
    "detect_source",
    "histogram_stats_us",
    "import_file",
]

HISTOGRAM_SCHEMA = "softrt.histogram/1"
#: A series an import has no figures of (its period, its processing time): every figure null.
_NO_STATS = Stats.build(mean=None, min=None, max=None, std=None, p50=None, p99=None, p99_9=None, p99_99=None)


def default_import_dir() -> Path:
    """Where imported runs are stored by default: ``<data dir>/imported``."""
    return data_dir() / "imported"


def import_file(
    path: Path | str, out_dir: Path | str | None = None, *, scenario: str | None = None, source: str | None = None
) -> Path:
    """Store the cyclictest/oslat JSON result *path* as a run directory under *out_dir*; return it.

    Importing the same file again returns the existing directory (the run id ends with a hash
    of the file). Raises ConfigError for an unreadable or foreign file.
    """
    path = Path(path)
    raw = read_bounded(path, "result", hint="give a cyclictest/oslat --json file")
    doc = parse_json(raw, path)  # bounded: depth, NaN/Infinity, 64-bit integers (store.validate)
    if not isinstance(doc, dict):
        raise ConfigError(
            f"{printable(path)} is not a cyclictest/oslat result", hint="give a cyclictest/oslat --json file"
        )
    tool = source or detect_source(doc)
    if tool not in SOURCES:
        raise ConfigError(f"unknown source {tool!r}", hint=f"use one of: {', '.join(SOURCES)}")
    threads = _threads(doc, tool, path)
    check_histograms(threads, path)
    digest = hashlib.sha256(raw).hexdigest()
    started = _iso(doc.get("start_time"))
    sysinfo = doc.get("sysinfo") if isinstance(doc.get("sysinfo"), dict) else {}
    # The nodename becomes part of a directory name: only [A-Za-z0-9._-] (a "/" would make a path).
    host = safe_name(_text(sysinfo.get("nodename")).split(".")[0], fallback="unknown", max_len=20)
    stamp = (datetime.fromisoformat(started) if started else datetime.now(timezone.utc)).strftime("%Y%m%d-%H%M%S")
    run_id = f"{stamp}-{host}-{tool}-{digest[:4]}"

    if out_dir is None:
        secure_dir(data_dir(), "softrt's data directory")  # SOFTRT_HOME: the same checks as the state directory
    base = Path(out_dir) if out_dir is not None else default_import_dir()
    target = base / run_id
    if (target / "summary.json").is_file():
        return target
    try:
        base.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ConfigError(
            f"cannot write imported runs to {base}: {err.strerror or err}",
            hint="choose another directory with --out-dir",
        ) from None
    summary = build_summary(
        doc, tool, threads, run_id=run_id, scenario=scenario or tool, file=str(path.resolve()), sha256=digest
    )
    # What is written must read back: the same checks as every reader, before anything is written.
    check_values(summary.to_dict(), path)
    summary.validate(path)
    # Written under a temporary sibling name and renamed when complete: an interrupted import
    # leaves no half-written run directory behind (which would block importing the file again).
    rundir = RunDir.of_files(base, f".{run_id}.partial-{os.getpid()}-{secrets.token_hex(3)}")
    try:
        (rundir.path / "source.json").write_bytes(raw)
        rundir.write_json(
            HISTOGRAM, {"schema": HISTOGRAM_SCHEMA, "metric": "latency", "source": tool, "threads": threads}
        )
        rundir.write_json("config.json", summary.config.to_dict())
        rundir.write_json("host.json", summary.host)
        rundir.write_json("summary.json", summary.to_dict())
        if target.is_dir() and not (target / "summary.json").is_file():
            shutil.rmtree(target)  # left half-written by an interrupted import of an older softrt
        try:
            os.rename(rundir.path, target)
        except OSError:
            if not (target / "summary.json").is_file():
                raise
            shutil.rmtree(rundir.path, ignore_errors=True)  # imported meanwhile by another process
    except BaseException:
        shutil.rmtree(rundir.path, ignore_errors=True)
        raise
    return target


# -- statistics ---------------------------------------------------------------------------------
def histogram_stats_us(
    lower_ns: np.ndarray,
    counts: np.ndarray,
    width_ns: int,
    *,
    overflow: int,
    label_offset_ns: int,
    min_ns: float,
    max_ns: float,
    mean_ns: float,
) -> tuple[Stats, list[str]]:
    """Return latency_us stats from a histogram, and notes on what could not be computed.

    min, max and mean are the tool's own exact figures; std needs every sample inside the
    histogram; a percentile is the label of the bucket that reaches it (``lower + label_offset``).
    """
    notes: list[str] = []
    total = int(counts.sum()) + overflow
    if total == 0:
        return _NO_STATS, ["no samples"]
    order = np.argsort(lower_ns, kind="stable")
    lower, cnt = lower_ns[order], counts[order]
    std = None
    if overflow == 0 and cnt.size:
        centre_us = (lower + width_ns / 2.0) / 1e3
        mu = float((centre_us * cnt).sum() / total)
        std = float(np.sqrt(((centre_us - mu) ** 2 * cnt).sum() / total))
    else:
        notes.append(
            f"{overflow:,} of {total:,} samples lie beyond the histogram: std and the percentiles "
            "they reach are unknown"
        )
    cum = np.cumsum(cnt)

    def label_us(q: float) -> float | None:
        """The label of the bucket that reaches the *q* % of samples (None: beyond the histogram)."""
        i = int(np.searchsorted(cum, int(np.ceil(q / 100.0 * total))))
        return float(lower[i] + label_offset_ns) / 1e3 if i < cum.size else None

    stats = Stats.build(
        mean=mean_ns / 1e3,
        min=min_ns / 1e3,
        max=max_ns / 1e3,
        std=std,
        p50=label_us(50.0),
        p99=label_us(99.0),
        p99_9=label_us(99.9),
        p99_99=label_us(99.99),
    )
    return stats, notes


def build_summary(
    doc: dict, tool: str, threads: list[dict], *, run_id: str, scenario: str, file: str, sha256: str
) -> RunSummary:
    """Return the summary.json of an imported result (all threads combined for latency_us)."""
    lower = np.concatenate([np.asarray(t["lower_ns"], dtype=np.int64) for t in threads])
    counts = np.concatenate([np.asarray(t["counts"], dtype=np.int64) for t in threads])
    cmd = _cmdline(doc)
    widths = {t["width_ns"] for t in threads}
    overflow = sum(t["overflow"] for t in threads)
    samples = sum(t["samples"] for t in threads)
    mean_ns = sum(t["mean_ns"] * t["samples"] for t in threads) / samples if samples else 0.0
    # cyclictest labels a bucket with its (truncated) lower value, oslat with its upper bound.
    offset = 0 if tool == "cyclictest" else max(widths)
    latency, notes = histogram_stats_us(
        lower,
        counts,
        max(widths),
        overflow=overflow,
        label_offset_ns=offset,
        min_ns=min(t["min_ns"] for t in threads),
        max_ns=max(t["max_ns"] for t in threads),
        mean_ns=mean_ns,
    )
    sysinfo = doc.get("sysinfo") if isinstance(doc.get("sysinfo"), dict) else {}
    config, notes = _import_config(doc, tool, cmd, threads, counts, notes)
    status_ok = doc.get("return_code", 0) == 0
    return RunSummary.build(
        schema=SCHEMA,
        source=tool,
        run_id=run_id,
        scenario=scenario,
        started_at=_iso(doc.get("start_time")),
        finished_at=_iso(doc.get("end_time")),
        status="complete" if status_ok else "partial",
        partial_reason=None
        if status_ok
        else f"{tool} exited with return code {printable(repr(doc.get('return_code')))[:20]}",
        mode=None,
        config=config,
        host=_host(sysinfo).to_dict(),
        tuning=Tuning.build(
            applied=_tuning(tool, cmd), not_applied=[], system_changes=[], recovered_from_earlier_runs=[]
        ),
        metrics=Metrics.build(
            cycles=samples,
            records_expected=None,
            records_missing=None,
            period_us=_NO_STATS,
            process_us=_NO_STATS,
            latency_us=latency,
            slack_us=_NO_STATS,
            misses=None,
        ),
        ring=None,
        board=None,
        threads=[
            ThreadResult.build(
                thread=t["thread"],
                cpu=t["cpu"],
                samples=t["samples"],
                min_us=t["min_ns"] / 1e3,
                mean_us=t["mean_ns"] / 1e3,
                max_us=t["max_ns"] / 1e3,
                overflow=t["overflow"],
            )
            for t in threads
        ],
        notes=notes,
        imported=Imported.build(
            file=file, sha256=sha256, imported_at=datetime.now(timezone.utc).isoformat(timespec="seconds")
        ),
    )


def _import_config(
    doc: dict, tool: str, cmd: list[str], threads: list[dict], counts: np.ndarray, notes: list[str]
) -> tuple[Config, list[str]]:
    """The imported run's configuration (its tool, command line, period) and the notes, with what
    the command line leaves unknown added (cyclictest.8: -h/--histogram, -i/--interval, -d/--distance)."""
    histogram_range = _int(_option(cmd, ("-h", "--histogram", "-H", "--histofall")))
    if tool == "cyclictest" and histogram_range is None and not counts.size:
        notes = ["cyclictest ran without -h/--histogram: only min, mean and max are known"]
    interval_us = _int(_option(cmd, ("-i", "--interval")))
    if tool == "cyclictest":
        # cyclictest's default interval is 1000 µs (cyclictest.8); -d adds a per-thread distance.
        period = dict(
            period_ns=(interval_us or 1000) * 1000,
            histogram_range_ns=threads[0]["overflow_from_ns"] if histogram_range is not None else None,
        )
        if _option(cmd, ("-d", "--distance")) not in (None, "0") and len(threads) > 1:
            notes.append("threads ran at different intervals (-d/--distance): period_ns is the first thread's")
    else:
        period = dict(period_ns=None)  # a busy loop: no cycle
    config = Config.build(
        tool=tool,
        cmdline=" ".join(cmd),
        version=_text(doc.get("rt_test_version:")) or None,
        threads=len(threads),
        cpus=[t["cpu"] for t in threads],
        **period,
    )
    return config, notes


def _host(sysinfo: dict) -> HostFacts:
    """The host facts the tool's ``sysinfo`` (uname) gives, as softrt's own (platform host_facts): only
    the keys uname has, and the tool's ``realtime`` flag kept beside them (``extra``)."""
    realtime = sysinfo.get("realtime")
    return HostFacts.build(
        os=_text(sysinfo.get("sysname")).lower() or None,
        hostname=_text(sysinfo.get("nodename")) or None,
        kernel=_text(sysinfo.get("release")) or None,
        kernel_version=_text(sysinfo.get("version")) or None,
        machine=_text(sysinfo.get("machine")) or None,
        realtime=realtime if isinstance(realtime, (bool, int)) else None,
    )


def _tuning(tool: str, cmd: list[str]) -> list[Tuned]:
    """What the tool did to itself and the system, as its command line says."""
    out = []
    if tool == "cyclictest":
        prio = _option(cmd, ("-p", "--priority"))
        if prio is not None:
            out.append(Tuned(what="sched_fifo", detail=f"SCHED_FIFO priority {prio} (-p)"))
        if _flag(cmd, "-m", "--mlockall"):
            out.append(Tuned(what="mlockall", detail="-m/--mlockall"))
        aff = _option(cmd, ("-a", "--affinity"))
        if aff is not None or _flag(cmd, "-S", "--smp"):
            out.append(Tuned(what="cpu_affinity", detail=f"threads pinned to CPUs {aff or 'all (-S)'}"))
        if not any(a in ("--default-system", "--laptop") for a in cmd):
            # cyclictest holds /dev/cpu_dma_latency at 0 unless --default-system (cyclictest.8).
            out.append(
                Tuned(what="cpu_dma_latency", detail="0 µs (cyclictest's default; --default-system disables it)")
            )
    else:
        prio = _option(cmd, ("-f", "--rtprio"))
        if prio is not None:
            out.append(Tuned(what="sched_fifo", detail=f"SCHED_FIFO priority {prio} (-f)"))
        out.append(Tuned(what="mlockall", detail="MCL_CURRENT|MCL_FUTURE (oslat always locks memory)"))
        cpus = _option(cmd, ("-c", "--cpu-list"))
        out.append(Tuned(what="cpu_affinity", detail=f"one busy loop per CPU in {cpus or 'all'}"))
    return out
