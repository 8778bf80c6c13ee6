"""Ceilings: the largest ε lower bound any attack could get with these sample sizes, α, δ and strategy.

A bound is only as informative as its ceiling: with N trials per side no multi-run method certifies much
more than ln N, whatever the attack. The ceiling is computed by running
the *same* estimator and strategy on a perfect attack: every in-score above every out-score (and above /
below every threshold fixed in advance). Every estimator here is non-increasing in its error counts, so
no other attack on the same sample sizes can do better.

Reference values (α = 0.05; tests/stats/test_clopper_pearson.py and test_one_run.py check them): multi-run Clopper–Pearson with one threshold fixed in advance,
N = 1000 per side, δ = 1e-5 → 5.60; one-run with all m = 1000 guesses right → 5.81 (δ = 0), 5.78 (δ = 1e-5). The
one-run estimators test every guess count at ½ of its share of α (:mod:`privaudit.stats.one_run_ties`), so their
ceiling at α = 0.05 is the value at 0.025: 5.56 for m = 1000, δ = 1e-5.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from privaudit.stats.scores import AuditScores
from privaudit.stats.strategies import Bonferroni, Explicit, MultiSplit, Strategy, ThresholdGrid


def perfect_attack_scores(n_in: int, n_out: int, strategy: Strategy) -> AuditScores:
    """Scores of an attack that never errs, placed so that the strategy's fixed thresholds separate them."""
    high, low = 1.0, 0.0
    match strategy:
        case Explicit(threshold=threshold):
            high, low = threshold + 1.0, threshold - 1.0
        case Bonferroni(family=ThresholdGrid(values=values)):
            high, low = max(values) + 1.0, min(values) - 1.0
    return AuditScores.of(np.full(n_in, high), np.full(n_out, low))


def ceiling(
    bound: Callable[[AuditScores, Strategy], float],
    n_in: int,
    n_out: int,
    strategy: Strategy,
    *,
    stratified_splits: bool = False,
) -> float:
    """``bound(scores, strategy)`` (an estimator with α and δ fixed) evaluated on the perfect attack.

    With ``stratified_splits`` (threshold estimators split each side separately) every split of a
    :class:`MultiSplit` of a perfect attack has the same sizes and no errors, hence the same bound, so a
    single split at α/2 — ``MultiSplit(n_splits=1)`` — gives the ceiling exactly and B times faster.
    One-run splits ignore membership, so their parts differ and all splits are run.
    """
    if stratified_splits and isinstance(strategy, MultiSplit):
        strategy = MultiSplit(1, strategy.seed, strategy.fraction)
    return float(bound(perfect_attack_scores(n_in, n_out, strategy), strategy))
