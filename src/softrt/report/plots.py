"""The report's figures, one per question, every run overlaid (report layer; matplotlib, no pyplot).

Figures are plain :class:`matplotlib.figure.Figure` objects (no pyplot global state, no GUI
backend); savefig picks the Agg/SVG canvas by format. Histograms follow the OSADL latency plots:
x in µs classes, y the count on a logarithmic axis, so the rare long cycles that decide
real-time suitability are as visible as the millions of ordinary ones.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import dataclass, field

import matplotlib
import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

from .data import Hist, common_width_ns, envelope, exceedance, late_marks, rebin
from .load import RunView

#: rcParams for every figure: browser-rendered text in SVG (smaller, selectable), fixed SVG ids
#: (the same report twice gives the same file), a compact font.
RC = {"svg.fonttype": "none", "svg.hashsalt": "softrt-report", "font.size": 9, "axes.titlesize": 10,
      "legend.fontsize": 8, "axes.grid": True, "grid.alpha": 0.3}
COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
          "#17becf")
WIDTH_IN = 10.0
#: Most classes in a histogram plot: 1 µs classes (OSADL's) up to 8 ms, 2 µs up to 16 ms (the
#: seed's untuned 14.6 ms), coarser beyond; more would only add SVG size, not visible detail.
HIST_MAX_BINS = 8000


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


def _fig(rows: int = 1, cols: int = 1, height_in: float = 3.6, **kw) -> tuple[Figure, np.ndarray]:
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
    if not np.isclose(value, 10.0 ** exp):
        return ""
    if -2 <= exp <= 3:
        return f"{10.0 ** exp:g}"
    return "10" + str(exp).translate(_SUPERSCRIPT)


def _log(ax, which: str = "y") -> None:
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


def _legend(fig: Figure) -> None:
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


def _label_classes(width_ns: int) -> str:
    return f"{width_ns / 1e3:g} µs"


def _hist_plot(key: str, title: str, xlabel: str, runs: list[tuple[int, RunView]],
               get: Callable[[RunView], Hist | None], why_missing: Callable[[RunView], str], *, floor_ns: int,
               marks_us: tuple[float, ...] = (), caption: str) -> Plot:
    have = [(i, r, get(r)) for i, r in runs if get(r) is not None and get(r).total]
    na = [f"{r.run_id}: {why_missing(r)}" for i, r in runs if get(r) is None or not get(r).total]
    if not have:
        return Plot(key, title, caption, None, na)
    width = common_width_ns([h for _, _, h in have], floor_ns=floor_ns, max_bins=HIST_MAX_BINS)
    fig, axes = _fig()
    ax = axes[0, 0]
    for i, run, h in have:
        b = rebin(h, width)
        if b.counts.size:
            ax.stairs(b.counts, b.edges_ns() / 1e3, color=color(i), lw=1.0, label=f"{run.label}: {h.total:,} samples")
        if h.over_count:
            x = (h.over_from_ns or 0) / 1e3
            ax.annotate(f"{h.over_count:,} beyond {x:g} µs (max {(h.max_ns or 0) / 1e3:,.0f} µs)",
                        xy=(x, h.over_count), xytext=(4, 4), textcoords="offset points", color=color(i), fontsize=8)
            ax.plot([x], [h.over_count], marker=">", color=color(i), ls="none")
    for m in marks_us:
        ax.axvline(m, color="0.4", lw=0.8, ls=":")
    _log(ax)
    ax.set_ylim(bottom=0.5)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(f"count per {_label_classes(width)} class (log)")
    ax.set_title(title)
    _legend(fig)
    return Plot(key, title, caption.format(width=_label_classes(width)), fig, na)


def _nominal(runs: list[tuple[int, RunView]]) -> tuple[float, ...]:
    return tuple(sorted({r.period_ns / 1e3 for _, r in runs if r.period_ns and r.source == "softrt"}))


def period_histogram(runs: list[tuple[int, RunView]]) -> Plot:
    return _hist_plot(
        "period_hist", "Timer int. period (permit to permit)", "period (µs)", runs, lambda r: r.period,
        lambda r: "no per-cycle period (imported latency histogram)" if r.source != "softrt" else "fewer than 2 cycles",
        floor_ns=1000, marks_us=_nominal(runs),
        caption="Histogram of the cycle period in {width} classes, count on a log axis (as OSADL latency plots). "
                "The dotted line is the nominal period; everything right of it is a late cycle.")


def latency_histogram(runs: list[tuple[int, RunView]]) -> Plot:
    meanings = "; ".join(m for m in dict.fromkeys(r.meaning for _, r in runs) if m)
    return _hist_plot(
        "latency_hist", "Latency", "latency (µs)", runs, lambda r: r.latency,
        lambda r: "no latency histogram (run without -h, or every sample beyond its range)"
        if r.source != "softrt" else "no cycles",
        floor_ns=1000,
        caption="Histogram in {width} classes, count on a log axis. " + meanings + ".")


def process_histogram(runs: list[tuple[int, RunView]]) -> Plot:
    return _hist_plot(
        "process_hist", "Timer int. process (write + next-target computation)", "processing time (µs)", runs,
        lambda r: r.process, lambda r: "does not apply (no per-cycle work measured by " + r.source + ")"
        if r.source != "softrt" else "no cycles", floor_ns=100,
        caption="Histogram of the processing time in {width} classes, count on a log axis: "
                "its spread is the work's own jitter, separate from the wait for the permit.")


def period_series(runs: list[tuple[int, RunView]]) -> Plot:
    key, title = "period_series", "Period over time"
    have = [(i, r) for i, r in runs if r.series is not None and r.series.t_s.size]
    na = [f"{r.run_id}: " + ("no per-cycle samples (imported)" if r.source != "softrt" else "fewer than 2 cycles")
          for i, r in runs if r.series is None or not r.series.t_s.size]
    caption = ("The light band joins the minimum and maximum period of every slice of the run "
               "(about 2,000 slices), so every spike of the raw series is drawn however long the run; the "
               "solid line is each slice's mean; triangles on top mark slices with missed updates; diamonds mark "
               "the worst late cycles of a traced run, labelled with the main cause found in the trace "
               "(see Why cycles were late).")
    if not have:
        return Plot(key, title, caption, None, na)
    fig, axes = _fig(height_in=3.8)
    ax = axes[0, 0]
    top = 0.0
    # The busiest run is drawn lowest (zorder), so its envelope does not hide a quieter run's spikes;
    # the legend keeps the run order.
    busiest_first = sorted(range(len(have)), key=lambda k: -float(np.mean(have[k][1].series.hi)))
    for k, (i, r) in enumerate(have):
        z = busiest_first.index(k)
        s = r.series
        x, y = envelope(s)
        counted = r.summary.metrics.misses
        misses = counted.cycles_with_miss if counted is not None and counted.cycles_with_miss is not None \
            else int(s.marks.sum())
        per = s.n / max(s.t_s.size, 1)
        ax.plot(x, y / 1e3, color=color(i), lw=0.6, alpha=0.5 if s.downsampled else 0.9, zorder=2 + 2 * z,
                label=f"{r.label}: {s.n:,} periods" + (f", min/max per slice of {per:,.0f} cycles (line: mean)"
                                                        if s.downsampled else ""))
        if s.downsampled:
            ax.plot(s.t_s, s.mean / 1e3, color=color(i), lw=1.0, zorder=3 + 2 * z, drawstyle="steps-post")
        top = max(top, float(s.hi.max()) / 1e3)
        hit = s.marks > 0
        if hit.any():
            ax.scatter(s.t_s[hit], np.full(int(hit.sum()), 0.985 - 0.035 * k), transform=ax.get_xaxis_transform(),
                       marker="v", s=14, color=color(i), edgecolors="none", clip_on=False,
                       label=f"{r.run_id}: missed updates in {misses:,} cycles")
        marks = late_marks(r.summary.why_late, r.t0_ns)
        if marks:
            ax.scatter([m.t_s for m in marks], [m.y_us for m in marks], marker="D", s=22, color=color(i),
                       edgecolors="black", linewidths=0.5, zorder=20, label=f"{r.run_id}: worst late cycles (traced)")
            top = max(top, max(m.y_us for m in marks))
            for n, m in enumerate(marks[:5]):  # the five worst get a label; more would overlap
                share = f" {m.share * 100:.0f} %" if m.share is not None else ""
                ax.annotate(f"{m.cause}{share}", (m.t_s, m.y_us), xytext=(5, 3 + 8 * (n % 3)),
                            textcoords="offset points", fontsize=7, color=color(i), zorder=21)
    for m in _nominal(runs):
        ax.axhline(m, color="0.4", lw=0.8, ls=":")
    ax.set_ylim(top=top * (1.06 + 0.04 * len(have)))  # headroom for the miss marks
    ax.set_xlabel("time since the first cycle (s)")
    ax.set_ylabel("period (µs)")
    ax.set_title(title)
    _legend(fig)
    return Plot(key, title, caption, fig, na)


def exceedance_curves(runs: list[tuple[int, RunView]]) -> Plot:
    key, title = "exceedance", "Exceedance: how often is the value above x?"
    caption = ("Fraction of cycles (samples) whose period (left) or latency (right) is at least x, on a "
               "logarithmic scale (the latency's x too): the curve's end is the longest value seen, its height "
               "there is 1 / samples. "
               "A dotted tail: samples beyond an imported histogram's range, known only to lie below the maximum.")
    panels = (("period", lambda r: r.period), ("latency", lambda r: r.latency))
    if not any(get(r) is not None and get(r).total for _, get in panels for _, r in runs):
        return Plot(key, title, caption, None, [f"{r.run_id}: nothing to plot" for _, r in runs])
    fig, axes = _fig(1, 2, height_in=3.6)
    na = []
    for ax, (name, get) in zip(axes[0], panels):
        for i, r in runs:
            h = get(r)
            if h is None or not h.total:
                na.append(f"{r.run_id}: no {name} data")
                continue
            e = exceedance(h)
            x = e.x_ns.copy()
            if x.size and h.min_ns is not None and h.min_ns > x[0]:
                x[0] = h.min_ns  # start the curve at the smallest value seen, not at its bin's edge
            ok = x > 0 if name == "latency" else np.ones(x.size, bool)  # a log axis cannot show 0
            if ok.any():
                ax.step(x[ok] / 1e3, e.fraction[ok], where="post", color=color(i), lw=1.0, label=r.label)
            if e.tail:
                a, b, f = e.tail
                ax.plot([a / 1e3, b / 1e3], [f, f], color=color(i), ls=":", lw=1.0)
        if name == "period":
            for m in _nominal(runs):
                ax.axvline(m, color="0.4", lw=0.8, ls=":")
                ax.axvline(2 * m, color="0.6", lw=0.8, ls="--")
        if name == "latency":
            _log(ax, "x")  # latencies span decades (0.1 µs polls to ms stalls); periods sit near nominal
        _log(ax)
        ax.set_xlabel(f"{name} x (µs)")
        ax.set_ylabel(f"fraction with {name} ≥ x")
        ax.set_title(name.capitalize() + (" (dotted: nominal; dashed: one cycle late)" if name == "period" else ""))
    _legend(fig)
    return Plot(key, title, caption, fig, sorted(set(na)))


def motion_impact(runs: list[tuple[int, RunView]]) -> Plot:
    key, title = "motion", "Motion impact around the worst miss"
    caption = ("Commanded (dashed) and delivered (solid) position and velocity of axis 0 around the worst miss, "
               "and their difference; x is board cycles relative to that miss, shaded cycles are missed updates. "
               "A missed update repeats the previous target: the delivered position stalls, its velocity drops "
               "and jumps back. The commanded motion is the schedule as already delayed by earlier misses, so "
               "the difference is what this miss did.")
    have = [(i, r) for i, r in runs if r.motion is not None]
    na = [f"{r.run_id}: {r.motion_note or 'no motion trace'}" for i, r in runs if r.motion is None]
    if not have:
        return Plot(key, title, caption, None, na)
    caption += " Centred " + "; ".join(f"for {r.run_id} {r.motion_note}" for _, r in have) + "."
    fig, axes = _fig(3, 1, height_in=6.4, sharex=True)
    ax_p, ax_v, ax_d = axes[:, 0]
    for i, r in have:
        m, ref = r.motion, r.motion_reference
        x = m.board_cycle - m.center_cycle
        ref_p = ref.position_counts if ref is not None else m.commanded_position_counts
        ref_v = ref.velocity_counts_per_s if ref is not None else m.commanded_velocity_counts_per_s
        ax_p.plot(x, ref_p, color=color(i), ls="--", lw=0.9)
        ax_p.plot(x, m.delivered_position_counts, color=color(i), lw=1.2, label=r.label)
        ax_v.plot(x, ref_v, color=color(i), ls="--", lw=0.9)
        ax_v.plot(x, m.delivered_velocity_counts_per_s, color=color(i), lw=1.2, drawstyle="steps-mid")
        dev = m.delivered_position_counts - ref_p
        ax_d.plot(x, dev, color=color(i), lw=1.2, drawstyle="steps-mid")
        # A missed cycle repeats the previous delivered sample: shade those cycles.
        held = np.flatnonzero(np.diff(m.delivered_sample) == 0) + 1
        for ax in (ax_p, ax_v, ax_d):
            for k in held:
                ax.axvspan(x[k] - 0.5, x[k] + 0.5, color=color(i), alpha=0.15, lw=0)
        if not np.any(np.abs(dev) > 0):
            ax_d.text(0.01, 0.9, f"{r.run_id}: no deviation, the axis stood still during these missed cycles",
                      transform=ax_d.transAxes, color=color(i), fontsize=8, va="top")
    ax_p.set_ylabel("position (counts)")
    ax_v.set_ylabel("velocity (counts/s)")
    ax_d.set_ylabel("delivered − commanded\n(counts)")
    ax_d.set_xlabel("board cycle relative to the worst miss")
    ax_p.set_title(title)
    _legend(fig)
    return Plot(key, title, caption, fig, na)


#: The report's figures, in page order.
PLOTS: tuple[Callable[[list[tuple[int, RunView]]], Plot], ...] = (
    period_histogram, latency_histogram, period_series, exceedance_curves, process_histogram, motion_impact,
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
    return buf.getvalue()
