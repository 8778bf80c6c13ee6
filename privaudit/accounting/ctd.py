"""privaudit's own PLD accountant: connect-the-dots discretisation on one shared grid, composed by FFT.

Why: compositions with many *distinct* mechanisms (per-step noise schedules, per-client ledgers with
participation-dependent releases) are where the other accountants fall off a cliff — prv-accountant and
dp-accounting's PLD pay a discretisation and a convolution per distinct mechanism, RDP is 20–60 % loose.
Here every mechanism is discretised on the *same* grid ``y_j = j·h``, transformed once, and all of them are
multiplied in the frequency domain; one inverse transform gives the composed privacy-loss distribution.

The accountant only plans; the mathematics lives in modules of its own, each with its soundness argument (every
step can only increase δ(ε), so ε is a certified upper bound):

* :mod:`privaudit.accounting.pairs` — the dominating pair of each mechanism (Zhu, Dong & Wang 2022), derived there
  for Poisson and fixed-size sampling under either neighbouring relation;
* :mod:`privaudit.accounting.loss_grid` — connect-the-dots discretisation of each pair's loss (Doroshenko, Ghazi,
  Kamath, Kumar & Manurangsi 2022) and the truncation of its tails;
* :mod:`privaudit.accounting.fft_composition` — composition by FFT, the privacy profile (Gopi, Lee & Wutschitz
  2021, Thm 3.3) and the Chernoff bound on the mass aliased around the window;
* :mod:`privaudit.accounting.bucketing` — beyond ``max_distinct`` distinct subsampled Gaussians, near-equal ones
  with the same kind of pair are grouped, each group accounted at its least private member.

The grid width h comes from the loss variance: connect-the-dots adds no drift, its error is second order in h
(variance ≤ h²/4 per step), so h can be coarse.

Supported: Gaussian, subsampled Gaussian (Poisson or fixed-size without replacement, either relation),
Laplace, pure ε-DP. Not: Skellam (refused, so ``auto`` falls back to RDP). Only numpy and scipy.special are used.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import special

from privaudit.accounting.base import Accountant, DeltaResult, EpsilonResult
from privaudit.accounting.bucketing import bucket
from privaudit.accounting.fft_composition import ComposedLoss, compose, delta_from, epsilon_from, profile_from
from privaudit.accounting.gaussian import gaussian_delta, gaussian_epsilon, plain_gaussian_mu
from privaudit.accounting.limits import Limits, default_limits, shared_work
from privaudit.accounting.loss_grid import LossPmfs, gaussian_pmfs, laplace_pmf, pure_pmf
from privaudit.accounting.mechanisms import (
    Composition,
    Gaussian,
    Laplace,
    Neighbouring,
    PureDP,
    Skellam,
    SubsampledGaussian,
    effective_gaussian_multiplier,
    effective_laplace_epsilon,
    effective_pure_epsilon,
)
from privaudit.accounting.pairs import (
    PAIR_ADD_REMOVE,
    PAIR_REPLACE,
    PAIR_SYMMETRISED,
    gaussian_moments,
    loss_of_u,
    pair_of,
    replace_loss_of_u,
    z_of_tail,
)
from privaudit.errors import NumericalFailure

#: Relative accuracy the default grid aims at (added loss variance ≤ 2·ρ·Var(Y), i.e. ≈ ρ in μ-GDP terms).
DEFAULT_RTOL = 1e-3
#: Fraction of δ given to the truncated tails (mass at +∞ and the Chernoff bound above the window).
TAIL_SHARE = 1e-3
#: Beyond this many distinct subsampled Gaussians, near-equal ones are bucketed (:mod:`privaudit.accounting.bucketing`).
MAX_DISTINCT = 2048
_BYTES_PER_BIN = 80.0  # discretisation work arrays per (mechanism, cell)
# Work (privaudit.accounting.limits: operations of the cost model, 1e9 per unit), counted before it is done:
_OPERATIONS_PER_BIN = 20.0  # per cell of the full support (thin tails are merged, so most cells cost 1/64)
_CHUNK_CELLS = 2_000_000  # Gaussians are discretised in chunks of at most this many cells
EXACT_NOTE = "exact: a composition of Gaussian mechanisms is one Gaussian mechanism (Balle & Wang 2018)"


@dataclass
class _Plan:
    """What is composed: the subsampled Gaussians (s = Δ/σ, rate q, count, pair kind; plain Gaussians merged into one
    with μ² = Σ count/z²), and the pure ε-DP and Laplace releases (ε, count)."""

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
                    kind, sensitivity = pair_of(mechanism, rel)
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
                    sampled[kind], note = bucket(entries, share)
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
            m_remove, v_remove = gaussian_moments(plan.s, plan.q, True, plan.kind)
            m_add, v_add = gaussian_moments(plan.s, plan.q, False, plan.kind)
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

    def _pmfs(self, plan: _Plan, h: float, delta: float, remove: bool, cells: np.ndarray) -> LossPmfs:
        """The discretised pmfs, Gaussians in chunks of at most ``_CHUNK_CELLS`` cells (bounded working memory)."""
        total = float(plan.counts.sum() + sum(c for _, c in plan.pure + plan.laplace))
        tau = delta * TAIL_SHARE / 2.0 / max(total, 1.0)
        parts, entries, start = [], 0, 0
        bounds = np.searchsorted(np.cumsum(cells), np.arange(1, cells.sum() // _CHUNK_CELLS + 2) * _CHUNK_CELLS)
        for stop in [*np.unique(np.clip(bounds + 1, 1, plan.s.size)).tolist(), plan.s.size]:
            if stop <= start:
                continue
            chunk = gaussian_pmfs(plan.s[start:stop], plan.q[start:stop], plan.kind[start:stop], plan.counts[start:stop],
                                  h, tau, remove)
            chunk.mech += start
            parts.append(chunk)
            entries += chunk.mech.size
            self.limits.check_memory("the discretised privacy-loss distributions", entries * 40.0)
            start = stop
        atoms = _atom_pmfs(plan, h)
        if atoms is not None:
            parts.append(atoms)
        return LossPmfs.concatenate(parts)

    def _cells(self, plan: _Plan, h: float, delta: float) -> np.ndarray:
        """Cells of width h each Gaussian's support spans (before merging thin tails): an upper bound on the work."""
        if not plan.s.size:
            return np.zeros(0)
        total = float(plan.counts.sum()) + 1.0
        z = z_of_tail(delta * TAIL_SHARE / 2.0 / total)
        top = loss_of_u(plan.s + z, plan.s, plan.q)
        bottom = np.where(plan.q >= 1, loss_of_u(plan.s - z, plan.s, plan.q), np.log1p(-np.minimum(plan.q, 0.5)))
        add_bottom = -loss_of_u(np.full_like(plan.s, z), plan.s, plan.q)
        add_top = np.where(plan.q >= 1, top - bottom + add_bottom, -np.log1p(-np.minimum(plan.q, 0.5)))
        span = np.maximum(top - bottom, add_top - add_bottom)
        # symmetric pairs: the half y ≥ 0 is discretised, then mirrored
        span = np.where(plan.kind == PAIR_SYMMETRISED, 2.0 * top, span)
        span = np.where(plan.kind == PAIR_REPLACE, 2.0 * replace_loss_of_u(plan.s + z, plan.s, plan.q), span)
        cells = span / h + 4.0
        return np.where(np.isfinite(cells), cells, np.inf)  # an overflowed span (σ → 0) is refused by the work guard

    def _composed(self, composition: Composition, delta: float) -> tuple[list[ComposedLoss], dict, list[str]]:
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
                out.append(compose(pmfs, h, lam, delta * TAIL_SHARE / 2.0, limits))
        details = {"value_discretization_interval": h, "grid_points": max(c.grid for c in out),
                   "distinct_mechanisms": int(plan.s.size + len(plan.pure) + len(plan.laplace)),
                   "tail_delta": max(c.extra for c in out)}
        return out, details, plan.notes

    def _epsilon(self, composition: Composition, delta: float) -> EpsilonResult:
        mu = plain_gaussian_mu(composition)
        if mu is not None:
            eps = gaussian_epsilon(mu, delta)
            return EpsilonResult(self.name, eps, delta, lower=eps, estimate=eps, notes=(EXACT_NOTE,), details={"mu": mu})
        composed, details, notes = self._composed(composition, delta)
        eps = max(epsilon_from(c, delta) for c in composed)
        return EpsilonResult(self.name, eps, delta, notes=tuple(notes), details=details)

    def _delta(self, composition: Composition, epsilon: float) -> DeltaResult:
        mu = plain_gaussian_mu(composition)
        if mu is not None:
            d = min(1.0, gaussian_delta(mu, epsilon))
            return DeltaResult(self.name, d, epsilon, lower=d, estimate=d, notes=(EXACT_NOTE,))
        composed, _, notes = self._composed(composition, 1e-10)
        return DeltaResult(self.name, max(delta_from(c, epsilon) for c in composed), epsilon, notes=tuple(notes))

    def privacy_profile(self, composition: Composition, epsilons: np.ndarray) -> np.ndarray:
        """δ(ε) at every ε ≥ 0 of ``epsilons`` (the worse direction), from one composition: the same certified upper
        bound as :meth:`delta` at each point (Gopi, Lee & Wutschitz 2021, Thm 3.3), exact for plain Gaussians."""
        self.check(composition)
        eps = np.asarray(epsilons, dtype=float)
        mu = plain_gaussian_mu(composition)
        if mu is not None:  # Dong, Roth & Su 2022, Cor. 2.13, in log space as gaussian_log_delta
            a = special.log_ndtr(-eps / mu + mu / 2.0)
            b = eps + special.log_ndtr(-eps / mu - mu / 2.0)
            with np.errstate(under="ignore"):
                return np.minimum(1.0, np.exp(a) * -np.expm1(np.minimum(b - a, 0.0)))
        composed, _, _ = self._composed(composition, 1e-10)
        return np.max([profile_from(c, eps) for c in composed], axis=0)


def _atom_pmfs(plan: _Plan, h: float) -> LossPmfs | None:
    """The pmfs of the pure ε-DP and Laplace releases (randomised response and the Laplace pair), numbered after the
    subsampled Gaussians; ``None`` when there are none."""
    k = plan.s.size
    extra_m, extra_j, extra_p, extra_c = [], [], [], []
    for eps, count in plan.pure:
        m, j, p = pure_pmf(eps, h, k)
        extra_m.append(m), extra_j.append(j), extra_p.append(p), extra_c.append(count)
        k += 1
    for eps, count in plan.laplace:
        m, j, p = laplace_pmf(eps, h, k)
        extra_m.append(m), extra_j.append(j), extra_p.append(p), extra_c.append(count)
        k += 1
    if not extra_m:
        return None
    mech, j = np.concatenate(extra_m), np.concatenate(extra_j)
    lo = np.full(len(extra_c), np.iinfo(np.int64).max)
    hi = np.full(len(extra_c), np.iinfo(np.int64).min)
    np.minimum.at(lo, mech - plan.s.size, j)
    np.maximum.at(hi, mech - plan.s.size, j)
    return LossPmfs(mech, j, np.concatenate(extra_p), np.array(extra_c, dtype=float), np.zeros(len(extra_c)), lo, hi)
