"""ROC curve, AUC and TPR at a fixed FPR of an attack's scores (point estimates, no confidence).

Conventions: "member" iff score ≥ threshold; ties between an in- and an out-score count ½ in the AUC
(the Mann–Whitney statistic). TPR at FPR f is the largest TPR of any threshold rule whose empirical
FPR is at most f — no interpolation between ROC points, so it is never optimistic:

    TPR@f = #{in > o₍c+1₎} / n_in,   c = ⌊f·n_out⌋,   o₍k₎ the k-th largest out-score   (1 when c ≥ n_out).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from privaudit.errors import InvalidParameterError
from privaudit.stats.scores import AuditScores


@dataclass(frozen=True, eq=False)
class RocCurve:
    """Empirical ROC: ``fpr[i]``, ``tpr[i]`` of the rule "score ≥ thresholds[i]" (first point: threshold +inf)."""

    fpr: np.ndarray
    tpr: np.ndarray
    thresholds: np.ndarray

    def to_dict(self) -> dict[str, Any]:
        return {"fpr": self.fpr.tolist(), "tpr": self.tpr.tolist(), "thresholds": self.thresholds.tolist()}


def check_fpr(fpr: float) -> float:
    value = float(fpr)
    if math.isnan(value) or not 0.0 <= value <= 1.0:
        raise InvalidParameterError(f"fpr must lie in [0, 1], got {fpr}")
    return value


def roc_curve(in_scores: object, out_scores: object) -> RocCurve:
    """All ROC points, from (0, 0) at threshold +inf down to (1, 1) at the smallest score."""
    scores = AuditScores.of(in_scores, out_scores)
    thresholds = np.unique(np.concatenate([scores.in_scores, scores.out_scores]))[::-1]
    in_sorted, out_sorted = np.sort(scores.in_scores), np.sort(scores.out_scores)
    tp = scores.n_in - np.searchsorted(in_sorted, thresholds, side="left")
    fp = scores.n_out - np.searchsorted(out_sorted, thresholds, side="left")
    return RocCurve(
        fpr=np.concatenate([[0.0], fp / scores.n_out]),
        tpr=np.concatenate([[0.0], tp / scores.n_in]),
        thresholds=np.concatenate([[np.inf], thresholds]),
    )


def auc_from_sorted(in_scores: np.ndarray, out_sorted: np.ndarray) -> float:
    """Mann–Whitney AUC = P[in > out] + ½·P[in = out]."""
    below = np.searchsorted(out_sorted, in_scores, side="left")
    at_or_below = np.searchsorted(out_sorted, in_scores, side="right")
    return float(np.sum(below + at_or_below) / (2.0 * in_scores.size * out_sorted.size))


def auc(in_scores: object, out_scores: object) -> float:
    """Area under the ROC curve (ties count ½)."""
    scores = AuditScores.of(in_scores, out_scores)
    return auc_from_sorted(scores.in_scores, np.sort(scores.out_scores))


def tpr_at_fpr_from_sorted(in_sorted: np.ndarray, out_sorted: np.ndarray, fpr: float) -> float:
    """TPR@fpr (module docstring) on ascending sorted arrays."""
    budget = math.floor(fpr * out_sorted.size + 1e-9)
    if budget >= out_sorted.size:
        return 1.0
    cut = out_sorted[out_sorted.size - 1 - budget]  # the (budget+1)-th largest out-score
    return float((in_sorted.size - np.searchsorted(in_sorted, cut, side="right")) / in_sorted.size)


def tpr_at_fpr(in_scores: object, out_scores: object, fpr: float) -> float:
    """Largest TPR of a threshold rule with empirical FPR ≤ ``fpr`` (no interpolation)."""
    scores = AuditScores.of(in_scores, out_scores)
    return tpr_at_fpr_from_sorted(np.sort(scores.in_scores), np.sort(scores.out_scores), check_fpr(fpr))
