"""The PRV accountant (Gopi, Lee & Wutschitz 2021) through microsoft's ``prv-accountant`` package.

Returns a certified interval (lower, estimate, upper) for ε. What privaudit adds around the package:

* **Exact answers where they exist.** A composition of plain Gaussian releases is one Gaussian release
  (μ² = Σ count/z²), whose ε is exact (Balle & Wang 2018, Thm 8); no discretisation is run.
* **A relative error target.** A first pass with ``eps_error = 0.1`` gives ε̂; if 0.1 is more than
  ``relative_error``·ε̂, a second pass runs with ``eps_error = max(relative_error·ε̂, 1e-3)``.
* **Known failures are caught and named** (microsoft/prv_accountant issues #14, #17, #36): prv-accountant 0.2.0's "Discrete
  mean differs from continuous mean significantly" (issue #36, fixed upstream but never released), memory
  exhaustion (predicted from the grid size before running), overflow, and intervals inconsistent with a
  rigorous bound (a lower end above the RDP upper bound). Each becomes a
  :class:`~privaudit.errors.NumericalFailure` saying what happened, so the default chain can fall back.
* **The tighter of two certified bounds.** The reported ε is min(PRV upper, RDP), with a note when RDP won.

The Laplace mechanism is passed as prv-accountant's ``LaplaceMechanism(mu=Δ/b)`` — its ``mu`` is the
per-release ε, not the noise scale (passing the scale b = 10 gives ε ≈ 960 for 100 releases instead of
4.2); privaudit's :class:`Laplace` carries the
scale, and the conversion happens here, once.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np

from privaudit.accounting import rdp_math
from privaudit.accounting.base import Accountant, DeltaResult, EpsilonResult
from privaudit.accounting.gaussian import gaussian_delta, gaussian_epsilon, plain_gaussian_mu
from privaudit.accounting.limits import ResourceRefusal, default_limits
from privaudit.accounting.mechanisms import (
    Composition,
    Gaussian,
    Laplace,
    Neighbouring,
    PureDP,
    Sampling,
    Skellam,
    SubsampledGaussian,
    effective_laplace_epsilon,
    effective_pure_epsilon,
)
from privaudit.accounting.rdp import RdpAccountant, composition_rdp
from privaudit.errors import NumericalFailure

#: Largest grid prv-accountant may allocate (each point costs ~100 bytes across its arrays).
MAX_GRID_POINTS = 20_000_000
#: Work per grid point and distinct mechanism (privaudit.accounting.limits' operations; prv-accountant 0.2.0 took
#: 6–12 µs per point and mechanism on a quiet 2-core machine).
_OPERATIONS_PER_POINT = 1e4
_BYTES_PER_POINT = 100.0
_COARSE_EPS_ERROR = 0.1
_MIN_EPS_ERROR = 1e-3


def _is_plain_gaussian(mechanism: Any) -> bool:
    return isinstance(mechanism, Gaussian) or (isinstance(mechanism, SubsampledGaussian) and mechanism.sample_rate >= 1.0)


class PrvAccountant(Accountant):
    name = "prv"
    description = "PRV accountant (Gopi et al. 2021, prv-accountant): certified (lower, estimate, upper) interval"

    def __init__(self, eps_error: float | None = None, relative_error: float = 0.005, delta_error: float | None = None,
                 max_grid_points: int = MAX_GRID_POINTS) -> None:
        self.eps_error = eps_error
        self.relative_error = relative_error
        self.delta_error = delta_error
        self.max_grid_points = max_grid_points

    def unsupported_reason(self, composition: Composition) -> str | None:
        for mechanism, _ in composition:
            if isinstance(mechanism, Skellam):
                return "prv-accountant has no Skellam mechanism (use rdp: Agarwal, Kairouz & Liu 2021, Thm 3.5)"
            if isinstance(mechanism, SubsampledGaussian) and mechanism.sample_rate < 1.0:
                if composition.neighbouring is Neighbouring.REPLACE_ONE:
                    return ("prv-accountant's subsampled Gaussian is the add/remove pair only; replace-one needs a "
                            "symmetric pair (use ctd or pld)")
            elif isinstance(mechanism, PureDP) and effective_pure_epsilon(mechanism, composition.neighbouring) is None:
                return f"{mechanism.describe()} says nothing about {composition.neighbouring.value} neighbours"
        return None

    # -- building prv-accountant's inputs ----------------------------------------------------------
    def _prvs(self, composition: Composition) -> tuple[list[Any], list[int]]:
        from prv_accountant import privacy_random_variables as prv_lib

        prvs: list[Any] = []
        counts: list[int] = []
        gaussian_part = Composition([(m, c) for m, c in composition if _is_plain_gaussian(m)], composition.neighbouring)
        mu = plain_gaussian_mu(gaussian_part) if not gaussian_part.is_empty else None
        if mu:
            prvs.append(prv_lib.GaussianMechanism(noise_multiplier=1.0 / mu))
            counts.append(1)
        for mechanism, count in composition:
            if _is_plain_gaussian(mechanism):
                continue
            if isinstance(mechanism, SubsampledGaussian):
                if math.isinf(mechanism.z):
                    continue
                # fixed-size batches under add/remove: the Poisson pair with sensitivity 2, i.e. σ/2 (privaudit.accounting.pairs)
                z = mechanism.z / 2.0 if mechanism.sampling is Sampling.FIXED_SIZE_WITHOUT_REPLACEMENT else mechanism.z
                prvs.append(prv_lib.PoissonSubsampledGaussianMechanism(sampling_probability=mechanism.sample_rate, noise_multiplier=z))
            elif isinstance(mechanism, Laplace):
                # prv-accountant's mu is the per-release ε = Δ/b, not the Laplace scale b.
                prvs.append(prv_lib.LaplaceMechanism(mu=effective_laplace_epsilon(mechanism, composition.neighbouring)))
            elif isinstance(mechanism, PureDP):
                eps = effective_pure_epsilon(mechanism, composition.neighbouring)
                if eps == 0:
                    continue
                prvs.append(prv_lib.PureDPMechanism(eps=eps))
            counts.append(count)
        return prvs, counts

    def _safe_domain(self, composition: Composition, eps_error: float, delta_error: float) -> float:
        """Half-width L of the PRV domain, Gopi et al. 2021, Remark 5.6 (what prv-accountant computes itself).

        L = max(ε_RDP(composition, δ_err/4), max over mechanisms of ε_RDP(one step, δ_err/(8·T)), eps_error) + 3,
        evaluated with privaudit's vectorised RDP instead of prv-accountant's per-order Python loop
        (the same bound, ~10–100× faster; it is passed to prv-accountant as ``eps_max``).
        """
        orders = rdp_math.DEFAULT_ORDERS
        total = composition.total_count
        big_l, _ = rdp_math.epsilon_from_rdp(orders, composition_rdp(composition, orders), delta_error / 4.0)
        for mechanism, _count in composition:
            single = composition_rdp(Composition.of(mechanism, 1, composition.neighbouring), orders)
            big_l = max(big_l, rdp_math.epsilon_from_rdp(orders, single, delta_error / 8.0 / total)[0])
        return max(big_l, eps_error) + 3.0

    def _grid_points(self, domain: float, composition: Composition, eps_error: float, delta_error: float) -> float:
        """Size of prv-accountant's grid: 2L/mesh with mesh = eps_error/sqrt(T/2·log(12/δ_err))."""
        mesh = eps_error / math.sqrt(composition.total_count / 2.0 * math.log(12.0 / delta_error))
        return 2.0 * domain / mesh

    def _run(self, composition: Composition, eps_error: float, delta_error: float, *, delta: float | None = None,
             epsilon: float | None = None) -> tuple[float, float, float]:
        domain = self._safe_domain(composition, eps_error, delta_error)
        points = self._grid_points(domain, composition, eps_error, delta_error)
        if points > self.max_grid_points:
            raise ResourceRefusal(
                f"prv-accountant would need about {points:.2g} grid points at eps_error={eps_error:g} "
                f"(limit {self.max_grid_points:.2g}); it would exhaust memory"
            )
        limits = default_limits()
        what = f"prv-accountant at eps_error={eps_error:g} ({points:.2g} grid points)"
        limits.check_memory(what, points * _BYTES_PER_POINT)
        limits.charge(what, points * max(1, len(composition)) * _OPERATIONS_PER_POINT)
        from prv_accountant import PRVAccountant

        prvs, counts = self._prvs(composition)
        if not prvs:
            return (0.0, 0.0, 0.0)
        try:
            with warnings.catch_warnings(), np.errstate(all="ignore"):
                warnings.simplefilter("ignore")
                acct = PRVAccountant(prvs=prvs, max_self_compositions=counts, eps_error=eps_error, delta_error=delta_error,
                                     eps_max=domain)
                if delta is not None:
                    result = acct.compute_epsilon(delta=delta, num_self_compositions=counts)
                else:
                    result = acct.compute_delta(epsilon=epsilon, num_self_compositions=counts)
        except MemoryError:
            raise NumericalFailure("prv-accountant ran out of memory") from None
        except (RuntimeError, ValueError, OverflowError, FloatingPointError, ZeroDivisionError, AssertionError) as exc:
            raise NumericalFailure(f"prv-accountant failed: {' '.join(str(exc).split())[:160]}") from None
        lower, estimate, upper = (float(v) for v in result)
        if not all(math.isfinite(v) for v in (lower, estimate, upper)) or not lower <= estimate <= upper:
            raise NumericalFailure(f"prv-accountant returned an invalid interval ({lower}, {estimate}, {upper})")
        return lower, estimate, upper

    # -- protocol --------------------------------------------------------------------------------
    def _epsilon(self, composition: Composition, delta: float) -> EpsilonResult:
        mu = plain_gaussian_mu(composition)
        if mu is not None:
            eps = gaussian_epsilon(mu, delta)
            return EpsilonResult(self.name, eps, delta, lower=eps, estimate=eps, notes=(
                "exact: a composition of Gaussian mechanisms is one Gaussian mechanism (Balle & Wang 2018)",), details={"mu": mu})
        delta_error = self.delta_error if self.delta_error is not None else delta / 1000.0
        notes: list[str] = []
        if self.eps_error is not None:
            eps_error = self.eps_error
            lower, estimate, upper = self._run(composition, eps_error, delta_error, delta=delta)
        else:
            eps_error = _COARSE_EPS_ERROR
            lower, estimate, upper = self._run(composition, eps_error, delta_error, delta=delta)
            wanted = max(self.relative_error * estimate, _MIN_EPS_ERROR)
            if wanted < eps_error:
                try:
                    lower, estimate, upper = self._run(composition, wanted, delta_error, delta=delta)
                    eps_error = wanted
                except NumericalFailure as exc:
                    notes.append(f"kept eps_error={eps_error:g}: the finer pass failed ({exc})")
        rdp_eps = RdpAccountant().epsilon(composition, delta).epsilon if RdpAccountant().supports(composition) else math.inf
        if lower > rdp_eps * (1 + 1e-9) + 1e-9:
            raise NumericalFailure(
                f"prv-accountant's interval [{lower:.6g}, {upper:.6g}] lies above the RDP upper bound {rdp_eps:.6g}: "
                "its lower end cannot be a lower bound"
            )
        answer = upper
        if rdp_eps < upper:
            answer = rdp_eps
            notes.append("the RDP bound was tighter than the PRV upper bound and is reported as the upper end")
        if lower < 0:  # ε ≥ 0 always: a negative certified lower end carries no information
            lower = 0.0
        return EpsilonResult(self.name, answer, delta, lower=lower, estimate=max(estimate, 0.0), notes=tuple(notes),
                             details={"eps_error": eps_error, "delta_error": delta_error})

    def _delta(self, composition: Composition, epsilon: float) -> DeltaResult:
        mu = plain_gaussian_mu(composition)
        if mu is not None:
            d = min(1.0, gaussian_delta(mu, epsilon))
            return DeltaResult(self.name, d, epsilon, lower=d, estimate=d, notes=("exact (Gaussian mechanism)",))
        eps_error = self.eps_error if self.eps_error is not None else max(self.relative_error * max(epsilon, 1.0), _MIN_EPS_ERROR)
        delta_error = self.delta_error if self.delta_error is not None else 1e-12
        lower, estimate, upper = self._run(composition, eps_error, delta_error, epsilon=epsilon)
        return DeltaResult(self.name, min(1.0, upper), epsilon, lower=max(0.0, lower), estimate=estimate)
