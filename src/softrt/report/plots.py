"""The report's figures, one per question, every run overlaid (report layer; matplotlib, no pyplot).

Figures are plain :class:`matplotlib.figure.Figure` objects (no pyplot global state, no GUI
backend); savefig picks the Agg/SVG canvas by format. The histograms are in
:mod:`.hist_plots` (re-exported here), the axes helpers in :mod:`.axes`.
"""

from __future__ import annotations

import io
from collections.abc import Callable

import matplotlib
import numpy as np
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from .axes import legend_below, log_axis, new_figure
from .data import envelope, exceedance, exceedance_of_hdr, late_marks
from .hist_plots import latency_histogram, nominal_us, period_histogram, process_histogram
from .load import RunView
from .style import RC, WIDTH_IN, Plot, color
from .tail_plot import overlay_fitted_tail

__all__ = [
    "MOTION_COLUMNS",
    "PLOTS",
    "RC",
    "WIDTH_IN",
    "Plot",
    "color",
    "exceedance_curves",
    "latency_histogram",
    "make_plots",
    "motion_impact",
    "period_histogram",
    "period_series",
    "process_histogram",
    "render",
]


def _series_panel(ax, i: int, r: RunView, runs: list[tuple[int, RunView]], causes: dict[str, int], top: float) -> float:
    """Run *i*'s panel of the period over time; *causes* gains the numbers of its late cycles' causes.
    Returns *top* raised to the highest value drawn."""
    s = r.series
    x, y = envelope(s)
    ax.plot(x, y / 1e3, color=color(i), lw=0.6, alpha=0.5 if s.downsampled else 0.9)
    if s.downsampled:
        ax.plot(s.t_s, s.mean / 1e3, color=color(i), lw=1.0, drawstyle="steps-post")
    top = max(top, float(s.hi.max()) / 1e3)
    hit = s.marks > 0
    if hit.any():
        ax.scatter(
            s.t_s[hit],
            np.full(int(hit.sum()), 0.96),
            transform=ax.get_xaxis_transform(),
            marker="v",
            s=14,
            color=color(i),
            edgecolors="none",
            clip_on=False,
        )
    marks = late_marks(r.summary.why_late, r.t0_ns)
    if marks:
        ax.scatter(
            [m.t_s for m in marks],
            [m.y_us for m in marks],
            marker="D",
            s=22,
            color=color(i),
            edgecolors="black",
            linewidths=0.5,
            zorder=20,
        )
        top = max(top, max(m.y_us for m in marks))
        for m in marks:
            number = causes.setdefault(m.cause, len(causes) + 1)
            ax.annotate(
                str(number),
                (m.t_s, m.y_us),
                xytext=(0, 5),
                textcoords="offset points",
                ha="center",
                va="bottom",
                fontsize=7,
                fontweight="bold",
                zorder=21,
            )
    for m in nominal_us(runs):
        ax.axhline(m, color="0.4", lw=0.8, ls=":")
    counted = r.summary.metrics.misses
    misses = (
        counted.cycles_with_miss if counted is not None and counted.cycles_with_miss is not None else int(s.marks.sum())
    )
    per = s.n / max(s.t_s.size, 1)
    slices = f"; min/max per slice of {per:,.0f} cycles" if s.downsampled else ""
    ax.set_title(
        f"{r.label}: {s.n:,} periods{slices}; missed updates in {misses:,} cycles",
        loc="left",
        fontsize=8,
        color=color(i),
    )
    ax.set_ylabel("period (µs)")
    return top


def _series_legend(fig: Figure, causes: dict[str, int]) -> None:
    """The period-over-time legend below the panels: the marks, then the numbered causes."""
    gray = "0.35"
    handles = [
        Line2D([], [], color=gray, lw=0.6, label="period: min/max band (line: mean per slice)"),
        Line2D([], [], color=gray, ls="none", marker="v", markersize=5, label="slice with missed updates"),
        Line2D(
            [],
            [],
            color=gray,
            ls="none",
            marker="D",
            markersize=5,
            markeredgecolor="black",
            label="worst late cycle (traced), numbered by its main cause:",
        ),
    ]
    handles += [
        Line2D([], [], ls="none", marker=f"${n}$", color="black", markersize=6, label=cause)
        for cause, n in causes.items()
    ]
    fig.legend(
        handles=handles, loc="outside lower center", ncols=1 if len(handles) > 6 else 2, frameon=False, fontsize=7.5
    )
    fig.set_figheight(fig.get_figheight() + 0.16 * (len(handles) if len(handles) > 6 else -(-len(handles) // 2)))


def period_series(runs: list[tuple[int, RunView]]) -> Plot:
    """The period over time, one panel per run (same axes), the worst late cycles numbered by cause."""
    key, title = "period_series", "Period over time"
    have = [(i, r) for i, r in runs if r.series is not None and r.series.t_s.size]
    na = [
        f"{r.run_id}: " + ("no per-cycle samples (imported)" if r.source != "softrt" else "fewer than 2 cycles")
        for i, r in runs
        if r.series is None or not r.series.t_s.size
    ]
    caption = (
        "One panel per run, on the same axes. The light band joins the minimum and maximum period of every "
        "slice of the run (about 2,000 slices), so every spike of the raw series is drawn however long the "
        "run; the solid line is each slice's mean; triangles on top mark slices with missed updates; "
        "diamonds mark the worst late cycles of a traced run, numbered by their main cause in the trace "
        "(the numbers are listed under the plot; see Why cycles were late)."
    )
    if not have:
        return Plot(key, title, caption, None, na)
    fig, axes = new_figure(
        len(have), 1, height_in=3.8 if len(have) == 1 else 0.9 + 1.75 * len(have), sharex=True, sharey=True
    )
    top = 0.0
    causes: dict[str, int] = {}  # main cause -> its number, the worst cycle's cause first
    for k, (i, r) in enumerate(have):
        top = _series_panel(axes[k, 0], i, r, runs, causes, top)
    axes[0, 0].set_ylim(top=top * 1.18)  # headroom for the miss marks and the numbers (shared by every panel)
    axes[-1, 0].set_xlabel("time since the first cycle (s)")
    if len(have) == 1:
        axes[0, 0].set_title(title, fontsize=10)
    _series_legend(fig, causes)
    return Plot(key, title, caption, fig, na)


def exceedance_curves(runs: list[tuple[int, RunView]]) -> Plot:
    key, title = "exceedance", "Exceedance: how often is the value above x?"
    caption = (
        "Fraction of cycles (samples) whose period (left) or latency (right) is at least x, both axes "
        "logarithmic: the curve's end is the longest value seen, its height there is 1 / samples. "
        "A dotted tail: samples beyond an imported histogram's range, known only to lie below the maximum. "
        "Dash-dot: the fitted tail model (generalized Pareto above its threshold)."
    )
    panels = (("period", lambda r: r.period), ("latency", lambda r: r.latency))

    if not any(get(r) is not None and get(r).total for _, get in panels for _, r in runs):
        return Plot(key, title, caption, None, [f"{r.run_id}: nothing to plot" for _, r in runs])
    fig, axes = new_figure(1, 2, height_in=3.6)
    na = []
    for ax, (name, get) in zip(axes[0], panels):
        for i, r in runs:
            h = get(r)
            if h is None or not h.total:
                na.append(f"{r.run_id}: no {name} data")
                continue
            # A softrt run's own histograms (exact to their buckets); an imported tool's its histogram's bins
            e = exceedance_of_hdr(r.stats.hist[name]) if r.stats is not None else exceedance(h)
            x = e.x_ns.copy()
            if x.size and h.min_ns is not None and h.min_ns > x[0]:
                x[0] = h.min_ns  # start the curve at the smallest value seen, not at its bin's edge
            ok = x > 0  # a log axis cannot show 0
            if ok.any():
                ax.step(x[ok] / 1e3, e.fraction[ok], where="post", color=color(i), lw=1.0, label=r.label)
            if e.tail:
                a, b, f = e.tail
                ax.plot([a / 1e3, b / 1e3], [f, f], color=color(i), ls=":", lw=1.0)
            tail = r.summary.tail  # the fitted tail (dash-dot) over the curve it models
            overlay_fitted_tail(ax, tail if tail is not None and tail.series == f"{name}_us" else None, color(i))
        if name == "period":
            for m in nominal_us(runs):
                ax.axvline(m, color="0.4", lw=0.8, ls=":")
                ax.axvline(2 * m, color="0.6", lw=0.8, ls="--")
        log_axis(ax, "x")  # decades: 0.1 µs polls and a 250 µs cycle beside 10 ms stalls
        log_axis(ax)
        ax.set_xlabel(f"{name} x (µs)")
        ax.set_ylabel(f"fraction with {name} ≥ x")
        ax.set_title(name.capitalize() + (" (dotted: nominal; dashed: one cycle late)" if name == "period" else ""))
    legend_below(fig)
    return Plot(key, title, caption, fig, sorted(set(na)))


#: Small multiples of the motion plot: runs side by side, this many to a row.
MOTION_COLUMNS = 4


def motion_impact(runs: list[tuple[int, RunView]]) -> Plot:
    """Small multiples: a column per run (position, velocity, their difference), velocity and
    difference on the same scale in every column."""
    key, title = "motion", "Motion impact around the worst miss"
    caption = (
        "One column per run: commanded (dashed) and delivered (solid) position and velocity of axis 0 "
        "around the run's worst miss, and their difference; x is board cycles relative to that miss, shaded "
        "cycles are missed updates. Velocity and difference share their scale across the runs. "
        "A missed update repeats the previous target: the delivered position stalls, its velocity drops "
        "and jumps back. The commanded motion is the schedule as already delayed by earlier misses, so "
        "the difference is what this miss did."
    )
    have = [(i, r) for i, r in runs if r.motion is not None]
    na = [f"{r.run_id}: {r.motion_note or 'no motion trace'}" for i, r in runs if r.motion is None]
    if not have:
        return Plot(key, title, caption, None, na)
    caption += " Centred " + "; ".join(f"for {r.run_id} {r.motion_note}" for _, r in have) + "."
    cols = min(len(have), MOTION_COLUMNS)
    blocks = -(-len(have) // cols)
    fig, axes = new_figure(3 * blocks, cols, height_in=0.8 + 5.6 * blocks if cols > 1 else 6.4, sharex="col")
    for k, (i, r) in enumerate(have):
        b, c = divmod(k, cols)
        ax_p, ax_v, ax_d = axes[3 * b : 3 * b + 3, c]
        if k:  # the same velocity and difference scale in every column
            ax_v.sharey(axes[1, 0])
            ax_d.sharey(axes[2, 0])
        m, ref = r.motion, r.motion_reference
        x = m.board_cycle - m.center_cycle
        ref_p = ref.position_counts if ref is not None else m.commanded_position_counts
        ref_v = ref.velocity_counts_per_s if ref is not None else m.commanded_velocity_counts_per_s
        ax_p.plot(x, ref_p, color=color(i), ls="--", lw=0.9)
        ax_p.plot(x, m.delivered_position_counts, color=color(i), lw=1.2)
        ax_v.plot(x, ref_v, color=color(i), ls="--", lw=0.9)
        ax_v.plot(x, m.delivered_velocity_counts_per_s, color=color(i), lw=1.2, drawstyle="steps-mid")
        dev = m.delivered_position_counts - ref_p
        ax_d.plot(x, dev, color=color(i), lw=1.2, drawstyle="steps-mid")
        # A missed cycle repeats the previous delivered sample: shade those cycles.
        held = np.flatnonzero(np.diff(m.delivered_sample) == 0) + 1
        spans = [(float(x[h]) - 0.5, 1.0) for h in held]
        for ax in (ax_p, ax_v, ax_d):  # one collection per axes, not a patch per cycle
            ax.broken_barh(spans, (0, 1), transform=ax.get_xaxis_transform(), color=color(i), alpha=0.15, lw=0)
        if not np.any(np.abs(dev) > 0):
            ax_d.text(
                0.02,
                0.9,
                "no deviation: the axis stood still during these missed cycles",
                transform=ax_d.transAxes,
                color=color(i),
                fontsize=7,
                va="top",
                wrap=True,
            )
        ax_p.set_title(r.label if cols == 1 else r.label.replace(" (", "\n("), fontsize=8, color=color(i))
        ax_d.set_xlabel("board cycles from the worst miss" if cols == 1 else "cycles from the worst miss")
        if c == 0:
            ax_p.set_ylabel("position (counts)")
            ax_v.set_ylabel("velocity (counts/s)")
            ax_d.set_ylabel("delivered − commanded\n(counts)")
    for k in range(len(have), blocks * cols):  # empty places of the last row of runs
        b, c = divmod(k, cols)
        for ax in axes[3 * b : 3 * b + 3, c]:
            ax.set_visible(False)
    fig.suptitle(title, fontsize=10)
    gray = "0.35"
    fig.legend(
        handles=[
            Line2D([], [], color=gray, ls="--", lw=0.9, label="commanded"),
            Line2D([], [], color=gray, lw=1.2, label="delivered"),
            Patch(color=gray, alpha=0.3, label="missed update (the target repeated)"),
        ],
        loc="outside lower center",
        ncols=3,
        frameon=False,
    )
    fig.set_figheight(fig.get_figheight() + 0.2)
    return Plot(key, title, caption, fig, na)


#: The report's figures, in page order.
PLOTS: tuple[Callable[[list[tuple[int, RunView]]], Plot], ...] = (
    period_histogram,
    latency_histogram,
    period_series,
    exceedance_curves,
    process_histogram,
    motion_impact,
)


def make_plots(runs: list[RunView]) -> list[Plot]:
    """Every figure for *runs* (run i keeps colour i in all of them)."""
    indexed = list(enumerate(runs))
    with matplotlib.rc_context(RC):
        return [make(indexed) for make in PLOTS]


def render(fig: Figure, fmt: str, dpi: int = 110) -> bytes:
    """The figure as SVG or PNG bytes."""
    buf = io.BytesIO()
    with matplotlib.rc_context(RC):
        fig.savefig(buf, format=fmt, dpi=dpi, metadata={"Date": None} if fmt == "svg" else None)
    # The first drawing placed the axes (constrained layout: most of a figure's drawing time); the
    # PNG drawn after the SVG keeps that placement instead of solving it again.
    fig.set_layout_engine("none")
    return buf.getvalue()
