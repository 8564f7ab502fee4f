"""The checks of a tail fit and of its assumptions (analysis layer; numpy and scipy; issue 33).

* Goodness of fit: the Anderson–Darling statistic of the cluster excesses against the fitted GPD,
  its p-value by parametric bootstrap with the parameters refitted on every sample, so the p-value
  is valid for estimated parameters (Choulakian and Stephens, "Goodness-of-fit tests for the
  generalized Pareto distribution", Technometrics 43, 2001; the scheme of scipy.stats.goodness_of_fit,
  vectorised here through :func:`softrt.analysis.tail_gpd.mle`).
* Independence of the cluster peaks: the Ljung–Box portmanteau statistic (Ljung and Box, "On a
  measure of lack of fit in time series models", Biometrika 65, 1978) on the peaks' ranks in time
  order (ranks: a heavy tail's few huge peaks would dominate raw autocorrelations), a few lags.
* Stationarity: a likelihood-ratio test of one model (cluster rate λ, ξ, σ) for the whole run against
  one per half (Wilks 1938: χ² with 3 degrees of freedom), the first-half-versus-second-half
  comparison of Santinelli et al. (WCET 2014).

Each test is passed at level :data:`ALPHA` = 0.01, so that three tests together refuse a good run
about 3 % of the time.
"""

from __future__ import annotations

import numpy as np
from scipy.special import chdtrc  # the χ² survival function

from ..schema.tail import TailTest
from .tail_gpd import mle

ALPHA = 0.01
FIT = "goodness of fit (Anderson-Darling, bootstrap)"
INDEPENDENCE = "independence of cluster peaks (Ljung-Box)"
STATIONARITY = "stationarity (halves agree)"


def _cdf(y: np.ndarray, xi: np.ndarray, sigma: np.ndarray) -> np.ndarray:
    xi = np.asarray(xi)[:, None]
    z = y / np.asarray(sigma)[:, None]
    small = np.abs(xi) < 1e-9
    with np.errstate(divide="ignore", invalid="ignore"):
        log_s = np.where(small, -z, -np.log1p(np.maximum(xi * z, -1.0)) / np.where(small, 1.0, xi))
    cdf: np.ndarray = -np.expm1(log_s)
    return cdf


def anderson_darling(y: np.ndarray, xi: np.ndarray, sigma: np.ndarray) -> np.ndarray:
    """A² of each row of *y* against GPD(ξ, σ) of that row."""
    n = y.shape[1]
    z = np.clip(np.sort(_cdf(y, xi, sigma), axis=1), 1e-12, 1 - 1e-12)
    i = np.arange(1, n + 1)
    a2: np.ndarray = -n - ((2 * i - 1) * (np.log(z) + np.log1p(-z[:, ::-1]))).sum(axis=1) / n
    return a2


def sample_gpd(rng: np.random.Generator, xi: float, sigma: float, shape: tuple[int, ...]) -> np.ndarray:
    """GPD draws by inversion: σ((1-U)^(-ξ) - 1)/ξ (σ·(-ln(1-U)) at ξ = 0)."""
    e = rng.standard_exponential(shape)  # -ln(1-U)
    return sigma * (np.expm1(xi * e) / xi if abs(xi) > 1e-9 else e)


def goodness_of_fit(y: np.ndarray, xi: float, sigma: float, rng: np.random.Generator, samples: int = 199) -> TailTest:
    """Parametric-bootstrap Anderson–Darling test of the excesses *y* against the fitted GPD."""
    stat = anderson_darling(y[None, :], np.array([xi]), np.array([sigma]))[0]
    boot = sample_gpd(rng, xi, sigma, (samples, y.size))
    bxi, bsigma, _ = mle(boot)
    ref = anderson_darling(boot, bxi, bsigma)
    p = float((1 + np.sum(ref >= stat)) / (samples + 1))
    return TailTest(name=FIT, p_value=p, ok=p >= ALPHA)


def ljung_box(peaks: np.ndarray, lags: int | None = None) -> TailTest:
    """Ljung–Box Q = n(n+2) Σ r_k²/(n-k) over k = 1..lags of the peaks' ranks; χ² with *lags* degrees of
    freedom. Lags: min(10, n/5)."""
    n = peaks.size
    lags = lags or max(1, min(10, n // 5))
    r = np.argsort(np.argsort(peaks, kind="stable")) - (n - 1) / 2  # ranks (ties broken by time)
    denom = float(np.dot(r, r))
    if n < 10 or denom == 0:
        return TailTest(name=INDEPENDENCE, p_value=None, ok=None)
    k = np.arange(1, lags + 1)
    acf = np.array([np.dot(r[:-j], r[j:]) for j in k]) / denom
    q = n * (n + 2) * np.sum(acf**2 / (n - k))
    p = float(chdtrc(lags, q))
    return TailTest(name=INDEPENDENCE, p_value=p, ok=p >= ALPHA)


def _loglik_full(y: np.ndarray, hours: float) -> float:
    """Poisson (cluster count) plus GPD log-likelihood at their maximum, up to a constant."""
    n = y.size
    if n == 0 or hours <= 0:
        return 0.0
    ll_pois = n * np.log(n / hours) - n
    if n < 3:
        return float(ll_pois)
    return float(ll_pois + mle(y[None, :])[2][0])


def stationarity(excess: np.ndarray, starts_s: np.ndarray | None, t0_s: float, t1_s: float) -> TailTest:
    """Likelihood ratio of separate (λ, ξ, σ) per half of [t0_s, t1_s] against one for the whole run."""
    if starts_s is None or excess.size < 20 or t1_s <= t0_s:
        return TailTest(name=STATIONARITY, p_value=None, ok=None)
    mid = (t0_s + t1_s) / 2
    first = starts_s < mid
    half_h = (t1_s - t0_s) / 7200
    whole = _loglik_full(excess, 2 * half_h)
    split = _loglik_full(excess[first], half_h) + _loglik_full(excess[~first], half_h)
    lr = max(2 * (split - whole), 0.0)
    p = float(chdtrc(3, lr))
    return TailTest(name=STATIONARITY, p_value=p, ok=p >= ALPHA)
