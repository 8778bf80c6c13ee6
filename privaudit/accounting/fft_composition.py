"""Composition of discretised privacy-loss distributions by FFT, and their privacy profile.

Every mechanism's pmf on the shared grid y_j = j·h (:mod:`privaudit.accounting.loss_grid`) is transformed once,
and all of them are multiplied in the frequency domain (a mechanism used ``c`` times contributes its transform to
the power ``c``); one inverse transform gives the composed privacy-loss distribution.

* **Privacy profile.** For a dominating pair (P, Q) with loss L = log(dP/dQ) under X ~ P, and independent
  compositions, δ(ε) = E[(1 − e^{ε − Y})₊] with Y = Σ L_k (Gopi, Lee & Wutschitz 2021, Thm 3.3; Zhu, Dong &
  Wang 2022).
* **Aliasing.** The composed distribution is computed modulo N grid points on a window [A, B]. Mass that wraps
  into the window only adds non-negative terms; the mass that truly lies above B is bounded by the Chernoff bound
  P(Y > B) ≤ exp(log E[e^{λY}] − λB), evaluated *exactly* on the discretised distributions, and added to δ, as is
  the mass at +∞ and an allowance for floating-point noise of the transform.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from privaudit.accounting.limits import Limits, ResourceRefusal
from privaudit.accounting.loss_grid import LossPmfs
from privaudit.errors import NumericalFailure

#: Largest composed grid (points of the FFT window).
MAX_GRID = 1 << 24
# Work (privaudit.accounting.limits: operations of the cost model, 1e9 per unit), counted before it is done:
_OPERATIONS_PER_FFT_POINT = 2.0  # per point and log2(N) of a forward transform (≈ 0.5 ns measured on 2 cores)
_CHUNK_BYTES = 48e6  # mechanisms are transformed in chunks of at most this much working memory


def fast_size(n: int) -> int:
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


def log_mgfs(pmfs: LossPmfs, lams: np.ndarray, h: float) -> np.ndarray:
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
class ComposedLoss:
    """The composed privacy-loss distribution on its window, and the δ its truncations add."""

    y: np.ndarray  # grid values of the window, ascending
    p: np.ndarray  # composed P-mass on the window (non-negative)
    extra: float  # δ added for the +∞ atom, the tail above the window and floating-point noise
    grid: int
    h: float


def compose(pmfs: LossPmfs, h: float, lam_guess: float, delta_tail: float, limits: Limits) -> ComposedLoss:
    """Compose by FFT on a window whose upper tail is bounded by ``delta_tail`` (Chernoff, exact MGF)."""
    inf_total = -math.expm1(float(np.sum(pmfs.counts * np.log1p(-np.minimum(pmfs.inf_mass, 1.0 - 1e-16)))))
    lams = np.unique(np.concatenate([lam_guess * np.array([0.25, 0.5, 1.0, 2.0, 4.0]), [1.0]]))
    up = log_mgfs(pmfs, lams, h)
    down = log_mgfs(pmfs, -lams, h)
    log_tail = math.log(delta_tail)
    upper = float(np.min((up - log_tail) / lams))
    lower = float(np.min((down - log_tail) / lams))
    if not (math.isfinite(upper) and math.isfinite(lower)):
        raise NumericalFailure("the discretised loss distributions have no finite mass to compose")
    j_lo = math.floor(-lower / h) - 1
    j_hi = max(math.ceil(upper / h) + 1, j_lo + 2)
    n = fast_size(j_hi - j_lo + 1)
    if n > MAX_GRID:
        raise ResourceRefusal(f"the composed loss needs a grid of {n:.3g} points at h = {h:.3g} (limit {MAX_GRID:.3g})")
    limits.check_memory("the composed privacy-loss grid", 48.0 * n)
    limits.charge("composing the privacy-loss distributions", pmfs.size * n * math.log2(max(n, 2)) * _OPERATIONS_PER_FFT_POINT)
    top = (j_lo + n - 1) * h  # the window's actual top (≥ upper): Chernoff bound on the mass above it
    tail = math.exp(min(0.0, float(np.min(up - lams * top))))
    values = _composed_spectrum(pmfs, n)
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
    return ComposedLoss(y, p, extra, n, h)


def _composed_spectrum(pmfs: LossPmfs, n: int) -> np.ndarray:
    """Π_k φ_k^{c_k}: the rfft of the composed pmf on n points, from the mechanisms' transforms in chunks of at most
    ``_CHUNK_BYTES`` (counts > 1 raised in log space; a frequency where some φ^c vanished is exactly 0)."""
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
    return values


def suffix_log_sums(y: np.ndarray, p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(Σ_{i≥k} p_i, log Σ_{i≥k} p_i·e^{−y_i}) for every k; the second in log space (y may be in the thousands)."""
    s0 = np.cumsum(p[::-1])[::-1]
    with np.errstate(divide="ignore"):
        terms = np.log(p) - y
    return s0, np.logaddexp.accumulate(terms[::-1])[::-1]


def epsilon_from(c: ComposedLoss, delta: float) -> float:
    """Smallest ε ≥ 0 with δ(ε) = Σ_{y>ε} (1 − e^{ε−y})·p + extra ≤ δ (exact between grid points)."""
    if c.extra >= delta:
        raise NumericalFailure(f"the truncated tails alone exceed δ = {delta:g} ({c.extra:.3g})")
    keep = c.y > 0
    y, p = c.y[keep], c.p[keep]
    if y.size == 0:
        return 0.0
    s0, l1 = suffix_log_sums(y, p)
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


def delta_from(c: ComposedLoss, epsilon: float) -> float:
    """δ(ε) = Σ_{y>ε} (1 − e^{ε−y})·p + extra (Gopi, Lee & Wutschitz 2021, Thm 3.3), at most 1."""
    keep = c.y > epsilon
    y, p = c.y[keep], c.p[keep]
    with np.errstate(over="ignore"):
        value = float(np.sum(p * -np.expm1(epsilon - y)))
    return min(1.0, value + c.extra)


def profile_from(c: ComposedLoss, epsilons: np.ndarray) -> np.ndarray:
    """:func:`delta_from` at every ε of ``epsilons`` at once (suffix sums over the window, one search per ε)."""
    eps = np.asarray(epsilons, dtype=float)
    s0, l1 = suffix_log_sums(c.y, c.p)
    s0, l1 = np.append(s0, 0.0), np.append(l1, -np.inf)
    k = np.searchsorted(c.y, eps, side="right")  # the first grid value above ε
    with np.errstate(over="ignore", under="ignore"):
        value = s0[k] - np.exp(np.minimum(eps + l1[k], 700.0))
    return np.minimum(1.0, np.maximum(value, 0.0) + c.extra)
