"""Apply a threshold strategy: turn scores into the one statistic an estimator reports, validly.

Estimators that rest on a threshold test (``cp``, ``gdp``) supply a *statistic*: a vectorised function
``statistic(fp, fn, n_out, n_in, significance) -> values`` (larger is stronger evidence, ``-inf`` allowed)
that is a valid level-``significance`` lower bound for one test fixed in advance. This module decides
which tests are run and how α is shared among them (:mod:`privaudit.stats.strategies`), and returns the
winning value with the facts a report needs.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from privaudit.errors import InvalidParameterError
from privaudit.stats.scores import AuditScores
from privaudit.stats.strategies import (
    Bonferroni,
    Explicit,
    MultiSplit,
    Split,
    ThresholdGrid,
    ThresholdStrategy,
)
from privaudit.stats.threshold_tests import (
    ThresholdTests,
    explicit_tests,
    family_tests,
    pareto_cuts,
    split_scores,
)

Statistic = Callable[[np.ndarray, np.ndarray, int, int, np.ndarray], np.ndarray]


@dataclass(frozen=True)
class Selection:
    """The reported statistic (unclamped) and how it was obtained."""

    value: float
    details: dict[str, Any] = field(default_factory=dict)
    split_values: tuple[float, ...] = ()


_EXHAUSTIVE_LIMIT = 4096  # families up to this many candidate tests are evaluated in full
_COARSE_POINTS = 1024
_EDGE_POINTS = 64
_REFINED_PEAKS = 8


def _search_indices(size: int, coarse_values: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    """Indices worth evaluating exactly when a family has many candidate tests.

    A coarse, evenly spaced pass (plus the extreme cuts, where counts are small and the bounds move
    fastest) locates the best regions; every test within one stride of the best coarse points is then
    evaluated. Reporting the best of a *subset* of the family is still valid — the Bonferroni share of
    each test does not change — it can only be (negligibly) less tight.
    """
    stride = math.ceil(size / _COARSE_POINTS)
    edge = min(_EDGE_POINTS, size)
    coarse = np.unique(np.concatenate([np.arange(0, size, stride), np.arange(edge), np.arange(size - edge, size)]))
    values = coarse_values(coarse)
    peaks = coarse[np.argsort(values, kind="stable")[-_REFINED_PEAKS:]]
    window = (peaks[:, None] + np.arange(-stride, stride + 1)[None, :]).ravel()
    return np.unique(np.concatenate([coarse, np.clip(window, 0, size - 1)]))


def _best(tests: ThresholdTests, significance: float, statistic: Statistic) -> Selection:
    shares = significance * tests.weights

    def values_at(index: np.ndarray) -> np.ndarray:
        return np.asarray(statistic(tests.fp[index], tests.fn[index], tests.n_out, tests.n_in, shares[index]), dtype=np.float64)

    size = tests.fp.size
    candidates = np.arange(size) if size <= _EXHAUSTIVE_LIMIT else _search_indices(size, values_at)
    values = values_at(candidates)
    index = int(candidates[int(np.argmax(values))])
    details = {
        "rule": tests.rule(index),
        "threshold": float(tests.thresholds[index]),
        "fp": int(tests.fp[index]),
        "fn": int(tests.fn[index]),
        "n_in": tests.n_in,
        "n_out": tests.n_out,
        "test_significance": float(shares[index]),
        "family_size": tests.family_size,
        "tests_evaluated": int(candidates.size),
    }
    return Selection(float(np.max(values)), details)


def select_threshold(scores: AuditScores, significance: float, statistic: Statistic) -> float:
    """The cut "score ≥ t" that maximises ``statistic`` on these scores (used on selection data only)."""
    thresholds, fp, fn = pareto_cuts(scores)
    tests = ThresholdTests(
        thresholds=thresholds,
        strict=np.zeros(thresholds.size, dtype=bool),
        fp=fp,
        fn=fn,
        weights=np.ones(thresholds.size),
        n_in=scores.n_in,
        n_out=scores.n_out,
        family_size=thresholds.size,
    )
    return _best(tests, significance, statistic).details["threshold"]


def _split_once(scores: AuditScores, fraction: float, rng: np.random.Generator, significance: float, statistic: Statistic) -> Selection:
    select, hold = split_scores(scores, fraction, rng)
    threshold = select_threshold(select, significance, statistic)
    chosen = _best(explicit_tests(hold, threshold), significance, statistic)
    chosen.details.update({"selection_n_in": select.n_in, "selection_n_out": select.n_out})
    return chosen


def multi_split_index(n_splits: int) -> int:
    """Index (0-based, descending order) of the reported split bound: the ⌈B/2⌉-th largest."""
    return math.ceil(n_splits / 2) - 1


def bound_with_strategy(
    scores: AuditScores, strategy: ThresholdStrategy, significance: float, statistic: Statistic
) -> Selection:
    """Run ``strategy`` on ``scores`` at level ``significance`` and return the reported statistic."""
    match strategy:
        case Explicit(threshold=threshold):
            return _best(explicit_tests(scores, threshold), significance, statistic)
        case Bonferroni(family=family):
            return _best(family_tests(scores, family), significance, statistic)
        case Split(fraction=fraction, seed=seed):
            return _split_once(scores, fraction, np.random.default_rng(seed), significance, statistic)
        case MultiSplit(n_splits=n_splits, seed=seed, fraction=fraction):
            rng = np.random.default_rng(seed)
            runs = [_split_once(scores, fraction, rng, significance / 2.0, statistic) for _ in range(n_splits)]
            order = sorted(range(n_splits), key=lambda i: runs[i].value, reverse=True)
            chosen = runs[order[multi_split_index(n_splits)]]
            details = dict(chosen.details)
            details["n_splits"] = n_splits
            return Selection(chosen.value, details, tuple(run.value for run in runs))
    raise InvalidParameterError(
        f"threshold estimators take Explicit, Bonferroni, Split or MultiSplit, got {type(strategy).__name__}"
    )


def reversed_strategy(strategy: ThresholdStrategy) -> ThresholdStrategy:
    """The same strategy for negated scores (the reverse direction: "member" iff score is *low*)."""
    match strategy:
        case Explicit(threshold=threshold):
            return Explicit(-threshold)
        case Bonferroni(family=ThresholdGrid(values=values, weights=weights)):
            return Bonferroni(ThresholdGrid(tuple(-v for v in values), weights))
    return strategy


def directional_bound(
    scores: AuditScores, strategy: ThresholdStrategy, significance: float, statistic: Statistic, two_sided: bool
) -> Selection:
    """One-sided (in-scores high) by default; with ``two_sided`` (declared in advance) each direction gets α/2.

    The reverse direction flips the decision ("member" iff the score is low), so its rates are bounded
    with their own Clopper–Pearson tails on the negated scores — never by taking |·| of a forward value
    (the ``epsilon_from_gdp`` bug of google-deepmind/jax_privacy ≤ 2.0.0).
    """
    if not two_sided:
        chosen = bound_with_strategy(scores, strategy, significance, statistic)
        chosen.details["direction"] = "in-scores high"
        return chosen
    forward = bound_with_strategy(scores, strategy, significance / 2.0, statistic)
    reverse = bound_with_strategy(scores.negated(), reversed_strategy(strategy), significance / 2.0, statistic)
    forward.details["direction"] = "in-scores high"
    reverse.details["direction"] = "in-scores low"
    if "rule" in reverse.details:
        reverse.details["rule"] = f"(negated) {reverse.details['rule']}"
    chosen = forward if forward.value >= reverse.value else reverse
    chosen.details["two_sided"] = True
    chosen.details["other_direction_value"] = float(reverse.value if chosen is forward else forward.value)
    return chosen
