"""Composing per-round white-box GDP observations: μ_total = √(Σ μ_t²), and when that is allowed.

With white-box access to every round (the server-observer threat model of FL), each round t gives its own
in/out observations of the canary direction and hence its own μ_t lower bound (Nasr et al. 2023, "Tight
auditing of differentially private machine learning": tight audits from two training runs; spec §2.4).
Gaussian trade-off curves compose exactly,
G_{μ₁} ⊗ … ⊗ G_{μ_T} = G_{√(Σ μ_t²)} (Dong, Roth & Su 2022, Cor. 3.3), so if every round *is* a Gaussian
mechanism whose μ_t is at least its bound, the whole run is exactly √(Σ μ_t²)-GDP with μ_total at least
√(Σ μ_t,lb²). Each round's bound is computed at α/T, so all hold together with probability ≥ 1 − α.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from privaudit.accounting.gaussian import gaussian_mu_for
from privaudit.audit.ceiling import ceiling
from privaudit.audit.gdp import gdp_bound, mu_to_epsilon
from privaudit.audit.power import monte_carlo_interval
from privaudit.audit.results import LowerBound, PowerEstimate
from privaudit.audit.scores import AuditScores, check_positive_delta, check_significance
from privaudit.audit.strategies import DEFAULT_GDP_FAMILY, Bonferroni, ThresholdStrategy
from privaudit.errors import InvalidParameterError

COMPOSITION_VALID_WHEN = (
    "valid when every round is a Gaussian mechanism on the canary's contribution with full participation "
    "(no record or client subsampling) and fresh, independent noise each round, and each per-round μ bound "
    "was computed at α/T"
)
COMPOSITION_INVALID_WHEN = (
    "not valid when records or clients are subsampled (a round's curve is then a Gaussian mixture, not "
    "Gaussian; its composition is only approximately GDP by the CLT, μ ≈ q·√(T(e^{μ₀²} − 1))), when rounds "
    "share or correlate their noise (tree aggregation / DP-FTRL, matrix mechanisms), or when the per-round "
    "bounds were computed at the full α"
)


@dataclass(frozen=True)
class GdpComposition:
    """μ_total = √(Σ μ_t²) together with the statement of when it may be used."""

    mu_total: float
    per_round: tuple[float, ...]
    valid_when: str = COMPOSITION_VALID_WHEN
    invalid_when: str = COMPOSITION_INVALID_WHEN

    def to_dict(self) -> dict[str, Any]:
        return {
            "mu_total": self.mu_total,
            "per_round": list(self.per_round),
            "valid_when": self.valid_when,
            "invalid_when": self.invalid_when,
        }


def compose_mu(mus: Sequence[float]) -> GdpComposition:
    """√(Σ μ_t²) of per-round μ values (Dong, Roth & Su 2022, Cor. 3.3), with its validity statement."""
    values = tuple(float(mu) for mu in mus)
    if not values:
        raise InvalidParameterError("compose_mu needs at least one per-round μ")
    if not all(math.isfinite(mu) and mu >= 0 for mu in values):
        raise InvalidParameterError(f"per-round μ values must be finite and non-negative, got {values}")
    return GdpComposition(math.sqrt(math.fsum(mu * mu for mu in values)), values)


def gdp_rounds_lower_bound(
    rounds: Sequence[tuple[object, object]],
    *,
    significance: float = 0.05,
    delta: float = 1e-5,
    strategy: ThresholdStrategy | None = None,
    claimed_epsilon: float | None = None,
    power_factor: float = 2.0,
    power_trials: int = 100,
    power_seed: int = 0,
) -> LowerBound:
    """ε lower bound of a whole run from per-round (in_scores, out_scores), each round audited at α/T.

    The composed μ is converted to ε at δ. The result's ``details["composition"]`` carries the validity
    statement, which a report must show with the number. With a ``claimed_epsilon`` the power is simulated
    for T Gaussian rounds of equal strength, μ_t = factor·μ_claim/√T (same sample sizes per round).
    """
    if not rounds:
        raise InvalidParameterError("gdp_rounds_lower_bound needs at least one round of scores")
    significance = check_significance(significance)
    delta = check_positive_delta(delta, "gdp")
    strategy = Bonferroni(DEFAULT_GDP_FAMILY) if strategy is None else strategy
    per_round_alpha = significance / len(rounds)
    mus: list[float] = []
    ceilings: list[float] = []
    sizes: list[tuple[int, int]] = []

    def round_mu(scores: AuditScores, chosen: ThresholdStrategy = strategy) -> float:
        return gdp_bound(scores, per_round_alpha, delta, chosen)[1]["mu_lb"]

    for in_scores, out_scores in rounds:
        scores = AuditScores.of(in_scores, out_scores)
        mus.append(round_mu(scores))
        ceilings.append(ceiling(round_mu, scores.n_in, scores.n_out, strategy, stratified_splits=True))
        sizes.append((scores.n_in, scores.n_out))
    composition = compose_mu(mus)
    ceiling_mu = compose_mu(ceilings).mu_total
    power = None
    if claimed_epsilon is not None:
        power = _composed_power(
            round_mu, sizes, claimed_epsilon, delta, power_factor, power_trials, power_seed
        )
    return LowerBound(
        estimator="gdp-composed",
        epsilon_lb=mu_to_epsilon(composition.mu_total, delta),
        significance=significance,
        delta=delta,
        strategy=strategy,
        ceiling=mu_to_epsilon(ceiling_mu, delta),
        power=power,
        n_in=sum(n for n, _ in sizes),
        n_out=sum(n for _, n in sizes),
        details={
            "rounds": len(rounds),
            "per_round_significance": per_round_alpha,
            "mu_lb": composition.mu_total,
            "ceiling_mu": ceiling_mu,
            "composition": composition.to_dict(),
            "reference": "Nasr et al. 2023 (tight auditing, white-box composition); Dong, Roth & Su 2022 Cor. 3.3",
        },
    )


def _composed_power(
    round_mu,
    sizes: Sequence[tuple[int, int]],
    claimed_epsilon: float,
    delta: float,
    factor: float,
    trials: int,
    seed: int,
) -> PowerEstimate:
    if not (math.isfinite(claimed_epsilon) and claimed_epsilon >= 0):
        raise InvalidParameterError(f"claimed_epsilon must be a finite non-negative number, got {claimed_epsilon}")
    if not (math.isfinite(factor) and factor > 0):
        raise InvalidParameterError(f"power factor must be a positive number, got {factor}")
    if isinstance(trials, bool) or not isinstance(trials, int) or trials < 1:
        raise InvalidParameterError(f"power trials must be a positive integer, got {trials!r}")
    mu_claimed = gaussian_mu_for(claimed_epsilon, delta)
    mu_round = factor * mu_claimed / math.sqrt(len(sizes))
    rng = np.random.default_rng(seed)
    refuted = 0
    for _ in range(trials):
        mus = [
            round_mu(AuditScores.trusted(rng.normal(mu_round, 1.0, n_in), rng.normal(0.0, 1.0, n_out)))
            for n_in, n_out in sizes
        ]
        refuted += int(mu_to_epsilon(compose_mu(mus).mu_total, delta) > claimed_epsilon)
    return PowerEstimate(
        probability=refuted / trials,
        claimed_epsilon=float(claimed_epsilon),
        delta=delta,
        factor=float(factor),
        mu_claimed=mu_claimed,
        mu_alternative=factor * mu_claimed,
        trials=trials,
        seed=seed,
        interval=monte_carlo_interval(refuted, trials),
        method="simulation: T Gaussian rounds, in ~ N(factor·μ_claim/√T, 1), out ~ N(0, 1), per-round sizes",
    )
