"""Gaussian-DP route: a μ lower bound from Clopper–Pearson rates, converted to ε through the GDP profile.

Nasr, Hayes, Steinke, Balle, Tramèr, Jagielski, Carlini & Terzis 2023 ("Tight auditing of differentially
private machine learning", USENIX Security 2023). Every test of a μ-GDP mechanism satisfies
FNR ≥ T_μ(FPR) with T_μ(x) = Φ(Φ⁻¹(1 − x) − μ) (Dong, Roth & Su 2022, "Gaussian differential privacy"). So for one test, with
FPR⁺ and FNR⁺ the Clopper–Pearson upper bounds at half the test's significance each,

    μ ≥ Φ⁻¹(1 − FPR⁺) − Φ⁻¹(FNR⁺) = −Φ⁻¹(FPR⁺) − Φ⁻¹(FNR⁺)

(the expression is symmetric in the two rates, so the swapped-dataset inequality gives nothing new).
The estimator reports the best test under the threshold strategy, clamped at 0 — a negative value is
*no* evidence and is never flipped with |·| (the bug of ``epsilon_from_gdp`` in google-deepmind/jax_privacy
≤ 2.0.0, which then certified ε > 0 on identical in/out scores; tests/stats/test_gdp.py keeps the regression); evidence
that in-scores are *low* is the reverse direction, used only when declared two-sided in advance, with
its own tails and its own half of α. The μ bound is converted with the exact profile
δ(ε; μ) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2) (Dong, Roth & Su 2022, Cor. 2.13) via
:func:`privaudit.accounting.gaussian.gaussian_epsilon`.

Validity caveat: μ_lb refutes "M is μ-GDP". It refutes an (ε, δ) claim only when the claimed
mechanism's privacy profile is Gaussian-shaped (DP-SGD / DP-FedAvg without subsampling exactly; with
Poisson subsampling only approximately, by the central limit theorem of Dong, Roth & Su 2022). For other
claims use ``cp`` or an f-DP audit.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy import special

from privaudit.accounting.gaussian import gaussian_epsilon
from privaudit.stats.clopper_pearson import cp_upper
from privaudit.stats.scores import AuditScores
from privaudit.stats.strategies import ThresholdStrategy
from privaudit.stats.threshold_selection import directional_bound


def mu_from_rate_bounds(fpr_upper: np.ndarray, fnr_upper: np.ndarray) -> np.ndarray:
    """−Φ⁻¹(FPR⁺) − Φ⁻¹(FNR⁺): the μ-GDP lower bound of one test (unclamped; −inf when FPR⁺ = 1)."""
    return -special.ndtri(np.asarray(fpr_upper, dtype=np.float64)) - special.ndtri(np.asarray(fnr_upper, dtype=np.float64))


def gdp_statistic(fp: np.ndarray, fn: np.ndarray, n_out: int, n_in: int, significance: np.ndarray) -> np.ndarray:
    """Per-test statistic of the GDP route: the μ bound at significance a, half on each rate."""
    half = np.asarray(significance, dtype=np.float64) / 2.0
    return mu_from_rate_bounds(cp_upper(fp, n_out, half), cp_upper(fn, n_in, half))


def mu_to_epsilon(mu: float, delta: float) -> float:
    """ε of μ-GDP at δ (0 for μ ≤ 0); exact, from :mod:`privaudit.accounting.gaussian`."""
    return 0.0 if mu <= 0.0 else gaussian_epsilon(mu, delta)


def gdp_bound(
    scores: AuditScores, significance: float, delta: float, strategy: ThresholdStrategy, two_sided: bool = False
) -> tuple[float, dict[str, Any]]:
    """ε lower bound by the GDP route under ``strategy`` (validated inputs, δ > 0; see module docstring)."""
    chosen = directional_bound(scores, strategy, significance, gdp_statistic, two_sided)
    mu_lb = max(0.0, chosen.value)
    details = dict(chosen.details)
    details["mu_lb"] = mu_lb
    if "fp" in details:
        half = details["test_significance"] / 2.0
        details["fpr_upper"] = float(cp_upper(details["fp"], details["n_out"], half)[()])
        details["fnr_upper"] = float(cp_upper(details["fn"], details["n_in"], half)[()])
    if chosen.split_values:
        details["split_mus"] = [max(0.0, v) for v in chosen.split_values]
    return mu_to_epsilon(mu_lb, delta), details
