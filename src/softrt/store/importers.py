"""Import cyclictest and oslat ``--json`` results as softrt run directories (store layer).

Both tools write one JSON object (rt-tests src/lib/rt-utils.c ``rt_write_json``): ``file_version``,
``cmdline:`` and ``rt_test_version:`` (the keys really end in a colon), ``start_time``/``end_time``
(RFC 2822), ``return_code``, ``sysinfo`` (uname fields, ``realtime``), then the tool's part:

* cyclictest (src/cyclictest/cyclictest.c): ``num_threads``, ``resolution_in_ns`` (1 with ``-N``),
  ``thread: {"0": {histogram: {bucket: count}, cycles, min, max, avg, cpu, node}}``. Bucket ``i``
  holds wake-up latencies of ``i`` units (µs, or ns with ``-N``; the value is truncated to the
  unit), only non-empty buckets are written, and a latency at or above the ``-h`` range is not in
  the histogram at all: ``cycles - sum(histogram)`` is the overflow count. Without ``-h`` the
  histogram is empty.
* oslat (src/oslat/oslat.c ``write_summary_json``): ``thread: {"0": {cpu, freq, min, avg, max,
  duration, histogram}}``; a bucket's key is its *upper* bound in µs (``bias + (j + 1) * width``,
  3 decimals when ``-W`` is not a multiple of 1000 ns) and the last bucket also counts every
  larger gap ("including overflows"). ``min``/``max`` are in the tool's unit (µs, or ns then).

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

import email.utils
import hashlib
import os
import re
import secrets
import shlex
import shutil
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from ..cpus import MAX_CPUS
from ..errors import ConfigError
from ..platform import data_dir
from ..platform.owned import secure_dir
from .history import HISTOGRAM
from .rundir import RunDir
from ..schema.summary import SCHEMA, RunSummary
from .validate import INT64_MAX, check_values, parse_json, read_bounded
from ..schema.text import printable, safe_name

HISTOGRAM_SCHEMA = "softrt.histogram/1"
SOURCES = ("cyclictest", "oslat")
_PERCENTILES = (("p50", 50.0), ("p99", 99.0), ("p99_9", 99.9), ("p99_99", 99.99))
#: The largest latency label or min/max/avg read (1e12 µs is 11 days): scaled to ns it fits 64 bits.
_MAX_LABEL = 1e12
#: The tools' own histogram ranges. cyclictest counts latencies 0 … HIST_MAX - 1 units and cuts a
#: larger -h to it (cyclictest.c: ``#define HIST_MAX 1000000``, ``if (histogram > HIST_MAX)
#: histogram = HIST_MAX``); oslat has 4 to 1024 buckets of one width (oslat(8) ``--bucket-size``), so
#: its labels span at most that many widths. A histogram.json spanning more buckets than either
#: tool writes is refused before anything is allocated for it (a label of 10^12 µs would be 7 TiB).
CYCLICTEST_HIST_MAX = 1_000_000
OSLAT_MAX_BUCKETS = 1024
_NO_STATS = {k: None for k in ("mean", "min", "max", "std", "p50", "p99", "p99_9", "p99_99")}


def default_import_dir() -> Path:
    """Where imported runs are stored by default: ``<data dir>/imported``."""
    return data_dir() / "imported"


def detect_source(doc: dict) -> str:
    """Return "cyclictest" or "oslat" for a parsed rt-tests JSON result; ConfigError otherwise."""
    cmd = _cmdline(doc)
    tool = Path(cmd[0]).name if cmd else ""
    if tool in SOURCES:
        return tool
    threads = doc.get("thread")
    if isinstance(threads, dict) and threads:
        first = next(iter(threads.values()))
        if isinstance(first, dict) and "cycles" in first:
            return "cyclictest"
        if isinstance(first, dict) and "freq" in first:
            return "oslat"
    raise ConfigError("not a cyclictest or oslat --json result (no thread results)",
                      hint="produce one with cyclictest --json=FILE or oslat --json=FILE")


def import_file(path: Path | str, out_dir: Path | str | None = None, *, scenario: str | None = None,
                source: str | None = None) -> Path:
    """Store the cyclictest/oslat JSON result *path* as a run directory under *out_dir*; return it.

    Importing the same file again returns the existing directory (the run id ends with a hash
    of the file). Raises ConfigError for an unreadable or foreign file.
    """
    path = Path(path)
    raw = read_bounded(path, "result", hint="give a cyclictest/oslat --json file")
    doc = parse_json(raw, path)  # bounded: depth, NaN/Infinity, 64-bit integers (store.validate)
    if not isinstance(doc, dict):
        raise ConfigError(f"{printable(path)} is not a cyclictest/oslat result",
                          hint="give a cyclictest/oslat --json file")
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
        raise ConfigError(f"cannot write imported runs to {base}: {err.strerror or err}",
                          hint="choose another directory with --out-dir") from None
    summary = build_summary(doc, tool, threads, run_id=run_id, scenario=scenario or tool,
                            file=str(path.resolve()), sha256=digest)
    # What is written must read back: the same checks as every reader, before anything is written.
    check_values(summary, path)
    summary = RunSummary.read(summary, path)
    # Written under a temporary sibling name and renamed when complete: an interrupted import
    # leaves no half-written run directory behind (which would block importing the file again).
    rundir = RunDir.of_files(base, f".{run_id}.partial-{os.getpid()}-{secrets.token_hex(3)}")
    try:
        (rundir.path / "source.json").write_bytes(raw)
        rundir.write_json(HISTOGRAM, {"schema": HISTOGRAM_SCHEMA, "metric": "latency", "source": tool,
                                      "threads": threads})
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


# -- parsing ------------------------------------------------------------------------------------
def _iso(text: object) -> str | None:
    """RFC 2822 ("Mon, 30 Nov 2026 06:48:43 +0000", strftime %a, %d %b %Y %T %z) → ISO 8601 UTC."""
    if not text:
        return None
    try:
        when = email.utils.parsedate_to_datetime(str(text))
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return when.astimezone(timezone.utc).isoformat(timespec="seconds")


def _num(value: object, what: str, path: Path, *, lo: float = -_MAX_LABEL, hi: float = _MAX_LABEL) -> float:
    """*value* as a float if it is a JSON number in [lo, hi]; ConfigError otherwise."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not lo <= value <= hi:
        shown = printable(repr(value))[:40]
        raise ConfigError(f"{printable(path)}: {what} is {shown}, not a number from {lo:g} to {hi:g}",
                          hint="is the file a complete --json result?")
    return float(value)


def _text(value: object) -> str:
    """A JSON string field as printable text ("" for anything else: a number, a list)."""
    return printable(value) if isinstance(value, str) else ""


def _cpu(value: object, name: str, path: Path) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < MAX_CPUS:
        raise ConfigError(f"{printable(path)}: thread {name}: cpu is {printable(repr(value))[:40]}, not a CPU number",
                          hint="give an unmodified --json result")
    return value


def _thread_order(item: tuple[str, object]) -> int:
    try:
        return int(item[0]) if len(item[0]) < 10 else 0
    except ValueError:
        return 0


def _threads(doc: dict, tool: str, path: Path) -> list[dict]:
    """Per-thread histograms in ns (the histogram.json ``threads`` list)."""
    threads = doc.get("thread")
    if not isinstance(threads, dict) or not threads:
        raise ConfigError(f"{path}: no thread results", hint="was the tool stopped before it wrote its results?")
    cmd = _cmdline(doc)
    if tool == "cyclictest":
        unit_ns = 1 if doc.get("resolution_in_ns") else 1000
        hist_units = _int(_option(cmd, ("-h", "--histogram", "-H", "--histofall")))
    else:
        width = _int(_option(cmd, ("-W", "--bucket-width")))
        # oslat keeps ns units when -W is not a multiple of 1000 ns (oslat.c parse_options).
        unit_ns = 1 if width is not None and int(width) % 1000 else 1000
        hist_units = None
    out = []
    total = 0
    for name, t in sorted(threads.items(), key=_thread_order):
        name = printable(name)[:20]
        if not isinstance(t, dict) or not isinstance(t.get("histogram", {}), dict):
            raise ConfigError(f"{printable(path)}: thread {name} is malformed", hint="give an unmodified --json result")
        try:
            buckets = sorted((float(k), v) for k, v in t.get("histogram", {}).items())
        except (TypeError, ValueError):
            buckets = None
        # A bucket label is a latency in µs or ns, a count a whole number; their total fits 64 bits.
        if buckets is None or not all(0 <= k <= _MAX_LABEL and not isinstance(v, bool) and isinstance(v, int)
                                      and v >= 0 for k, v in buckets) or sum(v for _, v in buckets) > INT64_MAX:
            raise ConfigError(f"{printable(path)}: thread {name} has a malformed histogram",
                              hint="give an unmodified --json result")
        total += sum(v for _, v in buckets)
        if total > INT64_MAX:
            raise ConfigError(f"{printable(path)}: the histograms hold more samples than 64 bits count",
                              hint="give an unmodified --json result")
        labels = np.array([b[0] for b in buckets], dtype=np.float64)
        counts = np.array([b[1] for b in buckets], dtype=np.int64)
        _check_labels(tool, labels, hist_units, name, path)
        lo, hi = _num(t.get("min"), "min", path), _num(t.get("max"), "max", path)
        mean = _num(t.get("avg"), "avg", path)
        if tool == "cyclictest":
            width_ns = unit_ns
            lower_ns = np.rint(labels * unit_ns).astype(np.int64)
            samples = _samples(t.get("cycles"), name, path)
            overflow = max(samples - int(counts.sum()), 0)
            if hist_units is not None:
                overflow_from_ns = int(hist_units) * unit_ns
            else:  # range not on the command line: at least past the last non-empty bucket
                overflow_from_ns = int(lower_ns.max()) + width_ns if lower_ns.size else 0
            if hist_units is None and not counts.size:
                overflow_from_ns = 0  # no histogram at all (no -h): every sample is outside it
            min_ns, max_ns, mean_ns = lo * unit_ns, hi * unit_ns, mean * unit_ns
        else:
            # Keys are upper bounds in µs; the bucket width is the step between keys (1 µs by default).
            upper_ns = np.rint(labels * 1000.0).astype(np.int64)
            width_ns = int(np.diff(upper_ns).min()) if upper_ns.size > 1 else 1000
            if width is not None:
                width_ns = int(width)  # -W is given in ns either way
            lower_ns = upper_ns - width_ns
            samples = int(counts.sum())
            overflow = 0
            overflow_from_ns = int(upper_ns[-1]) if upper_ns.size else 0
            min_ns, max_ns, mean_ns = lo * unit_ns, hi * unit_ns, mean * 1000.0  # oslat avg is printed in µs
            if counts.size and max_ns > upper_ns[-1]:
                # The last bucket holds every gap from its lower bound up to the maximum.
                overflow = int(counts[-1])
                overflow_from_ns = int(lower_ns[-1])
                lower_ns, counts = lower_ns[:-1], counts[:-1]
        out.append({
            "thread": name, "cpu": _cpu(t.get("cpu"), name, path), "samples": samples, "width_ns": int(width_ns),
            "lower_ns": lower_ns.tolist(), "counts": counts.tolist(), "overflow": int(overflow),
            "overflow_from_ns": int(overflow_from_ns), "min_ns": min_ns, "max_ns": max_ns, "mean_ns": mean_ns,
            **({"duration_s": _optional_num(t.get("duration")), "counter_mhz": _optional_num(t.get("freq"))}
               if tool == "oslat" else {}),
        })
    return out


def _check_labels(tool: str, labels: np.ndarray, hist_units: int | None, name: str, path: Path) -> None:
    """Raise ConfigError for bucket labels the tool could not have written (see CYCLICTEST_HIST_MAX)."""
    if tool == "cyclictest":
        top = min(hist_units or CYCLICTEST_HIST_MAX, CYCLICTEST_HIST_MAX)
        bad = labels[(labels != np.floor(labels)) | (labels >= top)]
        if bad.size:
            raise ConfigError(f"{printable(path)}: thread {name}: histogram bucket {bad[0]:g} is not one of "
                              f"cyclictest's (whole numbers 0 to {top - 1:,})", hint="give an unmodified --json result")
    elif labels.size > OSLAT_MAX_BUCKETS:
        raise ConfigError(f"{printable(path)}: thread {name}: {labels.size:,} histogram buckets, oslat writes at most "
                          f"{OSLAT_MAX_BUCKETS:,}", hint="give an unmodified --json result")


def check_histograms(threads: list, where: object) -> None:
    """Raise ConfigError unless the histogram.json *threads* span at most CYCLICTEST_HIST_MAX buckets
    of the widest width, each thread's within its own width (what the report allocates)."""
    try:
        widths = [int(t["width_ns"]) for t in threads]
        spans = [(min(t["lower_ns"]), max(t["lower_ns"])) for t in threads if t["lower_ns"]]
        # Widths and bucket starts are int64 (numpy's, and what the report's arrays hold).
        fits = (all(1 <= w <= INT64_MAX for w in widths)
                and all(isinstance(v, int) and -INT64_MAX <= v <= INT64_MAX for t in threads for v in t["lower_ns"])
                and all((hi - lo) // w <= CYCLICTEST_HIST_MAX for (lo, hi), w in zip(spans, widths))
                and (not spans or (max(hi for _, hi in spans) - min(lo for lo, _ in spans)) // max(widths)
                     <= CYCLICTEST_HIST_MAX))
    except (KeyError, TypeError, ValueError) as err:
        raise ConfigError(f"{printable(where)}: a histogram thread lacks or mistypes {printable(err)[:60]}",
                          hint="the file is corrupt or was not written by softrt") from None
    if not fits:
        raise ConfigError(f"{printable(where)}: the histogram spans more than {CYCLICTEST_HIST_MAX:,} buckets, "
                          "more than cyclictest or oslat writes", hint="the file is corrupt or was not written by softrt")


def _samples(value: object, name: str, path: Path) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= INT64_MAX:
        raise ConfigError(f"{printable(path)}: thread {name}: cycles is {printable(repr(value))[:40]}, "
                          "not a count", hint="give an unmodified --json result")
    return value


def _optional_num(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _cmdline(doc: dict) -> list[str]:
    try:
        return shlex.split(str(doc.get("cmdline:", doc.get("cmdline", ""))))
    except ValueError:
        return str(doc.get("cmdline:", "")).split()


def _option(cmd: list[str], names: tuple[str, ...]) -> str | None:
    """The value of the first of *names* in *cmd*: ``-h 400``, ``-h400``, ``-Sp90`` (getopt
    bundling, as in OSADL's ``cyclictest -m -Sp90 -i200 -h400``) or ``--histogram=400``."""
    for i, arg in enumerate(cmd):
        for name in names:
            if name.startswith("--"):
                if arg == name and i + 1 < len(cmd):
                    return cmd[i + 1]
                if arg.startswith(name + "="):
                    return arg.split("=", 1)[1]
                continue
            if not arg.startswith("-") or arg.startswith("--"):
                continue
            letters = arg[1:]
            for j, ch in enumerate(letters):
                if ch == name[1]:
                    rest = letters[j + 1:]
                    if rest:
                        return rest.lstrip("=")
                    return cmd[i + 1] if i + 1 < len(cmd) else None
                if not ch.isalpha():
                    break
    return None


def _int(text: str | None) -> int | None:
    """A positive whole number from the command line (-h, -W, -i), else None (absent or not sane)."""
    if text is None or not text.isdigit() or len(text) > 9:
        return None
    return int(text) or None


def _flag(cmd: list[str], short: str, long: str) -> bool:
    """True when *short* (possibly bundled: ``-mq``, ``-Sp90``) or *long* is on the command line."""
    for arg in cmd:
        if arg == long or arg.startswith(long + "="):
            return True
        if arg.startswith("-") and not arg.startswith("--"):
            lead = re.match(r"[A-Za-z]*", arg[1:]).group(0)  # option letters before any value
            if short[1] in lead:
                return True
    return False


# -- statistics ---------------------------------------------------------------------------------
def histogram_stats_us(lower_ns: np.ndarray, counts: np.ndarray, width_ns: int, *, overflow: int,
                       label_offset_ns: int, min_ns: float, max_ns: float, mean_ns: float) -> tuple[dict, list[str]]:
    """Return latency_us stats from a histogram, and notes on what could not be computed.

    min, max and mean are the tool's own exact figures; std needs every sample inside the
    histogram; a percentile is the label of the bucket that reaches it (``lower + label_offset``).
    """
    notes: list[str] = []
    total = int(counts.sum()) + overflow
    stats = dict(_NO_STATS)
    if total == 0:
        return stats, ["no samples"]
    stats.update(mean=mean_ns / 1e3, min=min_ns / 1e3, max=max_ns / 1e3)
    order = np.argsort(lower_ns, kind="stable")
    lower, cnt = lower_ns[order], counts[order]
    if overflow == 0 and cnt.size:
        centre_us = (lower + width_ns / 2.0) / 1e3
        mu = float((centre_us * cnt).sum() / total)
        stats["std"] = float(np.sqrt(((centre_us - mu) ** 2 * cnt).sum() / total))
    else:
        notes.append(f"{overflow:,} of {total:,} samples lie beyond the histogram: std and the percentiles "
                     "they reach are unknown")
    cum = np.cumsum(cnt)
    for key, q in _PERCENTILES:
        need = int(np.ceil(q / 100.0 * total))
        i = int(np.searchsorted(cum, need))
        stats[key] = float(lower[i] + label_offset_ns) / 1e3 if i < cum.size else None
    return stats, notes


def build_summary(doc: dict, tool: str, threads: list[dict], *, run_id: str, scenario: str, file: str,
                  sha256: str) -> dict:
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
    latency, notes = histogram_stats_us(lower, counts, max(widths), overflow=overflow, label_offset_ns=offset,
                                        min_ns=min(t["min_ns"] for t in threads),
                                        max_ns=max(t["max_ns"] for t in threads), mean_ns=mean_ns)
    histogram_range = _int(_option(cmd, ("-h", "--histogram", "-H", "--histofall")))
    if tool == "cyclictest" and histogram_range is None and not counts.size:
        notes = ["cyclictest ran without -h/--histogram: only min, mean and max are known"]
    sysinfo = doc.get("sysinfo") if isinstance(doc.get("sysinfo"), dict) else {}
    interval_us = _int(_option(cmd, ("-i", "--interval")))
    config: dict = {
        "tool": tool, "cmdline": " ".join(cmd), "version": _text(doc.get("rt_test_version:")) or None,
        "threads": len(threads), "cpus": [t["cpu"] for t in threads],
    }
    if tool == "cyclictest":
        # cyclictest's default interval is 1000 µs (cyclictest.8); -d adds a per-thread distance.
        config["period_ns"] = (interval_us or 1000) * 1000
        config["histogram_range_ns"] = threads[0]["overflow_from_ns"] if histogram_range is not None else None
        if _option(cmd, ("-d", "--distance")) not in (None, "0") and len(threads) > 1:
            notes.append("threads ran at different intervals (-d/--distance): period_ns is the first thread's")
    else:
        config["period_ns"] = None  # a busy loop: no cycle
    status_ok = doc.get("return_code", 0) == 0
    return {
        "schema": SCHEMA,
        "source": tool,
        "run_id": run_id,
        "scenario": scenario,
        "started_at": _iso(doc.get("start_time")),
        "finished_at": _iso(doc.get("end_time")),
        "status": "complete" if status_ok else "partial",
        "partial_reason": None if status_ok else f"{tool} exited with return code "
                                                 f"{printable(repr(doc.get('return_code')))[:20]}",
        "mode": None,
        "config": config,
        "host": {
            "os": _text(sysinfo.get("sysname")).lower() or None, "hostname": _text(sysinfo.get("nodename")) or None,
            "kernel": _text(sysinfo.get("release")) or None, "kernel_version": _text(sysinfo.get("version")) or None,
            "machine": _text(sysinfo.get("machine")) or None,
            "realtime": sysinfo.get("realtime") if isinstance(sysinfo.get("realtime"), (bool, int)) else None,
        },
        "tuning": {"applied": _tuning(tool, cmd), "not_applied": [], "system_changes": [],
                   "recovered_from_earlier_runs": []},
        "cycles": samples,
        "records_expected": None,
        "records_missing": None,
        "period_us": dict(_NO_STATS),
        "process_us": dict(_NO_STATS),
        "latency_us": latency,
        "slack_us": dict(_NO_STATS),
        "misses": None,
        "ring": None,
        "board": None,
        "threads": [{"thread": t["thread"], "cpu": t["cpu"], "samples": t["samples"], "min_us": t["min_ns"] / 1e3,
                     "mean_us": t["mean_ns"] / 1e3, "max_us": t["max_ns"] / 1e3, "overflow": t["overflow"]}
                    for t in threads],
        "notes": notes,
        "import": {"file": file, "sha256": sha256,
                   "imported_at": datetime.now(timezone.utc).isoformat(timespec="seconds")},
    }


def _tuning(tool: str, cmd: list[str]) -> list[dict]:
    """What the tool did to itself and the system, as its command line says."""
    out = []
    if tool == "cyclictest":
        prio = _option(cmd, ("-p", "--priority"))
        if prio is not None:
            out.append({"what": "sched_fifo", "detail": f"SCHED_FIFO priority {prio} (-p)"})
        if _flag(cmd, "-m", "--mlockall"):
            out.append({"what": "mlockall", "detail": "-m/--mlockall"})
        aff = _option(cmd, ("-a", "--affinity"))
        if aff is not None or _flag(cmd, "-S", "--smp"):
            out.append({"what": "cpu_affinity", "detail": f"threads pinned to CPUs {aff or 'all (-S)'}"})
        if not any(a in ("--default-system", "--laptop") for a in cmd):
            # cyclictest holds /dev/cpu_dma_latency at 0 unless --default-system (cyclictest.8).
            out.append({"what": "cpu_dma_latency",
                        "detail": "0 µs (cyclictest's default; --default-system disables it)"})
    else:
        prio = _option(cmd, ("-f", "--rtprio"))
        if prio is not None:
            out.append({"what": "sched_fifo", "detail": f"SCHED_FIFO priority {prio} (-f)"})
        out.append({"what": "mlockall", "detail": "MCL_CURRENT|MCL_FUTURE (oslat always locks memory)"})
        cpus = _option(cmd, ("-c", "--cpu-list"))
        out.append({"what": "cpu_affinity", "detail": f"one busy loop per CPU in {cpus or 'all'}"})
    return out
