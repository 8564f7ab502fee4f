"""How often will a cycle be late, and how long must the machine run to show it: the tail model of a
per-cycle series (analysis layer; numpy and scipy; issue 33).

Method (peaks over threshold, the standard of measurement-based timing analysis: Cucu-Grosjean et
al., ECRTS 2012; Cazorla et al., WCET 2013; Santinelli et al., WCET 2014; Coles, "An Introduction to
Statistical Modeling of Extreme Values", Springer 2001):

1. The no-model bound, always: with k late cycles in T hours, the late rate is at most
   χ²₀.₉₅(2k+2)/(2T) per hour (the exact upper Poisson limit, Garwood 1936; k = 0 gives ≈ 3/T).
2. A threshold u by the parameter-stability rule (:mod:`.tail_clusters`), or the user's.
3. The exceedances of u declustered into bursts (runs declustering, gap ``gap_s``); the extremal
   index by the intervals estimator of Ferro and Segers (2003).
4. A generalized Pareto distribution GPD(ξ, σ) fitted by maximum likelihood to the cluster peaks'
   excesses, and the cluster rate λ per hour (:mod:`.tail_gpd`). Clusters per hour above x:
   Λ(x) = λ (1 + ξ(x-u)/σ)^(-1/ξ); the level seen once every h hours: u + σ((λh)^ξ - 1)/ξ.
5. 95 % intervals of ξ, σ, the late rate Λ(deadline) and the return levels by profile likelihood over
   (λ, ξ, σ) jointly: the Poisson uncertainty of λ is in every interval.
6. Checks (:mod:`.tail_tests`): goodness of fit, independence of the cluster peaks, stationarity.
   Too few clusters (< 30) or a failed check refuses the fit: no fitted figure is given, only the
   no-model bound and one line saying why and what to do.
7. How long to run (:func:`run_hours_needed`): Santinelli-style planning as in the recipe's step 6.

The fitted late rate counts late *episodes* (bursts beyond the deadline, one per cluster), the unit
in which the model is independent; the no-model bound counts late cycles.

Integer data (cyclictest's and oslat's microseconds) get uniform jitter of ±0.5 in their last unit
before the fit (dequantisation: ties would break the continuous model and its tests); a histogram's
values are spread uniformly within their buckets. A histogram has no time order, so it cannot be
declustered: every exceedance counts as a cluster (``caveat`` says so).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from scipy.special import chdtri  # χ² quantiles; scipy.stats would add half a second of import

from ..errors import ConfigError
from ..schema.doc import MAX_US
from ..schema.tail import HOURS_PER_YEAR, RETURN_EVERY_H, Interval, ReturnLevel, Tail, TailTest
from . import tail_tests
from .tail_clusters import MIN_CLUSTERS, Choice, Clusters, choose_threshold, decluster
from .tail_gpd import BUDGET_95, Region, poisson_range, rate_above, region, return_level

MIN_CYCLES = 1000
HISTOGRAM_CAVEAT = "a histogram has no time order, so bursts could not be declustered: each late cycle counts alone"


def poisson_upper_rate(k: int, hours: float, conf: float = 0.95) -> float:
    """The exact upper *conf* limit of a Poisson rate per hour after *k* events in *hours*
    (Garwood 1936): χ²_conf(2k+2)/(2T); k = 0 gives -ln(1-conf)/T ≈ 3/T."""
    if hours <= 0:
        raise ConfigError(f"cannot bound a rate over {hours} hours", hint="give a positive run length")
    return float(chdtri(2 * k + 2, 1 - conf) / (2 * hours))


def _poisson_interval(k: int, hours: float) -> Interval:
    low = float(chdtri(2 * k, 0.975) / (2 * hours)) if k > 0 else 0.0
    return Interval(estimate=k / hours, low=low, high=float(chdtri(2 * k + 2, 0.025) / (2 * hours)))


def _check_values(values_us: np.ndarray, series: str) -> np.ndarray:
    values = np.asarray(values_us, dtype=float).ravel()
    if values.size == 0:
        raise ConfigError(f"the {series} series is empty", hint="record a run first, or name a file with cycles")
    if not np.all(np.isfinite(values)):
        raise ConfigError(f"the {series} series holds NaN or infinite values", hint="remove them from the input")
    if values.min() < 0:
        raise ConfigError(
            f"the {series} series holds negative values (lowest {values.min():g})",
            hint="give a non-negative per-cycle series such as a latency or a period",
        )
    if values.min() == values.max():
        raise ConfigError(
            f"every value of the {series} series is {values[0]:g}: a constant has no tail",
            hint="check that the right column or file was given",
        )
    return values


def _check_run(
    values: np.ndarray, times_s: np.ndarray | None, hours: float | None, cycles: int | None, series: str
) -> tuple[np.ndarray | None, float, int]:
    cycles = int(values.size if cycles is None else cycles)
    if cycles < values.size:
        raise ConfigError(f"{values.size} values but only {cycles} cycles", hint="give the run's total cycle count")
    if cycles < MIN_CYCLES:
        raise ConfigError(f"only {cycles} cycles of {series}: a tail needs at least {MIN_CYCLES:,}", hint="run longer")
    if times_s is not None:
        times_s = np.asarray(times_s, dtype=float).ravel()
        if times_s.size != values.size or not np.all(np.isfinite(times_s)):
            raise ConfigError(
                f"{times_s.size} times for {values.size} values of {series}", hint="give one finite time per value"
            )
        if hours is None:
            hours = float(times_s.max() - times_s.min()) / 3600 * cycles / max(cycles - 1, 1)
    if hours is None or not hours > 0:
        raise ConfigError(f"the observed time of {series} is unknown or zero", hint="give the run length in hours")
    return times_s, float(hours), cycles


def _dequantise(values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Spread whole-number values uniformly over their unit (see the module docstring)."""
    if values.size and np.all(values == np.round(values)):
        return values + rng.uniform(-0.5, 0.5, values.size)
    return values


def fit_tail(
    values_us: np.ndarray,
    times_s: np.ndarray | None,
    *,
    deadline_us: float,
    hours: float | None = None,
    cycles: int | None = None,
    series: str = "period_us",
    threshold_us: float | None = None,
    gap_s: float = 0.010,
    target_per_h: float = 1 / HOURS_PER_YEAR,
    seed: int = 0,
) -> Tail:
    """The tail of one per-cycle series (the module docstring says how).

    *values_us*: per-cycle values, all of them or only those above a low keep-threshold (then *cycles*
    is the run's total and *hours* its length); *times_s*: each value's time in seconds since the start
    of the run (any origin when every cycle is given; None: no time order, no declustering); *hours*
    defaults to the span of *times_s*. Bad input raises ConfigError;
    a fit that cannot be trusted is a Tail with ``refused`` set (not an error)."""
    tail, reason = analyse(
        values_us,
        times_s,
        deadline_us=deadline_us,
        hours=hours,
        cycles=cycles,
        series=series,
        threshold_us=threshold_us,
        gap_s=gap_s,
        target_per_h=target_per_h,
        seed=seed,
    )
    return refuse(tail, reason) if reason else tail


def fit_tail_histogram(
    edges_us: np.ndarray,
    counts: np.ndarray,
    *,
    hours: float,
    deadline_us: float,
    series: str = "latency_us",
    threshold_us: float | None = None,
    target_per_h: float = 1 / HOURS_PER_YEAR,
    seed: int = 0,
    beyond: int = 0,
    beyond_max_us: float | None = None,
) -> Tail:
    """The tail of a histogram (oslat, cyclictest -h): bucket i holds ``counts[i]`` values in
    [edges_us[i], edges_us[i+1]). Only the top buckets are expanded (uniformly within each), enough
    for the 99th percentile (where the threshold search starts); a late cycle is one in a bucket whose lower edge is above the deadline.

    *beyond* values lay past the last edge, the largest of them *beyond_max_us* (the tools' overflow:
    rt-tests count them, and keep only their maximum). Their values are not in the file, so they are
    never spread into the fit: they count as late when that maximum is past the deadline (the no-model
    bound stays an upper bound), and the fit is refused, saying how to record the whole tail."""
    edges = np.asarray(edges_us, dtype=float).ravel()
    counts = np.asarray(counts).ravel()
    if counts.size == 0 or edges.size != counts.size + 1:
        raise ConfigError(
            f"a histogram of {counts.size} buckets needs {counts.size + 1} edges, got {edges.size}",
            hint="check the histogram file",
        )
    if not np.all(np.isfinite(edges)) or np.any(np.diff(edges) <= 0):
        raise ConfigError("the histogram's bucket edges must increase", hint="check the histogram file")
    if np.any(counts < 0) or not np.all(counts == np.round(counts)):
        raise ConfigError("the histogram's counts must be whole and non-negative", hint="check the histogram file")
    counts = counts.astype(np.int64)
    total = int(counts.sum()) + beyond
    if np.count_nonzero(counts) == 1:
        raise ConfigError(
            f"every value of the {series} histogram is in one bucket: a constant has no tail",
            hint="check that the right histogram was given",
        )
    values = _top_of_histogram(edges, counts, max(math.ceil(0.01 * total), 2 * MIN_CYCLES), np.random.default_rng(seed))
    late = int(counts[edges[:-1] > deadline_us].sum())
    if beyond and (beyond_max_us is None or beyond_max_us > deadline_us):
        late += beyond
    tail, reason = analyse(
        values,
        None,
        deadline_us=deadline_us,
        hours=hours,
        cycles=total,
        series=series,
        threshold_us=threshold_us,
        gap_s=0.0,
        target_per_h=target_per_h,
        seed=seed,
        late=late,
        jitter=False,
    )
    if beyond and reason is None:
        top = f", the largest {beyond_max_us:,.0f} µs" if beyond_max_us is not None else ""
        late_too = " (counted late: the bound above is an upper one)" if late >= beyond else ""
        reason = (
            f"{beyond:,} values lie above the histogram ({edges[-1]:,.0f} µs{top}){late_too}: the tail is not in "
            "the file; record a histogram that reaches past the worst value (oslat -b/--bucket-size, cyclictest -h)"
        )
    return refuse(tail, reason) if reason else tail


def _top_of_histogram(edges: np.ndarray, counts: np.ndarray, wanted: int, rng: np.random.Generator) -> np.ndarray:
    """The *wanted* largest values of a histogram, spread uniformly within their buckets; of the bucket
    the cut falls in, only the values needed, in its upper part (a 24 h histogram holds 345 M values)."""
    from_top = np.cumsum(counts[::-1])[::-1]  # values in this bucket or above
    whole = np.flatnonzero(from_top <= wanted)
    idx = np.repeat(whole, counts[whole])
    low, width = edges[idx], edges[idx + 1] - edges[idx]
    values = low + rng.uniform(0, 1, idx.size) * width
    cut = (whole[0] if whole.size else counts.size) - 1  # the bucket the cut falls in
    if cut >= 0:
        need = int(min(counts[cut], wanted - idx.size))
        share = need / counts[cut] if counts[cut] else 0.0
        top, w = edges[cut + 1], edges[cut + 1] - edges[cut]
        values = np.r_[top - rng.uniform(0, share, need) * w, values]
    out: np.ndarray = values
    return out


def refuse(tail: Tail, reason: str) -> Tail:
    """*tail* without its fitted figures, with the reason (a figure is never shown without its fit)."""
    return tail.replace(
        refused=reason, xi=None, sigma_us=None, late_rate_per_h=None, return_levels=[], run_h_needed=None, heavy=False
    )


def analyse(
    values_us: np.ndarray,
    times_s: np.ndarray | None,
    *,
    deadline_us: float,
    hours: float | None,
    cycles: int | None,
    series: str,
    threshold_us: float | None,
    gap_s: float,
    target_per_h: float,
    seed: int,
    late: int | None = None,
    jitter: bool = True,
) -> tuple[Tail, str | None]:
    """The whole analysis with every fitted figure, and the reason to refuse it (None: trust it).
    :func:`fit_tail` blanks a refused fit; the coverage benchmark looks at the figures either way."""
    values = _check_values(values_us, series)
    times_s, hours, cycles = _check_run(values, times_s, hours, cycles, series)
    if not target_per_h > 0 or not math.isfinite(deadline_us):
        raise ConfigError(f"target {target_per_h}/h and deadline {deadline_us} µs", hint="give positive numbers")
    if times_s is not None and np.any(np.diff(times_s) < 0):
        order = np.argsort(times_s, kind="stable")
        values, times_s = values[order], times_s[order]
    late = int(np.count_nonzero(values > deadline_us)) if late is None else late
    rng = np.random.default_rng(seed)
    fit_values = _dequantise(values, rng) if jitter else values
    period_s = hours * 3600 / cycles
    if threshold_us is not None:
        c = decluster(fit_values, times_s, float(threshold_us), gap_s, period_s)
        choice = Choice(c, "given")
    else:
        choice = choose_threshold(fit_values, times_s, cycles, gap_s, period_s)
    c = choice.clusters
    tail = Tail(
        series=series,
        deadline_us=float(deadline_us),
        hours=hours,
        cycles=cycles,
        late=late,
        late_rate_bound_per_h=poisson_upper_rate(late, hours),
        threshold_us=c.threshold,
        threshold_rule=choice.rule,
        gap_ms=gap_s * 1000 if times_s is not None else None,
        exceedances=c.exceedances,
        clusters=c.count,
        extremal_index=c.extremal_index,
        target_per_h=target_per_h,
        caveat=None if times_s is not None else HISTOGRAM_CAVEAT,
    )
    if c.count < MIN_CLUSTERS:
        more = hours * (MIN_CLUSTERS / max(c.count, 1) - 1)  # at the threshold in use (a given one too)
        return tail, (
            f"only {c.count} clusters above {c.threshold:.1f} µs (a fit needs {MIN_CLUSTERS}): "
            f"run about {_hours(max(more, 0.0))} longer"
        )
    return _fitted(tail, c, fit_values, times_s, rng)


def _fitted(
    tail: Tail, c: Clusters, values: np.ndarray, times_s: np.ndarray | None, rng: np.random.Generator
) -> tuple[Tail, str | None]:
    excess = c.peaks - c.threshold
    reg = region(excess)
    rate = c.count / tail.hours
    u, deadline = c.threshold, tail.deadline_us
    levels = [_level(reg, u, rate, c.count, h) for h in RETURN_EVERY_H]
    if deadline > u:
        late_rate = _range(
            reg,
            c.count,
            rate,
            lambda lam: rate_above(u, reg.xi, reg.sigma, lam, deadline),
            float(rate_above(u, np.array(reg.xi_hat), np.array(reg.sigma_hat), rate, deadline)),
        )
    else:  # the deadline is below the threshold: late bursts are common enough to count
        late_c = decluster(values, times_s, deadline, (tail.gap_ms or 0) / 1000, None).count
        late_rate = _poisson_interval(late_c, tail.hours)
    sig = _range(reg, c.count, rate, lambda lam: reg.sigma + 0 * lam, reg.sigma_hat)
    t_start, t_end = _span(times_s, tail.hours)
    tests = [
        tail_tests.goodness_of_fit(excess, reg.xi_hat, reg.sigma_hat, rng),
        tail_tests.ljung_box(c.peaks) if c.starts_s is not None else TailTest(name=tail_tests.INDEPENDENCE),
        tail_tests.stationarity(excess, c.starts_s, t_start, t_end),
    ]
    heavy = reg.xi_low > 0
    tail = tail.replace(
        xi=Interval(estimate=reg.xi_hat, low=reg.xi_low, high=reg.xi_high),
        sigma_us=sig,
        late_rate_per_h=late_rate,
        return_levels=levels,
        heavy=heavy,
        tests=tests,
    )
    tail = tail.replace(run_h_needed=run_hours_needed(tail, reg, excess, c.count, rate))
    return tail, _reason(tests)


def _span(times_s: np.ndarray | None, hours: float) -> tuple[float, float]:
    """The run's start and end in the times' clock: from 0 when the times fit in [0, hours] (seconds
    since the start: a kept subset need not begin at the start), else from the first time."""
    if times_s is None:
        return 0.0, hours * 3600
    first, last = float(times_s.min()), float(times_s.max())
    start = 0.0 if first >= 0 and last <= hours * 3600 * 1.001 else first
    return start, start + hours * 3600


def _range(
    reg: Region, clusters: int, rate: float, figure: Callable[[np.ndarray], np.ndarray], estimate: float
) -> Interval:
    """The range of *figure(λ)* (increasing in λ) over the joint region: λ at each (ξ, σ) point spans
    what the Poisson part of the budget left over allows."""
    lam_lo, lam_hi = poisson_range(rate, clusters, BUDGET_95 - reg.deficit)
    return Interval(estimate=float(estimate), low=float(np.min(figure(lam_lo))), high=float(np.max(figure(lam_hi))))


def _level(reg: Region, u: float, rate: float, clusters: int, every_h: float) -> ReturnLevel:
    est = float(return_level(u, np.array(reg.xi_hat), np.array(reg.sigma_hat), rate, every_h))
    iv = _range(reg, clusters, rate, lambda lam: return_level(u, reg.xi, reg.sigma, lam, every_h), est)
    # A level past int64 ns (about 292 years for one cycle: schema.doc.MAX_US) is no time a summary
    # can hold (its reader refuses it): a heavy tail's yearly upper bound reaches 1e17 µs here. Such a
    # bound is kept as None, "unbounded"; a level or lower bound past it leaves no figure at all.
    level, low, high = (
        x if x is not None and math.isfinite(x) and abs(x) <= MAX_US else None for x in (iv.estimate, iv.low, iv.high)
    )
    if level is None or low is None:
        level = low = high = None
    return ReturnLevel(every_h=every_h, level_us=level, low_us=low, high_us=high)


def _reason(tests: list[TailTest]) -> str | None:
    """The first failed test's line: stationarity first (a tail that changed also shows as correlated
    peaks and a poor fit, but the change is the cause to remove), then independence, then the fit."""
    fixes = {
        tail_tests.STATIONARITY: "the tail changed during the run: remove the load that changed halfway and run again",
        tail_tests.INDEPENDENCE: "bursts are still correlated: give a longer declustering gap",
        tail_tests.FIT: "the tail mixes causes: set a higher threshold, or fit each culprit's cycles alone",
    }
    failed = {t.name: t for t in tests if t.ok is False}
    for name, fix in fixes.items():
        if name in failed:
            return f"{name} failed (p = {failed[name].p_value:.3g}): {fix}"
    return None


def _hours(h: float) -> str:
    """A run length in the unit that reads best (0.8 s, 12 min, 3.5 h, 1,200 h)."""
    if h < 1 / 60:
        return f"{h * 3600:.2g} s"
    if h < 1:
        return f"{h * 60:.2g} min"
    return f"{h:.2g} h" if h < 10 else f"{h:,.0f} h"


def run_hours_needed(tail: Tail, reg: Region, excess: np.ndarray, clusters: int, rate: float) -> float | None:
    """More hours of running until the 95 % upper bound of the late rate is at most the target.

    Two routes, the smaller justified one is given: (a) the model's (the recipe's step 6): interval
    half-widths shrink as clusters^(-1/2), i.e. the log-likelihood deficit of every point grows with
    the run length, so the region for a run f times longer is this one with the budget divided by f;
    solve for f where the upper bound of Λ(deadline) meets the target. (b) With no late cycle yet,
    the no-model bound 3/T falls to the target after 3/target hours in all. None when the fitted
    rate itself is above the target or the tail is heavy (no run length will pass)."""
    no_model = max(-math.log(0.05) / tail.target_per_h - tail.hours, 0.0) if tail.late == 0 else None
    lr = tail.late_rate_per_h
    if tail.heavy or lr is None or lr.estimate is None or lr.estimate > tail.target_per_h or tail.threshold_us is None:
        return None if tail.heavy or (lr is not None and (lr.estimate or 0) > tail.target_per_h) else no_model
    if lr.high is not None and lr.high <= tail.target_per_h:
        return 0.0
    u = float(tail.threshold_us)
    if tail.deadline_us <= u:
        return no_model
    factor = _solve_factor(reg, u, tail.deadline_us, clusters, rate, tail.target_per_h, 1.0)
    if factor is not None and factor > 4:  # again on a grid sized for the answer's smaller region
        factor = _solve_factor(
            region(excess, BUDGET_95 * 2 / factor), u, tail.deadline_us, clusters, rate, tail.target_per_h, factor / 2
        )
    model = tail.hours * (factor - 1) if factor is not None else None
    options = [h for h in (model, no_model) if h is not None]
    return min(options) if options else None


def _solve_factor(
    reg: Region, u: float, deadline: float, clusters: int, rate: float, target: float, f_low: float
) -> float | None:
    """The run-length factor f at which the upper bound of Λ(deadline), over the region with budget
    95 %-cut / f, meets *target* (bisection on log f); None when no f up to 10⁹ does."""

    def upper(f: float) -> float:
        budget = BUDGET_95 / f - reg.deficit
        inside = budget >= 0
        if not inside.any():
            inside = reg.deficit <= reg.deficit.min()
            budget = np.maximum(budget, 0.0)
        _, lam_hi = poisson_range(rate, clusters, budget[inside])  # f times the clusters, budget / f: the same
        return float(np.max(rate_above(u, reg.xi[inside], reg.sigma[inside], lam_hi, deadline)))

    lo, hi = math.log(max(f_low, 1.0)), math.log(1e9)
    if upper(math.exp(hi)) > target:
        return None
    for _ in range(40):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if upper(math.exp(mid)) > target else (lo, mid)
    return math.exp(hi)
