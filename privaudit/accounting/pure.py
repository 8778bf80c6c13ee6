"""Composition of pure-DP releases (Laplace, closed-form ε-DP mechanisms).

Basic composition gives Σ ε_i with δ = 0. For δ > 0 the heterogeneous advanced composition of Kairouz,
Oh & Viswanath 2015 ("The composition theorem for differential privacy", Thm 3.5, with δ_i = 0) gives

    ε = min{ Σ ε_i,
             Σ ε_i tanh(ε_i/2) + sqrt(2 Σ ε_i² · log(e + sqrt(Σ ε_i²)/δ)),
             Σ ε_i tanh(ε_i/2) + sqrt(2 Σ ε_i² · log(1/δ)) }

((e^ε − 1)/(e^ε + 1) = tanh(ε/2)). This accountant handles only pure releases; mixed compositions go to
the numerical accountants.
"""

from __future__ import annotations

import math

from privaudit.accounting.base import Accountant, DeltaResult, EpsilonResult
from privaudit.accounting.mechanisms import (
    Composition,
    Laplace,
    PureDP,
    effective_laplace_epsilon,
    effective_pure_epsilon,
)


def _per_release_epsilons(composition: Composition) -> list[tuple[float, int]]:
    out = []
    for mechanism, count in composition:
        eps = effective_laplace_epsilon(mechanism, composition.neighbouring) if isinstance(mechanism, Laplace) else effective_pure_epsilon(mechanism, composition.neighbouring)
        out.append((float(eps), count))
    return out


def basic_composition(epsilons: list[tuple[float, int]]) -> float:
    """Σ count·ε (Dwork & Roth 2014, Thm 3.16)."""
    return sum(c * e for e, c in epsilons)


def advanced_composition(epsilons: list[tuple[float, int]], delta: float) -> float:
    """Kairouz, Oh & Viswanath 2015, Thm 3.5 (heterogeneous, pure components): min of its three bounds."""
    s1 = basic_composition(epsilons)
    if math.isinf(s1):
        return math.inf
    tanh_sum = sum(c * e * math.tanh(e / 2.0) for e, c in epsilons)
    sq = sum(c * e * e for e, c in epsilons)
    b2 = tanh_sum + math.sqrt(2.0 * sq * math.log(math.e + math.sqrt(sq) / delta))
    b3 = tanh_sum + math.sqrt(2.0 * sq * math.log(1.0 / delta))
    return min(s1, b2, b3)


class PureCompositionAccountant(Accountant):
    name = "pure"
    description = "basic and advanced composition of pure ε-DP releases (Kairouz et al. 2015, Thm 3.5)"

    def unsupported_reason(self, composition: Composition) -> str | None:
        for mechanism, _ in composition:
            if isinstance(mechanism, Laplace):
                continue
            if isinstance(mechanism, PureDP):
                if effective_pure_epsilon(mechanism, composition.neighbouring) is None:
                    return f"{mechanism.describe()} says nothing about {composition.neighbouring.value} neighbours"
                continue
            return f"{mechanism.describe()} is not a pure-DP release"
        return None

    def _epsilon(self, composition: Composition, delta: float) -> EpsilonResult:
        eps_list = _per_release_epsilons(composition)
        basic = basic_composition(eps_list)
        adv = advanced_composition(eps_list, delta)
        notes = [] if adv < basic else ["basic composition is the tighter bound here"]
        if math.isinf(basic):
            notes = ["ε is infinite: a release has no finite pure-DP guarantee"]
        return EpsilonResult(self.name, adv, delta, notes=tuple(notes), details={"basic": basic, "advanced": adv})

    def _delta(self, composition: Composition, epsilon: float) -> DeltaResult:
        eps_list = _per_release_epsilons(composition)
        basic = basic_composition(eps_list)
        if epsilon >= basic:
            return DeltaResult(self.name, 0.0, epsilon)
        tanh_sum = sum(c * e * math.tanh(e / 2.0) for e, c in eps_list)
        sq = sum(c * e * e for e, c in eps_list)
        if epsilon <= tanh_sum or sq == 0:
            return DeltaResult(self.name, 1.0, epsilon)
        return DeltaResult(self.name, min(1.0, math.exp(-((epsilon - tanh_sum) ** 2) / (2.0 * sq))), epsilon)
