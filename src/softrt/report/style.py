"""The report's look, shared by every figure (report layer): matplotlib rcParams, the run colours and the
figure width, and :class:`Plot`, one figure with its caption (report.plots, report.tail_plot)."""

from __future__ import annotations

from dataclasses import dataclass, field

from matplotlib.figure import Figure

#: rcParams for every figure: browser-rendered text in SVG (smaller, selectable), fixed SVG ids
#: (the same report twice gives the same file), a compact font.
RC = {
    "svg.fonttype": "none",
    "svg.hashsalt": "softrt-report",
    "font.size": 9,
    "axes.titlesize": 10,
    "legend.fontsize": 8,
    "axes.grid": True,
    "grid.alpha": 0.3,
}
COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf")
WIDTH_IN = 10.0


def color(i: int) -> str:
    """The colour of run *i*, the same in every figure and in the run table."""
    return COLORS[i % len(COLORS)]


@dataclass
class Plot:
    """One figure of the report (``figure`` is None when it applies to no run)."""

    key: str
    title: str
    caption: str
    figure: Figure | None
    not_applicable: list[str] = field(default_factory=list)
