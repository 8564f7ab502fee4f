"""The raw material of the tail model for runs of any length: every cycle above a low, rising
threshold, with its time (analysis layer; pure numpy; issue 33, item 7).

The tail model (:mod:`softrt.analysis.tail`) needs every value above its lowest candidate threshold
(the 99th percentile of all cycles) with its time, to decluster bursts. A 24 h run at 250 µs has
345 M cycles: the streaming pass cannot keep them, and ``--samples late`` stores only the late
ones. :class:`TailKeeper` keeps, chunk by chunk (one vectorised comparison per chunk, no per-cycle
Python), each value strictly above ``threshold`` and its time. When more than ``2 × share`` of the
cycles seen (at least ``min_keep``) or ``cap`` values are held, it raises the threshold to keep the
top ``share`` of the cycles seen (at most ``cap / 2``) and drops the rest. The threshold only rises,
so what is held is exactly every value above the final threshold over the whole run: a consistent
top of the series (the model is told the run's total cycle count and length). With the defaults a
24 h run holds at most 1.5 M values (24 MB); its final threshold (``threshold``) and how often it rose
(``raised``) are recorded with the kept values (``tail.npz``, docs/run-format.md).
"""

from __future__ import annotations

import numpy as np

from ..errors import ConfigError
from ..schema.tail import HOURS_PER_YEAR, Tail

#: Keep about this share of every cycle seen: the model's lowest candidate is the 99th percentile.
SHARE = 0.012
#: Never hold more values than this (24 MB of values and times): the fit of a 24 h run stays under
#: 500 MB (bench/tail_keep_scale.py); the model needs its top, not the whole 1 %.
CAP = 1_500_000
#: Hold at least this many before the threshold first rises (a short run keeps its whole top).
MIN_KEEP = 50_000


class TailKeeper:
    """Every value above a rising threshold with its time (the module docstring says how)."""

    def __init__(
        self,
        floor: int | float,
        deadline: int | float | None = None,
        *,
        share: float = SHARE,
        cap: int = CAP,
        min_keep: int = MIN_KEEP,
    ) -> None:
        self.threshold = floor  # values strictly above it are kept
        self.deadline = deadline  # values above it are counted (late), also once the threshold passes it
        self.late = 0
        self.first: int | float | None = None  # the first and last time offered: the run's span
        self.last: int | float | None = None
        self.share, self.cap, self.min_keep = share, int(cap), int(min_keep)
        self.seen = 0  # values offered (every cycle of the series)
        self.raised = 0  # times the threshold rose
        self._values: list[np.ndarray] = []
        self._times: list[np.ndarray] = []
        self._held = 0

    @property
    def held(self) -> int:
        return self._held

    def add(self, values: np.ndarray, times: np.ndarray) -> None:
        """Offer one chunk: *values* and their *times* (same length, any numeric dtype)."""
        n = int(values.size)
        if n == 0:
            return
        self.seen += n
        if self.first is None:
            self.first = times[0].item()
        self.last = times[-1].item()
        if self.deadline is not None:
            self.late += int(np.count_nonzero(values > self.deadline))
        keep = values > self.threshold
        if keep.any():
            self._values.append(values[keep])
            self._times.append(times[keep])
            self._held += int(self._values[-1].size)
        if self._held > min(self.cap, max(self.min_keep, int(2 * self.share * self.seen))):
            self._trim(min(self.cap // 2, max(self.min_keep // 2, int(self.share * self.seen))))

    def _trim(self, target: int) -> None:
        values, times = self.arrays()
        if values.size > target:
            cut = values[np.argpartition(values, values.size - target - 1)[values.size - target - 1]]
            keep = values > cut
            values, times = values[keep], times[keep]
            self.threshold, self.raised = cut.item(), self.raised + 1
        self._values, self._times, self._held = [values], [times], int(values.size)

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """The values held and their times, in the order offered (time order for one stream)."""
        if not self._values:
            return np.zeros(0), np.zeros(0)
        if len(self._values) > 1:
            self._values, self._times = [np.concatenate(self._values)], [np.concatenate(self._times)]
        return self._values[0], self._times[0]

    def hours(self, period_ns: int, scale_s: float = 1e-9) -> float:
        """The observed time: the span of the times offered (in units of *scale_s* seconds) and one
        more cycle, else (nothing offered twice) the cycles at the nominal *period_ns*."""
        if self.first is not None and self.last is not None and self.seen > 1 and self.last > self.first:
            return (self.last - self.first) * scale_s / 3600 * self.seen / (self.seen - 1)
        return self.seen * period_ns / 3.6e12

    @classmethod
    def restore(
        cls,
        values: np.ndarray,
        times: np.ndarray,
        *,
        threshold: float,
        seen: int,
        raised: int = 0,
        deadline: float | None = None,
        late: int = 0,
        first: float | None = None,
        last: float | None = None,
    ) -> TailKeeper:
        """A keeper holding what a stored one held (store.tailkeep reads it back)."""
        out = cls(threshold, deadline)
        out.seen, out.raised, out.late = int(seen), int(raised), int(late)
        out.first, out.last = first, last
        if values.size:
            out._values, out._times, out._held = [values], [times], int(values.size)
        return out


#: Pooled runs are set this far apart in time, so no burst spans two of them.
POOL_GAP_NS = 1_000_000_000


def pool(keepers: list[TailKeeper], period_ns: int) -> TailKeeper:
    """The runs of *keepers* (one loop, one period) as one: above the highest of their thresholds,
    each run's times after the one before it (its cycles × the period, plus a second)."""
    threshold = max(k.threshold for k in keepers)
    values, times, offset = [], [], 0
    for k in keepers:
        v, t = k.arrays()
        keep = v > threshold
        values.append(v[keep])
        times.append(t[keep] - (k.first if k.first is not None else 0) + offset)
        offset += int(k.hours(period_ns) * 3.6e12) + POOL_GAP_NS
    # The pooled span counts each run's own, not the gaps set between them.
    span_ns = sum(int(k.hours(period_ns) * 3.6e12) for k in keepers)
    seen = sum(k.seen for k in keepers)
    return TailKeeper.restore(
        np.concatenate(values),
        np.concatenate(times),
        threshold=threshold,
        seen=seen,
        raised=sum(k.raised for k in keepers),
        deadline=keepers[0].deadline,
        late=sum(k.late for k in keepers),
        first=0,
        last=span_ns * (seen - 1) / seen if seen > 1 else None,
    )


def fit_kept(
    keeper: TailKeeper,
    *,
    hours: float,
    series: str,
    scale: float = 1e-3,
    gap_s: float = 0.010,
    target_per_h: float = 1 / HOURS_PER_YEAR,
    threshold_us: float | None = None,
) -> Tail:
    """The tail model (analysis.tail) of what *keeper* held over a run of *hours*: values times
    *scale* in µs (ns by default), times in ns; the late cycles are the keeper's count above its
    deadline. Too little to fit (fewer than 1,000 cycles, a constant) is a refusal here, not an
    error: a run's summary always carries the no-model bound."""
    # scipy.special (0.3 s of import): loaded when a run is fitted, not by every command that reads a
    # summary (session.run loads it in the background while the loop runs: prefetch_fit).
    from .tail import analyse, poisson_upper_rate, refuse

    if keeper.deadline is None:  # a keeper made for a model counts its late cycles above one
        raise ValueError("the tail model needs a keeper with a deadline")
    deadline_us = float(keeper.deadline) * scale
    values, times = keeper.arrays()
    bound = poisson_upper_rate(keeper.late, hours) if hours > 0 else None
    base = Tail(
        series=series,
        deadline_us=deadline_us,
        hours=hours,
        cycles=keeper.seen,
        late=keeper.late,
        late_rate_bound_per_h=bound or 0.0,
        target_per_h=target_per_h,
    )
    if keeper.raised:
        base = base.replace(
            caveat=f"only the cycles above {keeper.threshold * scale:.1f} µs were kept "
            f"(the top of {keeper.seen:,}): the threshold starts there"
        )
    try:
        start = keeper.first if keeper.first is not None else (times[0] if times.size else 0)
        tail, reason = analyse(
            values * scale,
            (times - start) / 1e9 if times.size else None,
            deadline_us=deadline_us,
            hours=hours,
            cycles=keeper.seen,
            series=series,
            threshold_us=threshold_us,
            gap_s=gap_s,
            target_per_h=target_per_h,
            seed=0,
            late=keeper.late,
        )
    except ConfigError as err:
        return base.replace(refused=err.msg)
    except (ArithmeticError, IndexError, ValueError) as err:  # a fault of the model: the run keeps its bound
        return base.replace(refused=f"the tail model failed ({type(err).__name__}: {err}); the no-model bound stands")
    if base.caveat and not tail.caveat:
        tail = tail.replace(caveat=base.caveat)
    return refuse(tail, reason) if reason else tail


def prefetch_fit() -> None:
    """Load the tail model's modules (scipy.special) in a thread of its own, so the fit at a run's
    end does not wait for the import: started while the loop runs (the supervisor mostly sleeps then,
    on the housekeeping CPUs). The import lock makes the fit wait for it if it is not done."""
    import importlib
    import threading

    threading.Thread(
        target=importlib.import_module, args=("softrt.analysis.tail",), name="softrt-prefetch", daemon=True
    ).start()
