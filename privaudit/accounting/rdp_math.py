"""Rényi-DP curves of the mechanisms privaudit accounts for, and the RDP → (ε, δ) conversion.

Pure functions over numpy arrays of orders α. Every function returns RDP values ε(α) (natural log),
``inf`` where the divergence is infinite, never NaN.

Sources
-------
* Gaussian mechanism: ε(α) = α Δ² / (2σ²) (Mironov 2017, "Rényi differential privacy", Prop. 7).
* Poisson-subsampled Gaussian: ε(α) = log A_α / (α − 1) with A_α = E_{z~N(0,σ²)}[(1 − q + q·e^{(2z−1)/(2σ²)})^α]
  (Mironov, Talwar & Zhang 2019, "Rényi differential privacy of the sampled Gaussian mechanism", §3).
  Integer α: the exact binomial expansion (their eq. for integer orders), rearranged as
  A_α − 1 = Σ_{k≥2} C(α,k) q^k (1−q)^{α−k} (e^{(k²−k)/(2σ²)} − 1), a sum of positive terms that stays
  accurate when A_α is within 1e-12 of 1. Fractional α: the defining integral evaluated by the trapezoidal
  rule on a uniform grid, which converges geometrically for this analytic integrand (error
  ≈ exp(−2π d / h) for a strip of half-width d, Trefethen & Weideman 2014, "The exponentially convergent
  trapezoidal rule", Thm 5.1); the step is chosen so that the error is below 1e-30 relative.
* Fixed-size sampling without replacement (replace-one neighbours): Wang, Balle & Kasiviswanathan 2019,
  "Subsampled Rényi differential privacy and analytical moments accountant", Thm 9 (general upper
  bound, integer α ≥ 2; ε_base(∞) = ∞ for the Gaussian). Fractional α use the next integer order
  (RDP is non-decreasing in α).
* Laplace mechanism: Mironov 2017, Prop. 6.
* Pure ε-DP: the Rényi divergence of randomized response with parameter ε, which dominates every
  ε-DP pair (Kairouz, Oh & Viswanath 2015, Thm 2.1, plus the data-processing inequality).
* Skellam mechanism (integer sum + Sk(μ) noise of variance μ per coordinate): Agarwal, Kairouz & Liu 2021,
  "The Skellam mechanism for differentially private federated learning", Thm 3.5 / Cor. 3.6, integer α > 1:
  ε(α) ≤ α Δ₂²/(2μ) + min{((2α − 1)Δ₂² + 6Δ₁)/(4μ²), 3Δ₁/(2μ)}. Fractional α use ⌈α⌉ (RDP is
  non-decreasing in α, so this is still an upper bound).
* RDP → (ε, δ): Balle, Barthe, Gaboardi, Hsu & Sato 2020, "Hypothesis testing interpretations and Rényi
  differential privacy", Thm 21: ε = r(α) + log((α−1)/α) − (log δ + log α)/(α − 1).
"""

from __future__ import annotations

import math

import numpy as np
from scipy import special

from privaudit.accounting.limits import default_limits

#: opacus' default orders (1.1 … 10.9 step 0.1, 12 … 63); reproduced exactly for cross-checks.
OPACUS_ORDERS = np.array([1 + x / 10.0 for x in range(1, 100)] + list(range(12, 64)), dtype=float)

#: privaudit's default orders: a superset of opacus' (finer near 1 for large ε, larger for tiny ε).
DEFAULT_ORDERS = np.unique(
    np.concatenate(
        [
            1 + np.arange(1, 10) / 100.0,
            OPACUS_ORDERS,
            [11.0],
            [64, 72, 80, 96, 112, 128, 160, 192, 256, 320, 384, 512, 768, 1024],
        ]
    )
)


def _as_orders(orders: np.ndarray | list[float] | None) -> np.ndarray:
    if orders is None or orders is DEFAULT_ORDERS:
        return DEFAULT_ORDERS
    arr = np.asarray(orders, dtype=float)
    if arr.ndim != 1 or arr.size == 0 or np.any(arr <= 1) or not np.all(np.isfinite(arr)):
        raise ValueError("RDP orders must be a non-empty 1-D array of finite values > 1")
    return arr


# --------------------------------------------------------------------------------------------------
# Gaussian, Laplace, pure DP
# --------------------------------------------------------------------------------------------------
def rdp_gaussian(z: float, orders: np.ndarray) -> np.ndarray:
    """ε(α) = α / (2 z²) for effective noise multiplier z = σ/Δ (Mironov 2017, Prop. 7)."""
    orders = _as_orders(orders)
    if math.isinf(z):
        return np.zeros_like(orders)
    return orders / (2.0 * z * z)


def rdp_laplace(epsilon_per_release: float, orders: np.ndarray) -> np.ndarray:
    """Laplace with scale b and sensitivity Δ, written through ε₀ = Δ/b (Mironov 2017, Prop. 6).

    ε(α) = 1/(α−1) · log( α/(2α−1) · e^{(α−1)ε₀} + (α−1)/(2α−1) · e^{−αε₀} ).
    """
    orders = _as_orders(orders)
    e0 = float(epsilon_per_release)
    if e0 == 0:
        return np.zeros_like(orders)
    a = orders
    log_terms = np.stack([np.log(a / (2 * a - 1)) + (a - 1) * e0, np.log((a - 1) / (2 * a - 1)) - a * e0])
    return np.minimum(special.logsumexp(log_terms, axis=0) / (a - 1), e0)


def rdp_pure(epsilon: float, orders: np.ndarray) -> np.ndarray:
    """Tightest RDP implied by ε-DP: D_α of randomized response, min(ε, ·) (see module docstring).

    ε(α) = 1/(α−1) · log( (e^{αε} + e^{(1−α)ε}) / (1 + e^ε) ).
    """
    orders = _as_orders(orders)
    eps = float(epsilon)
    if eps == 0:
        return np.zeros_like(orders)
    if math.isinf(eps):
        return np.full_like(orders, math.inf)
    a = orders
    num = np.logaddexp(a * eps, (1 - a) * eps)
    return np.minimum((num - np.logaddexp(0.0, eps)) / (a - 1), eps)


# --------------------------------------------------------------------------------------------------
# Poisson-subsampled Gaussian
# --------------------------------------------------------------------------------------------------
def _logsumexp(x: np.ndarray, axis: int) -> np.ndarray:
    """log Σ exp(x) along ``axis`` (plain numpy; −inf entries are ignored, all −inf gives −inf)."""
    m = np.max(x, axis=axis, keepdims=True)
    m_safe = np.where(np.isfinite(m), m, 0.0)
    with np.errstate(divide="ignore"):
        out = np.log(np.sum(np.exp(x - m_safe), axis=axis, keepdims=True)) + m_safe
    return np.squeeze(out, axis=axis)


def _log_expm1(x: np.ndarray) -> np.ndarray:
    """log(e^x − 1) for x > 0, stable for tiny and huge x."""
    small = np.minimum(x, 30.0)
    with np.errstate(divide="ignore"):
        return np.where(x > 30.0, x + np.log1p(-np.exp(-np.maximum(x, 30.0))), np.log(np.expm1(small)))


def _log1pexp(x: np.ndarray) -> np.ndarray:
    """log(1 + e^x)."""
    return np.logaddexp(0.0, x)


def _log_a_integer_batch(q: np.ndarray, sigma: np.ndarray, alphas: np.ndarray) -> np.ndarray:
    """log A_α for integer α ≥ 2, shape [mechanisms, orders] (MTZ 2019, integer orders).

    Uses A_α − 1 = Σ_{k=2}^{α} C(α,k) q^k (1−q)^{α−k} (e^{(k²−k)/(2σ²)} − 1) (all terms positive), then
    log A_α = log1p(A_α − 1) evaluated in log space.
    """
    k_max = int(alphas.max())
    k = np.arange(2, k_max + 1, dtype=float)  # [K]
    a = alphas.astype(float)[:, None]  # [I, 1]
    valid = k[None, :] <= a  # [I, K]
    with np.errstate(invalid="ignore"):
        log_binom = np.where(valid, special.gammaln(a + 1) - special.gammaln(k + 1)[None, :] - special.gammaln(np.maximum(a - k[None, :], 0) + 1), -np.inf)
    log_q = np.log(q)[:, None]  # [M, 1]
    log_1mq = np.log1p(-q)[:, None]
    log_gain = _log_expm1((k * k - k)[None, :] / (2.0 * (sigma * sigma)[:, None]))  # [M, K]
    per_mk = k[None, :] * (log_q - log_1mq) + log_gain  # [M, K]
    terms = log_binom[None, :, :] + per_mk[:, None, :]  # [M, I, K]
    log_am1 = _logsumexp(terms, axis=2) + alphas[None, :] * log_1mq  # [M, I]
    return _log1pexp(log_am1)


def _fractional_grid(sigma: float, a_max: float) -> tuple[float, float, int]:
    """(start, step, n) of the trapezoid grid for one σ (see :func:`_log_a_fractional_batch`)."""
    lo = -11.0 * sigma - 1.0
    hi = a_max + 11.0 * sigma + 1.0
    h = min(sigma / 5.0, sigma * sigma / 8.0)
    cells = (hi - lo) / h if h > 0 else math.inf  # σ² underflows to 0 for σ below ~1e-154
    n = math.ceil(cells) + 1 if cells < 200_000 else 200_001
    if n > 200_000:  # extremely small σ: cap the grid (error bound exp(−π²σ²/h) still below 1e-30)
        n = 200_000
        h = (hi - lo) / (n - 1)
    return lo, h, n


def _log_a_fractional_batch(q: np.ndarray, sigma: np.ndarray, orders: np.ndarray) -> np.ndarray:
    """log A_α for fractional α by the trapezoidal rule, shape [mechanisms, orders].

    The integrand φ_σ(z)·(1 − q + q e^{(2z−1)/(2σ²)})^α is analytic in the strip |Im z| < πσ² and
    Gaussian-like with width σ; the step h = min(σ/5, σ²/8) bounds the discretisation error by
    exp(−π²σ²/h) ≤ e^{−78} relative (Trefethen & Weideman 2014, Thm 5.1). The grid covers
    [−11σ − 1, α_max + 11σ + 1], outside of which the integrand is below e^{−60} of its peak. Where A_α is
    close to 1 the integral of (·)^α − 1 is formed instead (expm1, positive and negative parts summed
    separately), so log A_α keeps full relative precision even when it is 1e-10.
    """
    a_max = float(orders.max())
    grids = [_fractional_grid(float(s), a_max) for s in sigma]
    n_max = max(g[2] for g in grids)
    lo = np.array([g[0] for g in grids])[:, None]
    h = np.array([g[1] for g in grids])[:, None]
    n = np.array([g[2] for g in grids])[:, None]
    j = np.arange(n_max, dtype=float)[None, :]
    inside = j < n  # [M, J]
    z = lo + h * j
    s2 = (sigma * sigma)[:, None]
    log_w = np.where(inside, -0.5 * z * z / s2 - 0.5 * np.log(2 * math.pi * s2) + np.log(h), -np.inf)  # [M, J]
    x = (2.0 * z - 1.0) / (2.0 * s2)
    qq = q[:, None]
    with np.errstate(over="ignore", divide="ignore"):
        g_neg = np.log1p(qq * np.expm1(np.minimum(x, 0.0)))
        g_pos = np.log(qq) + x + np.log1p((1.0 - qq) * np.exp(-np.maximum(x, 0.0)) / qq)
    g = np.where(x < 0, g_neg, g_pos)  # log(1 − q + q e^x)
    f = log_w[:, None, :] + orders[None, :, None] * g[:, None, :]  # [M, A, J]
    log_a = _logsumexp(f, axis=2)
    near_one = log_a < 0.5
    if np.any(near_one):
        mi, ai = np.nonzero(near_one)
        x_ag = orders[ai][:, None] * g[mi]  # [P, J]
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            # w·(e^x − 1) in log space: log w + log|e^x − 1|, positive part (x > 0) and negative part apart.
            log_pos = np.where(x_ag > 0, log_w[mi] + _log_expm1(np.where(x_ag > 0, x_ag, 1.0)), -np.inf)
            log_neg = np.where(x_ag < 0, log_w[mi] + np.log(-np.expm1(np.where(x_ag < 0, x_ag, -1.0))), -np.inf)
        diff = np.exp(log_pos).sum(axis=1) - np.exp(log_neg).sum(axis=1)
        log_a = log_a.copy()
        log_a[mi, ai] = np.where(diff > 0, np.log1p(np.maximum(diff, 0.0)), np.maximum(log_a[mi, ai], 0.0))
    return np.maximum(log_a, 0.0)


def _chunks_by_cost(cost: np.ndarray, budget: float) -> list[np.ndarray]:
    """Split indices (sorted by cost) into groups whose padded size stays within ``budget`` elements."""
    order = np.argsort(cost, kind="stable")
    groups: list[np.ndarray] = []
    start = 0
    while start < len(order):
        stop = start + 1
        while stop < len(order) and cost[order[stop]] * (stop - start + 1) <= budget:
            stop += 1
        groups.append(order[start:stop])
        start = stop
    return groups


def _integer_order_groups(alphas: np.ndarray) -> list[np.ndarray]:
    """Index groups of integer orders whose largest member is at most twice the smallest."""
    if alphas.size == 0:
        return []
    order = np.argsort(alphas)
    groups, current = [], [order[0]]
    for i in order[1:]:
        if alphas[i] > 2 * alphas[current[0]]:
            groups.append(np.array(current))
            current = []
        current.append(i)
    groups.append(np.array(current))
    return groups


#: Quadrature points × fractional orders one batch may evaluate per work unit of the limit
#: (privaudit.accounting.limits; 30 units by default → 9e7); see rdp_poisson_subsampled_gaussian_batch.
FRACTIONAL_POINTS_PER_UNIT = 3e6


def _fractional_budget() -> float:
    return max(2e6, default_limits().work * FRACTIONAL_POINTS_PER_UNIT)


def rdp_poisson_subsampled_gaussian_batch(q: np.ndarray, z: np.ndarray, orders: np.ndarray) -> np.ndarray:
    """RDP curves of many Poisson-subsampled Gaussian steps at once: shape [len(q), len(orders)].

    ε(α) = log A_α / (α − 1) (Mironov, Talwar & Zhang 2019), add/remove neighbours; q = 1 reduces to the
    Gaussian mechanism and z = ∞ or q = 0 to no release. Work is vectorised over mechanisms and orders.
    """
    orders = _as_orders(orders)
    q = np.atleast_1d(np.asarray(q, dtype=float))
    z = np.atleast_1d(np.asarray(z, dtype=float))
    out = np.zeros((q.size, orders.size))
    trivial = np.isinf(z) | (q <= 0)
    full = ~trivial & (q >= 1.0)
    if np.any(full):
        out[full] = orders[None, :] / (2.0 * z[full, None] ** 2)
    sub = np.flatnonzero(~trivial & ~full)
    if sub.size == 0:
        return out
    is_int = np.isclose(orders, np.round(orders), rtol=0, atol=1e-12)
    int_idx, frac_idx = np.flatnonzero(is_int), np.flatnonzero(~is_int)
    # Integer orders in groups of similar magnitude, so that padding every order to the largest k stays cheap.
    for order_group in _integer_order_groups(orders[int_idx]):
        cols = int_idx[order_group]
        alphas = np.round(orders[cols])
        per_mech = float(cols.size * alphas.max())
        for group in _chunks_by_cost(np.full(sub.size, per_mech), 2_000_000):
            idx = sub[group]
            out[np.ix_(idx, cols)] = _log_a_integer_batch(q[idx], z[idx], alphas) / (alphas - 1)[None, :]
    if frac_idx.size:
        a_frac = orders[frac_idx]
        a_max = float(a_frac.max())
        cost = np.array([_fractional_grid(float(s), a_max)[2] * a_frac.size for s in z[sub]], dtype=float)
        # Fractional orders cost ∝ 1/σ² each (the quadrature grid); beyond the budget in total the costliest
        # mechanisms keep their integer orders only (ε(α) = ∞ at the others): still an upper bound, never a stall.
        order = np.argsort(-cost, kind="stable")
        excess = np.cumsum(cost[order[::-1]])[::-1] > _fractional_budget()
        skipped = order[excess]
        if skipped.size:
            out[np.ix_(sub[skipped], frac_idx)] = np.inf
            keep = np.setdiff1d(np.arange(sub.size), skipped)
            sub, cost = sub[keep], cost[keep]
        for group in _chunks_by_cost(cost, 4_000_000):
            idx = sub[group]
            out[np.ix_(idx, frac_idx)] = _log_a_fractional_batch(q[idx], z[idx], a_frac) / (a_frac - 1)[None, :]
    return out


def rdp_poisson_subsampled_gaussian(q: float, z: float, orders: np.ndarray) -> np.ndarray:
    """RDP of one step of the Poisson-subsampled Gaussian mechanism (MTZ 2019), add/remove neighbours."""
    return rdp_poisson_subsampled_gaussian_batch(np.array([q]), np.array([z]), orders)[0]


def rdp_sampled_without_replacement_gaussian(q: float, z: float, orders: np.ndarray) -> np.ndarray:
    """RDP of a fixed-size batch (fraction q, without replacement) + Gaussian noise, replace-one neighbours.

    Wang, Balle & Kasiviswanathan 2019, Thm 9, with the base Gaussian on neighbouring batches that differ
    in one replaced record: L2 sensitivity 2 (in units of the clipping norm), so ε_base(j) = 2j / z²
    and ε_base(∞) = ∞. (dp-accounting uses sensitivity 1 here, google/differential-privacy #378.)
    For integer α ≥ 2::

        ε(α) ≤ 1/(α−1) · log(1 + q² C(α,2) min{4(e^{ε(2)} − 1), 2 e^{ε(2)}} + Σ_{j=3}^{α} 2 q^j C(α,j) e^{(j−1) ε(j)})
    """
    orders = _as_orders(orders)
    if math.isinf(z):
        return np.zeros_like(orders)
    base = lambda j: 2.0 * j / (z * z)  # noqa: E731 - the base mechanism's RDP curve
    out = np.empty_like(orders)
    cache: dict[int, float] = {}
    for i, a in enumerate(orders):
        alpha = max(2, math.ceil(a - 1e-12))
        if alpha not in cache:
            e2 = base(2)
            log_second = 2 * math.log(q) + math.log(alpha * (alpha - 1) / 2.0) + min(math.log(4.0) + e2 + math.log(-math.expm1(-e2)), math.log(2.0) + e2)  # log(e^{e2} − 1) without overflow
            terms = [0.0, log_second]
            if alpha >= 3:
                j = np.arange(3, alpha + 1, dtype=float)
                log_binom = special.gammaln(alpha + 1) - special.gammaln(j + 1) - special.gammaln(alpha - j + 1)
                terms.extend((math.log(2.0) + j * math.log(q) + log_binom + (j - 1) * base(j)).tolist())
            cache[alpha] = float(special.logsumexp(terms)) / (alpha - 1)
        # Subsampling never hurts: the bound is also at most the base mechanism's RDP.
        out[i] = min(cache[alpha], base(alpha))
    return out


# --------------------------------------------------------------------------------------------------
# Skellam
# --------------------------------------------------------------------------------------------------
def rdp_skellam(variance: float, l2_sensitivity: float, l1_sensitivity: float, orders: np.ndarray) -> np.ndarray:
    """RDP of the multi-dimensional Skellam mechanism (Agarwal, Kairouz & Liu 2021, Thm 3.5).

    ε(α) = α Δ₂²/(2μ) + min{((2α − 1)Δ₂² + 6Δ₁)/(4μ²), 3Δ₁/(2μ)} at the integer order ⌈α⌉ (α > 1), with μ the
    noise variance per coordinate and Δ₂, Δ₁ the L2 and L1 sensitivities, all in the integer units of the sum.
    The first term is the Gaussian mechanism's RDP at variance μ; the second vanishes relative to it as μ grows.
    """
    orders = _as_orders(orders)
    mu, l2, l1 = float(variance), float(l2_sensitivity), float(l1_sensitivity)
    if math.isinf(mu):
        return np.zeros_like(orders)
    a = np.ceil(orders - 1e-12)
    a = np.maximum(a, 2.0)
    gaussian = a * l2 * l2 / (2.0 * mu)
    correction = np.minimum(((2.0 * a - 1.0) * l2 * l2 + 6.0 * l1) / (4.0 * mu * mu), 3.0 * l1 / (2.0 * mu))
    return gaussian + correction


# --------------------------------------------------------------------------------------------------
# Conversion
# --------------------------------------------------------------------------------------------------
def epsilon_from_rdp(orders: np.ndarray, rdp: np.ndarray, delta: float) -> tuple[float, float]:
    """Smallest ε over orders by Balle et al. 2020, Thm 21; returns (ε, optimal order).

    ε is clamped at 0 (a negative value would only mean the bound is vacuous in the other direction).
    """
    orders = _as_orders(orders)
    rdp = np.asarray(rdp, dtype=float)
    if not 0 < delta < 1:
        raise ValueError("delta must lie in (0, 1)")
    with np.errstate(invalid="ignore", over="ignore"):
        eps = rdp + np.log1p(-1.0 / orders) - (math.log(delta) + np.log(orders)) / (orders - 1)
    eps = np.where(np.isnan(eps), np.inf, eps)
    i = int(np.argmin(eps))
    return max(0.0, float(eps[i])), float(orders[i])


def delta_from_rdp(orders: np.ndarray, rdp: np.ndarray, epsilon: float) -> tuple[float, float]:
    """Smallest δ over orders with Thm 21 of Balle et al. 2020 solved for δ; returns (δ, optimal order).

    log δ = (α − 1)(r(α) − ε + log(1 − 1/α)) − log α, capped at δ ≤ 1.
    """
    orders = _as_orders(orders)
    rdp = np.asarray(rdp, dtype=float)
    with np.errstate(invalid="ignore", over="ignore"):
        log_delta = (orders - 1) * (rdp - epsilon + np.log1p(-1.0 / orders)) - np.log(orders)
    log_delta = np.where(np.isnan(log_delta), np.inf, log_delta)
    i = int(np.argmin(log_delta))
    return float(min(1.0, math.exp(min(log_delta[i], 0.0)))), float(orders[i])
