"""The report's histograms: period, latency and processing time of every run (report layer).

Split from :mod:`.plots`. They follow the OSADL latency plots: x in µs classes, y the count on a
logarithmic axis, so the rare long cycles that decide real-time suitability are as visible as the
millions of ordinary ones.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .axes import class_label, legend_below, log_axis, new_figure, stairs
from .data import Hist, common_width_ns, nice_width_ns, rebin
from .load import RunView
from .style import Plot, color

#: Most classes in a histogram plot: 1 µs classes (OSADL's) up to 8 ms, 2 µs up to 16 ms (the
#: seed's untuned 14.6 ms), coarser beyond; more would only add SVG size, not visible detail.
HIST_MAX_BINS = 8000


def _draw_run(
    whole,
    zoom,
    zoom_us: tuple[float, float] | None,
    k: int,
    i: int,
    run: RunView,
    h: Hist,
    width: int,
    zoom_width: int,
    smallest: float,
) -> float:
    """Run *i*'s histogram *h* (the *k*-th drawn) on the whole-range axes and the zoom, with what the
    zoom leaves out and the samples beyond the histogram's range. Returns *smallest* lowered to the
    smallest positive class edge drawn (µs)."""
    b = rebin(h, width)
    if b.counts.size:
        edges = b.edges_ns() / 1e3
        stairs(whole, b.counts, edges, color=color(i), lw=1.0, label=f"{run.label}: {h.total:,} samples")
        if zoom is not None:  # its own finer classes, and only those it shows (half the drawing time)
            zb = rebin(h, zoom_width)
            ze = zb.edges_ns() / 1e3
            a = max(int(np.searchsorted(ze, zoom_us[0], "right")) - 1, 0)
            z = min(int(np.searchsorted(ze, zoom_us[1], "left")), zb.counts.size)
            if z > a:
                stairs(zoom, zb.counts[a:z], ze[a : z + 1], color=color(i), lw=1.0)
        positive = edges[edges > 0]
        smallest = min(smallest, positive[0] if positive.size else np.inf)
    if zoom is not None and b.counts.size:
        lo, hi = zoom_us  # µs, as the edges
        left = int(b.counts[edges[1:] <= lo].sum()) + h.under_count
        right = int(b.counts[edges[:-1] >= hi].sum()) + h.over_count
        if left or right:  # what the zoom leaves out, so the eye does not take it for all
            zoom.text(
                0.98,
                0.97 - 0.07 * (k % 10),
                f"{left:,} below, {right:,} above",
                color=color(i),
                transform=zoom.transAxes,
                ha="right",
                va="top",
                fontsize=7,
            )
    if h.over_count:
        x = (h.over_from_ns or 0) / 1e3
        whole.annotate(
            f"{h.over_count:,} beyond {x:g} µs (max {(h.max_ns or 0) / 1e3:,.0f} µs)",
            xy=(x, h.over_count),
            xytext=(4, 4),
            textcoords="offset points",
            color=color(i),
            fontsize=8,
        )
        whole.plot([x], [h.over_count], marker=">", color=color(i), ls="none")
    return smallest


def _finish_axes(
    fig,
    whole,
    zoom,
    *,
    title: str,
    xlabel: str,
    marks_us: tuple[float, ...],
    zoom_us: tuple[float, float] | None,
    width: int,
    zoom_width: int,
    smallest: float,
) -> None:
    """Log axes, marks, limits, titles and the legend of a histogram figure."""
    for ax in (zoom, whole):
        if ax is None:
            continue
        for m in marks_us:
            ax.axvline(m, color="0.4", lw=0.8, ls=":")
        log_axis(ax)
        ax.set_ylim(bottom=0.5)
        ax.set_xlabel(xlabel)
    log_axis(whole, "x")  # a 250 µs cycle and a 50 ms stall in one view
    if np.isfinite(smallest):
        whole.set_xlim(left=smallest / 2)
    if zoom is None:
        whole.set_title(title)
    else:
        whole.set_title("whole range (log x)", fontsize=9)
        fig.suptitle(title, fontsize=10)
    whole.set_ylabel(f"count per {class_label(width)} class (log)")
    if zoom is not None:
        zoom.set_xlim(*zoom_us)
        zoom.set_title(f"{zoom_us[0]:g} to {zoom_us[1]:g} µs", fontsize=9)
        zoom.set_ylabel(f"count per {class_label(zoom_width)} class (log)")
    legend_below(fig)


def _hist_plot(
    key: str,
    title: str,
    xlabel: str,
    runs: list[tuple[int, RunView]],
    get: Callable[[RunView], Hist | None],
    why_missing: Callable[[RunView], str],
    *,
    floor_ns: int,
    marks_us: tuple[float, ...] = (),
    zoom_us: tuple[float, float] | None = None,
    caption: str,
) -> Plot:
    """OSADL-style histograms of every run: counts on a log axis, x on a log axis (µs to the longest
    stall in one view); with *zoom_us*, a linear panel of that range beside it, where the ordinary
    cycles are (the classes are the same in both panels)."""
    have = [(i, r, get(r)) for i, r in runs if get(r) is not None and get(r).total]
    na = [f"{r.run_id}: {why_missing(r)}" for i, r in runs if get(r) is None or not get(r).total]
    if not have:
        return Plot(key, title, caption, None, na)
    # With a zoom beside it the whole range needs no fine classes (a quarter of the drawing).
    width = common_width_ns(
        [h for _, _, h in have], floor_ns=floor_ns, max_bins=HIST_MAX_BINS if zoom_us is None else HIST_MAX_BINS // 4
    )
    zoom_width = (
        width
        if zoom_us is None
        else nice_width_ns(
            (zoom_us[1] - zoom_us[0]) * 1e3, HIST_MAX_BINS, max(floor_ns, *(h.width_ns for _, _, h in have))
        )
    )
    if zoom_us is not None:
        fig, axes = new_figure(1, 2, width_ratios=(2, 3))
        zoom, whole = axes[0]
    else:
        fig, axes = new_figure()
        zoom, whole = None, axes[0, 0]
    smallest = np.inf
    for k, (i, run, h) in enumerate(have):
        smallest = _draw_run(whole, zoom, zoom_us, k, i, run, h, width, zoom_width, smallest)
    _finish_axes(
        fig,
        whole,
        zoom,
        title=title,
        xlabel=xlabel,
        marks_us=marks_us,
        zoom_us=zoom_us,
        width=width,
        zoom_width=zoom_width,
        smallest=smallest,
    )
    return Plot(key, title, caption.format(width=class_label(width)), fig, na)


def nominal_us(runs: list[tuple[int, RunView]]) -> tuple[float, ...]:
    return tuple(sorted({r.period_ns / 1e3 for _, r in runs if r.period_ns and r.source == "softrt"}))


#: The zoom of the period histogram: the nominal period ± this (µs).
ZOOM_US = 100.0


def _around_nominal(runs: list[tuple[int, RunView]]) -> tuple[float, float] | None:
    nominal = nominal_us(runs)
    return (max(nominal[0] - ZOOM_US, 0.0), nominal[-1] + ZOOM_US) if nominal else None


def period_histogram(runs: list[tuple[int, RunView]]) -> Plot:
    return _hist_plot(
        "period_hist",
        "Timer int. period (permit to permit)",
        "period (µs)",
        runs,
        lambda r: r.period,
        lambda r: "no per-cycle period (imported latency histogram)" if r.source != "softrt" else "fewer than 2 cycles",
        floor_ns=1000,
        marks_us=nominal_us(runs),
        zoom_us=_around_nominal(runs),
        caption="Histogram of the cycle period, count on a log axis (as OSADL latency plots): left the nominal "
        "period ±100 µs on a linear axis in finer classes, right the whole range on a log axis in {width} "
        "classes, so the "
        "ordinary cycles and the longest stall are both readable. The dotted line is the nominal period; "
        "everything right of it is a late cycle.",
    )


def latency_histogram(runs: list[tuple[int, RunView]]) -> Plot:
    meanings = "; ".join(m for m in dict.fromkeys(r.meaning for _, r in runs) if m)
    return _hist_plot(
        "latency_hist",
        "Latency",
        "latency (µs)",
        runs,
        lambda r: r.latency,
        lambda r: (
            "no latency histogram (run without -h, or every sample beyond its range)"
            if r.source != "softrt"
            else "no cycles"
        ),
        floor_ns=1000,
        zoom_us=(0.0, 100.0),
        caption="Histogram, count on a log axis: left 0 to 100 µs on a linear axis in finer classes, right the "
        "whole range on a log axis in {width} classes. " + meanings + ".",
    )


def process_histogram(runs: list[tuple[int, RunView]]) -> Plot:
    return _hist_plot(
        "process_hist",
        "Timer int. process (write + next-target computation)",
        "processing time (µs)",
        runs,
        lambda r: r.process,
        lambda r: (
            "does not apply (no per-cycle work measured by " + r.source + ")" if r.source != "softrt" else "no cycles"
        ),
        floor_ns=100,
        caption="Histogram of the processing time in {width} classes, counts and time on log axes: "
        "its spread is the work's own jitter, separate from the wait for the permit.",
    )
