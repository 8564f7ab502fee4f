"""Exceedances of a threshold, declustered into independent bursts, and the automatic threshold
(analysis layer; pure numpy; issue 33).

Runs declustering (Smith and Weissman, "Estimating the extremal index", JRSS B 56, 1994; Coles
2001, section 5.3.2): exceedances closer in time than the gap belong to one cluster, which ends
after a gap of at least ``gap_s`` with no exceedance; only each cluster's peak is fitted, because one
disturbance (an SMI, a hypervisor stall) makes several late cycles that are not independent draws.

Extremal index: the intervals estimator of Ferro and Segers ("Inference for clusters of extreme
values", JRSS B 65, 2003, eq. 4), computed from the inter-exceedance times in cycles. It needs no
gap, so it checks the declustering: about 1/θ exceedances per burst.

Threshold rule (:func:`choose_threshold`): candidates from the 99th percentile of all cycles (or the
lowest kept value, or where 2,000 clusters remain, or where clusters come rarely enough that at most
5 % of independent ones would fall within one gap of the one before (rate × gap <= 0.05: below that
runs declustering merges independent exceedances and the peaks of merged ones are not GPD), whichever
is highest) up to where 30 clusters remain, ten of them spaced evenly in log(cluster count). The chosen one is the lowest candidate whose
ξ̂ and modified scale σ* = σ - ξu (both threshold-invariant for a GPD tail, Coles 2001, section 4.3.4)
lie within the 95 % (Wald) intervals of the higher candidates that hold at least a quarter of its
clusters (at least the next one), sized at the lower candidate's parameters: the parameter-stability
rule (Coles 2001, section 4.3.4), read over a range of thresholds rather than up to the last few
dozen clusters, whose chance excursions would otherwise reject every threshold below them and pick
the noisiest candidate. Above 2,000 clusters the interval is narrower than a threshold's bias.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .tail_gpd import mle

MIN_CLUSTERS = 30
MAX_CLUSTERS = 2000
#: A candidate is compared with the higher ones holding at least 1/SPAN of its clusters.
SPAN = 4
#: At most this share of independent clusters may fall within one gap of the previous one.
MAX_MERGE = 0.05
CANDIDATES = 10
LOW_QUANTILE = 0.99


@dataclass(frozen=True)
class Clusters:
    """The exceedances of *threshold* grouped into bursts."""

    threshold: float
    exceedances: int
    peaks: np.ndarray  # each cluster's largest value, in time order
    starts_s: np.ndarray | None  # each cluster's first exceedance (None: no time order)
    extremal_index: float | None

    @property
    def count(self) -> int:
        return int(self.peaks.size)


def decluster(
    values: np.ndarray, times_s: np.ndarray | None, threshold: float, gap_s: float, period_s: float | None
) -> Clusters:
    """Group the values above *threshold* (*times_s* sorted) into clusters split by gaps > *gap_s*.
    Without times every exceedance is its own cluster and the extremal index is unknown."""
    above = values > threshold
    v = values[above]
    if times_s is None or v.size == 0:
        return Clusters(threshold, int(v.size), v, None, None)
    t = times_s[above]
    starts = np.r_[0, np.flatnonzero(np.diff(t) > gap_s) + 1]
    peaks = np.maximum.reduceat(v, starts)
    return Clusters(threshold, int(v.size), peaks, t[starts], ferro_segers(t, period_s))


def ferro_segers(times_s: np.ndarray, period_s: float | None) -> float | None:
    """The intervals estimator of the extremal index from exceedance times (Ferro and Segers 2003):
    with inter-exceedance times T_i in cycles, θ = 2(ΣT)²/((N-1)ΣT²) when max T <= 2, else
    2(Σ(T-1))²/((N-1)Σ(T-1)(T-2)); capped at 1."""
    if times_s.size < 3 or not period_s:
        return None
    gaps = np.maximum(np.round(np.diff(times_s) / period_s), 1.0)
    n = gaps.size + 1
    if gaps.max() <= 2:
        est = 2 * gaps.sum() ** 2 / ((n - 1) * (gaps**2).sum())
    else:
        denom = ((gaps - 1) * (gaps - 2)).sum()
        est = 2 * (gaps - 1).sum() ** 2 / ((n - 1) * denom) if denom > 0 else 1.0
    return float(min(est, 1.0))


def wald(xi: float, sigma: float, u: float, n: int) -> tuple[float, float]:
    """Standard errors of ξ̂ and of σ* = σ - ξu from the GPD's Fisher information (Coles 2001, section
    4.3.3: var ξ = (1+ξ)²/n, var σ = 2σ²(1+ξ)/n, cov = σ(1+ξ)/n); ξ is floored at -0.45 where the
    information is infinite."""
    x = max(xi, -0.45)
    var_xi = (1 + x) ** 2 / n
    var_sigma = 2 * sigma**2 * (1 + x) / n
    cov = sigma * (1 + x) / n
    var_star = var_sigma + u**2 * var_xi - 2 * u * cov
    return math.sqrt(var_xi), math.sqrt(max(var_star, 0.0))


def lowest_candidate(values: np.ndarray, cycles: int) -> float:
    """The 99th percentile of all *cycles* when *values* (possibly only the top of them) reach that
    far down, else the lowest kept value minus nothing (every kept value counts)."""
    m = int(math.ceil((1 - LOW_QUANTILE) * cycles))
    if m >= values.size:
        return float(np.min(values)) - 1e-9 * max(1.0, abs(float(np.min(values))))
    return float(np.partition(values, values.size - m - 1)[values.size - m - 1])


def _agrees(low: tuple[float, float], high: tuple[float, float], at: Clusters) -> bool:
    """Whether the lower candidate's (ξ, σ*) lie in the higher candidate's 95 % intervals, their widths
    taken at the lower candidate's parameters (a few dozen clusters give ξ̂ far too noisy to size an
    interval by: a wild ξ̂ = -0.9 at the top would reject every threshold below it)."""
    xi, star = low
    sigma = star + xi * at.threshold
    if sigma <= 0:
        return False
    se_xi, se_star = wald(xi, sigma, at.threshold, at.count)
    return abs(xi - high[0]) <= 1.96 * se_xi and abs(star - high[1]) <= 1.96 * se_star


@dataclass(frozen=True)
class Choice:
    """The chosen threshold, its clusters and the rule that chose it."""

    clusters: Clusters
    rule: str


def choose_threshold(
    values: np.ndarray, times_s: np.ndarray | None, cycles: int, gap_s: float, period_s: float | None
) -> Choice:
    """The parameter-stability rule of the module docstring; fewer than 30 clusters at the lowest
    candidate gives that candidate (the caller refuses)."""
    u0 = lowest_candidate(values, cycles)
    first = decluster(values, times_s, u0, gap_s, period_s)
    if first.count < 2 * MIN_CLUSTERS:
        return Choice(first, f"99th percentile ({first.count} clusters: too few to compare thresholds)")
    ranked = np.sort(first.peaks)[::-1]
    span_s = period_s * cycles if period_s else 0.0
    sparse = int(MAX_MERGE * span_s / gap_s) if times_s is not None and gap_s > 0 else first.count
    top = max(min(first.count - 1, MAX_CLUSTERS, sparse), MIN_CLUSTERS)
    counts = np.unique(np.round(np.geomspace(top, MIN_CLUSTERS, CANDIDATES)).astype(int))[::-1]
    cands = [first] if first.count <= top else []
    for k in counts:
        c = decluster(values, times_s, float(ranked[k]), gap_s, period_s)
        if c.count >= MIN_CLUSTERS and (not cands or c.threshold > cands[-1].threshold):
            cands.append(c)
    if not cands:  # no higher candidate kept 30 clusters (seen in runs, 1 in ~12): the lowest stands
        return Choice(first, f"99th percentile ({first.count} clusters: no higher candidate keeps {MIN_CLUSTERS})")
    fits = []
    for c in cands:
        xi, sigma, _ = (float(a[0]) for a in mle((c.peaks - c.threshold)[None, :]))
        fits.append((xi, sigma - xi * c.threshold))
    chosen = len(cands) - 1
    for j in range(len(cands)):
        near = [k for k in range(j + 1, len(cands)) if k == j + 1 or cands[k].count * SPAN >= cands[j].count]
        if all(_agrees(fits[j], fits[k], cands[k]) for k in near):
            chosen = j
            break
    c = cands[chosen]
    rule = (
        f"parameter stability: the lowest of {len(cands)} candidates ({cands[0].count} to {cands[-1].count} "
        f"clusters) whose ξ and modified scale lie in the 95 % intervals of the higher ones: "
        f"candidate {chosen + 1}, {c.count} clusters"
    )
    return Choice(c, rule)
