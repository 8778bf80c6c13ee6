"""Threshold tests as counts: for each candidate rule, the false positives and false negatives it makes.

A *test* is a rule "member iff score ≥ t" (or "> t" for the rank rules of :class:`QuantileGrid`) together
with the share of α it may spend. Estimators never see scores, only these counts, so every estimator uses
the same, audited, counting code. See :mod:`privaudit.stats.strategies` for why each family is valid.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from privaudit.errors import InvalidParameterError
from privaudit.stats.scores import AuditScores
from privaudit.stats.strategies import OrderStatistics, QuantileGrid, ThresholdGrid


@dataclass(frozen=True, eq=False)
class ThresholdTests:
    """Candidate tests on one set of scores.

    ``thresholds[i]`` with ``strict[i]`` is the rule ("score > t" when strict, else "score ≥ t"),
    ``fp``/``fn`` its error counts out of ``n_out``/``n_in``, and ``weights[i]`` the share of α the test
    may spend (the weights of a family sum to 1 over the whole family, also over tests that were never
    built because they cannot win).
    """

    thresholds: np.ndarray
    strict: np.ndarray
    fp: np.ndarray
    fn: np.ndarray
    weights: np.ndarray
    n_in: int
    n_out: int
    family_size: int

    def rule(self, index: int) -> str:
        return f"score {'>' if self.strict[index] else '>='} {float(self.thresholds[index]):.12g}"


def _sorted(scores: AuditScores) -> tuple[np.ndarray, np.ndarray]:
    return np.sort(scores.in_scores), np.sort(scores.out_scores)


def counts_at(scores: AuditScores, thresholds: np.ndarray, *, strict: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(FP, FN) of the rules "score ≥ t" (or "> t" when ``strict``) for each t in ``thresholds``."""
    in_sorted, out_sorted = _sorted(scores)
    side = "right" if strict else "left"
    t = np.asarray(thresholds, dtype=np.float64)
    fn = np.searchsorted(in_sorted, t, side=side)
    fp = scores.n_out - np.searchsorted(out_sorted, t, side=side)
    return fp.astype(np.int64), fn.astype(np.int64)


def explicit_tests(scores: AuditScores, threshold: float) -> ThresholdTests:
    """The single rule "score ≥ threshold", spending the whole α."""
    fp, fn = counts_at(scores, np.array([threshold]))
    return ThresholdTests(
        thresholds=np.array([threshold]),
        strict=np.array([False]),
        fp=fp,
        fn=fn,
        weights=np.ones(1),
        n_in=scores.n_in,
        n_out=scores.n_out,
        family_size=1,
    )


def pareto_cuts(scores: AuditScores) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Cuts "score ≥ v" at distinct observed values v that are not dominated in (FP, FN).

    Every bound in this package falls when FP or FN grows, so the best cut is always among these: v is an
    in-score value and, below v and at or above the next lower in-score value, there is an out-score (for
    the lowest in-value: always). Moving the cut up past out-scores only lowers FP, past in-scores only
    raises FN, so no other cut can be better on both counts. Returns (thresholds, fp, fn), ascending.
    """
    in_sorted, out_sorted = _sorted(scores)
    first = np.concatenate([[True], in_sorted[1:] != in_sorted[:-1]])
    values = in_sorted[first]
    fn = np.flatnonzero(first).astype(np.int64)  # in-scores strictly below each distinct in-value
    out_below = np.searchsorted(out_sorted, values, side="left")
    fp = (scores.n_out - out_below).astype(np.int64)
    keep = np.concatenate([[True], out_below[1:] > out_below[:-1]])
    return values[keep], fp[keep], fn[keep]


def family_tests(scores: AuditScores, family: OrderStatistics | ThresholdGrid | QuantileGrid) -> ThresholdTests:
    """The tests of a Bonferroni family on these scores, with their α shares."""
    match family:
        case OrderStatistics():
            thresholds, fp, fn = pareto_cuts(scores)
            size = min(scores.n_in, scores.n_out)
            return ThresholdTests(
                thresholds=thresholds,
                strict=np.zeros(thresholds.size, dtype=bool),
                fp=fp,
                fn=fn,
                weights=np.full(thresholds.size, 1.0 / size),
                n_in=scores.n_in,
                n_out=scores.n_out,
                family_size=size,
            )
        case ThresholdGrid(values=values, weights=weights):
            thresholds = np.asarray(values, dtype=np.float64)
            fp, fn = counts_at(scores, thresholds)
            return ThresholdTests(
                thresholds=thresholds,
                strict=np.zeros(thresholds.size, dtype=bool),
                fp=fp,
                fn=fn,
                weights=np.asarray(weights, dtype=np.float64),
                n_in=scores.n_in,
                n_out=scores.n_out,
                family_size=thresholds.size,
            )
        case QuantileGrid(levels=levels, weights=weights):
            out_desc = np.sort(scores.out_scores)[::-1]
            ranks = np.floor(np.asarray(levels) * scores.n_out).astype(np.int64)  # k − 1 out-scores above the cut
            thresholds = out_desc[np.minimum(ranks, scores.n_out - 1)]
            fp, fn = counts_at(scores, thresholds, strict=True)
            return ThresholdTests(
                thresholds=thresholds,
                strict=np.ones(thresholds.size, dtype=bool),
                fp=fp,
                fn=fn,
                weights=np.asarray(weights, dtype=np.float64),
                n_in=scores.n_in,
                n_out=scores.n_out,
                family_size=thresholds.size,
            )
    raise InvalidParameterError(
        f"threshold estimators take an OrderStatistics, ThresholdGrid or QuantileGrid family, got {type(family).__name__}"
    )


def split_scores(scores: AuditScores, fraction: float, rng: np.random.Generator) -> tuple[AuditScores, AuditScores]:
    """Randomly split each side into a selection part (``fraction``) and a held-out part (the rest)."""
    if scores.n_in < 2 or scores.n_out < 2:
        raise InvalidParameterError("a split needs at least 2 scores on each side (one to select, one to bound)")

    def cut(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        n_select = min(values.size - 1, max(1, int(np.floor(fraction * values.size))))
        order = rng.permutation(values.size)
        return values[order[:n_select]], values[order[n_select:]]

    in_select, in_hold = cut(scores.in_scores)
    out_select, out_hold = cut(scores.out_scores)
    return AuditScores.trusted(in_select, out_select), AuditScores.trusted(in_hold, out_hold)
