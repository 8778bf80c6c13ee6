"""Attack metrics for a report: ROC curve, AUC and TPR at low FPR, each with a bootstrap interval."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from privaudit.stats.bootstrap import bootstrap_intervals
from privaudit.stats.estimates import IntervalEstimate
from privaudit.stats.roc import RocCurve, roc_curve
from privaudit.stats.scores import AuditScores


@dataclass(frozen=True)
class AttackMetrics:
    """How good the attack is, independent of any privacy claim."""

    auc: IntervalEstimate
    tpr_at_fpr: tuple[IntervalEstimate, ...]
    roc: RocCurve
    n_in: int
    n_out: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "auc": self.auc.to_dict(),
            "tpr_at_fpr": [interval.to_dict() for interval in self.tpr_at_fpr],
            "roc": self.roc.to_dict(),
            "n_in": self.n_in,
            "n_out": self.n_out,
        }


def attack_metrics(
    in_scores: object,
    out_scores: object,
    *,
    fprs: Sequence[float] = (0.001, 0.01),
    confidence: float = 0.95,
    n_resamples: int = 1000,
    seed: int = 0,
    method: str = "bca",
) -> AttackMetrics:
    """ROC curve plus AUC and TPR@``fprs`` with seeded stratified bootstrap intervals (BCa by default)."""
    scores = AuditScores.of(in_scores, out_scores)
    roc = roc_curve(scores.in_scores, scores.out_scores)
    auc_interval, tpr_intervals = bootstrap_intervals(
        scores.in_scores, scores.out_scores, fprs, confidence=confidence, n_resamples=n_resamples, seed=seed, method=method
    )
    return AttackMetrics(auc_interval, tpr_intervals, roc, scores.n_in, scores.n_out)
