"""Per-cycle metrics, in the seed's terms (analysis layer; pure numpy).

:func:`derive` gives the whole per-cycle series of a record array (the definition, for plots and
tests); their statistics come from the one streaming pass, :mod:`softrt.analysis.stream`
(:func:`summarize` is re-exported here).

* period  — permit detected to the next permit detected (the seed's "Timer int. period");
* process — permit detected to next target computed, i.e. write + compute ("Timer int. process");
* latency — permit detected minus the board edge that raised it;
* slack   — the next board edge minus the end of the cycle's work (negative: overran).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .stream import PERCENTILES, summarize

__all__ = ["PERCENTILES", "Series", "derive", "summarize"]


class Series(NamedTuple):
    """The per-cycle series of a record array (int64 ns)."""

    period_ns: np.ndarray  # one per pair of consecutive records (none across a gap in seq)
    process_ns: np.ndarray
    latency_ns: np.ndarray
    slack_ns: np.ndarray


def derive(records: np.ndarray, period_ns: int) -> Series:
    """Return the per-cycle series (int64 ns) derived from *records* (RECORD_DTYPE).

    A period spans two consecutive cycles; where the ring dropped records (a gap in ``seq``)
    there is no period, rather than one that spans the gap.
    """
    detect = records["detect_ns"]
    consecutive = np.diff(records["seq"]) == 1
    return Series(
        period_ns=np.diff(detect)[consecutive],
        process_ns=records["done_ns"] - detect,
        latency_ns=detect - records["edge_ns"],
        slack_ns=records["edge_ns"] + period_ns - records["done_ns"],
    )
