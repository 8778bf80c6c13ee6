"""Seeded bootstrap confidence intervals for AUC and TPR at a fixed FPR.

Resampling is *stratified*: in- and out-scores are resampled separately (with replacement, their own
sizes), as the two samples were drawn separately. Each resample is represented by multiplicity weights,
so AUC and TPR@FPR are recomputed in O(n) from the sorted originals (no re-sorting).

Intervals are **BCa** by default (Efron 1987, "Better bootstrap confidence intervals", JASA 82):
bias correction z₀ = Φ⁻¹(share of resamples below the estimate, ties counted ½) and acceleration from
jackknife influence values computed per sample (the stratified form, Davison & Hinkley 1997,
"Bootstrap methods and their application", §3.2 and §5.3). The jackknife values have closed forms here
(leave-one-out AUC from placement values; leave-one-out TPR@FPR takes two values per sample), so BCa
costs no more than the percentile interval. ``method="percentile"`` gives the plain percentile interval.
These intervals are approximate (bootstrap), unlike the ε lower bounds, which are exact.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

import numpy as np
from scipy import special

from privaudit.errors import InvalidParameterError
from privaudit.stats.estimates import IntervalEstimate
from privaudit.stats.roc import auc_from_sorted, check_fpr, tpr_at_fpr_from_sorted
from privaudit.stats.scores import AuditScores

Method = Literal["bca", "percentile"]


def _fpr_budget(fpr: float, n_out: int) -> int:
    return math.floor(fpr * n_out + 1e-9)


class _Sorted:
    """Sorted copies of the two samples and the precomputed positions the weighted statistics need."""

    def __init__(self, scores: AuditScores) -> None:
        self.in_sorted = np.sort(scores.in_scores)
        self.out_sorted = np.sort(scores.out_scores)
        self.n_in, self.n_out = self.in_sorted.size, self.out_sorted.size
        self.below = np.searchsorted(self.out_sorted, self.in_sorted, side="left")
        self.at_or_below = np.searchsorted(self.out_sorted, self.in_sorted, side="right")
        self.no_ties = bool(np.array_equal(self.below, self.at_or_below))

    def weighted_statistics(self, w_in: np.ndarray, w_out: np.ndarray, fprs: Sequence[float]) -> tuple[float, list[float]]:
        """AUC and TPR@fpr of the resample that holds each sorted score ``w`` times (integer weights)."""
        cum_in = np.zeros(self.n_in + 1, dtype=np.int64)
        np.cumsum(w_in, out=cum_in[1:])
        cum_out = np.zeros(self.n_out + 1, dtype=np.int64)
        np.cumsum(w_out, out=cum_out[1:])
        placements = cum_out[self.below] if self.no_ties else (cum_out[self.below] + cum_out[self.at_or_below]) / 2.0
        auc = float(np.dot(w_in, placements)) / (self.n_in * self.n_out)
        tprs = []
        for fpr in fprs:
            budget = _fpr_budget(fpr, self.n_out)
            # the (budget+1)-th highest resampled out-score sits at the last position with > budget draws at or above it
            position = int(np.searchsorted(cum_out, cum_out[-1] - budget, side="left")) - 1
            if position < 0:
                tprs.append(1.0)
                continue
            above = self.n_in - cum_in[np.searchsorted(self.in_sorted, self.out_sorted[position], side="right")]
            tprs.append(float(above) / self.n_in)
        return auc, tprs

    def jackknife_auc(self) -> tuple[np.ndarray, np.ndarray]:
        """Leave-one-out AUC for each in-score and each out-score (closed form from placements)."""
        v_in = (self.below + self.at_or_below) / 2.0
        total = float(np.sum(v_in))
        less = np.searchsorted(self.in_sorted, self.out_sorted, side="left")
        less_eq = np.searchsorted(self.in_sorted, self.out_sorted, side="right")
        w_out = self.n_in - (less + less_eq) / 2.0
        loo_in = (total - v_in) / (max(self.n_in - 1, 1) * self.n_out)
        loo_out = (total - w_out) / (self.n_in * max(self.n_out - 1, 1))
        return loo_in, loo_out

    def jackknife_tpr(self, fpr: float) -> tuple[np.ndarray, np.ndarray]:
        """Leave-one-out TPR@fpr for each in-score and each out-score."""
        budget = _fpr_budget(fpr, self.n_out)
        if budget >= self.n_out:
            loo_in = np.ones(self.n_in)
        else:
            cut = self.out_sorted[self.n_out - 1 - budget]
            above = self.in_sorted > cut
            tp = int(np.sum(above))
            loo_in = (tp - above) / max(self.n_in - 1, 1)
        out_desc = self.out_sorted[::-1]
        budget_loo = _fpr_budget(fpr, self.n_out - 1)
        if budget_loo >= self.n_out - 1:
            loo_out = np.ones(self.n_out)
        else:

            def tpr_above(value: float) -> float:
                return (self.n_in - np.searchsorted(self.in_sorted, value, side="right")) / self.n_in

            removed_high = tpr_above(out_desc[budget_loo + 1])  # a score among the top budget+1 was left out
            removed_low = tpr_above(out_desc[budget_loo])
            loo_out = np.where(np.arange(self.n_out) <= budget_loo, removed_high, removed_low)
        return loo_in, loo_out


def _acceleration(jackknife: Sequence[np.ndarray]) -> float:
    """BCa acceleration from per-sample jackknife values (stratified empirical influence values)."""
    num, den = 0.0, 0.0
    for values in jackknife:
        n = values.size
        if n < 2:
            continue
        influence = (n - 1) * (np.mean(values) - values)
        num += float(np.sum(influence**3)) / n**3
        den += float(np.sum(influence**2)) / n**2
    return 0.0 if den <= 0.0 else num / (6.0 * den**1.5)


def _interval(
    estimate: float, resampled: np.ndarray, jackknife: Sequence[np.ndarray], confidence: float, method: Method
) -> tuple[float, float]:
    tail = (1.0 - confidence) / 2.0
    levels = np.array([tail, 1.0 - tail])
    if method == "bca":
        n = resampled.size
        below = (np.sum(resampled < estimate) + 0.5 * np.sum(resampled == estimate)) / n
        z0 = float(special.ndtri(np.clip(below, 0.5 / n, 1.0 - 0.5 / n)))
        accel = _acceleration(jackknife)
        z = special.ndtri(levels)
        levels = special.ndtr(z0 + (z0 + z) / (1.0 - accel * (z0 + z)))
    low, high = np.quantile(resampled, levels)
    return float(low), float(high)


def _check_method(method: str) -> Method:
    if method not in ("bca", "percentile"):
        raise InvalidParameterError(f"bootstrap method must be 'bca' or 'percentile', got {method!r}")
    return method  # type: ignore[return-value]


def _check_confidence(confidence: float) -> float:
    value = float(confidence)
    if not 0.0 < value < 1.0:
        raise InvalidParameterError(f"confidence must lie in (0, 1), got {confidence}")
    return value


def _check_resamples(n_resamples: int) -> int:
    if isinstance(n_resamples, bool) or not isinstance(n_resamples, int) or n_resamples < 10:
        raise InvalidParameterError(f"n_resamples must be an integer ≥ 10, got {n_resamples!r}")
    return n_resamples


def bootstrap_intervals(
    in_scores: object,
    out_scores: object,
    fprs: Sequence[float] = (0.001, 0.01),
    *,
    confidence: float = 0.95,
    n_resamples: int = 1000,
    seed: int = 0,
    method: str = "bca",
) -> tuple[IntervalEstimate, tuple[IntervalEstimate, ...]]:
    """(AUC interval, TPR@fpr intervals) from one shared set of stratified resamples."""
    scores = AuditScores.of(in_scores, out_scores)
    confidence = _check_confidence(confidence)
    method = _check_method(method)
    n_resamples = _check_resamples(n_resamples)
    fprs = tuple(check_fpr(f) for f in fprs)
    data = _Sorted(scores)
    rng = np.random.default_rng(seed)
    auc_samples = np.empty(n_resamples)
    tpr_samples = np.empty((len(fprs), n_resamples))
    for b in range(n_resamples):
        w_in = np.bincount(rng.integers(0, data.n_in, data.n_in), minlength=data.n_in)
        w_out = np.bincount(rng.integers(0, data.n_out, data.n_out), minlength=data.n_out)
        auc_samples[b], tpr_samples[:, b] = data.weighted_statistics(w_in, w_out, fprs)

    def make(name: str, estimate: float, samples: np.ndarray, jackknife: tuple[np.ndarray, np.ndarray]) -> IntervalEstimate:
        low, high = _interval(estimate, samples, jackknife, confidence, method)
        return IntervalEstimate(name, estimate, low, high, confidence, method, n_resamples, seed)

    auc_interval = make("auc", auc_from_sorted(data.in_sorted, data.out_sorted), auc_samples, data.jackknife_auc())
    tpr_intervals = tuple(
        make(
            f"tpr_at_fpr={fpr:g}",
            tpr_at_fpr_from_sorted(data.in_sorted, data.out_sorted, fpr),
            tpr_samples[i],
            data.jackknife_tpr(fpr),
        )
        for i, fpr in enumerate(fprs)
    )
    return auc_interval, tpr_intervals


def bootstrap_auc(
    in_scores: object,
    out_scores: object,
    *,
    confidence: float = 0.95,
    n_resamples: int = 1000,
    seed: int = 0,
    method: str = "bca",
) -> IntervalEstimate:
    """AUC with a seeded stratified bootstrap interval (BCa unless ``method="percentile"``)."""
    return bootstrap_intervals(
        in_scores, out_scores, (), confidence=confidence, n_resamples=n_resamples, seed=seed, method=method
    )[0]


def bootstrap_tpr_at_fpr(
    in_scores: object,
    out_scores: object,
    fpr: float,
    *,
    confidence: float = 0.95,
    n_resamples: int = 1000,
    seed: int = 0,
    method: str = "bca",
) -> IntervalEstimate:
    """TPR at a fixed FPR with a seeded stratified bootstrap interval (BCa unless ``method="percentile"``)."""
    return bootstrap_intervals(
        in_scores, out_scores, (fpr,), confidence=confidence, n_resamples=n_resamples, seed=seed, method=method
    )[1][0]
