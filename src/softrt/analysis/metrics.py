"""Per-cycle metrics and their statistics, in the seed's terms (pure numpy).

* period  — permit detected to the next permit detected (the seed's "Timer int. period");
* process — permit detected to next target computed, i.e. write + compute ("Timer int. process");
* latency — permit detected minus the board edge that raised it;
* slack   — the next board edge minus the end of the cycle's work (negative: overran).
"""

from __future__ import annotations

import numpy as np

from ..ipc.layout import FLAG_DEVICE_ERROR

PERCENTILES = (50.0, 99.0, 99.9, 99.99)
_SERIES = ("period_ns", "process_ns", "latency_ns", "slack_ns")


def derive(records: np.ndarray, period_ns: int) -> dict[str, np.ndarray]:
    """Return the per-cycle series (int64 ns) derived from *records* (RECORD_DTYPE).

    A period spans two consecutive cycles; where the ring dropped records (a gap in ``seq``)
    there is no period, rather than one that spans the gap.
    """
    detect = records["detect_ns"]
    consecutive = np.diff(records["seq"]) == 1
    return {
        "period_ns": np.diff(detect)[consecutive],
        "process_ns": records["done_ns"] - detect,
        "latency_ns": detect - records["edge_ns"],
        "slack_ns": records["edge_ns"] + period_ns - records["done_ns"],
    }


def stats_us(values_ns: np.ndarray) -> dict[str, float | None]:
    """Return mean/min/max/std and the percentiles of *values_ns*, in microseconds."""
    if values_ns.size == 0:
        return {k: None for k in ("mean", "min", "max", "std", "p50", "p99", "p99_9", "p99_99")}
    v = values_ns.astype(np.float64) / 1e3
    pct = np.percentile(v, PERCENTILES)
    return {
        "mean": float(v.mean()),
        "min": float(v.min()),
        "max": float(v.max()),
        "std": float(v.std()),
        "p50": float(pct[0]),
        "p99": float(pct[1]),
        "p99_9": float(pct[2]),
        "p99_99": float(pct[3]),
    }


def summarize(records: np.ndarray | list[np.ndarray], period_ns: int) -> dict:
    """Return the statistics of a run's records (the numeric part of summary.json).

    A list pools several runs (``softrt compare --repeat``): each run's series are derived on
    their own, so no period spans two runs.
    """
    runs = records if isinstance(records, list) else [records]
    parts = [derive(r, period_ns) for r in runs]
    series = {k: np.concatenate([p[k] for p in parts]) if parts else np.empty(0, np.int64) for k in _SERIES}
    missed = np.concatenate([r["missed"] for r in runs]) if runs else np.empty(0, np.int64)
    flags = np.concatenate([r["flags"] for r in runs]) if runs else np.empty(0, np.int64)
    # Records are numbered by the worker; a gap means the ring dropped records (overflow).
    expected = sum(int(r["seq"][-1] - r["seq"][0] + 1) for r in runs if r.size)
    cycles = sum(int(r.size) for r in runs)
    out = {
        "cycles": cycles,
        "records_expected": expected,
        "records_missing": expected - cycles,
        "period_us": stats_us(series["period_ns"]),
        "process_us": stats_us(series["process_ns"]),
        "latency_us": stats_us(series["latency_ns"]),
        "slack_us": stats_us(series["slack_ns"]),
        "misses": {
            "missed_updates": int(missed.sum()),
            "cycles_with_miss": int((missed > 0).sum()),
            "longest_miss_run": int(missed.max()) if missed.size else 0,
            "overruns": int((series["slack_ns"] < 0).sum()),
            "device_errors": int(((flags & FLAG_DEVICE_ERROR) != 0).sum()),
        },
    }
    rtt = np.concatenate([r["rtt_ns"] for r in runs]) if runs else np.empty(0, np.int64)
    if rtt.any():  # a device with frames (EtherCAT): their round trip
        out["rtt_us"] = stats_us(rtt[rtt > 0])
    return out
