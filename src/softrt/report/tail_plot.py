"""The tail model's figures: the return-level plot and the fitted tail over the exceedance curve
(report layer; matplotlib, no pyplot; issue 33).

Return-level plot (Coles, "An Introduction to Statistical Modeling of Extreme Values", Springer
2001, section 4.4.2): x is the return period (hours, log axis), y the level a cycle exceeds once in
that period. The empirical points are the declustered cluster peaks: the k-th largest of n peaks
in T hours is seen about once every T/k hours. The fitted curve is ``u + σ((λh)^ξ - 1)/ξ`` (λ the
cluster rate per hour); its band joins the 95 % intervals of the return levels the model gives
(1 h, 1 day, 1 week, 1 year); the deadline is a horizontal line. One curve per run or scenario,
one colour each, on one axis. A refused fit draws its points only, and says why in the caption.
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from ..analysis.tail_clusters import decluster
from ..schema.tail import HOURS_PER_YEAR, Tail
from .style import COLORS, RC, WIDTH_IN, Plot

_TICKS = ((1 / 60, "1 min"), (1.0, "1 h"), (24.0, "1 day"), (168.0, "1 week"), (HOURS_PER_YEAR, "1 year"))


def fitted_level_us(tail: Tail, every_h: np.ndarray) -> np.ndarray | None:
    """The fitted return level (µs) for each return period in *every_h* (None: no fit)."""
    if not tail.fitted or tail.sigma_us is None or not tail.clusters or tail.threshold_us is None:
        return None
    xi, sigma, u = tail.xi.estimate, tail.sigma_us.estimate, tail.threshold_us
    lam_h = np.maximum(tail.clusters / tail.hours * every_h, 1.0)
    if abs(xi) < 1e-9:
        return u + sigma * np.log(lam_h)
    return u + sigma * (lam_h**xi - 1) / xi


def empirical_points(
    tail: Tail, values_us: np.ndarray | None, times_s: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray]:
    """(return period h, level µs) of each cluster peak above the model's threshold."""
    if values_us is None or tail.threshold_us is None or not values_us.size:
        return np.zeros(0), np.zeros(0)
    c = decluster(values_us, times_s, tail.threshold_us, (tail.gap_ms or 0) / 1e3, None)
    peaks = np.sort(c.peaks)[::-1]
    return tail.hours / np.arange(1, peaks.size + 1), peaks


def draw_return_levels(
    ax, tail: Tail, colour: str, label: str, values_us: np.ndarray | None = None, times_s: np.ndarray | None = None
) -> None:
    """One run's (or scenario's) points, fitted curve and band on *ax*."""
    h, peaks = empirical_points(tail, values_us, times_s)
    if h.size:
        ax.plot(h, peaks, "o", ms=3, color=colour, alpha=0.6, label=f"{label}: cluster peaks")
    rl = [r for r in tail.return_levels if r.level_us is not None and r.low_us is not None and r.high_us is not None]
    start_h = tail.hours / max(tail.clusters or 1, 1)  # once per cluster: the threshold
    grid = np.geomspace(start_h, HOURS_PER_YEAR, 200)
    curve = fitted_level_us(tail, grid)
    if curve is not None:
        ax.plot(grid, curve, color=colour, lw=1.4, label=f"{label}: fitted (ξ = {tail.xi.estimate:+.2f})")
    if rl:
        first = [(start_h, tail.threshold_us, tail.threshold_us)] if start_h < rl[0].every_h else []
        band = first + [(r.every_h, r.low_us, r.high_us) for r in rl]
        ax.fill_between(
            [b[0] for b in band],
            [b[1] for b in band],
            [b[2] for b in band],
            color=colour,
            alpha=0.18,
            lw=0,
            label=f"{label}: 95 % interval",
        )
    elif tail.refused:
        ax.plot([], [], " ", label=f"{label}: no fit ({tail.refused[:60]})")


def return_level_figure(items: list[tuple[str, Tail, np.ndarray | None, np.ndarray | None]]) -> Figure:
    """The return-level plot of every (label, tail, values, times) on one axis, the deadlines as lines."""
    fig = Figure(figsize=(WIDTH_IN, 4.0), layout="constrained")
    ax = fig.subplots()
    deadlines = set()
    for i, (label, tail, values, times) in enumerate(items):
        colour = COLORS[i % len(COLORS)]
        draw_return_levels(ax, tail, colour, label, values, times)
        deadlines.add(tail.deadline_us)
    for d in sorted(deadlines):
        ax.axhline(d, color="0.2", ls="--", lw=0.9)
        ax.annotate(
            f"deadline {d:,.0f} µs",
            (1, d),
            xycoords=("axes fraction", "data"),
            ha="right",
            va="bottom",
            fontsize=7,
            color="0.2",
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xticks([t for t, _ in _TICKS], [n for _, n in _TICKS])
    ax.set_xlabel("return period: the level is exceeded about once in this long")
    ax.set_ylabel("return level (µs)")
    ax.legend(loc="upper left", fontsize=7, frameon=False)
    return fig


def return_level_plot(items: list[tuple[str, Tail, np.ndarray | None, np.ndarray | None]]) -> Plot:
    """The report's figure (a Plot; None when no run has a tail block)."""
    key, title = "return_levels", "Return levels: the worst cycle once an hour, day, week, year"
    caption = (
        "x: a return period (log axis); y: the level a cycle exceeds about once in that period. Points: the "
        "declustered bursts' peaks (the k-th worst of n in T hours: once every T/k hours); line: the fitted "
        "tail (generalized Pareto, peaks over threshold); band: its 95 % interval; dashed: the deadline. "
        "A heavy tail (ξ > 0) bends up: a longer run only finds worse cycles."
    )
    have = [it for it in items if it[1] is not None]
    na = [
        f"{label}: no tail model (a run recorded before softrt kept its tail)" for label, t, _, _ in items if t is None
    ]
    for label, tail, _, _ in have:
        if tail.refused:
            na.append(f"{label}: fit refused: {tail.refused}")
    if not have:
        return Plot(key, title, caption, None, na)
    import matplotlib

    with matplotlib.rc_context(RC):
        return Plot(key, title, caption, return_level_figure(have), na)


def return_levels(runs: list) -> Plot:
    """The report's return-level plot of *runs* (report.load.RunView): each run's tail block with the
    points it kept (tail.npz), one colour per run as in every other figure."""
    from ..store.tailsource import run_tail_points

    items = []
    for r in runs:
        tail = r.summary.tail
        points = run_tail_points(r.path, r.summary.scenario) if tail is not None else None
        items.append((r.label, tail, *(points if points is not None else (None, None))))
    return return_level_plot(items)


def overlay_fitted_tail(ax, tail: Tail | None, colour: str, scale: float = 1.0) -> None:
    """The fitted tail on an exceedance curve (fraction of cycles ≥ x, x in µs × *scale*): above the
    threshold, the share of exceedances times the GPD's survival function."""
    if tail is None or not tail.fitted or tail.sigma_us is None or not tail.cycles or not tail.exceedances:
        return
    xi, sigma, u = tail.xi.estimate, tail.sigma_us.estimate, tail.threshold_us
    top = u + sigma * 1e3 if xi >= 0 else u + min(sigma / -xi, sigma * 1e3) * 0.999
    x = np.geomspace(u, top, 200)
    z = (x - u) / sigma
    survival = np.exp(-z) if abs(xi) < 1e-9 else np.maximum(1 + xi * z, 1e-300) ** (-1 / xi)
    share = tail.exceedances / tail.cycles
    ax.plot(x * scale, share * survival, color=colour, lw=1.0, ls="-.", alpha=0.9)


def write_return_level_plot(
    tail: Tail, file: str, values_us: np.ndarray | None = None, times_s: np.ndarray | None = None, label: str = ""
) -> None:
    """``softrt tail --plot FILE``: the return-level plot of one tail, PNG or SVG by the file's suffix."""
    import matplotlib

    from ..errors import ConfigError
    from ..platform.outfile import write_file

    with matplotlib.rc_context(RC):
        fig = return_level_figure([(label or tail.series, tail, values_us, times_s)])
        # Drawn into memory, then written by the one writer of files the user names (platform.outfile:
        # never through a planted link, a device in place); the format from the file's suffix.
        suffix = Path(str(file)).suffix.lower().lstrip(".")
        if suffix not in ("png", "svg"):
            raise ConfigError(
                f"cannot write the plot to {file}: give it a .png or .svg name", hint="e.g. --plot tail.png"
            )
        buf = io.BytesIO()
        fig.savefig(buf, format=suffix, dpi=110)
    write_file(file, buf.getvalue(), what="the plot", hint="give a writable .png or .svg file")
