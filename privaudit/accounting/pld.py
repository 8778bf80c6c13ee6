"""The PLD accountant through google's ``dp-accounting`` (pessimistic privacy-loss distributions).

The tightest certified upper bound among the peers measured in spec accountants.md §2 (within 1e-6 of
the exact Gaussian ε for moderate ε; +0.95 at ε ≳ 900). It is slower and heavier (a convolution per
distinct mechanism, ~1.3 s to import), so it is imported only when asked for.

Mechanisms are built at the PLD level (``privacy_loss_distribution.from_*``), composed, and queried:
Gaussian and Poisson-subsampled Gaussian under either relation (dp-accounting doubles the sensitivity
under replace-one), Laplace (scale per unit sensitivity) and pure ε-DP releases
(``from_privacy_parameters``). dp-accounting has no Laplace/pure analysis under replace-one; such
releases are converted to add/remove with doubled sensitivity (group privacy of size 2), which is exact
for Laplace and Gaussian releases, unless a Poisson-subsampled step forces the replace-one analysis.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

from privaudit.accounting.base import Accountant, DeltaResult, EpsilonResult
from privaudit.accounting.limits import default_limits
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
from privaudit.errors import NumericalFailure

VALUE_DISCRETIZATION_INTERVAL = 1e-4


def _has_poisson_subsampling(composition: Composition) -> bool:
    return any(isinstance(m, SubsampledGaussian) and m.sample_rate < 1.0 for m, _ in composition)


class PldAccountant(Accountant):
    name = "pld"
    description = "privacy loss distributions (dp-accounting, pessimistic): tightest certified upper bound, slower"

    def __init__(self, value_discretization_interval: float = VALUE_DISCRETIZATION_INTERVAL) -> None:
        if not value_discretization_interval > 0:
            raise NumericalFailure(f"the discretisation interval must be positive, got {value_discretization_interval}")
        self.value_discretization_interval = float(value_discretization_interval)

    def unsupported_reason(self, composition: Composition) -> str | None:
        replace = composition.neighbouring is Neighbouring.REPLACE_ONE
        for mechanism, _ in composition:
            if isinstance(mechanism, Skellam):
                return "dp-accounting's PLD has no Skellam mechanism (use rdp: Agarwal, Kairouz & Liu 2021, Thm 3.5)"
            if isinstance(mechanism, SubsampledGaussian) and mechanism.sample_rate < 1.0 and mechanism.sampling is not Sampling.POISSON:
                return "dp-accounting's PLD has no analysis of fixed-size sampling without replacement (use rdp)"
            if isinstance(mechanism, PureDP) and effective_pure_epsilon(mechanism, composition.neighbouring) is None:
                return f"{mechanism.describe()} says nothing about {composition.neighbouring.value} neighbours"
            if replace and isinstance(mechanism, Laplace | PureDP) and _has_poisson_subsampling(composition):
                return "dp-accounting cannot compose Laplace/pure releases with Poisson sampling under replace-one"
        return None

    def _pld(self, composition: Composition) -> Any:
        try:
            from dp_accounting import NeighboringRelation
            from dp_accounting.pld import common
            from dp_accounting.pld import privacy_loss_distribution as pld_lib
        except ImportError:  # pragma: no cover - dp-accounting is a declared dependency
            raise NumericalFailure("dp-accounting is not installed (pip install dp-accounting)") from None

        vdi = self.value_discretization_interval
        use_replace = composition.neighbouring is Neighbouring.REPLACE_ONE and _has_poisson_subsampling(composition)
        relation = NeighboringRelation.REPLACE_ONE if use_replace else NeighboringRelation.ADD_OR_REMOVE_ONE
        total = pld_lib.identity(value_discretization_interval=vdi)
        for mechanism, count in composition:
            if isinstance(mechanism, Gaussian | SubsampledGaussian):
                z = mechanism.z
                if math.isinf(z):
                    continue
                q = mechanism.sample_rate if isinstance(mechanism, SubsampledGaussian) else 1.0
                if composition.neighbouring is Neighbouring.REPLACE_ONE and not use_replace:
                    z /= 2.0  # plain Gaussian under replace-one: sensitivity 2Δ, exactly
                if isinstance(mechanism, Gaussian) and use_replace:
                    z = mechanism.z  # dp-accounting doubles the sensitivity itself under REPLACE_ONE
                if q >= 1.0:
                    # One Gaussian release composed count times is one release with σ/√count (exact).
                    pld = pld_lib.from_gaussian_mechanism(z / math.sqrt(count), value_discretization_interval=vdi,
                                                          neighboring_relation=relation)
                else:
                    pld = pld_lib.from_gaussian_mechanism(z, sampling_prob=q, value_discretization_interval=vdi,
                                                          neighboring_relation=relation).self_compose(count)
            elif isinstance(mechanism, Laplace):
                eps0 = effective_laplace_epsilon(mechanism, composition.neighbouring)
                pld = pld_lib.from_laplace_mechanism(1.0 / eps0, value_discretization_interval=vdi).self_compose(count)
            elif isinstance(mechanism, PureDP):
                eps = effective_pure_epsilon(mechanism, composition.neighbouring)
                if eps == 0:
                    continue
                if math.isinf(eps):
                    raise NumericalFailure("a release has ε = ∞; the composition has no finite guarantee")
                params = common.DifferentialPrivacyParameters(eps, 0.0)
                pld = pld_lib.from_privacy_parameters(params, value_discretization_interval=vdi).self_compose(count)
            else:  # pragma: no cover - guarded by unsupported_reason
                raise NumericalFailure(f"unsupported mechanism {mechanism!r}")
            total = total.compose(pld)
        return total

    def _check_resources(self, composition: Composition) -> None:
        """Estimate dp-accounting's grids before running (it has no guard of its own) and decline if too large.

        Per distinct mechanism its PLD spans the loss range up to a tail mass of e^{-50} (≈ 9.8 standard
        normal deviations); the composition spans about ±10 standard deviations of the composed loss plus one
        step's range. Costs measured on a 2-core machine: ~8 µs per single-step grid point (discretisation)
        and ~0.15 µs per composed point and log₂ of it (FFT), per distinct mechanism.
        """
        import numpy as np

        from privaudit.accounting.ctd import _gaussian_moments, _loss_of_u

        vdi = self.value_discretization_interval
        s, q, counts, ranges = [], [], [], []
        for mechanism, count in composition:
            if isinstance(mechanism, Gaussian | SubsampledGaussian):
                z = mechanism.z
                if math.isinf(z):
                    continue
                rate = mechanism.sample_rate if isinstance(mechanism, SubsampledGaussian) else 1.0
                if composition.neighbouring is Neighbouring.REPLACE_ONE and rate >= 1.0:
                    z /= 2.0
                if rate >= 1.0:  # composed exactly as one release with σ/√count
                    z, count = z / math.sqrt(count), 1
                s.append(1.0 / z)
                q.append(rate)
                counts.append(count)
            elif isinstance(mechanism, Laplace):
                ranges.append(2.0 * effective_laplace_epsilon(mechanism, composition.neighbouring))
            elif isinstance(mechanism, PureDP):
                ranges.append(2.0 * float(effective_pure_epsilon(mechanism, composition.neighbouring) or 0.0))
        single, widest, spread = sum(ranges) / vdi, max(ranges, default=0.0), 0.0
        if s:
            sa, qa, ca = np.array(s), np.array(q), np.array(counts, dtype=float)
            top = _loss_of_u(sa + 9.8, sa, qa)
            bottom = np.where(qa >= 1.0, _loss_of_u(sa - 9.8, sa, qa), np.log1p(-np.minimum(qa, 0.5)))
            width = top - bottom
            single += float(np.sum(width)) / vdi
            widest = max(widest, float(np.max(width)))
            _, variance = _gaussian_moments(sa, qa, True)
            spread = 20.0 * math.sqrt(float(np.sum(ca * variance)))
        composed = (spread + widest) / vdi
        distinct = max(1, len(composition))
        limits = default_limits()
        what = f"dp-accounting's PLD at value_discretization_interval={vdi:g} (about {composed:.2g} grid points)"
        limits.check_memory(what, 64.0 * max(composed, single))
        limits.check_time(what, 8e-6 * single + 1.5e-7 * composed * math.log2(max(composed, 2.0)) * distinct)

    def _epsilon(self, composition: Composition, delta: float) -> EpsilonResult:
        self._check_resources(composition)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                eps = float(self._pld(composition).get_epsilon_for_delta(delta))
        except MemoryError:
            raise NumericalFailure("dp-accounting's PLD ran out of memory") from None
        except (ValueError, OverflowError, FloatingPointError) as exc:
            raise NumericalFailure(f"dp-accounting's PLD failed: {' '.join(str(exc).split())[:160]}") from None
        if math.isnan(eps):
            raise NumericalFailure("dp-accounting's PLD returned NaN")
        return EpsilonResult(self.name, max(0.0, eps), delta, details={"value_discretization_interval": self.value_discretization_interval})

    def _delta(self, composition: Composition, epsilon: float) -> DeltaResult:
        self._check_resources(composition)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            d = float(self._pld(composition).get_delta_for_epsilon(epsilon))
        return DeltaResult(self.name, min(1.0, max(0.0, d)), epsilon)
