"""Dominating pairs of one subsampled Gaussian step, and the loss functions of those pairs.

A pair (P, Q) of distributions stands for a mechanism in the privacy-loss accountants (:mod:`privaudit.accounting.ctd`,
and the fixed-size pairs :mod:`privaudit.accounting.pld` assembles from dp-accounting's pieces). Everything is in
units of σ·C (u = x/σ, s = Δ/σ) and vectorised over mechanisms (arrays ``s``, ``q`` of equal shape).

**Dominating pairs** (Zhu, Dong & Wang 2022, "Optimal accounting of differential privacy via characteristic
function", AISTATS: a pair (P, Q) dominates a mechanism if H_α(M(D) ‖ M(D')) ≤ H_α(P ‖ Q) for every α ≥ 0 and
every ordered pair of neighbours; the product of dominating pairs dominates the adaptive composition). One step
sums a batch of records clipped to norm C and adds N(0, σ²C²); in units of σC, with A = (1 − q)·N(0, 1) + q·N(s, 1):

* *Poisson, add/remove* (q the inclusion probability): (A, N(0, 1)) with s = 1/σ for removal and
  (N(0, 1), A) for addition; both are composed and the larger ε is reported (the direction is the same at every
  step for one pair of neighbouring datasets).
* *Poisson, replace-one*: the symmetric pair ((1 − q)·N(0, 1) + q·N(s, 1), (1 − q)·N(0, 1) + q·N(−s, 1)),
  s = 1/σ — the replaced record is sampled with probability q in both datasets, and its two contributions lie
  in the ball of radius C around the rest of the batch's sum, at most 2C apart. It is dp-accounting's
  ``REPLACE_ONE`` pair; privaudit's tests check numerically that it dominates every other placement of the two
  contributions in that ball.
* *Fixed-size batches of b = q·n records drawn uniformly without replacement, replace-one*: the symmetrisation
  of (A, N(0, 1)) with **s = 2/σ**. Couple the batches: draw b − 1 records B' and one more record j from the
  others; with probability q the batch is B' ∪ {the replaced record}, else B' ∪ {j}. Given (B', j) the two
  outputs are (1 − q)·N(u) + q·N(v) and (1 − q)·N(u) + q·N(w) with u, v, w the sums with j, x, x' — pairwise
  up to 2C apart. By joint convexity of the hockey-stick divergence it suffices to bound each such pair, and
  advanced joint convexity (Balle, Barthe & Gaboardi 2018, "Privacy amplification by subsampling") gives
  H_{1+q(e^ε−1)} ≤ q·H_{e^ε}(N(2C) ‖ N(0)), which is exactly the value of (A, N(0, 1)) with s = 2/σ
  (the subsampled pair of the base pair (N(2C), N(0)): Zhu, Dong & Wang 2022's amplification result for
  sampling without replacement under replace-one); for α < 1 the same holds with the roles swapped.
  It is attained: if every other record's clipped gradient equals that of x', D' gives N(b·g') and D gives
  (1 − q)·N(b·g') + q·N(b·g' + g − g') with ‖g − g'‖ = 2C. Since other steps may take the other orientation
  (every other record looking like x), the pair must dominate both orientations at every α: its privacy
  profile is max(δ_{A‖N}, δ_{N‖A}) = δ_{A‖N} for ε ≥ 0, that of a symmetric pair (see
  :func:`privaudit.accounting.loss_grid.gaussian_pmfs`).
  This is **not** the Poisson replace-one pair at rate q: a fixed-size batch gives much weaker guarantees
  (σ = 1, q = 0.01, 1000 steps, δ = 1e-5: ε ≈ 14.8 here, 2.85 for Poisson replace-one; cf. Lebeda, Regehr,
  Kamath & Steinke 2024, "Avoiding pitfalls for privacy accounting of subsampled mechanisms under composition").
* *Fixed-size batches, add/remove* (the batch size b is fixed and public; the neighbours hold n and n ± 1
  records): the same coupling with the added record in place of x shows that the larger dataset's output is
  (1 − γ)·N(u) + γ·N(v) against N(u) for the smaller one, γ = b / (size of the larger dataset) ≤ q = b/n,
  ‖v − u‖ ≤ 2C. So (A, N(0, 1)) with s = 2/σ at rate q dominates, in a direction fixed for the whole run:
  the Poisson add/remove computation with σ/2. It is tight when the neighbour has one record fewer (γ = q).

Under either relation q = 1 means the whole dataset at every step: a plain Gaussian release (sensitivity C
under add/remove, 2C under replace-one).

Only numpy and scipy.special are used.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import special

from privaudit.accounting.mechanisms import Neighbouring, Sampling, SubsampledGaussian

#: Dominating pairs of a subsampled Gaussian step, all with P = (1 − q)·N(0, 1) + q·N(s, 1) (s = Δ/σ):
#: Q = N(0, 1) composed in both directions (Poisson, add/remove; fixed-size, add/remove with s = 2/σ) ...
PAIR_ADD_REMOVE = 0
#: ... Q = (1 − q)·N(0, 1) + q·N(−s, 1), symmetric (Poisson, replace-one) ...
PAIR_REPLACE = 1
#: ... the symmetrisation of the add/remove pair with s = 2/σ (fixed-size without replacement, replace-one).
PAIR_SYMMETRISED = 2
#: Gauss–Hermite nodes and weights (probabilists' weight e^{−u²/2}) for the loss moments.
_HERMITE = np.polynomial.hermite_e.hermegauss(48)


def pair_of(mechanism: SubsampledGaussian, rel: Neighbouring) -> tuple[int, float]:
    """(pair kind, sensitivity s·σ) of one subsampled step with q < 1 (the module docstring, *Dominating pairs*)."""
    if mechanism.sampling is Sampling.POISSON:
        return (PAIR_REPLACE if rel is Neighbouring.REPLACE_ONE else PAIR_ADD_REMOVE), 1.0
    return (PAIR_SYMMETRISED if rel is Neighbouring.REPLACE_ONE else PAIR_ADD_REMOVE), 2.0


def normal_tail(u: np.ndarray) -> np.ndarray:
    """Φ(−|u|): the smaller standard normal tail at u (differences of tails keep their relative precision)."""
    return special.ndtr(-np.abs(u))


def normal_interval(u1: np.ndarray, u2: np.ndarray, t1: np.ndarray | None = None, t2: np.ndarray | None = None) -> np.ndarray:
    """Φ(u2) − Φ(u1) for u1 ≤ u2 from the tails Φ(−|u|) (computed here unless given)."""
    t1 = normal_tail(u1) if t1 is None else t1
    t2 = normal_tail(u2) if t2 is None else t2
    out = np.where(u1 >= 0, t1 - t2, np.where(u2 <= 0, t2 - t1, 1.0 - t1 - t2))
    return np.maximum(out, 0.0)


def loss_of_u(u: np.ndarray, s: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Remove-direction loss ℓ(u) = log(1 − q + q·e^{s·u − s²/2}) for u = x/σ, s = Δ/σ: log dA/dN(0, 1) at u, the
    privacy loss of the Poisson-subsampled Gaussian pair (A, N(0, 1)) (Zhu, Dong & Wang 2022, Sec. 5)."""
    with np.errstate(divide="ignore"):
        return np.logaddexp(np.log1p(-q), np.log(q) + s * u - s * s / 2.0)


def u_of_loss(loss: np.ndarray, s: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Inverse of :func:`loss_of_u`; −∞ at or below the smallest loss log(1 − q)."""
    loss = np.asarray(loss, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        pos = loss + np.log1p(-(1.0 - q) * np.exp(-np.maximum(loss, 0.0)))
        neg = np.log(q + np.expm1(np.minimum(loss, 0.0)))
        f = np.where(loss > 0, pos, neg)
        f = np.where(q >= 1.0, loss, f)
        f = np.where(np.isnan(f), -np.inf, f)
        return (f - np.log(q)) / s + s / 2.0


def replace_loss_of_u(u: np.ndarray, s: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Loss of the replace-one Poisson pair (module docstring), L(u) = ℓ(u) − ℓ(−u): odd and increasing in u."""
    return loss_of_u(u, s, q) - loss_of_u(-u, s, q)


def u_of_replace_loss(loss: np.ndarray, s: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Inverse of :func:`replace_loss_of_u` for loss ≥ 0.

    With w = s·u and k = (1 − q)·e^{s²/2}/q, e^{L} = (k + e^{w})/(k + e^{−w}); writing w = L/2 + v gives
    sinh(v) = k·sinh(L/2), so w = L/2 + asinh(k·sinh(L/2)), evaluated in logs where k·sinh(L/2) is large.
    """
    loss = np.maximum(np.asarray(loss, dtype=float), 0.0)
    half = loss / 2.0
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        log_k = np.log1p(-q) - np.log(q) + s * s / 2.0
        log_x = log_k + half + np.log(-np.expm1(-loss)) - math.log(2.0)  # log(k·sinh(L/2))
        small = np.arcsinh(np.exp(np.minimum(log_x, 30.0)))
        large = log_x + np.log1p(np.sqrt(1.0 + np.exp(-2.0 * np.maximum(log_x, 30.0))))
        w = half + np.where(log_x > 30.0, large, small)
    return np.where(loss > 0, w, 0.0) / s


def z_of_tail(tau: float) -> float:
    """z with Φ(−z) = τ: the normal quantile at which a mechanism's support is truncated (mass τ beyond it)."""
    return float(-special.ndtri(tau))


def gaussian_moments(s: np.ndarray, q: np.ndarray, remove: bool, kind: np.ndarray | None = None
                      ) -> tuple[np.ndarray, np.ndarray]:
    """(mean, variance) of the loss under P (Gauss–Hermite quadrature over the mixture components).

    For the symmetrised pair E[f(Y)] = E_A[(f(ℓ) + e^{−ℓ}·f(−ℓ))·1{ℓ > 0}] + atom·f(0), with A the remove pair's
    mixture (the indicator makes the quadrature approximate: these moments only size the grid)."""
    nodes, weights = _HERMITE
    weights = weights / weights.sum()
    u = nodes[None, :]
    s2, q2 = s[:, None], q[:, None]
    kind = np.zeros(s.shape, dtype=np.int64) if kind is None else np.asarray(kind)
    k2 = kind[:, None]
    if remove or np.any(kind != PAIR_ADD_REMOVE):
        l0, l1 = loss_of_u(u, s2, q2), loss_of_u(u + s2, s2, q2)
        r0, r1 = replace_loss_of_u(u, s2, q2), replace_loss_of_u(u + s2, s2, q2)
        l0 = np.where(k2 == PAIR_REPLACE, r0, l0)
        l1 = np.where(k2 == PAIR_REPLACE, r1, l1)
        sym = k2 == PAIR_SYMMETRISED
        with np.errstate(over="ignore"):
            f1 = [np.where(sym, np.where(x > 0, x * -np.expm1(-x), 0.0), x) for x in (l0, l1)]
            f2 = [np.where(sym, np.where(x > 0, x * x * (1.0 + np.exp(-np.maximum(x, 0.0))), 0.0), x * x) for x in (l0, l1)]
        m1 = (1 - q2[:, 0]) * (f1[0] @ weights) + q2[:, 0] * (f1[1] @ weights)
        m2 = (1 - q2[:, 0]) * (f2[0] @ weights) + q2[:, 0] * (f2[1] @ weights)
        if not remove:  # add direction of the add/remove pairs (the symmetric ones are the same both ways)
            a0 = -loss_of_u(u, s2, q2)
            add = kind == PAIR_ADD_REMOVE
            m1 = np.where(add, a0 @ weights, m1)
            m2 = np.where(add, (a0 ** 2) @ weights, m2)
    else:
        l0 = -loss_of_u(u, s2, q2)
        m1, m2 = l0 @ weights, (l0 ** 2) @ weights
    return m1, np.maximum(m2 - m1 * m1, 0.0)
