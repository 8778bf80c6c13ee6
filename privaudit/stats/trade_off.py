"""Trade-off curves that one-run f-DP audits test, as the inverse blow-up functions the recursion needs.

A trade-off function f (Dong, Roth & Su 2022, "Gaussian differential privacy", Def. 2.1) maps a test's
type-I error x to the smallest type-II error any test of M(D) vs M(D′) can reach. Mahloujifar, Melis &
Chaudhuri (2024, "Auditing f-differential privacy in one run") bound the guessing game with the inverse of
the blow-up x ↦ 1 − f(x); for a symmetric f (f = f⁻¹, which both curves here are) that inverse is
g(x) = f(1 − x).

* Gaussian, G_μ(x) = Φ(Φ⁻¹(1 − x) − μ) ⇒ g(x) = Φ(Φ⁻¹(x) − μ). Valid only for Gaussian-shaped mechanisms.
* (ε, δ)-DP, f_{ε,δ}(x) = max(0, 1 − δ − e^ε·x, e^{−ε}(1 − δ − x)) (Kairouz, Oh & Viswanath 2015; Dong, Roth &
  Su 2022 Prop. 2.5: M is (ε, δ)-DP iff it is f_{ε,δ}-DP) ⇒ g(x) = max(0, e^ε·x − (e^ε − 1) − δ, e^{−ε}(x − δ)).
  Valid for every mechanism; with δ = 0 it is the randomized-response curve, the pure-DP family.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from scipy import special

_SQRT2 = math.sqrt(2.0)

#: g: [0, 1] → [0, 1], the inverse blow-up of a trade-off curve
InverseBlowUp = Callable[[float], float]


def gaussian_inverse_blow_up(mu: float) -> InverseBlowUp:
    """g(x) = Φ(Φ⁻¹(x) − μ) of the μ-GDP curve."""

    def g(x: float) -> float:
        if x <= 0.0:
            return 0.0
        if x >= 1.0:
            return 1.0
        return 0.5 * math.erfc(-(float(special.ndtri(x)) - mu) / _SQRT2)

    return g


def dp_inverse_blow_up(epsilon: float, delta: float) -> InverseBlowUp:
    """g(x) = f_{ε,δ}(1 − x) = max(0, e^ε·x − (e^ε − 1) − δ, e^{−ε}(x − δ)) of the (ε, δ)-DP curve."""
    grow = math.exp(epsilon) if epsilon < 700.0 else math.inf
    shrink = math.exp(-epsilon)

    def g(x: float) -> float:
        if x <= 0.0:
            return 0.0
        if x >= 1.0:
            return 1.0
        upper = grow * x - (grow - 1.0) - delta if math.isfinite(grow) else -math.inf
        return min(1.0, max(0.0, upper, shrink * (x - delta)))

    return g
