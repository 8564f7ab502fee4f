"""Reports: one self-contained HTML file per set of runs, plots overlaid (report layer).

* :mod:`.data` — streaming histograms, min/max downsampling, exceedance (pure numpy);
* :mod:`.load` — one run directory → a :class:`RunView` (what exists to plot);
* :mod:`.plots` — the matplotlib figures; :mod:`.html` — the page;
* :mod:`.build` — :func:`build_report`, the entry point.
"""

from __future__ import annotations

from .build import ReportResult, build_report, resolve_runs

__all__ = ["ReportResult", "build_report", "resolve_runs"]
