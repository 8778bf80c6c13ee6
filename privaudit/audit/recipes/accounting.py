"""Accounting evidence the recipes share: cached accountant answers and exact Gaussian compositions.

* :func:`epsilon_of` — ε(δ) of a composition from a named accountant, memoised per process (recipes ask the
  same question for several readings and several clients).
* :func:`gaussian_composition_epsilon` — the exact ε of T Gaussian releases with effective multiplier z:
  the composition is μ-GDP with μ = √T/z (Dong, Roth & Su 2022, Cor. 3.3), and its privacy profile is
  exact (Balle & Wang 2018, Thm 8), so the number is both an upper and — whenever the worst-case pair of
  the mechanism is attained — a lower bound.
"""

from __future__ import annotations

import math
from functools import lru_cache

from privaudit.accounting.accountants import get_accountant
from privaudit.accounting.base import EpsilonResult
from privaudit.accounting.gaussian import gaussian_epsilon
from privaudit.accounting.mechanisms import Composition


@lru_cache(maxsize=512)
def epsilon_of(composition: Composition, delta: float, accountant: str = "auto") -> EpsilonResult:
    """``get_accountant(accountant).epsilon(composition, delta)``, memoised."""
    return get_accountant(accountant).epsilon(composition, delta)


def gaussian_composition_epsilon(noise_multiplier: float, releases: int, delta: float, sensitivity: float = 1.0) -> float:
    """Exact ε of ``releases`` Gaussian releases of std ``noise_multiplier`` on a query of ``sensitivity``."""
    mu = math.sqrt(releases) * sensitivity / noise_multiplier
    return gaussian_epsilon(mu, delta)


def gaussian_mu(noise_multiplier: float, releases: int, sensitivity: float = 1.0) -> float:
    """μ = √T·Δ/σ of T Gaussian releases (Dong, Roth & Su 2022, Cor. 3.3)."""
    return math.sqrt(releases) * sensitivity / noise_multiplier
