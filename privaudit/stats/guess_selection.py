"""Guesses for one-run audits: who is guessed "in"/"out", how many are right, and which counts are tested.

In a one-run audit (Steinke, Nasr & Jagielski 2023) each of m canaries is included independently
with probability ½; the auditor guesses "in" for the k₊ highest scores, "out" for the k₋ lowest, and
abstains on the rest. The m canaries here are the in- and out-scores together.

Ties: a count whose cut splits a group of equal scores is credited with the correct guesses that a uniformly random
choice within the group reaches with probability ≥ ½, and every count is tested at ½ of its share of α
(:mod:`privaudit.stats.one_run_ties`, which says why that is valid and why a seeded random order is not).

Strategies (:mod:`privaudit.stats.strategies`): :class:`Guesses` fixed in advance; :class:`Bonferroni`
over a :class:`GuessGrid` (each pair at α/|family|, halved as above); :class:`Split`, which chooses the guess fraction of
:data:`DEFAULT_GUESS_GRID` on a random subset of canaries drawn *without looking at membership* (so the
held-out canaries' memberships stay independent fair coins) and audits the rest with m = held-out count;
:class:`MultiSplit`, the ⌈B/2⌉-th largest of B such split bounds at α/2.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from privaudit.errors import InvalidParameterError
from privaudit.stats.one_run_ties import TIE_QUANTILE, TiedRanking
from privaudit.stats.scores import AuditScores
from privaudit.stats.strategies import (
    DEFAULT_GUESS_GRID,
    Bonferroni,
    Guesses,
    GuessGrid,
    GuessStrategy,
    MultiSplit,
    Split,
)
from privaudit.stats.threshold_selection import multi_split_index

#: ε lower bound of one guess count: (m, r, v, significance, precise) -> ε; precise=False only ranks candidates
GuessTest = Callable[[int, int, int, float, bool], float]


def ranked_membership(scores: np.ndarray, is_in: np.ndarray) -> np.ndarray:
    """Membership labels ordered from highest to lowest score, ties out first (the worst case for the auditor)."""
    return is_in[np.lexsort((is_in, -scores))]


def correct_guesses(ranked_is_in: np.ndarray, k_plus: np.ndarray, k_minus: np.ndarray) -> np.ndarray:
    """Correct guesses v for each (k₊, k₋): in-canaries among the top k₊ plus out-canaries among the bottom k₋."""
    m = ranked_is_in.size
    prefix_in = np.concatenate([[0], np.cumsum(ranked_is_in, dtype=np.int64)])
    k_plus = np.asarray(k_plus, dtype=np.int64)
    k_minus = np.asarray(k_minus, dtype=np.int64)
    in_at_bottom = prefix_in[m] - prefix_in[m - k_minus]
    return prefix_in[k_plus] + (k_minus - in_at_bottom)


def _pooled(scores: AuditScores) -> tuple[np.ndarray, np.ndarray]:
    values = np.concatenate([scores.out_scores, scores.in_scores])
    is_in = np.concatenate([np.zeros(scores.n_out, dtype=bool), np.ones(scores.n_in, dtype=bool)])
    return values, is_in


def _evaluate_pairs(
    ranked: TiedRanking, pairs: tuple[tuple[int, int], ...], share: float, test: GuessTest, precise: bool = True
) -> tuple[float, dict[str, Any]]:
    """The best pair's bound; each pair is credited per :mod:`privaudit.stats.one_run_ties` and tested at γ·share."""
    m = ranked.size
    level = share * TIE_QUANTILE
    credited = [ranked.credited(k_plus, k_minus) for k_plus, k_minus in pairs]
    epsilons = [test(m, k_plus + k_minus, v, level, precise) for (k_plus, k_minus), (v, _) in zip(pairs, credited, strict=True)]
    best = int(np.argmax(epsilons))
    k_plus, k_minus = pairs[best]
    details = {
        "m": m,
        "k_plus": int(k_plus),
        "k_minus": int(k_minus),
        "guesses": int(k_plus + k_minus),
        "correct": int(credited[best][0]),
        "test_significance": level,
        "family_size": len(pairs),
        "ties": {"guesses_in_split_groups": int(credited[best][1]), "quantile": TIE_QUANTILE,
                 "rule": "a cut through equal scores is credited the correct guesses a random choice within them "
                         "reaches with probability ≥ ½; every count is tested at ½ of its share of α"},
    }
    return float(epsilons[best]), details


def _split_ranked(ranked: TiedRanking, fraction: float, rng: np.random.Generator) -> tuple[TiedRanking, TiedRanking]:
    """Split canaries at random, ignoring membership, keeping each part in rank order.

    The random subset is drawn over rank positions, which is the same as over canaries (the subset is
    uniform and independent of scores and memberships), and a part of a ranking is the ranking of the part.
    """
    m = ranked.size
    if m < 2:
        raise InvalidParameterError("a split needs at least 2 canaries")
    n_select = min(m - 1, max(1, int(np.floor(fraction * m))))
    selected = rng.permutation(m) < n_select
    return ranked.part(selected), ranked.part(~selected)


def _split_once(ranked, fraction, rng, significance, test) -> tuple[float, dict[str, Any]]:
    select, hold = _split_ranked(ranked, fraction, rng)
    best_fraction, best_eps = DEFAULT_GUESS_GRID.fractions[0], -math.inf
    for fraction_guessed in DEFAULT_GUESS_GRID.fractions:
        grid = GuessGrid((fraction_guessed,), DEFAULT_GUESS_GRID.plus_share)
        eps, _ = _evaluate_pairs(select, grid.guess_counts(select.size), significance, test, precise=False)
        if eps > best_eps:
            best_fraction, best_eps = fraction_guessed, eps
    grid = GuessGrid((best_fraction,), DEFAULT_GUESS_GRID.plus_share)
    eps, details = _evaluate_pairs(hold, grid.guess_counts(hold.size), significance, test)
    details.update({"selected_fraction": best_fraction, "selection_m": int(select.size)})
    return eps, details


def guess_bound(
    scores: AuditScores, strategy: GuessStrategy, significance: float, test: GuessTest
) -> tuple[float, dict[str, Any], tuple[float, ...]]:
    """Run a one-run ``strategy``; returns (ε lower bound, details, per-split bounds for MultiSplit)."""
    ranked = TiedRanking.of(*_pooled(scores))
    m = ranked.size
    match strategy:
        case Guesses(k_plus=k_plus, k_minus=k_minus):
            if k_plus + k_minus > m:
                raise InvalidParameterError(f"Guesses asks for {k_plus + k_minus} guesses but there are only {m} canaries")
            eps, details = _evaluate_pairs(ranked, ((k_plus, k_minus),), significance, test)
            return eps, details, ()
        case Bonferroni(family=GuessGrid() as grid):
            pairs = grid.guess_counts(m)
            eps, details = _evaluate_pairs(ranked, pairs, significance / len(pairs), test)
            return eps, details, ()
        case Bonferroni(family=family):
            raise InvalidParameterError(f"one-run audits take a GuessGrid family, got {type(family).__name__}")
        case Split(fraction=fraction, seed=seed):
            eps, details = _split_once(ranked, fraction, np.random.default_rng(seed), significance, test)
            return eps, details, ()
        case MultiSplit(n_splits=n_splits, seed=seed, fraction=fraction):
            rng = np.random.default_rng(seed)
            runs = [_split_once(ranked, fraction, rng, significance / 2.0, test) for _ in range(n_splits)]
            order = sorted(range(n_splits), key=lambda i: runs[i][0], reverse=True)
            eps, details = runs[order[multi_split_index(n_splits)]]
            details = dict(details, n_splits=n_splits)
            return eps, details, tuple(run[0] for run in runs)
    raise InvalidParameterError(f"one-run audits take Guesses, Bonferroni, Split or MultiSplit, got {type(strategy).__name__}")


def split_ceiling(m: int, strategy: Split | MultiSplit, significance: float, test: GuessTest) -> float:
    """The largest bound a :class:`Split` / :class:`MultiSplit` one-run audit of ``m`` canaries can return.

    The held-out part has a fixed size, but its guess counts are chosen on the other part, so a perfect attack
    is not the best case: a luckier selection can pick counts that suit the held-out part better. Every outcome
    is bounded by all guesses right (v = r) for the best count any selection could pick, tested at γ times its
    share like every count (:mod:`privaudit.stats.one_run_ties`); the median of MultiSplit's splits (each at α/2) is
    bounded by that maximum too.
    """
    if m < 2:
        raise InvalidParameterError("a split needs at least 2 canaries")
    share = (significance / 2.0 if isinstance(strategy, MultiSplit) else significance) * TIE_QUANTILE
    hold = m - min(m - 1, max(1, int(np.floor(strategy.fraction * m))))
    pairs = {pair for f in DEFAULT_GUESS_GRID.fractions
             for pair in GuessGrid((f,), DEFAULT_GUESS_GRID.plus_share).guess_counts(hold)}
    return max(test(hold, int(kp + km), int(kp + km), share, True) for kp, km in pairs)
