"""δ-aware Clopper–Pearson ε lower bound (Jagielski, Ullman & Oprea, NeurIPS 2020; Nasr et al., IEEE S&P 2021).

For one threshold test with FP false positives out of n_out and FN false negatives out of n_in, spend
half of the test's significance a on each rate (union bound):

    FPR⁺ = CPU(FP, n_out, a/2),   FNR⁺ = CPU(FN, n_in, a/2),   CPU(k, n, b) = BetaInv(1 − b; k + 1, n − k)

and, with probability ≥ 1 − a, FPR ≤ FPR⁺ and FNR ≤ FNR⁺ together. An (ε, δ)-DP mechanism satisfies
*both* inequalities of the hypothesis-testing region for this one test (Kairouz, Oh & Viswanath, "The
composition theorem for differential privacy", ICML 2015, Thm 2.1):

    FPR + e^ε·FNR ≥ 1 − δ    and    FNR + e^ε·FPR ≥ 1 − δ,

(the second is the first with the roles of the neighbouring datasets swapped, applied to the same
rejection region), and both right-hand bounds on ε fall as FPR or FNR grow, so on that event

    ε ≥ max( ln((1 − δ − FNR⁺)/FPR⁺),  ln((1 − δ − FPR⁺)/FNR⁺) )          (terms with numerator ≤ 0 dropped).

Both terms use the *same* two upper bounds, so taking their maximum costs no extra α. The *reverse
direction* — the decision flipped, "member" iff the score is low — needs the other tails of the counts
and is only used when declared two-sided in advance (:func:`privaudit.stats.threshold_selection.directional_bound`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy import special

from privaudit.stats.scores import AuditScores
from privaudit.stats.strategies import ThresholdStrategy
from privaudit.stats.threshold_selection import Statistic, directional_bound


def cp_upper(k: np.ndarray | int, n: int, significance: np.ndarray | float) -> np.ndarray:
    """One-sided exact upper confidence bound of a binomial rate: BetaInv(1 − b; k + 1, n − k), 1 at k = n.

    Clopper & Pearson 1934. ``P[rate > cp_upper(K, n, b)] ≤ b`` when K ~ Bin(n, rate). Uses the complement
    of the regularised incomplete Beta inverse so that tiny b (Bonferroni shares) keep full precision.
    """
    k = np.asarray(k, dtype=np.float64)
    b = np.asarray(significance, dtype=np.float64)
    k, b = np.broadcast_arrays(k, b)
    out = np.ones(k.shape, dtype=np.float64)
    below = k < n
    if np.any(below):
        out[below] = special.betainccinv(k[below] + 1.0, n - k[below], b[below])
    return out


def box_epsilon(fpr_upper: np.ndarray, fnr_upper: np.ndarray, delta: float) -> np.ndarray:
    """max of the two (ε, δ) hypothesis-testing inequalities at upper rate bounds (may be −inf)."""
    fpr = np.asarray(fpr_upper, dtype=np.float64)
    fnr = np.asarray(fnr_upper, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        first = np.where(1.0 - delta - fnr > 0, np.log(np.maximum(1.0 - delta - fnr, 1e-300)) - np.log(fpr), -np.inf)
        second = np.where(1.0 - delta - fpr > 0, np.log(np.maximum(1.0 - delta - fpr, 1e-300)) - np.log(fnr), -np.inf)
    return np.maximum(first, second)


def cp_statistic(delta: float) -> Statistic:
    """The per-test statistic of the CP route: ε bound at significance a, half on each rate."""

    def statistic(fp: np.ndarray, fn: np.ndarray, n_out: int, n_in: int, significance: np.ndarray) -> np.ndarray:
        half = np.asarray(significance, dtype=np.float64) / 2.0
        return box_epsilon(cp_upper(fp, n_out, half), cp_upper(fn, n_in, half), delta)

    return statistic


def cp_bound(
    scores: AuditScores, significance: float, delta: float, strategy: ThresholdStrategy, two_sided: bool = False
) -> tuple[float, dict[str, Any]]:
    """ε lower bound by δ-aware Clopper–Pearson under ``strategy`` (validated inputs; see module docstring)."""
    chosen = directional_bound(scores, strategy, significance, cp_statistic(delta), two_sided)
    details = dict(chosen.details)
    if "fp" in details:
        half = details["test_significance"] / 2.0
        details["fpr_upper"] = float(cp_upper(details["fp"], details["n_out"], half)[()])
        details["fnr_upper"] = float(cp_upper(details["fn"], details["n_in"], half)[()])
    if chosen.split_values:
        details["split_epsilons"] = [max(0.0, v) for v in chosen.split_values]
    return max(0.0, chosen.value), details
