"""Exact (ε, δ) profile of the Gaussian mechanism, equivalently of μ-Gaussian DP.

A Gaussian mechanism with L2 sensitivity Δ and noise standard deviation σ is μ-GDP with μ = Δ/σ, and
its exact privacy profile is (Balle & Wang 2018, "Improving the Gaussian mechanism for differential
privacy", Thm 8; Dong, Roth & Su 2022, "Gaussian differential privacy", Cor. 2.13)::

    δ(ε; μ) = Φ(−ε/μ + μ/2) − e^ε · Φ(−ε/μ − μ/2)

The functions here evaluate it in log space (no overflow for ε in the thousands) and invert it with a
bracketing root finder. They are shared by the accountants (plain Gaussian compositions are exact:
:func:`plain_gaussian_mu`) and by the auditor (the GDP route from a μ lower bound to an ε lower bound).
"""

from __future__ import annotations

import math

import numpy as np
from scipy import special

from privaudit.accounting.mechanisms import (
    Composition,
    Gaussian,
    Neighbouring,
    SubsampledGaussian,
    effective_gaussian_multiplier,
)
from privaudit.errors import InvalidParameterError

_LOG_TINY = -745.0  # log of the smallest positive double


def _root(f, lo: float, hi: float, xtol: float, rtol: float) -> float:
    """A root of ``f`` in [lo, hi] (f(lo), f(hi) of opposite signs): Illinois steps with a bisection safeguard.

    Converges superlinearly like Brent's method (what scipy.optimize.brentq did here) without importing
    scipy.optimize, which costs ~0.1–0.3 s at start-up; the bracket always shrinks, so it cannot stall.
    """
    f_lo, f_hi = f(lo), f(hi)
    if f_lo == 0:
        return lo
    if f_hi == 0:
        return hi
    if (f_lo > 0) == (f_hi > 0):
        raise InvalidParameterError("the root is not bracketed")
    side = 0
    for i in range(400):
        if hi - lo <= xtol + rtol * max(abs(lo), abs(hi)):
            break
        x = hi - f_hi * (hi - lo) / (f_hi - f_lo)
        if i % 4 == 3 or not lo < x < hi:  # every fourth step a bisection: at worst linear convergence
            x = 0.5 * (lo + hi)
        fx = f(x)
        if fx == 0:
            return x
        if (fx > 0) == (f_lo > 0):
            lo, f_lo = x, fx
            if side == -1:
                f_hi /= 2.0
            side = -1
        else:
            hi, f_hi = x, fx
            if side == 1:
                f_lo /= 2.0
            side = 1
    return 0.5 * (lo + hi)


def _log_ndtr(x: float) -> float:
    return float(special.log_ndtr(x))


def _log_sub(a: float, b: float) -> float:
    """log(e^a − e^b) for a ≥ b (returns −inf when equal)."""
    if b == -math.inf or b < a - 40:
        return a if b == -math.inf else a + math.log1p(-math.exp(b - a))
    if b >= a:
        return -math.inf
    return a + math.log(-math.expm1(b - a))


def gaussian_log_delta(mu: float, epsilon: float) -> float:
    """log δ(ε) of μ-GDP (Dong, Roth & Su 2022, Cor. 2.13), computed stably in log space."""
    if mu <= 0:
        return -math.inf
    if math.isinf(mu):
        return 0.0
    a = _log_ndtr(-epsilon / mu + mu / 2.0)
    b = epsilon + _log_ndtr(-epsilon / mu - mu / 2.0)
    return _log_sub(a, b)


def gaussian_delta(mu: float, epsilon: float) -> float:
    """δ(ε) of μ-GDP; for ε < 0 the profile is still well defined (used by the auditor)."""
    return math.exp(gaussian_log_delta(mu, epsilon))


def gaussian_epsilon(mu: float, delta: float) -> float:
    """Smallest ε with δ(ε; μ) ≤ δ for μ-GDP (exact; the inverse of :func:`gaussian_delta`).

    Returns 0 when even ε = 0 satisfies the target and ``inf`` when μ is infinite.
    """
    if not 0.0 < delta < 1.0:
        raise InvalidParameterError(f"delta must lie in (0, 1), got {delta}")
    if mu < 0 or math.isnan(mu):
        raise InvalidParameterError(f"mu must be non-negative, got {mu}")
    if mu == 0:
        return 0.0
    if math.isinf(mu):
        return math.inf
    log_target = math.log(delta)
    if gaussian_log_delta(mu, 0.0) <= log_target:
        return 0.0
    # δ(ε) is decreasing in ε; bracket the root by doubling.
    hi = max(1.0, mu * mu / 2.0 + mu * math.sqrt(2.0 * max(-log_target, 1.0)))
    while gaussian_log_delta(mu, hi) > log_target:
        hi *= 2.0
        if hi > 1e12:  # pragma: no cover - unreachable for finite μ
            return math.inf
    return float(_root(lambda e: gaussian_log_delta(mu, e) - log_target, 0.0, hi, xtol=1e-12, rtol=1e-14))


def gaussian_mu_for(epsilon: float, delta: float) -> float:
    """Largest μ such that μ-GDP is (ε, δ)-DP (inverse in μ; δ(ε; μ) is increasing in μ)."""
    if not 0.0 < delta < 1.0:
        raise InvalidParameterError(f"delta must lie in (0, 1), got {delta}")
    if epsilon < 0:
        raise InvalidParameterError(f"epsilon must be non-negative, got {epsilon}")
    log_target = math.log(delta)
    lo, hi = 1e-12, 1.0
    while gaussian_log_delta(hi, epsilon) < log_target:
        hi *= 2.0
        if hi > 1e8:  # pragma: no cover
            return math.inf
    return float(_root(lambda m: gaussian_log_delta(m, epsilon) - log_target, lo, hi, xtol=1e-14, rtol=1e-14))


def gaussian_epsilon_vec(mu: np.ndarray, delta: float) -> np.ndarray:
    """Vectorised :func:`gaussian_epsilon` (a loop; μ arrays in audits are short)."""
    return np.array([gaussian_epsilon(float(m), delta) for m in np.ravel(mu)]).reshape(np.shape(mu))


def plain_gaussian_mu(composition: Composition) -> float | None:
    """μ of a composition of plain Gaussian releases, else ``None``.

    A Gaussian release with effective multiplier z is (1/z)-GDP and μ-GDP composes as μ² = Σ count/z² (Dong, Roth &
    Su 2022, Cor. 3.3), exactly: the composition is one Gaussian release (Balle & Wang 2018, Thm 8). A subsampled
    Gaussian at rate 1 is a plain release; replace-one neighbours halve z (the sensitivity doubles).
    """
    mu_sq = 0.0
    for mechanism, count in composition:
        if isinstance(mechanism, Gaussian):
            z = effective_gaussian_multiplier(mechanism, composition.neighbouring)
        elif isinstance(mechanism, SubsampledGaussian) and mechanism.sample_rate >= 1.0:
            z = mechanism.z / (2.0 if composition.neighbouring is Neighbouring.REPLACE_ONE else 1.0)
        else:
            return None
        mu_sq += 0.0 if math.isinf(z) else count / (z * z)
    return math.sqrt(mu_sq)
