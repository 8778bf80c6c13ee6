"""privaudit's own PLD accountant: connect-the-dots discretisation on one shared grid, composed by FFT.

Why: compositions with many *distinct* mechanisms (per-step noise schedules, per-client ledgers with
participation-dependent releases) are where the other accountants fall off a cliff — prv-accountant and
dp-accounting's PLD pay a discretisation and a convolution per distinct mechanism, RDP is 20–60 % loose.
Here every mechanism is discretised on the *same* grid ``y_j = j·h``, transformed once, and all of them are
multiplied in the frequency domain (a mechanism used ``c`` times contributes its transform to the power
``c``); one inverse transform gives the composed privacy-loss distribution.

Soundness (every step can only increase δ(ε), so ε is a certified upper bound):

* **Privacy profile.** For a dominating pair (P, Q) with loss L = log(dP/dQ) under X ~ P, and independent
  compositions, δ(ε) = E[(1 − e^{ε − Y})₊] with Y = Σ L_k (Gopi, Lee & Wutschitz 2021, Thm 3.3; Zhu, Dong &
  Wang 2022). Under add/remove neighbours both directions are composed separately and the larger ε is reported.
* **Connect-the-dots** (Doroshenko, Ghazi, Kamath, Kumar & Manurangsi 2022). The mass of each grid cell
  [a, a + h] is moved to its two end points so that both its P-mass and its Q-mass (= E_P[e^{−L}]) are kept.
  In t = e^{−y} this is a mean-preserving spread, and for every other coordinate fixed the integrand
  (1 − e^{ε−s}·t)₊ is convex in t, so by Jensen the expectation — δ(ε) of the composition — can only grow.
  Numerically, a split weight outside [0, P] is clipped, which rounds mass up to the upper end point (also
  pessimistic). Unlike rounding every loss up (privacy buckets), the spread adds no drift, so the error is
  second order in h (variance ≤ h²/4 per step) and h can be coarse.
* **Truncation.** Loss mass above the top of a mechanism's support is an atom at +∞ (it counts fully in δ);
  mass below the bottom is moved *up* to the bottom (a pointwise increase of the loss, pessimistic).
* **Aliasing.** The composed distribution is computed modulo N grid points on a window [A, B]. Mass that
  wraps into the window only adds non-negative terms; the mass that truly lies above B is bounded by the
  Chernoff bound P(Y > B) ≤ exp(log E[e^{λY}] − λB), evaluated *exactly* on the discretised distributions,
  and added to δ, as is the mass at +∞ and an allowance for floating-point noise of the transform.

Many distinct mechanisms are additionally grouped (when there are more than ``max_distinct``) into buckets of
near-equal subsampled Gaussians with the same kind of dominating pair (below), each accounted at its least
private member (smallest noise, largest rate): sound because adding noise is post-processing (x ↦ r·x +
√(1 − r²)·Z maps N(0, 1), N(±s, 1) to N(0, 1), N(±r·s, 1)) and a lower sampling rate is a mixture of the pair
with the identical pair (N(0, 1), N(0, 1)) (joint convexity of the hockey-stick divergence; for the symmetric
pairs α ≥ 1 suffices).

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
  profile is max(δ_{A‖N}, δ_{N‖A}) = δ_{A‖N} for ε ≥ 0, that of a symmetric pair (see :func:`_gaussian_pmfs`).
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

Supported: Gaussian, subsampled Gaussian (Poisson or fixed-size without replacement, either relation),
Laplace, pure ε-DP. Not: Skellam (refused, so ``auto`` falls back to RDP). Only numpy and scipy.special are used.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import special

from privaudit.accounting.base import Accountant, DeltaResult, EpsilonResult
from privaudit.accounting.gaussian import gaussian_delta, gaussian_epsilon
from privaudit.accounting.limits import Limits, ResourceRefusal, default_limits, shared_work
from privaudit.accounting.mechanisms import (
    Composition,
    Gaussian,
    Laplace,
    Neighbouring,
    PureDP,
    Sampling,
    Skellam,
    SubsampledGaussian,
    effective_gaussian_multiplier,
    effective_laplace_epsilon,
    effective_pure_epsilon,
)
from privaudit.errors import NumericalFailure

#: Relative accuracy the default grid aims at (added loss variance ≤ 2·ρ·Var(Y), i.e. ≈ ρ in μ-GDP terms).
DEFAULT_RTOL = 1e-3
#: Fraction of δ given to the truncated tails (mass at +∞ and the Chernoff bound above the window).
TAIL_SHARE = 1e-3
#: Beyond this many distinct subsampled Gaussians, near-equal ones are bucketed (see the module docstring).
MAX_DISTINCT = 2048
_BUCKET_RATIOS = (1e-4, 2e-4, 5e-4, 1e-3, 2e-3, 5e-3, 1e-2, 2e-2, 5e-2)
_MAX_GRID = 1 << 24
_BYTES_PER_BIN = 80.0  # discretisation work arrays per (mechanism, cell)
# Work (privaudit.accounting.limits: operations of the cost model, 1e9 per unit), counted before it is done:
_OPERATIONS_PER_BIN = 20.0  # per cell of the full support (thin tails are merged, so most cells cost 1/64)
_CHUNK_CELLS = 2_000_000  # Gaussians are discretised in chunks of at most this many cells
_OPERATIONS_PER_FFT_POINT = 2.0  # per point and log2(N) of a forward transform (≈ 0.5 ns measured on 2 cores)
_CHUNK_BYTES = 48e6
_HERMITE = np.polynomial.hermite_e.hermegauss(48)

#: Dominating pairs of a subsampled Gaussian step, all with P = (1 − q)·N(0, 1) + q·N(s, 1) (s = Δ/σ):
#: Q = N(0, 1) composed in both directions (Poisson, add/remove; fixed-size, add/remove with s = 2/σ) ...
PAIR_ADD_REMOVE = 0
#: ... Q = (1 − q)·N(0, 1) + q·N(−s, 1), symmetric (Poisson, replace-one) ...
PAIR_REPLACE = 1
#: ... the symmetrisation of the add/remove pair with s = 2/σ (fixed-size without replacement, replace-one).
PAIR_SYMMETRISED = 2


# ------------------------------------------------------------------------------------------------
# Poisson-subsampled Gaussians (q = 1: plain Gaussian), vectorised over mechanisms
# ------------------------------------------------------------------------------------------------
def _tails(u: np.ndarray) -> np.ndarray:
    """Φ(−|u|): the smaller tail at u (differences of tails keep their relative precision)."""
    return special.ndtr(-np.abs(u))


def _interval(u1: np.ndarray, u2: np.ndarray, t1: np.ndarray | None = None, t2: np.ndarray | None = None) -> np.ndarray:
    """Φ(u2) − Φ(u1) for u1 ≤ u2 from the tails Φ(−|u|) (computed here unless given)."""
    t1 = _tails(u1) if t1 is None else t1
    t2 = _tails(u2) if t2 is None else t2
    out = np.where(u1 >= 0, t1 - t2, np.where(u2 <= 0, t2 - t1, 1.0 - t1 - t2))
    return np.maximum(out, 0.0)


def _loss_of_u(u: np.ndarray, s: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Remove-direction loss ℓ(u) = log(1 − q + q·e^{s·u − s²/2}) for u = x/σ, s = Δ/σ."""
    with np.errstate(divide="ignore"):
        return np.logaddexp(np.log1p(-q), np.log(q) + s * u - s * s / 2.0)


def _u_of_loss(loss: np.ndarray, s: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Inverse of :func:`_loss_of_u`; −∞ at or below the smallest loss log(1 − q)."""
    loss = np.asarray(loss, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        pos = loss + np.log1p(-(1.0 - q) * np.exp(-np.maximum(loss, 0.0)))
        neg = np.log(q + np.expm1(np.minimum(loss, 0.0)))
        f = np.where(loss > 0, pos, neg)
        f = np.where(q >= 1.0, loss, f)
        f = np.where(np.isnan(f), -np.inf, f)
        return (f - np.log(q)) / s + s / 2.0


def _replace_loss_of_u(u: np.ndarray, s: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Loss of the replace-one Poisson pair, L(u) = ℓ(u) − ℓ(−u): odd and increasing in u."""
    return _loss_of_u(u, s, q) - _loss_of_u(-u, s, q)


def _u_of_replace_loss(loss: np.ndarray, s: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Inverse of :func:`_replace_loss_of_u` for loss ≥ 0.

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


def _mixture(u1: np.ndarray, u2: np.ndarray, s: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Mass of [u1, u2] under (1 − q)·N(0, 1) + q·N(s, 1)."""
    return (1.0 - q) * _interval(u1, u2) + q * _interval(u1 - s, u2 - s)


def _z_tail(tau: float) -> float:
    """z with Φ(−z) = τ."""
    return float(-special.ndtri(tau))


@dataclass
class _Pmfs:
    """Discretised loss distributions of several mechanisms on the grid y = j·h (one direction)."""

    mech: np.ndarray  # mechanism index of every entry
    j: np.ndarray  # grid index of every entry
    p: np.ndarray  # P-mass of every entry
    counts: np.ndarray  # composition count of every mechanism
    inf_mass: np.ndarray  # per mechanism: P-mass at +∞
    lo: np.ndarray  # per mechanism: smallest grid index
    hi: np.ndarray  # per mechanism: largest grid index

    @property
    def size(self) -> int:
        return self.counts.size


def _connect_the_dots(mech: np.ndarray, ja: np.ndarray, jb: np.ndarray, pm: np.ndarray, qm: np.ndarray, h: float
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Split each cell [ja·h, jb·h]'s (P, Q) mass between its end points, keeping both masses."""
    a = ja * h
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        scaled_q = np.minimum(np.exp(a + np.log(qm)), pm)
        up = (pm - scaled_q) / -np.expm1(-(jb - ja) * h)
    up = np.clip(np.nan_to_num(up, nan=0.0, posinf=0.0), 0.0, pm)
    down = pm - up
    return (np.concatenate([mech, mech]), np.concatenate([ja, jb]), np.concatenate([down, up]))


def _ragged(starts: np.ndarray, counts: np.ndarray, steps: np.ndarray | int = 1) -> tuple[np.ndarray, np.ndarray]:
    """(owner, value) of the runs start_i + step_i·t, t = 0 … count_i − 1, concatenated."""
    owner = np.repeat(np.arange(starts.size), counts)
    first = np.repeat(np.cumsum(counts) - counts, counts)
    t = np.arange(owner.size) - first
    step = steps if np.isscalar(steps) else np.asarray(steps)[owner]
    return owner, starts[owner] + step * t


class _GaussianEdges:
    """u = x/σ and the normal tails at loss-grid edges of subsampled Gaussians (one direction).

    Every pair has P = (1 − q)·N(0, 1) + q·N(s, 1) in the remove orientation; Q is N(0, 1) (add/remove pair and
    its symmetrisation) or (1 − q)·N(0, 1) + q·N(−s, 1) (the replace-one Poisson pair, ``kind == PAIR_REPLACE``).
    """

    def __init__(self, mech: np.ndarray, j: np.ndarray, s: np.ndarray, q: np.ndarray, kind: np.ndarray, h: float,
                 remove: bool) -> None:
        self.s, self.q, self.remove = s[mech], q[mech], remove
        self.rep = kind[mech] == PAIR_REPLACE
        sign = 1.0 if remove else -1.0
        self.u = _u_of_loss(sign * j * h, self.s, self.q)  # add direction: L = −ℓ(u), edge L = j·h sits at u(−j·h)
        if self.rep.any():
            self.u[self.rep] = _u_of_replace_loss(j[self.rep] * h, self.s[self.rep], self.q[self.rep])
        self.t0, self.t1 = _tails(self.u), _tails(self.u - self.s)
        self.t2 = _tails(self.u + self.s) if self.rep.any() else None

    def cells(self, i1: np.ndarray, i2: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(P-mass, Q-mass) of the loss cells between edges i1 < i2 (in loss)."""
        if not self.remove:
            i1, i2 = i2, i1  # u decreases with L in the add direction
        u, s, q = self.u, self.s, self.q
        n0 = _interval(u[i1], u[i2], self.t0[i1], self.t0[i2])
        n1 = _interval(u[i1] - s[i1], u[i2] - s[i2], self.t1[i1], self.t1[i2])
        mix = (1.0 - q[i1]) * n0 + q[i1] * n1
        if not self.remove:
            return n0, mix
        other = n0
        rep = self.rep[i1]
        if rep.any():  # Q = (1 − q)·N(0, 1) + q·N(−s, 1)
            a, b = i1[rep], i2[rep]
            other = n0.copy()
            other[rep] = (1.0 - q[a]) * n0[rep] + q[a] * _interval(u[a] + s[a], u[b] + s[b], self.t2[a], self.t2[b])
        return mix, other

    def outside(self, i: np.ndarray, above: bool) -> np.ndarray:
        """P-mass of losses above (``above``) or below the edges ``i``."""
        u, s, q, t0, t1 = self.u[i], self.s[i], self.q[i], self.t0[i], self.t1[i]
        upper0, upper1 = np.where(u >= 0, t0, 1.0 - t0), np.where(u - s >= 0, t1, 1.0 - t1)
        lower0, lower1 = np.where(u <= 0, t0, 1.0 - t0), np.where(u - s <= 0, t1, 1.0 - t1)
        if self.remove:
            return (1.0 - q) * (upper0 if above else lower0) + q * (upper1 if above else lower1)
        return lower0 if above else upper0  # P = N(0, 1); larger loss ⟺ smaller u


_BLOCK = 64
_MERGE_SHARE = 1e-4


def _gaussian_pmfs(s: np.ndarray, q: np.ndarray, kind: np.ndarray, counts: np.ndarray, h: float, tau: float,
                   remove: bool) -> _Pmfs:
    """Pmfs of subsampled Gaussians (s = Δ/σ, rate q, pair ``kind``) in one direction (remove: P = mixture).

    Cells are h wide where the mass is; in blocks of 64 cells with little mass they are merged into cells of
    up to 64·h (still between grid points, so connect-the-dots stays exact in (P, Q)-mass): the variance they
    add, Σ mass·width²/4, stays within a quarter of the bulk's h²/4.

    The symmetric pairs (``PAIR_REPLACE``, ``PAIR_SYMMETRISED``) are discretised on losses ≥ 0 only (the grid
    point 0 is an edge, so no cell straddles it) and completed by symmetry: a symmetric pair's loss
    distribution ω satisfies ω(−y) = e^{−y}·ω(y), so every point y > 0 of mass p gets a mirror at −y of mass
    e^{−y}·p, and the P-mass left over is an atom at 0. For ε ≥ 0, δ(ε) only sees the points y > 0, where
    connect-the-dots already bounds it from above; the mirrored distribution is a valid symmetric pair, so it
    dominates at every ε (its profile at ε < 0 is fixed by the one at −ε). Both directions are then one.
    """
    if not remove and np.any(kind != PAIR_ADD_REMOVE):  # pragma: no cover - symmetric pairs need one direction
        raise NumericalFailure("symmetric pairs are composed in one direction only")
    z = _z_tail(tau)
    full = q >= 1.0
    log1mq = np.log1p(-np.where(full, 0.5, q))
    sym = kind != PAIR_ADD_REMOVE
    if remove:
        top = _loss_of_u(s + z, s, q)
        bottom = np.where(full, _loss_of_u(s - z, s, q), log1mq)
        rep = kind == PAIR_REPLACE
        if rep.any():
            top = np.where(rep, _replace_loss_of_u(s + z, s, q), top)
        bottom = np.where(sym, 0.0, bottom)
    else:
        top = np.where(full, -_loss_of_u(-np.full_like(s, z), s, q), -log1mq)
        bottom = -_loss_of_u(np.full_like(s, z), s, q)
    lo = np.floor(bottom / h).astype(np.int64)
    hi = np.maximum(np.ceil(top / h).astype(np.int64), lo + 1)
    # 1. coarse blocks of _BLOCK cells: their masses decide the cell width inside each
    nblocks = (hi - lo + _BLOCK - 1) // _BLOCK
    bmech, bstart = _ragged(lo, nblocks + 1, _BLOCK)
    bstart = np.minimum(bstart, hi[bmech])
    coarse = _GaussianEdges(bmech, bstart, s, q, kind, h, remove)
    last_edge = np.cumsum(nblocks + 1) - 1
    is_block = np.ones(bmech.size, dtype=bool)
    is_block[last_edge] = False
    b1 = np.nonzero(is_block)[0]
    bmass, _ = coarse.cells(b1, b1 + 1)
    owner = bmech[b1]
    share = _MERGE_SHARE / nblocks[owner]
    with np.errstate(divide="ignore"):
        width = np.floor(np.log2(np.sqrt(share / np.maximum(bmass, 1e-300))))
    width = (2 ** np.clip(width, 0, int(math.log2(_BLOCK)))).astype(np.int64)
    span = bstart[b1 + 1] - bstart[b1]
    # 2. fine edges: each block's start, then every width cells; each mechanism's top edge closes it
    ncells = (span + width - 1) // width
    fowner, fj = _ragged(bstart[b1], ncells, width)
    fmech = owner[fowner]
    mech = np.concatenate([fmech, np.arange(s.size)])
    j = np.concatenate([fj, hi])
    order = np.lexsort((j, mech))
    mech, j = mech[order], j[order]
    edges = _GaussianEdges(mech, j, s, q, kind, h, remove)
    last = np.zeros(mech.size, dtype=bool)
    last[np.searchsorted(mech, np.arange(s.size), side="right") - 1] = True
    i1 = np.nonzero(~last)[0]
    pm, qm = edges.cells(i1, i1 + 1)
    first = np.searchsorted(mech, np.arange(s.size), side="left")
    inf_mass = np.clip(edges.outside(np.nonzero(last)[0], above=True), 0.0, 1.0)  # → an atom at +∞
    below = np.maximum(edges.outside(first, above=False), 0.0)  # moved up to the bottom edge
    _, _, split = _connect_the_dots(mech[i1], j[i1], j[i1 + 1], pm, qm, h)
    point = np.zeros(mech.size)  # the grid points are the edges: each gets its cells' shares
    point[i1] += split[: i1.size]
    point[i1 + 1] += split[i1.size:]
    point[first] += below
    if sym.any():  # mirror the points y > 0 of the symmetric pairs; what is left of their P-mass sits at 0
        entry = sym[mech]
        positive = entry & (j > 0)
        mirrored = point[positive] * np.exp(-j[positive] * h)
        used = np.bincount(mech[positive], weights=point[positive] + mirrored, minlength=s.size)
        atom = np.maximum(1.0 - inf_mass - used, 0.0)
        keep = ~entry | positive
        owners = np.nonzero(sym)[0]
        mech = np.concatenate([mech[keep], mech[positive], owners])
        j = np.concatenate([j[keep], -j[positive], np.zeros(owners.size, dtype=np.int64)])
        point = np.concatenate([point[keep], mirrored, atom[owners]])
        lo = np.where(sym, -hi, lo)
    return _Pmfs(mech, j, point, counts.astype(float), inf_mass, lo, hi)


def _gaussian_moments(s: np.ndarray, q: np.ndarray, remove: bool, kind: np.ndarray | None = None
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
        l0, l1 = _loss_of_u(u, s2, q2), _loss_of_u(u + s2, s2, q2)
        r0, r1 = _replace_loss_of_u(u, s2, q2), _replace_loss_of_u(u + s2, s2, q2)
        l0 = np.where(k2 == PAIR_REPLACE, r0, l0)
        l1 = np.where(k2 == PAIR_REPLACE, r1, l1)
        sym = k2 == PAIR_SYMMETRISED
        with np.errstate(over="ignore"):
            f1 = [np.where(sym, np.where(x > 0, x * -np.expm1(-x), 0.0), x) for x in (l0, l1)]
            f2 = [np.where(sym, np.where(x > 0, x * x * (1.0 + np.exp(-np.maximum(x, 0.0))), 0.0), x * x) for x in (l0, l1)]
        m1 = (1 - q2[:, 0]) * (f1[0] @ weights) + q2[:, 0] * (f1[1] @ weights)
        m2 = (1 - q2[:, 0]) * (f2[0] @ weights) + q2[:, 0] * (f2[1] @ weights)
        if not remove:  # add direction of the add/remove pairs (the symmetric ones are the same both ways)
            a0 = -_loss_of_u(u, s2, q2)
            add = kind == PAIR_ADD_REMOVE
            m1 = np.where(add, a0 @ weights, m1)
            m2 = np.where(add, (a0 ** 2) @ weights, m2)
    else:
        l0 = -_loss_of_u(u, s2, q2)
        m1, m2 = l0 @ weights, (l0 ** 2) @ weights
    return m1, np.maximum(m2 - m1 * m1, 0.0)


# ------------------------------------------------------------------------------------------------
# Laplace and pure ε-DP (few, handled one by one; the pair is symmetric, so one direction suffices)
# ------------------------------------------------------------------------------------------------
def _atoms_pmf(losses: list[float], pmass: list[float], qmass: list[float], h: float, k: int
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    ls = np.asarray(losses, dtype=float)
    j = np.floor(ls / h).astype(np.int64)
    return _connect_the_dots(np.full(j.size, k), j, j + 1, np.asarray(pmass, dtype=float), np.asarray(qmass, dtype=float), h)


def _pure_pmf(eps: float, h: float, k: int):
    """Randomised response with parameter ε dominates every ε-DP pair (Kairouz, Oh & Viswanath 2015)."""
    big = 1.0 / (1.0 + math.exp(-eps))
    small = 1.0 / (1.0 + math.exp(eps))
    return _atoms_pmf([eps, -eps], [big, small], [small, big], h, k)


def _laplace_pmf(eps: float, h: float, k: int):
    """Laplace, unit sensitivity, scale 1/ε: atoms at ±ε and a linear loss (2x − 1)ε for x ∈ (0, 1)."""
    m1, j1, p1 = _atoms_pmf([eps, -eps], [0.5, 0.5 * math.exp(-eps)], [0.5 * math.exp(-eps), 0.5], h, k)
    lo, hi = math.floor(-eps / h), math.ceil(eps / h)
    j = np.arange(lo, hi, dtype=np.int64)
    a = np.clip(j * h, -eps, eps)
    b = np.clip((j + 1) * h, -eps, eps)
    x1, x2 = (a / eps + 1) / 2, (b / eps + 1) / 2
    pm = 0.5 * (np.exp(-(1 - x2) * eps) - np.exp(-(1 - x1) * eps))
    qm = 0.5 * (np.exp(-x1 * eps) - np.exp(-x2 * eps))
    m2, j2, p2 = _connect_the_dots(np.full(j.size, k), j, j + 1, pm, qm, h)
    return np.concatenate([m1, m2]), np.concatenate([j1, j2]), np.concatenate([p1, p2])


# ------------------------------------------------------------------------------------------------
# The composed distribution and its privacy profile
# ------------------------------------------------------------------------------------------------
def _fast_size(n: int) -> int:
    """Smallest 2^a·3^b ≥ n (sizes numpy's FFT handles fastest)."""
    best = 1 << max(0, (n - 1).bit_length())
    p3 = 1
    while p3 < best:
        p2 = p3
        while p2 < n:
            p2 *= 2
        best = min(best, p2)
        p3 *= 3
    return best


def _log_mgfs(pmfs: _Pmfs, lams: np.ndarray, h: float) -> np.ndarray:
    """log E[e^{λY}] for every λ in ``lams`` of the composition of the discretised (finite parts of the)
    distributions — exact, so the Chernoff bounds below hold for what is actually composed."""
    positive = pmfs.p > 0
    mech, y, p = pmfs.mech[positive], pmfs.j[positive] * h, pmfs.p[positive]
    y_max = np.full(pmfs.size, -np.inf)
    y_min = np.full(pmfs.size, np.inf)
    np.maximum.at(y_max, mech, y)
    np.minimum.at(y_min, mech, y)
    out = np.empty(lams.size)
    for i, lam in enumerate(lams):
        ref = lam * (y_max if lam > 0 else y_min)  # each mechanism's largest exponent: its term is ≥ its mass
        ref = np.where(np.isfinite(ref), ref, 0.0)
        with np.errstate(over="ignore", under="ignore"):
            sums = np.bincount(mech, weights=p * np.exp(lam * y - ref[mech]), minlength=pmfs.size)
        with np.errstate(divide="ignore"):
            per = np.log(sums) + ref
        out[i] = float(np.sum(pmfs.counts * per))
    return out


@dataclass
class _Composed:
    y: np.ndarray  # grid values of the window, ascending
    p: np.ndarray  # composed P-mass on the window (non-negative)
    extra: float  # δ added for the +∞ atom, the tail above the window and floating-point noise
    grid: int
    h: float


def _compose(pmfs: _Pmfs, h: float, lam_guess: float, delta_tail: float, limits: Limits) -> _Composed:
    """Compose by FFT on a window whose upper tail is bounded by ``delta_tail`` (Chernoff, exact MGF)."""
    inf_total = -math.expm1(float(np.sum(pmfs.counts * np.log1p(-np.minimum(pmfs.inf_mass, 1.0 - 1e-16)))))
    lams = np.unique(np.concatenate([lam_guess * np.array([0.25, 0.5, 1.0, 2.0, 4.0]), [1.0]]))
    up = _log_mgfs(pmfs, lams, h)
    down = _log_mgfs(pmfs, -lams, h)
    log_tail = math.log(delta_tail)
    upper = float(np.min((up - log_tail) / lams))
    lower = float(np.min((down - log_tail) / lams))
    if not (math.isfinite(upper) and math.isfinite(lower)):
        raise NumericalFailure("the discretised loss distributions have no finite mass to compose")
    j_lo = math.floor(-lower / h) - 1
    j_hi = max(math.ceil(upper / h) + 1, j_lo + 2)
    n = _fast_size(j_hi - j_lo + 1)
    if n > _MAX_GRID:
        raise ResourceRefusal(f"the composed loss needs a grid of {n:.3g} points at h = {h:.3g} (limit {_MAX_GRID:.3g})")
    limits.check_memory("the composed privacy-loss grid", 48.0 * n)
    limits.charge("composing the privacy-loss distributions", pmfs.size * n * math.log2(max(n, 2)) * _OPERATIONS_PER_FFT_POINT)
    top = (j_lo + n - 1) * h  # the window's actual top (≥ upper): Chernoff bound on the mass above it
    tail = math.exp(min(0.0, float(np.min(up - lams * top))))
    spectrum = np.zeros(n // 2 + 1, dtype=complex)  # Σ count·log φ for mechanisms used more than once
    product = np.ones(n // 2 + 1, dtype=complex)  # Π φ for mechanisms used once
    zero = np.zeros(n // 2 + 1, dtype=bool)  # frequencies where some φ^c vanished
    rows = max(1, int(_CHUNK_BYTES // (24.0 * n)))
    # mechanisms ordered by count, so that each chunk holds few distinct counts: the spectra of equal counts
    # are multiplied first and raised to their count once (Π φ_k^c = (Π φ_k)^c)
    by_count = np.argsort(pmfs.counts, kind="stable")
    rank = np.empty_like(by_count)
    rank[by_count] = np.arange(by_count.size)
    counts_sorted = pmfs.counts[by_count]
    new_id = rank[pmfs.mech]
    order = np.argsort(new_id, kind="stable")
    mech, jj, pp = new_id[order], pmfs.j[order], pmfs.p[order]
    bounds = np.searchsorted(mech, np.arange(0, pmfs.size + rows, rows))
    for c, start in enumerate(range(0, pmfs.size, rows)):
        stop = min(start + rows, pmfs.size)
        sel = slice(bounds[c], bounds[c + 1])
        flat = (mech[sel] - start) * n + np.mod(jj[sel], n)
        block = np.bincount(flat, weights=pp[sel], minlength=(stop - start) * n).reshape(stop - start, n)
        transformed = np.fft.rfft(block, axis=1)
        counts = counts_sorted[start:stop]
        values, first = np.unique(counts, return_index=True)
        edges = [*first.tolist(), counts.size]
        with np.errstate(under="ignore"):
            for count, a, b in zip(values.tolist(), edges[:-1], edges[1:], strict=True):
                group = np.prod(transformed[a:b], axis=0) if b - a > 1 else transformed[a]
                if count == 1:
                    product *= group
                else:
                    vanished = group == 0
                    zero |= vanished
                    spectrum += count * np.log(np.where(vanished, 1.0, group))
    with np.errstate(under="ignore", over="ignore", invalid="ignore"):
        values = np.where(zero, 0.0, product * np.exp(spectrum))
    if not np.all(np.isfinite(values)):
        raise NumericalFailure("the composed characteristic function is not finite")
    composed = np.fft.irfft(values, n=n)
    index = j_lo + np.mod(np.arange(n) - j_lo, n)
    order = np.argsort(index)
    y, p = index[order] * h, composed[order]
    noise = max(-float(p.min()), 2.2e-16 * float(np.abs(p).max()) * math.log2(n))
    p = np.maximum(p, 0.0)
    positive = int(np.count_nonzero(y > 0))
    extra = inf_total + tail + 4.0 * noise * positive
    return _Composed(y, p, extra, n, h)


def _suffix_log_sums(y: np.ndarray, p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(Σ_{i≥k} p_i, log Σ_{i≥k} p_i·e^{−y_i}) for every k; the second in log space (y may be in the thousands)."""
    s0 = np.cumsum(p[::-1])[::-1]
    with np.errstate(divide="ignore"):
        terms = np.log(p) - y
    return s0, np.logaddexp.accumulate(terms[::-1])[::-1]


def _epsilon_from(c: _Composed, delta: float) -> float:
    """Smallest ε ≥ 0 with δ(ε) = Σ_{y>ε} (1 − e^{ε−y})·p + extra ≤ δ (exact between grid points)."""
    if c.extra >= delta:
        raise NumericalFailure(f"the truncated tails alone exceed δ = {delta:g} ({c.extra:.3g})")
    keep = c.y > 0
    y, p = c.y[keep], c.p[keep]
    if y.size == 0:
        return 0.0
    s0, l1 = _suffix_log_sums(y, p)
    with np.errstate(over="ignore", under="ignore"):
        if s0[0] - math.exp(float(l1[0])) + c.extra <= delta:
            return 0.0
        # δ at ε = y_k uses the suffix from k + 1
        s0n, l1n = np.append(s0[1:], 0.0), np.append(l1[1:], -np.inf)
        at_grid = s0n - np.exp(np.minimum(y + l1n, 700.0)) + c.extra
    k = int(np.argmax(at_grid <= delta))
    if not at_grid[k] <= delta:  # pragma: no cover - extra < δ makes the last point feasible
        raise NumericalFailure("no ε on the grid meets δ")
    lo = 0.0 if k == 0 else float(y[k - 1])
    need = float(s0[k]) + c.extra - delta
    eps = math.log(need) - float(l1[k]) if need > 0 and np.isfinite(l1[k]) else lo
    return float(min(max(eps, lo), y[k]))


def _delta_from(c: _Composed, epsilon: float) -> float:
    keep = c.y > epsilon
    y, p = c.y[keep], c.p[keep]
    with np.errstate(over="ignore"):
        value = float(np.sum(p * -np.expm1(epsilon - y)))
    return min(1.0, value + c.extra)


# ------------------------------------------------------------------------------------------------
# The accountant
# ------------------------------------------------------------------------------------------------
@dataclass
class _Plan:
    s: np.ndarray
    q: np.ndarray
    counts: np.ndarray
    kind: np.ndarray  # PAIR_* of every subsampled Gaussian
    pure: list[tuple[float, int]]
    laplace: list[tuple[float, int]]
    notes: list[str]


class CtdAccountant(Accountant):
    """Connect-the-dots PLD on one grid (privaudit, numpy): tight certified upper bound, many distinct mechanisms."""

    name = "ctd"
    description = "connect-the-dots PLDs on one grid, composed by FFT (privaudit): tight upper bound, fast for many mechanisms"

    def __init__(self, value_discretization_interval: float | None = None, rtol: float = DEFAULT_RTOL,
                 max_distinct: int = MAX_DISTINCT, limits: Limits | None = None) -> None:
        if value_discretization_interval is not None and not value_discretization_interval > 0:
            raise NumericalFailure(f"the discretisation interval must be positive, got {value_discretization_interval}")
        self.value_discretization_interval = value_discretization_interval
        self.rtol = float(rtol)
        self.max_distinct = int(max_distinct)
        self._limits = limits

    @property
    def limits(self) -> Limits:
        return self._limits if self._limits is not None else default_limits()

    def unsupported_reason(self, composition: Composition) -> str | None:
        for mechanism, _ in composition:
            if isinstance(mechanism, Skellam):
                return "no PLD of the Skellam mechanism here (use rdp: Agarwal, Kairouz & Liu 2021, Thm 3.5)"
            if isinstance(mechanism, PureDP) and effective_pure_epsilon(mechanism, composition.neighbouring) is None:
                return f"{mechanism.describe()} says nothing about {composition.neighbouring.value} neighbours"
        return None

    # -- planning ----------------------------------------------------------------------------------
    def _plan(self, composition: Composition) -> _Plan:
        rel = composition.neighbouring
        mu_sq, pure, laplace, notes = 0.0, [], [], []
        sampled: dict[int, list[tuple[float, float, int]]] = {}
        for mechanism, count in composition:
            if isinstance(mechanism, Gaussian) or (isinstance(mechanism, SubsampledGaussian) and mechanism.sample_rate >= 1.0):
                z = effective_gaussian_multiplier(mechanism, rel) if isinstance(mechanism, Gaussian) else mechanism.z
                if isinstance(mechanism, SubsampledGaussian) and rel is Neighbouring.REPLACE_ONE:
                    z /= 2.0
                mu_sq += 0.0 if math.isinf(z) else count / (z * z)
            elif isinstance(mechanism, SubsampledGaussian):
                if not math.isinf(mechanism.z):
                    kind, sensitivity = _pair_of(mechanism, rel)
                    sampled.setdefault(kind, []).append((sensitivity / mechanism.z, mechanism.sample_rate, count))
            elif isinstance(mechanism, Laplace):
                pure_eps = effective_laplace_epsilon(mechanism, rel)
                laplace.append((pure_eps, count))
            elif isinstance(mechanism, PureDP):
                eps = effective_pure_epsilon(mechanism, rel)
                if eps:
                    pure.append((float(eps), count))
        distinct = sum(len(v) for v in sampled.values())
        if distinct > self.max_distinct:  # each pair kind bucketed apart, in proportion to its share
            for kind, entries in sampled.items():
                share = max(1, self.max_distinct * len(entries) // distinct)
                if len(entries) > share:
                    sampled[kind], note = _bucket(entries, share)
                    notes.append(note)
        rows = [(*entry, kind) for kind, entries in sorted(sampled.items()) for entry in entries]
        if mu_sq > 0:  # plain Gaussians compose exactly into one (Dong, Roth & Su 2022, Cor. 3.3)
            rows.append((math.sqrt(mu_sq), 1.0, 1, PAIR_ADD_REMOVE))
        arr = np.array(rows, dtype=float).reshape(-1, 4)
        return _Plan(arr[:, 0].copy(), arr[:, 1].copy(), arr[:, 2].copy(), arr[:, 3].astype(np.int64), pure, laplace, notes)

    def _grid(self, plan: _Plan, delta: float) -> tuple[float, float]:
        """(h, λ guess). h from the loss variance (unless fixed): the spread of connect-the-dots adds at most
        h²/4 of variance per step, kept below 2·rtol of the composed variance; λ from a Gaussian approximation
        of the composed loss (only a starting point: the tail bounds are evaluated exactly)."""
        mean, variance, steps = 0.0, 0.0, 0.0
        if plan.s.size:
            m_remove, v_remove = _gaussian_moments(plan.s, plan.q, True, plan.kind)
            m_add, v_add = _gaussian_moments(plan.s, plan.q, False, plan.kind)
            mean += float(np.sum(plan.counts * np.maximum(m_remove, m_add)))
            variance += float(np.sum(plan.counts * np.maximum(v_remove, v_add)))
            steps += float(plan.counts.sum())
        for eps, count in plan.pure + plan.laplace:
            mean += count * eps * math.tanh(eps / 2.0)
            variance += count * eps * eps
            steps += count
        variance = max(variance, 1e-300)
        log_tail = math.log(1.0 / (delta * TAIL_SHARE))
        lam = max(math.sqrt(2.0 * log_tail / variance), 1e-6)
        scale = max(mean + math.sqrt(2.0 * variance * math.log(1.0 / delta)), 1e-12)  # ≈ the answer's size
        if self.value_discretization_interval is not None:
            return float(self.value_discretization_interval), lam
        h = math.sqrt(8.0 * self.rtol * variance / max(steps, 1.0))
        return max(min(h, scale / 200.0), 1e-10), lam

    def _pmfs(self, plan: _Plan, h: float, delta: float, remove: bool, cells: np.ndarray) -> _Pmfs:
        """The discretised pmfs, Gaussians in chunks of at most ``_CHUNK_CELLS`` cells (bounded working memory)."""
        total = float(plan.counts.sum() + sum(c for _, c in plan.pure + plan.laplace))
        tau = delta * TAIL_SHARE / 2.0 / max(total, 1.0)
        parts, entries, start = [], 0, 0
        bounds = np.searchsorted(np.cumsum(cells), np.arange(1, cells.sum() // _CHUNK_CELLS + 2) * _CHUNK_CELLS)
        for stop in [*np.unique(np.clip(bounds + 1, 1, plan.s.size)).tolist(), plan.s.size]:
            if stop <= start:
                continue
            chunk = _gaussian_pmfs(plan.s[start:stop], plan.q[start:stop], plan.kind[start:stop], plan.counts[start:stop], h,
                                   tau, remove)
            chunk.mech += start
            parts.append(chunk)
            entries += chunk.mech.size
            self.limits.check_memory("the discretised privacy-loss distributions", entries * 40.0)
            start = stop
        k = plan.s.size
        extra_m, extra_j, extra_p, extra_c = [], [], [], []
        for eps, count in plan.pure:
            m, j, p = _pure_pmf(eps, h, k)
            extra_m.append(m), extra_j.append(j), extra_p.append(p), extra_c.append(count)
            k += 1
        for eps, count in plan.laplace:
            m, j, p = _laplace_pmf(eps, h, k)
            extra_m.append(m), extra_j.append(j), extra_p.append(p), extra_c.append(count)
            k += 1
        if extra_m:
            mech, j = np.concatenate(extra_m), np.concatenate(extra_j)
            lo = np.full(len(extra_c), np.iinfo(np.int64).max)
            hi = np.full(len(extra_c), np.iinfo(np.int64).min)
            np.minimum.at(lo, mech - plan.s.size, j)
            np.maximum.at(hi, mech - plan.s.size, j)
            parts.append(_Pmfs(mech, j, np.concatenate(extra_p), np.array(extra_c, dtype=float), np.zeros(len(extra_c)), lo, hi))
        return _Pmfs(*(np.concatenate([getattr(x, f) for x in parts])
                       for f in ("mech", "j", "p", "counts", "inf_mass", "lo", "hi")))

    def _cells(self, plan: _Plan, h: float, delta: float) -> np.ndarray:
        """Cells of width h each Gaussian's support spans (before merging thin tails): an upper bound on the work."""
        if not plan.s.size:
            return np.zeros(0)
        total = float(plan.counts.sum()) + 1.0
        z = _z_tail(delta * TAIL_SHARE / 2.0 / total)
        top = _loss_of_u(plan.s + z, plan.s, plan.q)
        bottom = np.where(plan.q >= 1, _loss_of_u(plan.s - z, plan.s, plan.q), np.log1p(-np.minimum(plan.q, 0.5)))
        add_bottom = -_loss_of_u(np.full_like(plan.s, z), plan.s, plan.q)
        add_top = np.where(plan.q >= 1, top - bottom + add_bottom, -np.log1p(-np.minimum(plan.q, 0.5)))
        span = np.maximum(top - bottom, add_top - add_bottom)
        # symmetric pairs: the half y ≥ 0 is discretised, then mirrored
        span = np.where(plan.kind == PAIR_SYMMETRISED, 2.0 * top, span)
        span = np.where(plan.kind == PAIR_REPLACE, 2.0 * _replace_loss_of_u(plan.s + z, plan.s, plan.q), span)
        cells = span / h + 4.0
        return np.where(np.isfinite(cells), cells, np.inf)  # an overflowed span (σ → 0) is refused by the work guard

    def _composed(self, composition: Composition, delta: float) -> tuple[list[_Composed], dict, list[str]]:
        limits = self.limits
        plan = self._plan(composition)
        h, lam = self._grid(plan, delta)
        cells = self._cells(plan, h, delta)
        extra = sum(2 * eps / h + 4 for eps, _ in plan.pure + plan.laplace)
        limits.check_memory("discretising the pure/Laplace releases", extra * _BYTES_PER_BIN)
        # symmetric pairs (plain Gaussians, replace-one pairs, Laplace, pure) need one direction
        symmetric = not np.any((plan.kind == PAIR_ADD_REMOVE) & (plan.q < 1.0))
        directions = (True,) if symmetric else (True, False)
        out = []
        with shared_work():  # both directions' discretisations and transforms count against one budget
            for remove in directions:
                limits.charge("discretising the privacy-loss distributions", (float(cells.sum()) + extra) * _OPERATIONS_PER_BIN)
                pmfs = self._pmfs(plan, h, delta, remove, cells)
                out.append(_compose(pmfs, h, lam, delta * TAIL_SHARE / 2.0, limits))
        details = {"value_discretization_interval": h, "grid_points": max(c.grid for c in out),
                   "distinct_mechanisms": int(plan.s.size + len(plan.pure) + len(plan.laplace)),
                   "tail_delta": max(c.extra for c in out)}
        return out, details, plan.notes

    def _epsilon(self, composition: Composition, delta: float) -> EpsilonResult:
        mu = _plain_gaussian_mu(composition)
        if mu is not None:
            eps = gaussian_epsilon(mu, delta)
            return EpsilonResult(self.name, eps, delta, lower=eps, estimate=eps, notes=(EXACT_NOTE,), details={"mu": mu})
        composed, details, notes = self._composed(composition, delta)
        eps = max(_epsilon_from(c, delta) for c in composed)
        return EpsilonResult(self.name, eps, delta, notes=tuple(notes), details=details)

    def _delta(self, composition: Composition, epsilon: float) -> DeltaResult:
        mu = _plain_gaussian_mu(composition)
        if mu is not None:
            d = min(1.0, gaussian_delta(mu, epsilon))
            return DeltaResult(self.name, d, epsilon, lower=d, estimate=d, notes=(EXACT_NOTE,))
        composed, _, notes = self._composed(composition, 1e-10)
        return DeltaResult(self.name, max(_delta_from(c, epsilon) for c in composed), epsilon, notes=tuple(notes))


def _pair_of(mechanism: SubsampledGaussian, rel: Neighbouring) -> tuple[int, float]:
    """(pair kind, sensitivity s·σ) of one subsampled step with q < 1 (see the module docstring, *Dominating pairs*)."""
    if mechanism.sampling is Sampling.POISSON:
        return (PAIR_REPLACE if rel is Neighbouring.REPLACE_ONE else PAIR_ADD_REMOVE), 1.0
    return (PAIR_SYMMETRISED if rel is Neighbouring.REPLACE_ONE else PAIR_ADD_REMOVE), 2.0


EXACT_NOTE = "exact: a composition of Gaussian mechanisms is one Gaussian mechanism (Balle & Wang 2018)"


def _plain_gaussian_mu(composition: Composition) -> float | None:
    """μ of a composition of plain Gaussian releases (μ² = Σ count/z², Dong, Roth & Su 2022), else ``None``."""
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


def _bucket(sampled: list[tuple[float, float, int]], limit: int) -> tuple[list[tuple[float, float, int]], str]:
    """Group (s, q, count) into at most ``limit`` buckets on a geometric grid; each bucket takes its largest
    s = Δ/σ (least noise) and largest q (sound: both are monotone, see the module docstring)."""
    arr = np.array(sampled, dtype=float)
    log_s, log_q = np.log(arr[:, 0]), np.log(arr[:, 1])
    for ratio in _BUCKET_RATIOS:
        width = math.log1p(ratio)
        keys = np.stack([np.floor(log_s / width), np.floor(log_q / width)], axis=1)
        uniq, inverse = np.unique(keys, axis=0, return_inverse=True)
        if uniq.shape[0] <= limit or ratio == _BUCKET_RATIOS[-1]:
            break
    inverse = inverse.ravel()
    n = uniq.shape[0]
    s_max = np.full(n, -np.inf)
    q_max = np.full(n, -np.inf)
    np.maximum.at(s_max, inverse, arr[:, 0])
    np.maximum.at(q_max, inverse, arr[:, 1])
    counts = np.bincount(inverse, weights=arr[:, 2], minlength=n)
    out = [(float(a), float(b), int(c)) for a, b, c in zip(s_max, q_max, counts, strict=True)]
    note = (f"{len(sampled)} distinct subsampled Gaussians grouped into {n} buckets of relative width {ratio:g} in σ and q, "
            "each accounted at its least noisy, most sampled member (an upper bound)")
    return out, note
