"""The generalized Pareto distribution (GPD) by maximum likelihood, and its profile-likelihood region
(analysis layer; pure numpy; issue 33).

Excesses ``y = peak - u`` over a threshold follow GPD(ξ, σ) (Pickands 1975; Balkema and de Haan
1974; Coles, "An Introduction to Statistical Modeling of Extreme Values", Springer 2001, ch. 4):
``P(Y > y) = (1 + ξ y / σ)^(-1/ξ)`` (``exp(-y/σ)`` at ξ = 0). scipy's ``genpareto(c)`` has
``c = ξ``; this module computes the log-likelihood itself so that hundreds of samples are fitted
at once (the bootstrap of the goodness-of-fit test).

Maximum likelihood (:func:`mle`): Grimshaw's reduction ("Computing maximum likelihood estimates for
the generalized Pareto distribution", Technometrics 35, 1993): with θ = ξ/σ the likelihood is
maximised over ξ in closed form, ``ξ(θ) = mean(log1p(θ y))``, so the fit is a one-dimensional
search over θ (a grid, then golden section), vectorised over samples. ξ is kept in [-1, 5]: below
-1 the likelihood is unbounded (Smith, "Maximum likelihood estimation in a class of nonregular
cases", Biometrika 72, 1985), so ξ = -1 (a uniform tail) is the edge of the model.

Intervals (:func:`region`): the 95 % profile-likelihood interval of any function g of the
parameters is the range of g over the region ``{θ : l(θ) >= l_max - χ²₁(0.95)/2}`` (Coles 2001,
section 2.6.6; Venzon and Moolgavkar 1988), here over (ξ, σ) on a grid around the profile
``σ̂(ξ)`` and over the cluster rate λ, whose Poisson likelihood is separate and whose range for a
given budget is solved exactly with Lambert's W. So every derived figure (return levels, the
late rate) carries the uncertainty of ξ, σ and λ together.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import chdtri

XI_MIN, XI_MAX = -1.0, 5.0
#: Half the 95 % quantile of χ² with one degree of freedom: the likelihood drop of a 95 % profile interval.
BUDGET_95 = float(chdtri(1, 0.05)) / 2
_S_GRID = np.linspace(-9.0, 30.0, 48)  # θ·max(y) = e^s - 1: from near -1 (ξ → -1) to very heavy tails
_GOLDEN = (np.sqrt(5.0) - 1) / 2


def xi_of_theta(y: np.ndarray, theta: np.ndarray) -> np.ndarray:
    """Grimshaw's ξ(θ) = mean(log1p(θ y)) per row of *y* (rows: samples; *theta*: one per row and column)."""
    xi: np.ndarray = np.log1p(theta[..., None] * y[:, None, :]).mean(axis=-1)
    return xi


def _profile_theta(y: np.ndarray, theta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The log-likelihood maximised over ξ for each θ (columns) and sample (rows), with that ξ."""
    n = y.shape[1]
    xi = xi_of_theta(y, theta)
    small = np.abs(theta) < 1e-12
    safe = np.where(small, 1.0, theta)
    sigma = np.where(small, y.mean(axis=1)[:, None], xi / safe)
    with np.errstate(divide="ignore", invalid="ignore"):
        loglik = -n * np.log(sigma) - n * xi - n
    ok = (xi >= XI_MIN) & (xi <= XI_MAX) & (sigma > 0) & np.isfinite(loglik)
    return np.where(ok, loglik, -np.inf), xi


def mle(y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """ξ̂, σ̂ and the maximum log-likelihood for each row of *y* (excesses > 0, shape (samples, n))."""
    y = np.atleast_2d(np.asarray(y, dtype=float))
    top = y.max(axis=1)[:, None]
    grid = np.expm1(_S_GRID)[None, :] / top
    grid[np.abs(grid) < 1e-12] = 1e-12
    loglik, _ = _profile_theta(y, grid)
    best = np.argmax(loglik, axis=1)
    rows = np.arange(y.shape[0])
    lo_s = _S_GRID[np.maximum(best - 1, 0)]
    hi_s = _S_GRID[np.minimum(best + 1, len(_S_GRID) - 1)]
    a, b = lo_s.copy(), hi_s.copy()
    for _ in range(32):  # golden section on s, all rows at once (the bracket shrinks to 1e-6)
        c = b - _GOLDEN * (b - a)
        d = a + _GOLDEN * (b - a)
        lc = _profile_theta(y, np.stack([np.expm1(c), np.expm1(d)], axis=1) / top)[0]
        left = lc[:, 0] >= lc[:, 1]
        b = np.where(left, d, b)
        a = np.where(left, a, c)
    s = np.stack([(a + b) / 2, _S_GRID[best]], axis=1)
    theta = np.expm1(s) / top
    theta[np.abs(theta) < 1e-12] = 1e-12
    loglik, xi = _profile_theta(y, theta)
    pick = np.argmax(loglik, axis=1)  # the refined point unless it fell off a boundary
    xi_hat, ll = xi[rows, pick], loglik[rows, pick]
    th = theta[rows, pick]
    sigma = np.where(np.abs(th) < 1e-12, y.mean(axis=1), xi_hat / th)
    return xi_hat, sigma, ll


def loglik(y: np.ndarray, xi: np.ndarray, sigma: np.ndarray) -> np.ndarray:
    """The GPD log-likelihood of excesses *y* (1-D) at each (ξ, σ) pair (arrays of one shape);
    -inf outside the support."""
    xi = np.asarray(xi, dtype=float)[..., None]
    sigma = np.asarray(sigma, dtype=float)[..., None]
    z = y / sigma
    arg = xi * z
    with np.errstate(divide="ignore", invalid="ignore"):
        small = np.abs(xi) < 1e-9
        term = np.where(small, z, (1 + 1 / np.where(small, 1.0, xi)) * np.log1p(arg))
        total = -y.size * np.log(sigma[..., 0]) - term.sum(axis=-1)
    bad = (arg <= -1).any(axis=-1) | (sigma[..., 0] <= 0)
    return np.where(bad | ~np.isfinite(total), -np.inf, total)


def profile_sigma(y: np.ndarray, xis: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For each ξ in *xis*: σ̂(ξ), the profile log-likelihood and the curvature -d²l/d(ln σ)².

    The score in s = ln σ, ``g(s) = -n + (1+ξ) Σ z/(1+ξz)`` with z = y/σ, decreases in s for
    ξ > -1, so its root is found by Newton steps kept inside a bracket (bisection when a step leaves it).
    """
    xis = np.asarray(xis, dtype=float)
    n, top = y.size, y.max()
    lo = np.where(xis < 0, np.log(np.maximum(-xis, 1e-300) * top) + 1e-12, np.log(y.mean()) - 30)
    hi = np.full_like(xis, np.log(top) + 30 + np.log1p(np.maximum(xis, 0) * 100))
    s = np.clip(
        np.log(np.median(y) * np.where(np.abs(xis) < 1e-9, 1 / np.log(2), xis / np.expm1(xis * np.log(2)))),
        lo + 1e-9,
        hi,
    )
    floor = np.log(np.maximum(-xis, 1e-300) * top) + 0.05  # inside the support of a bounded tail
    s = np.where(xis < 0, np.maximum(s, floor), s)
    for _ in range(60):
        z = y[None, :] / np.exp(s)[:, None]
        den = 1 + xis[:, None] * z
        g = -n + (1 + xis) * (z / den).sum(axis=1)
        h = (1 + xis) * (z / den**2).sum(axis=1)
        lo = np.where(g > 0, s, lo)
        hi = np.where(g > 0, hi, s)
        with np.errstate(divide="ignore", invalid="ignore"):
            step = s + g / h
        s_new = np.where((step > lo) & (step < hi) & np.isfinite(step), step, (lo + hi) / 2)
        if np.all(np.abs(s_new - s) < 1e-10):
            s = s_new
            break
        s = s_new
    sigma = np.exp(s)
    z = y[None, :] / sigma[:, None]
    den = 1 + xis[:, None] * z
    h = (1 + xis) * (z / den**2).sum(axis=1)
    edge = xis <= XI_MIN  # ξ = -1: the supremum is at σ = max(y), l = -n ln max(y)
    sigma = np.where(edge, top, sigma)
    ll = np.where(edge, -n * np.log(top), loglik(y, xis, sigma))
    return sigma, ll, h


def poisson_range(rate: float, clusters: int, budget: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The cluster rates λ whose Poisson log-likelihood (``N ln λ - λT``) is within *budget* of its
    maximum at λ̂ = *rate*: ``N (ln r - r + 1) = -budget`` with r = λ/λ̂, solved by Lambert's W."""
    b = np.maximum(np.asarray(budget, dtype=float), 0.0)
    low, high = _log_roots(b / max(clusters, 1))
    return rate * low, rate * high


def _log_roots(c: np.ndarray, steps: int = 80) -> tuple[np.ndarray, np.ndarray]:
    """The two roots of ``ln r - r + 1 = -c`` (c >= 0): r <= 1 and r >= 1 (Lambert's W's branches 0
    and -1 of ``-exp(-1 - c)``), by bisection to double precision. Not scipy.special.lambertw: its
    complex path calls ucrtbase's ``cabs``, which Wine 8 lacks (the interpreter aborts)."""
    c = np.asarray(c, dtype=float)
    # r = exp(-t), t in [0, 2 + c]: -t - exp(-t) + 1 + c falls from c >= 0 to below 0.
    lo, hi = np.zeros_like(c), 2.0 + c
    for _ in range(steps):
        mid = (lo + hi) / 2
        above = -mid - np.exp(-mid) + 1 + c > 0
        lo, hi = np.where(above, mid, lo), np.where(above, hi, mid)
    low = np.exp(-(lo + hi) / 2)
    # r in [1, 2 (1 + c)] (r - ln r >= r / 2): r - ln r - 1 - c rises from -c <= 0 to above 0.
    lo, hi = np.ones_like(c), 2.0 * (1.0 + c)
    for _ in range(steps):
        mid = (lo + hi) / 2
        below = mid - np.log(mid) - 1 - c < 0
        lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
    return low, (lo + hi) / 2


@dataclass(frozen=True)
class Region:
    """Points (ξ, σ) of the joint 95 % likelihood region, each with its GPD log-likelihood deficit
    (the Poisson rate λ is handled by :func:`poisson_range` per point)."""

    xi: np.ndarray
    sigma: np.ndarray
    deficit: np.ndarray  # l_max - l(ξ, σ) >= 0
    xi_hat: float
    sigma_hat: float
    xi_low: float  # the 95 % profile interval of ξ, interpolated on the profile
    xi_high: float


def _xi_interval(y: np.ndarray, xi_hat: float, l_max: float, budget: float) -> tuple[float, float, np.ndarray]:
    """The profile-likelihood interval of ξ (interpolated where the profile crosses l_max - budget)
    and the ξ grid it was read from."""
    se = (1 + max(xi_hat, -0.5)) / np.sqrt(y.size)
    width = max(4.0 * se, 0.05)
    for _ in range(6):  # widen until the profile has dropped below the cut on both sides (or at the edges)
        grid = np.unique(np.clip(np.linspace(xi_hat - width, xi_hat + width, 161), XI_MIN, XI_MAX))
        _, prof, _ = profile_sigma(y, grid)
        inside = prof >= l_max - budget
        low_ok = grid[0] <= XI_MIN or not inside[0]
        high_ok = grid[-1] >= XI_MAX or not inside[-1]
        if low_ok and high_ok:
            break
        width *= 2
    cut = l_max - budget
    idx = np.nonzero(inside)[0]
    if idx.size == 0:
        return xi_hat, xi_hat, grid
    i, j = idx[0], idx[-1]
    low = grid[i] if i == 0 else _cross(grid[i - 1], grid[i], prof[i - 1], prof[i], cut)
    high = grid[j] if j == grid.size - 1 else _cross(grid[j], grid[j + 1], prof[j], prof[j + 1], cut)
    return float(low), float(high), grid


def _cross(x0: float, x1: float, f0: float, f1: float, cut: float) -> float:
    if not np.isfinite(f0) or not np.isfinite(f1) or f0 == f1:
        return x1 if not np.isfinite(f0) else x0
    return x0 + (cut - f0) * (x1 - x0) / (f1 - f0)


def region(y: np.ndarray, budget: float = BUDGET_95, steps: int = 41) -> Region:
    """The (ξ, σ) grid over the joint region where the GPD log-likelihood is within *budget* of its
    maximum (with room: the Poisson part of the budget is spent by :func:`poisson_range`)."""
    xi_hat, sigma_hat, l_max = (float(v[0]) for v in mle(y[None, :]))
    xi_low, xi_high, _ = _xi_interval(y, xi_hat, l_max, budget)
    margin = 0.1 * (xi_high - xi_low) + 1e-6
    xis = np.unique(
        np.r_[np.linspace(max(xi_low - margin, XI_MIN), min(xi_high + margin, XI_MAX), steps), xi_hat, xi_low, xi_high]
    )
    sig, prof, curv = profile_sigma(y, xis)
    l_max = max(l_max, float(np.max(prof)))
    half = np.minimum(1.8 * np.sqrt(2 * budget / np.maximum(curv, 1e-12)), 5.0)  # in ln σ: e^±5 is far enough
    t = np.linspace(-1.0, 1.0, steps)
    for _ in range(4):  # widen the rows whose edge is still inside the region
        sigma = sig[:, None] * np.exp(half[:, None] * t[None, :])
        ll = loglik(y, np.broadcast_to(xis[:, None], sigma.shape), sigma)
        deficit = l_max - ll
        edge = (deficit[:, 0] <= budget) | (deficit[:, -1] <= budget)
        if not edge.any():
            break
        half = np.where(edge, np.minimum(half * 2, 10.0), half)
    keep = deficit <= budget
    keep[np.argmin(np.abs(xis - xi_hat)), steps // 2] = True  # the maximum itself (t = 0 at ξ̂)
    rows = np.broadcast_to(xis[:, None], sigma.shape)
    edge_xi, edge_sigma, edge_deficit = _edges(y, xis, sig, sigma, deficit, l_max, budget)
    return Region(
        xi=np.r_[rows[keep], edge_xi],
        sigma=np.r_[sigma[keep], edge_sigma],
        deficit=np.maximum(np.r_[deficit[keep], edge_deficit], 0.0),
        xi_hat=xi_hat,
        sigma_hat=sigma_hat,
        xi_low=xi_low,
        xi_high=xi_high,
    )


def _edges(
    y: np.ndarray, xis: np.ndarray, sig: np.ndarray, sigma: np.ndarray, deficit: np.ndarray, l_max: float, budget: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The region's edge in each ξ row, between the last grid point inside and the first outside
    (linear in ln σ), so that a coarse grid does not cut the interval's ends short. At ξ = -1 the
    likelihood is -n ln σ for σ > max(y) and -inf below, so its edge is solved exactly (and calibrated
    exactly: the endpoint of a uniform sample, Smith 1985)."""
    ln_s = np.log(sigma)
    d0, d1 = deficit[:, :-1], deficit[:, 1:]
    cross = ((d0 <= budget) != (d1 <= budget)) & np.isfinite(d0) & np.isfinite(d1)
    with np.errstate(invalid="ignore"):  # inf - inf outside the crossings, which np.where drops
        frac = np.where(cross, (budget - np.where(cross, d0, 0.0)) / np.where(cross, d1 - d0, 1.0), 0.0)
    at = ln_s[:, :-1] + frac * (ln_s[:, 1:] - ln_s[:, :-1])
    rows = np.broadcast_to(xis[:, None], at.shape)
    out_xi, out_sigma, out_d = rows[cross], np.exp(at[cross]), np.full(int(cross.sum()), budget)
    d_edge = l_max + y.size * np.log(y.max())
    if xis[0] <= XI_MIN and d_edge <= budget:
        # A uniform tail's endpoint is not regular: its deficit is exponential (P(θ > max·e^(c/n)) = e^-c),
        # not half a χ²₁, so the 95 % edge is at c = ln 20 (scaled with the budget), not at 1.92.
        reach = budget * np.log(20) / BUDGET_95 - d_edge
        top = y.max() * np.array([1 + 1e-12, np.exp(reach / y.size)])
        out_xi, out_sigma = np.r_[out_xi, XI_MIN, XI_MIN], np.r_[out_sigma, top]
        out_d = np.r_[out_d, d_edge, budget]
    return out_xi, out_sigma, out_d


def return_level(u: float, xi: np.ndarray, sigma: np.ndarray, rate: np.ndarray | float, every_h: float) -> np.ndarray:
    """The level exceeded by one cluster every *every_h* hours on average:
    ``u + σ ((λh)^ξ - 1)/ξ`` (``u + σ ln(λh)`` at ξ = 0; Coles 2001, eq. 4.13)."""
    log_n = np.log(np.asarray(rate) * every_h)
    xi = np.asarray(xi, dtype=float)
    small = np.abs(xi) < 1e-9
    factor = np.where(small, log_n, np.expm1(xi * log_n) / np.where(small, 1.0, xi))
    return u + sigma * factor


def rate_above(u: float, xi: np.ndarray, sigma: np.ndarray, rate: np.ndarray | float, level: float) -> np.ndarray:
    """Λ(x) = λ (1 + ξ(x-u)/σ)^(-1/ξ): clusters per hour whose peak exceeds *level* (0 beyond a
    bounded tail's end)."""
    xi = np.asarray(xi, dtype=float)
    arg = xi * (level - u) / sigma
    small = np.abs(xi) < 1e-9
    with np.errstate(divide="ignore", invalid="ignore"):
        log_s = np.where(small, -(level - u) / sigma, -np.log1p(np.maximum(arg, -1.0)) / np.where(small, 1.0, xi))
    log_s = np.where(arg <= -1, -np.inf, log_s)
    return np.asarray(rate) * np.exp(log_s)
