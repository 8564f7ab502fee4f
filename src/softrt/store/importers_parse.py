"""Read cyclictest and oslat ``--json`` results (store layer): which tool, each thread's histogram.

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

:mod:`.importers` stores what is read here as a run directory.
"""

from __future__ import annotations

import email.utils
import re
import shlex
from datetime import timezone
from pathlib import Path

import numpy as np

from ..cpus import MAX_CPUS
from ..errors import ConfigError
from ..schema.text import printable
from .validate import INT64_MAX

SOURCES = ("cyclictest", "oslat")
#: The largest latency label or min/max/avg read (1e12 µs is 11 days): scaled to ns it fits 64 bits.
_MAX_LABEL = 1e12
#: The tools' own histogram ranges. cyclictest counts latencies 0 … HIST_MAX - 1 units and cuts a
#: larger -h to it (cyclictest.c: ``#define HIST_MAX 1000000``, ``if (histogram > HIST_MAX)
#: histogram = HIST_MAX``); oslat has 4 to 1024 buckets of one width (oslat(8) ``--bucket-size``), so
#: its labels span at most that many widths. A histogram.json spanning more buckets than either
#: tool writes is refused before anything is allocated for it (a label of 10^12 µs would be 7 TiB).
CYCLICTEST_HIST_MAX = 1_000_000
OSLAT_MAX_BUCKETS = 1024


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
    raise ConfigError(
        "not a cyclictest or oslat --json result (no thread results)",
        hint="produce one with cyclictest --json=FILE or oslat --json=FILE",
    )


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
        raise ConfigError(
            f"{printable(path)}: {what} is {shown}, not a number from {lo:g} to {hi:g}",
            hint="is the file a complete --json result?",
        )
    return float(value)


def _text(value: object) -> str:
    """A JSON string field as printable text ("" for anything else: a number, a list)."""
    return printable(value) if isinstance(value, str) else ""


def _cpu(value: object, name: str, path: Path) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < MAX_CPUS:
        raise ConfigError(
            f"{printable(path)}: thread {name}: cpu is {printable(repr(value))[:40]}, not a CPU number",
            hint="give an unmodified --json result",
        )
    return value


def _thread_order(item: tuple[str, object]) -> int:
    try:
        return int(item[0]) if len(item[0]) < 10 else 0
    except ValueError:
        return 0


def _buckets(t: object, name: str, path: Path) -> list[tuple[float, int]]:
    """One thread's ``histogram`` as sorted (label, count) pairs; ConfigError when it is malformed."""
    if not isinstance(t, dict) or not isinstance(t.get("histogram", {}), dict):
        raise ConfigError(f"{printable(path)}: thread {name} is malformed", hint="give an unmodified --json result")
    try:
        buckets = sorted((float(k), v) for k, v in t.get("histogram", {}).items())
    except (TypeError, ValueError):
        buckets = None
    # A bucket label is a latency in µs or ns, a count a whole number; their total fits 64 bits.
    if (
        buckets is None
        or not all(
            0 <= k <= _MAX_LABEL and not isinstance(v, bool) and isinstance(v, int) and v >= 0 for k, v in buckets
        )
        or sum(v for _, v in buckets) > INT64_MAX
    ):
        raise ConfigError(
            f"{printable(path)}: thread {name} has a malformed histogram", hint="give an unmodified --json result"
        )
    return buckets


def _oslat_buckets(labels: np.ndarray, counts: np.ndarray, width, max_ns: float):
    """oslat's buckets as (width_ns, lower_ns, counts, overflow, overflow_from_ns) (oslat.c)."""
    # Keys are upper bounds in µs; the bucket width is the step between keys (1 µs by default).
    upper_ns = np.rint(labels * 1000.0).astype(np.int64)
    width_ns = int(np.diff(upper_ns).min()) if upper_ns.size > 1 else 1000
    if width is not None:
        width_ns = int(width)  # -W is given in ns either way
    lower_ns = upper_ns - width_ns
    overflow = 0
    overflow_from_ns = int(upper_ns[-1]) if upper_ns.size else 0
    if counts.size and max_ns > upper_ns[-1]:
        # The last bucket holds every gap from its lower bound up to the maximum.
        overflow = int(counts[-1])
        overflow_from_ns = int(lower_ns[-1])
        lower_ns, counts = lower_ns[:-1], counts[:-1]
    return width_ns, lower_ns, counts, overflow, overflow_from_ns


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
        buckets = _buckets(t, name, path)
        total += sum(v for _, v in buckets)
        if total > INT64_MAX:
            raise ConfigError(
                f"{printable(path)}: the histograms hold more samples than 64 bits count",
                hint="give an unmodified --json result",
            )
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
            samples = int(counts.sum())
            width_ns, lower_ns, counts, overflow, overflow_from_ns = _oslat_buckets(labels, counts, width, hi * unit_ns)
            min_ns, max_ns, mean_ns = lo * unit_ns, hi * unit_ns, mean * 1000.0  # oslat avg is printed in µs
        out.append(
            {
                "thread": name,
                "cpu": _cpu(t.get("cpu"), name, path),
                "samples": samples,
                "width_ns": int(width_ns),
                "lower_ns": lower_ns.tolist(),
                "counts": counts.tolist(),
                "overflow": int(overflow),
                "overflow_from_ns": int(overflow_from_ns),
                "min_ns": min_ns,
                "max_ns": max_ns,
                "mean_ns": mean_ns,
                **(
                    {"duration_s": _optional_num(t.get("duration")), "counter_mhz": _optional_num(t.get("freq"))}
                    if tool == "oslat"
                    else {}
                ),
            }
        )
    return out


def _check_labels(tool: str, labels: np.ndarray, hist_units: int | None, name: str, path: Path) -> None:
    """Raise ConfigError for bucket labels the tool could not have written (see CYCLICTEST_HIST_MAX)."""
    if tool == "cyclictest":
        top = min(hist_units or CYCLICTEST_HIST_MAX, CYCLICTEST_HIST_MAX)
        bad = labels[(labels != np.floor(labels)) | (labels >= top)]
        if bad.size:
            raise ConfigError(
                f"{printable(path)}: thread {name}: histogram bucket {bad[0]:g} is not one of "
                f"cyclictest's (whole numbers 0 to {top - 1:,})",
                hint="give an unmodified --json result",
            )
    elif labels.size > OSLAT_MAX_BUCKETS:
        raise ConfigError(
            f"{printable(path)}: thread {name}: {labels.size:,} histogram buckets, oslat writes at most "
            f"{OSLAT_MAX_BUCKETS:,}",
            hint="give an unmodified --json result",
        )


def check_histograms(threads: list, where: object) -> None:
    """Raise ConfigError unless the histogram.json *threads* span at most CYCLICTEST_HIST_MAX buckets
    of the widest width, each thread's within its own width (what the report allocates)."""
    try:
        widths = [int(t["width_ns"]) for t in threads]
        spans = [(min(t["lower_ns"]), max(t["lower_ns"])) for t in threads if t["lower_ns"]]
        # Widths and bucket starts are int64 (numpy's, and what the report's arrays hold).
        fits = (
            all(1 <= w <= INT64_MAX for w in widths)
            and all(isinstance(v, int) and -INT64_MAX <= v <= INT64_MAX for t in threads for v in t["lower_ns"])
            and all((hi - lo) // w <= CYCLICTEST_HIST_MAX for (lo, hi), w in zip(spans, widths))
            and (
                not spans
                or (max(hi for _, hi in spans) - min(lo for lo, _ in spans)) // max(widths) <= CYCLICTEST_HIST_MAX
            )
        )
    except (KeyError, TypeError, ValueError) as err:
        raise ConfigError(
            f"{printable(where)}: a histogram thread lacks or mistypes {printable(err)[:60]}",
            hint="the file is corrupt or was not written by softrt",
        ) from None
    if not fits:
        raise ConfigError(
            f"{printable(where)}: the histogram spans more than {CYCLICTEST_HIST_MAX:,} buckets, "
            "more than cyclictest or oslat writes",
            hint="the file is corrupt or was not written by softrt",
        )


def _samples(value: object, name: str, path: Path) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= INT64_MAX:
        raise ConfigError(
            f"{printable(path)}: thread {name}: cycles is {printable(repr(value))[:40]}, not a count",
            hint="give an unmodified --json result",
        )
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
                    rest = letters[j + 1 :]
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
