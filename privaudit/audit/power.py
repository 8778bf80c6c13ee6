"""Power: how likely an estimator is to refute a claimed (ε, δ) if the mechanism were N× less private.

By simulation (not analytically). For δ > 0 the alternative is a Gaussian mechanism with noise ``factor``×
smaller than the one that is exactly (ε, δ)-DP, so μ = factor·μ_claim with μ_claim from
:func:`privaudit.accounting.gaussian.gaussian_mu_for`, and its exact scores are in ~ N(μ, 1),
out ~ N(0, 1) (the likelihood-ratio statistic of the Gaussian mechanism, i.e. the strongest attack on
it). For a pure claim (δ = 0), where no Gaussian mechanism qualifies, the alternative is the Laplace
mechanism of sensitivity 1 and scale b = 1/(factor·ε) (exactly (factor·ε)-DP, Dwork & Roth 2014 Thm 3.6):
in ~ Lap(1, b), out ~ Lap(0, b), whose likelihood ratio is monotone in the output. Each trial draws fresh
scores with the audit's own sample sizes and runs the audit's own estimator and strategy; "refuted" means
ε_lb > claimed ε. With ``factor = 1`` the result estimates the false refutation rate at the claim and must
stay ≤ α (tested for both alternatives).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from scipy import stats

from privaudit.accounting.gaussian import gaussian_mu_for
from privaudit.audit.results import PowerEstimate
from privaudit.audit.scores import AuditScores, check_delta
from privaudit.errors import InvalidParameterError


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
    if not factor > 0 or not np.isfinite(factor):
        raise InvalidParameterError(f"power factor must be a positive number, got {factor}")
    if isinstance(trials, bool) or not isinstance(trials, int) or trials < 1:
        raise InvalidParameterError(f"power trials must be a positive integer, got {trials!r}")


def simulated_power(
    bound: Callable[[AuditScores], float],
    *,
    claimed_epsilon: float,
    delta: float,
    n_in: int,
    n_out: int,
    factor: float = 2.0,
    trials: int = 200,
    seed: int = 0,
) -> PowerEstimate:
    """P[ε_lb > claimed ε] under the alternative ``factor``× less private than the claim (see module docstring).

    ``mu_claimed`` / ``mu_alternative`` are the alternative's shift ÷ noise scale: μ for the Gaussian, ε for the
    Laplace mechanism.
    """
    delta = check_delta(delta)
    check_power_arguments(claimed_epsilon, factor, trials)
    pure = delta == 0
    if pure and claimed_epsilon == 0:
        raise InvalidParameterError("a pure claim of ε = 0 has no less private Laplace alternative to simulate")
    mu_claimed = float(claimed_epsilon) if pure else gaussian_mu_for(claimed_epsilon, delta)
    mu_alternative = factor * mu_claimed
    rng = np.random.default_rng(seed)
    refuted = 0
    for _ in range(trials):
        if pure:
            scale = 1.0 / mu_alternative
            scores = AuditScores.trusted(rng.laplace(1.0, scale, n_in), rng.laplace(0.0, scale, n_out))
        else:
            scores = AuditScores.trusted(rng.normal(mu_alternative, 1.0, n_in), rng.normal(0.0, 1.0, n_out))
        refuted += int(bound(scores) > claimed_epsilon)
    return PowerEstimate(
        probability=refuted / trials,
        claimed_epsilon=float(claimed_epsilon),
        delta=delta,
        factor=float(factor),
        mu_claimed=mu_claimed,
        mu_alternative=mu_alternative,
        trials=trials,
        seed=seed,
        interval=monte_carlo_interval(refuted, trials),
        method=LAPLACE_METHOD if pure else GAUSSIAN_METHOD,
    )


GAUSSIAN_METHOD = "simulation: in ~ N(factor·μ_claim, 1), out ~ N(0, 1), same sample sizes and strategy"
LAPLACE_METHOD = "simulation (pure claim): in ~ Lap(1, 1/(factor·ε)), out ~ Lap(0, 1/(factor·ε)), same sample sizes and strategy"
