"""Power from the attack that ran: how likely the audit is to refute the claim if the mechanism were less private.

A power figure earns "consistent" only if it describes *this* attack. So the alternative is built from the
observed scores, not from an idealised attack: "the mechanism ``factor``× less private" is modelled as the
audited mechanism run k times, attacked by summing this attack's scores over the k runs. In each Monte-Carlo
trial every in-score is the sum of k in-scores drawn with replacement from the observed ones, and every out-score
the sum of k observed out-scores (same sample sizes, same estimator, same strategy); "refuted" means
ε_lb > claimed ε.

k is the number of compositions that makes a mechanism ``factor``× less private:

* δ > 0: k = ⌊factor²⌋. k-fold composition of a μ-GDP mechanism is √k·μ-GDP (Dong, Roth & Su 2022 Cor. 3.3), and
  summing k independent Gaussian-shift scores multiplies their separation by √k exactly, so an attack that is
  optimal on the audited mechanism stays optimal on the alternative; ε at fixed δ grows about as fast as μ.
* δ = 0: k = ⌊factor⌋. k-fold composition of an ε-DP mechanism is kε-DP, tight for randomized response.

Rounding down keeps the alternative no further from the claim than ``factor`` asks, so the power is not
overstated. Consequences that matter for verdicts: an attack whose in- and out-scores have the same distribution
(no signal) gives sums with the same distribution, so its power is the estimator's false-refutation rate, ≤ α —
such an attack can never make a claim "consistent". With ``factor = 1`` (k = 1) the figure is the bootstrap
probability that a re-run of this attack at these sample sizes refutes the claim.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
from scipy import stats

from privaudit.errors import InvalidParameterError
from privaudit.stats.estimates import PowerEstimate
from privaudit.stats.scores import AuditScores, check_delta

METHOD = ("resampled from the observed scores: each score the sum of k draws (k = {k} compositions of the audited "
          "mechanism, {why}); same sample sizes, estimator and strategy")


def monte_carlo_interval(successes: int, trials: int, confidence: float = 0.95) -> tuple[float, float]:
    """Two-sided Clopper–Pearson interval for a Monte-Carlo proportion."""
    tail = (1.0 - confidence) / 2.0
    low = 0.0 if successes == 0 else float(stats.beta.ppf(tail, successes, trials - successes + 1))
    high = 1.0 if successes == trials else float(stats.beta.ppf(1.0 - tail, successes + 1, trials - successes))
    return low, high


def check_power_arguments(claimed_epsilon: float, factor: float, trials: int) -> None:
    """The claim, the alternative's factor and the Monte-Carlo trials of a power simulation, or one clear error."""
    if not claimed_epsilon >= 0 or not np.isfinite(claimed_epsilon):
        raise InvalidParameterError(f"claimed_epsilon must be a finite non-negative number, got {claimed_epsilon}")
    if not factor >= 1 or not np.isfinite(factor):
        raise InvalidParameterError(f"power factor must be a number ≥ 1 (how many times less private), got {factor}")
    if isinstance(trials, bool) or not isinstance(trials, int) or trials < 1:
        raise InvalidParameterError(f"power trials must be a positive integer, got {trials!r}")


def compositions_for(factor: float, delta: float) -> int:
    """k: ⌊factor²⌋ compositions for δ > 0 (GDP scaling), ⌊factor⌋ for a pure claim (δ = 0); at least 1."""
    k = factor * factor if delta > 0 else factor
    return max(1, math.floor(k + 1e-9))


def _composed(rng: np.random.Generator, observed: np.ndarray, size: int, k: int) -> np.ndarray:
    draws = rng.choice(observed, size=(size, k), replace=True)
    return draws.sum(axis=1)


def rounds_power(
    bound: Callable[[Sequence[AuditScores]], float],
    rounds: Sequence[tuple[np.ndarray, np.ndarray]],
    *,
    claimed_epsilon: float,
    delta: float,
    factor: float = 2.0,
    trials: int = 200,
    seed: int = 0,
    method_suffix: str = "",
) -> PowerEstimate:
    """P[bound(resampled rounds) > claimed ε] with every round's scores resampled as in the module docstring."""
    delta = check_delta(delta)
    check_power_arguments(claimed_epsilon, factor, trials)
    k = compositions_for(factor, delta)
    arrays = [(np.asarray(i, dtype=np.float64), np.asarray(o, dtype=np.float64)) for i, o in rounds]
    if not arrays:
        raise InvalidParameterError("power needs at least one round of observed scores")
    rng = np.random.default_rng(seed)
    refuted = 0
    for _ in range(trials):
        resampled = [AuditScores.trusted(_composed(rng, i, i.size, k), _composed(rng, o, o.size, k)) for i, o in arrays]
        refuted += int(bound(resampled) > claimed_epsilon)
    why = "ε-DP composes to kε" if delta == 0 else "√k·μ under GDP composition"
    return PowerEstimate(
        probability=refuted / trials,
        claimed_epsilon=float(claimed_epsilon),
        delta=delta,
        factor=float(factor),
        compositions=k,
        trials=trials,
        seed=seed,
        interval=monte_carlo_interval(refuted, trials),
        method=METHOD.format(k=k, why=why) + method_suffix,
    )


def attack_power(
    bound: Callable[[AuditScores], float],
    in_scores: np.ndarray,
    out_scores: np.ndarray,
    *,
    claimed_epsilon: float,
    delta: float,
    factor: float = 2.0,
    trials: int = 200,
    seed: int = 0,
) -> PowerEstimate:
    """P[ε_lb > claimed ε] of this attack against a mechanism ``factor``× less private (module docstring)."""
    return rounds_power(lambda rounds: bound(rounds[0]), [(in_scores, out_scores)], claimed_epsilon=claimed_epsilon,
                        delta=delta, factor=factor, trials=trials, seed=seed)
