"""Privacy-loss distributions discretised on the shared grid y_j = j·h by connect-the-dots.

Connect-the-dots (Doroshenko, Ghazi, Kamath, Kumar & Manurangsi 2022, "Connect the dots: tighter discrete
approximations of privacy loss distributions", PETS, Sec. 3): the mass of each grid cell [a, a + h] is moved to its
two end points so that both its P-mass and its Q-mass (= E_P[e^{−L}]) are kept. In t = e^{−y} this is a
mean-preserving spread, and for every other coordinate fixed the integrand (1 − e^{ε−s}·t)₊ is convex in t, so by
Jensen δ(ε) of the composition can only grow: the discretised distributions dominate the pairs they come from.
Numerically, a split weight outside [0, P] is clipped, which rounds mass up to the upper end point (also pessimistic).

Truncation: loss mass above the top of a mechanism's support is an atom at +∞ (it counts fully in δ); mass below the
bottom is moved *up* to the bottom (a pointwise increase of the loss, pessimistic).

The pairs are those of :mod:`privaudit.accounting.pairs` (subsampled Gaussians, vectorised over mechanisms), plus
randomised response for pure ε-DP and the Laplace pair, few and handled one by one. Only numpy is used.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from privaudit.accounting.pairs import (
    PAIR_ADD_REMOVE,
    PAIR_REPLACE,
    loss_of_u,
    normal_interval,
    normal_tail,
    replace_loss_of_u,
    u_of_loss,
    u_of_replace_loss,
    z_of_tail,
)
from privaudit.errors import NumericalFailure

#: Cells are merged in blocks of this many where the mass is thin (see :func:`gaussian_pmfs`).
_BLOCK = 64
#: Share of the bulk's added variance (h²/4) the merged thin cells may add.
_MERGE_SHARE = 1e-4


@dataclass
class LossPmfs:
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

    @classmethod
    def concatenate(cls, parts: list[LossPmfs]) -> LossPmfs:
        """The entries and per-mechanism arrays of ``parts`` one after the other (mechanism indices unchanged)."""
        return cls(*(np.concatenate([getattr(x, f.name) for x in parts]) for f in dataclasses.fields(cls)))


def connect_the_dots(mech: np.ndarray, ja: np.ndarray, jb: np.ndarray, pm: np.ndarray, qm: np.ndarray, h: float
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Split each cell [ja·h, jb·h]'s (P, Q) mass between its end points, keeping both masses (Doroshenko et al.
    2022, Sec. 3): (mechanism, grid index, P-mass) of the lower end points, then of the upper ones."""
    a = ja * h
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        scaled_q = np.minimum(np.exp(a + np.log(qm)), pm)
        up = (pm - scaled_q) / -np.expm1(-(jb - ja) * h)
    up = np.clip(np.nan_to_num(up, nan=0.0, posinf=0.0), 0.0, pm)
    down = pm - up
    return (np.concatenate([mech, mech]), np.concatenate([ja, jb]), np.concatenate([down, up]))


def ragged(starts: np.ndarray, counts: np.ndarray, steps: np.ndarray | int = 1) -> tuple[np.ndarray, np.ndarray]:
    """(owner, value) of the runs start_i + step_i·t, t = 0 … count_i − 1, concatenated (ragged ranges, vectorised)."""
    owner = np.repeat(np.arange(starts.size), counts)
    first = np.repeat(np.cumsum(counts) - counts, counts)
    t = np.arange(owner.size) - first
    step = steps if np.isscalar(steps) else np.asarray(steps)[owner]
    return owner, starts[owner] + step * t


class GaussianEdges:
    """u = x/σ and the normal tails at loss-grid edges of subsampled Gaussians (one direction).

    Every pair has P = (1 − q)·N(0, 1) + q·N(s, 1) in the remove orientation; Q is N(0, 1) (add/remove pair and
    its symmetrisation) or (1 − q)·N(0, 1) + q·N(−s, 1) (the replace-one Poisson pair, ``kind == PAIR_REPLACE``).
    """

    def __init__(self, mech: np.ndarray, j: np.ndarray, s: np.ndarray, q: np.ndarray, kind: np.ndarray, h: float,
                 remove: bool) -> None:
        self.s, self.q, self.remove = s[mech], q[mech], remove
        self.rep = kind[mech] == PAIR_REPLACE
        sign = 1.0 if remove else -1.0
        self.u = u_of_loss(sign * j * h, self.s, self.q)  # add direction: L = −ℓ(u), edge L = j·h sits at u(−j·h)
        if self.rep.any():
            self.u[self.rep] = u_of_replace_loss(j[self.rep] * h, self.s[self.rep], self.q[self.rep])
        self.t0, self.t1 = normal_tail(self.u), normal_tail(self.u - self.s)
        self.t2 = normal_tail(self.u + self.s) if self.rep.any() else None

    def cells(self, i1: np.ndarray, i2: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(P-mass, Q-mass) of the loss cells between edges i1 < i2 (in loss)."""
        if not self.remove:
            i1, i2 = i2, i1  # u decreases with L in the add direction
        u, s, q = self.u, self.s, self.q
        n0 = normal_interval(u[i1], u[i2], self.t0[i1], self.t0[i2])
        n1 = normal_interval(u[i1] - s[i1], u[i2] - s[i2], self.t1[i1], self.t1[i2])
        mix = (1.0 - q[i1]) * n0 + q[i1] * n1
        if not self.remove:
            return n0, mix
        other = n0
        rep = self.rep[i1]
        if rep.any():  # Q = (1 − q)·N(0, 1) + q·N(−s, 1)
            a, b = i1[rep], i2[rep]
            other = n0.copy()
            other[rep] = (1.0 - q[a]) * n0[rep] + q[a] * normal_interval(u[a] + s[a], u[b] + s[b], self.t2[a], self.t2[b])
        return mix, other

    def outside(self, i: np.ndarray, above: bool) -> np.ndarray:
        """P-mass of losses above (``above``) or below the edges ``i``."""
        u, s, q, t0, t1 = self.u[i], self.s[i], self.q[i], self.t0[i], self.t1[i]
        upper0, upper1 = np.where(u >= 0, t0, 1.0 - t0), np.where(u - s >= 0, t1, 1.0 - t1)
        lower0, lower1 = np.where(u <= 0, t0, 1.0 - t0), np.where(u - s <= 0, t1, 1.0 - t1)
        if self.remove:
            return (1.0 - q) * (upper0 if above else lower0) + q * (upper1 if above else lower1)
        return lower0 if above else upper0  # P = N(0, 1); larger loss ⟺ smaller u


def gaussian_pmfs(s: np.ndarray, q: np.ndarray, kind: np.ndarray, counts: np.ndarray, h: float, tau: float,
                  remove: bool) -> LossPmfs:
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
    sym = kind != PAIR_ADD_REMOVE
    lo, hi = _support(s, q, kind, h, tau, remove)
    mech, j = _cell_edges(s, q, kind, h, remove, lo, hi)
    edges = GaussianEdges(mech, j, s, q, kind, h, remove)
    last = np.zeros(mech.size, dtype=bool)
    last[np.searchsorted(mech, np.arange(s.size), side="right") - 1] = True
    i1 = np.nonzero(~last)[0]
    pm, qm = edges.cells(i1, i1 + 1)
    first = np.searchsorted(mech, np.arange(s.size), side="left")
    inf_mass = np.clip(edges.outside(np.nonzero(last)[0], above=True), 0.0, 1.0)  # → an atom at +∞
    below = np.maximum(edges.outside(first, above=False), 0.0)  # moved up to the bottom edge
    _, _, split = connect_the_dots(mech[i1], j[i1], j[i1 + 1], pm, qm, h)
    point = np.zeros(mech.size)  # the grid points are the edges: each gets its cells' shares
    point[i1] += split[: i1.size]
    point[i1 + 1] += split[i1.size:]
    point[first] += below
    if sym.any():  # mirror the points y > 0 of the symmetric pairs; what is left of their P-mass sits at 0
        mech, j, point, lo = _mirror(mech, j, point, inf_mass, sym, (lo, hi), h)
    return LossPmfs(mech, j, point, counts.astype(float), inf_mass, lo, hi)


def _support(s: np.ndarray, q: np.ndarray, kind: np.ndarray, h: float, tau: float, remove: bool
             ) -> tuple[np.ndarray, np.ndarray]:
    """(lo, hi): the grid indices of each mechanism's loss support, truncated at normal tail mass ``tau``."""
    z = z_of_tail(tau)
    full = q >= 1.0
    log1mq = np.log1p(-np.where(full, 0.5, q))
    sym = kind != PAIR_ADD_REMOVE
    if remove:
        top = loss_of_u(s + z, s, q)
        bottom = np.where(full, loss_of_u(s - z, s, q), log1mq)
        rep = kind == PAIR_REPLACE
        if rep.any():
            top = np.where(rep, replace_loss_of_u(s + z, s, q), top)
        bottom = np.where(sym, 0.0, bottom)
    else:
        top = np.where(full, -loss_of_u(-np.full_like(s, z), s, q), -log1mq)
        bottom = -loss_of_u(np.full_like(s, z), s, q)
    lo = np.floor(bottom / h).astype(np.int64)
    hi = np.maximum(np.ceil(top / h).astype(np.int64), lo + 1)
    return lo, hi


def _cell_edges(s: np.ndarray, q: np.ndarray, kind: np.ndarray, h: float, remove: bool, lo: np.ndarray, hi: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray]:
    """(mechanism, grid index) of every cell edge, sorted: h apart where the mass is, up to 64·h in thin tails."""
    # 1. coarse blocks of _BLOCK cells: their masses decide the cell width inside each
    nblocks = (hi - lo + _BLOCK - 1) // _BLOCK
    bmech, bstart = ragged(lo, nblocks + 1, _BLOCK)
    bstart = np.minimum(bstart, hi[bmech])
    coarse = GaussianEdges(bmech, bstart, s, q, kind, h, remove)
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
    fowner, fj = ragged(bstart[b1], ncells, width)
    fmech = owner[fowner]
    mech = np.concatenate([fmech, np.arange(s.size)])
    j = np.concatenate([fj, hi])
    order = np.lexsort((j, mech))
    mech, j = mech[order], j[order]
    return mech, j


def _mirror(mech: np.ndarray, j: np.ndarray, point: np.ndarray, inf_mass: np.ndarray, sym: np.ndarray,
            support: tuple[np.ndarray, np.ndarray], h: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Complete the symmetric pairs' half y ≥ 0 by ω(−y) = e^{−y}·ω(y), the rest of their P-mass an atom at 0."""
    lo, hi = support
    entry = sym[mech]
    positive = entry & (j > 0)
    mirrored = point[positive] * np.exp(-j[positive] * h)
    used = np.bincount(mech[positive], weights=point[positive] + mirrored, minlength=sym.size)
    atom = np.maximum(1.0 - inf_mass - used, 0.0)
    keep = ~entry | positive
    owners = np.nonzero(sym)[0]
    mech = np.concatenate([mech[keep], mech[positive], owners])
    j = np.concatenate([j[keep], -j[positive], np.zeros(owners.size, dtype=np.int64)])
    point = np.concatenate([point[keep], mirrored, atom[owners]])
    lo = np.where(sym, -hi, lo)
    return mech, j, point, lo


def atoms_pmf(losses: list[float], pmass: list[float], qmass: list[float], h: float, k: int
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(mechanism ``k``, grid index, P-mass) of point masses at ``losses`` with the given (P, Q) masses, each split
    between the two grid points around it by connect-the-dots (Doroshenko et al. 2022)."""
    ls = np.asarray(losses, dtype=float)
    j = np.floor(ls / h).astype(np.int64)
    return connect_the_dots(np.full(j.size, k), j, j + 1, np.asarray(pmass, dtype=float), np.asarray(qmass, dtype=float), h)


def pure_pmf(eps: float, h: float, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Randomised response with parameter ε dominates every ε-DP pair (Kairouz, Oh & Viswanath 2015)."""
    big = 1.0 / (1.0 + math.exp(-eps))
    small = 1.0 / (1.0 + math.exp(eps))
    return atoms_pmf([eps, -eps], [big, small], [small, big], h, k)


def laplace_pmf(eps: float, h: float, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Laplace, unit sensitivity, scale 1/ε: atoms at ±ε and a linear loss (2x − 1)ε for x ∈ (0, 1)."""
    m1, j1, p1 = atoms_pmf([eps, -eps], [0.5, 0.5 * math.exp(-eps)], [0.5 * math.exp(-eps), 0.5], h, k)
    lo, hi = math.floor(-eps / h), math.ceil(eps / h)
    j = np.arange(lo, hi, dtype=np.int64)
    a = np.clip(j * h, -eps, eps)
    b = np.clip((j + 1) * h, -eps, eps)
    x1, x2 = (a / eps + 1) / 2, (b / eps + 1) / 2
    pm = 0.5 * (np.exp(-(1 - x2) * eps) - np.exp(-(1 - x1) * eps))
    qm = 0.5 * (np.exp(-x1 * eps) - np.exp(-x2 * eps))
    m2, j2, p2 = connect_the_dots(np.full(j.size, k), j, j + 1, pm, qm, h)
    return np.concatenate([m1, m2]), np.concatenate([j1, j2]), np.concatenate([p1, p2])
