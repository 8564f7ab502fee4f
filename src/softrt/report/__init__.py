"""Reports: one self-contained HTML file per set of runs, plots overlaid (report layer).

* :mod:`.data` — streaming histograms, min/max downsampling, exceedance (pure numpy);
* :mod:`.load` — one run directory → a :class:`RunView` (what exists to plot);
* :mod:`.plots` — the matplotlib figures; :mod:`.html` — the page;
* :mod:`.build` — :func:`build_report`, the entry point;
* :mod:`.rows` — the rows of figures the side-by-side tables show (also ``softrt compare``'s).

The entry point is imported on first use (PEP 562 ``__getattr__``): a command that needs only
:mod:`.rows` does not load matplotlib.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .build import ReportResult, build_report, resolve_runs

__all__ = ["ReportResult", "build_report", "resolve_runs"]


def __getattr__(name: str) -> object:
    if name in __all__:
        from . import build

        return getattr(build, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
