"""One-run audit for fixed in/out counts: pair the canaries at random, guess which of each pair was in.

Steinke, Nasr & Jagielski (2023) need every canary's membership to be an independent fair coin. With fixed counts
(900 in / 100 out, or memberships chosen as a random subset of a given size) that fails: guessing "in" is then
right 90 % of the time with no signal at all, and the binomial p-value of :mod:`privaudit.stats.one_run` certifies
ε > 0 on identical in/out scores. This route restores fair coins by pairing.

Construction. Let p = min(n_in, n_out). Draw, independently of the scores, p of the larger side's canaries and a
uniformly random matching of them with the smaller side's. The draw is seeded (:data:`PAIRING_SEED`, reproducible)
and uses positions in the two arrays, so the scores must be listed in an order that does not depend on their values
(canary order, not sorted by score) — part of the ``fixed`` design's statement. If the "in" set was a uniformly random subset of its
size (assumption ``fixed``; Bernoulli inclusion and independent trials satisfy it), then *given the p unordered
pairs and the unpaired canaries*, which member of each pair is "in" is an independent fair coin: each of the
2^p labellings is the image of exactly one "in" set, and each such set produces these pairs with the same
probability. Swapping the two members of a pair replaces one record by another, so an (ε, δ)-DP mechanism under
add/remove neighbours is (2ε, (1 + e^ε)·δ)-DP with respect to each pair's coin (group privacy, Dwork & Roth 2014
Thm 2.2 for ε, and the standard two-step δ). Steinke et al.'s Theorem 3.1 then applies to the p pairs with those
parameters.

Guesses: for each pair the auditor guesses that the member with the larger score is "in" and ranks pairs by the
absolute score difference (label-free), pairs with equal differences in a seeded random order
(:data:`TIE_ORDER_SEED`) over the pair index. Every pair holds one in- and one out-canary, so that order never sees
which member is "in" (a randomised guess, as Theorem 3.1 allows); on tied null scores its false-positive rate is the
same for every seed (tests/stats/test_one_run_ties.py). On Gaussian μ = 0.5 scores rounded to integers (2,000
fair-coin canaries, medians over 50 seeds) ordering them wrong-first gave 0.34, the random order 0.43, unrounded
scores 0.47. The route guesses on the r most separated pairs and abstains on the rest. Ties within a pair
(difference 0) count as wrong guesses (against the auditor; they carry no evidence).
ε_lb = inf{ε ≥ 0 : p(2ε, (1 + e^ε)δ) > α} (:func:`privaudit.stats.epsilon_search.first_unrejected_epsilon`). The price of validity under fixed counts is the
factor 2 in ε; when the DP claim is under replace-one neighbours, ``neighbours=Neighbouring.REPLACE_ONE`` tests (ε, δ) per
pair.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from privaudit.accounting.mechanisms import Neighbouring
from privaudit.errors import InvalidParameterError
from privaudit.stats.epsilon_search import first_unrejected_epsilon
from privaudit.stats.one_run import one_run_p_value
from privaudit.stats.scores import AuditScores
from privaudit.stats.strategies import Bonferroni, Guesses, GuessGrid, GuessStrategy

PAIRING_SEED = 20231  # the pairing is random but reproducible; it never looks at the scores' values
TIE_ORDER_SEED = 20232  # order among pairs with equal score differences (never looks at which member is in)


def pair_parameters(epsilon: float, delta: float, neighbours: Neighbouring = Neighbouring.ADD_REMOVE) -> tuple[float, float]:
    """(ε, δ) of one pair's coin for an (ε, δ)-DP mechanism: (2ε, (1 + e^ε)δ) under add/remove neighbours (group
    privacy for two records, Dwork & Roth 2014, Thm 2.2), (ε, δ) under replace-one."""
    if neighbours is Neighbouring.REPLACE_ONE:
        return epsilon, delta
    return 2.0 * epsilon, min(1.0, (1.0 + math.exp(min(epsilon, 700.0))) * delta)


def paired_margins(scores: AuditScores, seed: int = PAIRING_SEED) -> tuple[np.ndarray, np.ndarray]:
    """For each random pair: |s_a − s_b| (the label-free confidence) and whether "higher score is in" is right."""
    rng = np.random.default_rng(seed)
    p = min(scores.n_in, scores.n_out)
    in_pick = rng.permutation(scores.n_in)[:p]
    out_pick = rng.permutation(scores.n_out)[:p]
    difference = scores.in_scores[in_pick] - scores.out_scores[out_pick]
    return np.abs(difference), difference > 0.0  # a tie (difference 0) is a wrong guess


def _guess_counts(strategy: GuessStrategy, p: int) -> tuple[tuple[int, ...], float]:
    """Numbers of guessed pairs, and the share of α each is tested at."""
    match strategy:
        case Guesses(k_plus=k_plus, k_minus=k_minus):  # k₊ + k₋ guesses, at most one per pair
            return (max(1, min(p, k_plus + k_minus)),), 1.0
        case Bonferroni(family=GuessGrid(fractions=fractions)):
            counts = tuple(dict.fromkeys(min(p, max(1, round(f * p))) for f in fractions))
            return counts, 1.0 / len(counts)
    raise InvalidParameterError(
        f"one-run-paired takes Guesses or Bonferroni over a GuessGrid, got {type(strategy).__name__}")


def paired_epsilon(m: int, r: int, v: int, significance: float, delta: float,
                   neighbours: Neighbouring = Neighbouring.ADD_REMOVE) -> float:
    """inf{ε ≥ 0 : p_Steinke(m, r, v; pair_parameters(ε, δ)) > α} for m pairs, r guessed, v right."""
    if r == 0 or v == 0 or one_run_p_value(m, r, v, 0.0, 0.0) > significance:
        return 0.0

    def p_value(eps: float) -> float:
        pair_eps, pair_delta = pair_parameters(eps, delta, neighbours)
        return one_run_p_value(m, r, v, pair_eps, pair_delta)

    return first_unrejected_epsilon(lambda eps: p_value(eps) <= significance,
                                    margin=lambda eps: significance - p_value(eps))


def one_run_paired_bound(
    scores: AuditScores, significance: float, delta: float, strategy: GuessStrategy,
    neighbours: Neighbouring | str = Neighbouring.ADD_REMOVE,
) -> tuple[float, dict[str, Any]]:
    """ε lower bound of the paired one-run audit under ``strategy`` (validated scores, α and δ; ``neighbours`` is
    parsed here, either spelling; see module docstring)."""
    neighbours = Neighbouring.parse(neighbours)
    margin, right = paired_margins(scores)
    p = margin.size
    key = np.random.default_rng(TIE_ORDER_SEED).permutation(p)
    order = np.lexsort((key, -margin))  # most separated first; equal margins in a seeded random order
    correct = np.concatenate([[0], np.cumsum(right[order], dtype=np.int64)])
    counts, weight = _guess_counts(strategy, p)
    share = significance * weight
    epsilons = [paired_epsilon(p, r, int(correct[r]), share, delta, neighbours) for r in counts]
    best = int(np.argmax(epsilons))
    details = {"pairs": p, "unpaired": scores.n_in + scores.n_out - 2 * p, "guesses": counts[best],
               "correct": int(correct[counts[best]]), "test_significance": share, "family_size": len(counts),
               "neighbours": neighbours.value, "pairing_seed": PAIRING_SEED, "tie_order_seed": TIE_ORDER_SEED,
               "pair_privacy": "(2ε, (1 + e^ε)δ) per pair" if neighbours is Neighbouring.ADD_REMOVE else "(ε, δ) per pair"}
    return float(epsilons[best]), details
