"""The rows of figures both side-by-side tables show: the report's (:mod:`.compare`) and ``softrt
compare``'s in the terminal (report layer; light: no numpy, no matplotlib, so the CLI imports it
at start-up).

Each row is a label, the figure it reads from a run's (or a compare's pooled) metrics
(:class:`softrt.schema.summary.Metrics`, the summary's definitions) and its decimals; times in µs.
Each table formats the figure its own way (the report's "–" for none, the terminal's "-").
"""

from __future__ import annotations

from collections.abc import Callable

from ..schema.summary import Metrics

#: The timing rows both tables open with: label, the figure, decimals.
TIMING_ROWS: tuple[tuple[str, Callable[[Metrics], float | None], int], ...] = (
    ("period mean", lambda m: m.period_us.mean, 1),
    ("period max", lambda m: m.period_us.max, 1),
    ("period min", lambda m: m.period_us.min, 1),
    ("process mean", lambda m: m.process_us.mean, 2),
    ("process max", lambda m: m.process_us.max, 2),
    ("process min", lambda m: m.process_us.min, 2),
    ("period p99.9", lambda m: m.period_us.p99_9, 1),
)
