"""Shared helpers of the audit tests: deterministic samples and the Monte-Carlo tolerance."""

from __future__ import annotations

import math

import numpy as np
from scipy import stats


def deterministic_normal(mu: float, n: int) -> np.ndarray:
    """n scores at the mid-point quantiles of N(mu, 1): counts at any threshold are within 1 of expected."""
    return stats.norm.ppf((np.arange(n) + 0.5) / n) + mu


def binomial_upper_tolerance(alpha: float, repetitions: int) -> float:
    """α + 3·√(α(1 − α)/R): the largest false-positive rate a valid level-α procedure plausibly shows in R runs."""
    return alpha + 3.0 * math.sqrt(alpha * (1.0 - alpha) / repetitions)
