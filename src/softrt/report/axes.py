"""The report's axes helpers, shared by its figures (report layer; matplotlib, no pyplot).

Split from :mod:`.plots`: a figure without pyplot state, logarithmic axes labelled in plain text,
one legend below the axes, and a histogram's outline drawn as one line. Log axes follow the OSADL
latency plots: counts on a log axis, so the rare long cycles are as visible as the millions of
ordinary ones.
"""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogLocator

from .style import WIDTH_IN


def new_figure(rows: int = 1, cols: int = 1, height_in: float = 3.6, **kw) -> tuple[Figure, np.ndarray]:
    fig = Figure(figsize=(WIDTH_IN, height_in), layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=False, **kw)
    return fig, axes


_SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def _decade(value: float, _pos: object = None) -> str:
    """Label a power of ten as plain text (1, 10, 100, 10³ …): log axes otherwise go through
    mathtext, which made up half the rendering time."""
    if value <= 0:
        return ""
    exp = int(round(np.log10(value)))
    if not np.isclose(value, 10.0**exp):
        return ""
    if -2 <= exp <= 3:
        return f"{10.0**exp:g}"
    return "10" + str(exp).translate(_SUPERSCRIPT)


def log_axis(ax, which: str = "y") -> None:
    """A logarithmic axis with plain-text labels; zero counts drop to the bottom (clip).

    Decades are labelled; on an axis spanning less than two decades the 2× and 5× ticks too,
    so a narrow range still has numbers on it.
    """
    axis = ax.yaxis if which == "y" else ax.xaxis
    (ax.set_yscale if which == "y" else ax.set_xscale)("log", nonpositive="clip")
    axis.set_major_formatter(FuncFormatter(_decade))

    def minor(value: float, _pos: object = None) -> str:
        lo, hi = sorted(axis.get_view_interval())
        if lo <= 0 or np.log10(hi / lo) >= 2:
            return ""
        mantissa = value / 10.0 ** np.floor(np.log10(value) + 1e-9)
        return f"{value:g}" if round(mantissa) in (2, 5) and np.isclose(mantissa, round(mantissa)) else ""

    axis.set_minor_formatter(FuncFormatter(minor))
    # Minor ticks at 2× and 5× only (the ones labelled): a quarter of the default 2…9×, and ticks are
    # most of the drawing time of a log axis.
    axis.set_minor_locator(LogLocator(subs=(2.0, 5.0)))


def legend_below(fig: Figure) -> None:
    """One legend for the whole figure, below the axes, so it never hides data."""
    handles, labels = [], []
    for ax in fig.axes:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            if lab not in labels:
                handles.append(h)
                labels.append(lab)
    if handles:
        ncols = 2 if len(labels) >= 3 and max(map(len, labels)) <= 60 else 1
        fig.legend(handles, labels, loc="outside lower center", ncols=ncols, frameon=False)
        fig.set_figheight(fig.get_figheight() + 0.17 * -(-len(labels) // ncols))  # room for the legend rows


def class_label(width_ns: int) -> str:
    return f"{width_ns / 1e3:g} µs"


def stairs(ax, counts: np.ndarray, edges: np.ndarray, **kw) -> None:
    """A histogram's outline, as ``ax.stairs`` draws it (up from 0 at the first edge, down to 0 at the
    last), as one line: a StepPatch's data limits are found segment by segment in Python (add_patch,
    0.57 s for a 12,000-class processing-time histogram), a line's in one array operation."""
    x = np.repeat(edges, 2)
    y = np.concatenate(([0], np.repeat(counts, 2), [0]))
    ax.plot(x, y, **kw)
