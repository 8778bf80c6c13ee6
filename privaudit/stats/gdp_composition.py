"""Composing per-round white-box GDP observations: μ_total = √(Σ μ_t²), and when that is allowed.

With white-box access to every round (the server-observer threat model of FL), each round t gives its own
in/out observations of the canary direction and hence its own μ_t lower bound (Nasr et al. 2023, "Tight
auditing of differentially private machine learning", USENIX Security 2023: tight audits from two training runs).
Gaussian trade-off curves compose exactly,
G_{μ₁} ⊗ … ⊗ G_{μ_T} = G_{√(Σ μ_t²)} (Dong, Roth & Su 2022, Cor. 3.3), so if every round *is* a Gaussian
mechanism whose μ_t is at least its bound, the whole run is exactly √(Σ μ_t²)-GDP with μ_total at least
√(Σ μ_t,lb²). Each round's bound is computed at α/T, so all hold together with probability ≥ 1 − α.

Power (with a claimed ε) is calibrated to the claim (:mod:`privaudit.stats.power`): the alternative is a run of
T Gaussian rounds whose total is μ_alt, ε(μ_alt, δ) = factor × claimed ε, attacked optimally in every round, with
each round's observed sample sizes. For ``gdp-composed`` the rounds are equal (μ_alt/√T each), the least
favourable split when a round's bound falls short of its μ_t by a slack set by its sample sizes
(:func:`privaudit.stats.power.canonical_rounds_power`). For ``gdp-best-round`` equal rounds are *not* always the
hardest case (the maximum of T noisy per-round bounds can exceed the claim more often than one strong round's
bound), so its power is a lower bound that holds for every split: Σ μ_t² = μ_alt² forces some round to have
μ_t ≥ μ_alt/√T, and that round alone refutes the claim with at least the power of a single round at μ_alt/√T
(non-decreasing in μ_t); the figure is the smallest such single-round power over the rounds' distinct sample sizes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from privaudit.errors import InvalidParameterError
from privaudit.stats.assumptions import Design, MechanismFamily
from privaudit.stats.ceiling import ceiling
from privaudit.stats.claim_power import NO_CLAIM, ClaimPower
from privaudit.stats.estimates import LowerBound, PowerEstimate
from privaudit.stats.gdp import gdp_bound, mu_to_epsilon
from privaudit.stats.power import (
    alternative_mu,
    canonical_power,
    canonical_rounds_power,
    declared,
    power_unavailable,
)
from privaudit.stats.routes import ROUTES
from privaudit.stats.scores import AuditScores, check_positive_delta, check_significance
from privaudit.stats.strategies import DEFAULT_GDP_FAMILY, Bonferroni, ThresholdStrategy

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


@dataclass(frozen=True)
class _PerRound:
    """Each round's μ lower bound at α/T, its ceiling and sample sizes, and the per-round statistic itself."""

    significance: float
    delta: float
    strategy: ThresholdStrategy
    per_round_alpha: float
    mus: list[float]
    ceilings: list[float]
    sizes: list[tuple[int, int]]
    round_mu: Any  # AuditScores -> μ lower bound at α/T


def _per_round(rounds: Sequence[tuple[object, object]], significance: float, delta: float,
               strategy: ThresholdStrategy | None, caller: str) -> _PerRound:
    if not rounds:
        raise InvalidParameterError(f"{caller} needs at least one round of scores")
    significance = check_significance(significance)
    delta = check_positive_delta(delta, "gdp")
    strategy = Bonferroni(DEFAULT_GDP_FAMILY) if strategy is None else strategy
    per_round_alpha = significance / len(rounds)

    def round_mu(scores: AuditScores, chosen: ThresholdStrategy = strategy) -> float:
        return gdp_bound(scores, per_round_alpha, delta, chosen)[1]["mu_lb"]

    mus, ceilings, sizes = [], [], []
    for in_scores, out_scores in rounds:
        scores = AuditScores.of(in_scores, out_scores)
        mus.append(round_mu(scores))
        ceilings.append(ceiling(round_mu, scores.n_in, scores.n_out, strategy, stratified_splits=True))
        sizes.append((scores.n_in, scores.n_out))
    return _PerRound(significance, delta, strategy, per_round_alpha, mus, ceilings, sizes, round_mu)


def _unavailable(per: _PerRound, claim: ClaimPower) -> str | None:
    """Why per-round GDP bounds have no power for ``claim`` (``None``: they have; the request is checked first)."""
    claim.request(per.delta)
    return power_unavailable(MechanismFamily.GAUSSIAN, ROUTES["gdp"], per.strategy, per.delta, claim.factor)


def _composed_power(per: _PerRound, ask: ClaimPower) -> PowerEstimate:
    """P[√(Σ μ_t,lb²) → ε > claim] for T equal Gaussian rounds of total μ_alt (module docstring)."""

    def bound(rounds: Sequence[AuditScores]) -> float:
        return mu_to_epsilon(compose_mu([per.round_mu(scores) for scores in rounds]).mu_total, per.delta)

    return canonical_rounds_power(bound, per.sizes, ask.request(per.delta), key=("gdp-composed", per.strategy, per.per_round_alpha),
                                  method_suffix="; bound: gdp-composed")


def _best_round_power(per: _PerRound, ask: ClaimPower) -> PowerEstimate:
    """The smallest single-round power at μ_alt/√T over the rounds' distinct sizes (module docstring)."""
    rounds = len(per.sizes)
    per_round_mu = alternative_mu(ask.claimed_epsilon, per.delta, ask.factor) / math.sqrt(rounds)

    def bound(scores: AuditScores) -> float:
        return mu_to_epsilon(per.round_mu(scores), per.delta)

    request = ask.request(per.delta)
    figures = [canonical_power(bound, request, sizes=size, design=Design.TRIALS,
                               key=("gdp-best-round", per.strategy, per.per_round_alpha), mu=per_round_mu, rounds=rounds,
                               method_suffix=(f"; bound: gdp-best-round, as the power of the one round that must have "
                                              f"μ ≥ μ_alt/√T = {per_round_mu:.4g} (smallest over the rounds' sizes)"))
               for size in dict.fromkeys(per.sizes)]
    return min(figures, key=lambda p: p.lower)


def _bound(estimator: str, per: _PerRound, mu: float, ceiling_mu: float, power: PowerEstimate | None,
           ask: ClaimPower, no_power: str | None, details: dict[str, Any]) -> LowerBound:
    return LowerBound(
        estimator=estimator,
        epsilon_lb=mu_to_epsilon(mu, per.delta),
        significance=per.significance,
        delta=per.delta,
        strategy=per.strategy,
        ceiling=mu_to_epsilon(ceiling_mu, per.delta),
        power=power,
        n_in=sum(n for n, _ in per.sizes),
        n_out=sum(n for _, n in per.sizes),
        details={"rounds": len(per.sizes), "per_round_significance": per.per_round_alpha, "mu_lb": mu,
                 "ceiling_mu": ceiling_mu, **details},
        mechanism=MechanismFamily.GAUSSIAN.value,
        design=Design.TRIALS.value,
        attack_optimal=bool(ask.attack_optimal),
        no_power_reason=no_power,
    )


def _power(per: _PerRound, ask: ClaimPower, compute) -> tuple[PowerEstimate | None, str | None]:
    """(power, why none) for a claimed ε; (None, None) without one."""
    if ask.claimed_epsilon is None:
        return None, None
    no_power = _unavailable(per, ask)
    if no_power is not None:
        return None, no_power
    return declared(compute(per, ask), ask.attack_optimal), None


def gdp_rounds_lower_bound(
    rounds: Sequence[tuple[object, object]],
    *,
    significance: float = 0.05,
    delta: float = 1e-5,
    strategy: ThresholdStrategy | None = None,
    claim: ClaimPower = NO_CLAIM,
) -> LowerBound:
    """ε lower bound of a whole run from per-round (in_scores, out_scores), each round audited at α/T.

    The composed μ is converted to ε at δ. The result's ``details["composition"]`` carries the validity
    statement, which a report must show with the number. With a ``claim`` the power is that of an
    optimal attack on T equal Gaussian rounds of total μ_alt (module docstring); its ``attack_optimal`` records the
    auditor's declaration that the per-round scores are optimal for the (Gaussian) rounds.
    """
    per = _per_round(rounds, significance, delta, strategy, "gdp_rounds_lower_bound")
    composition = compose_mu(per.mus)
    power, no_power = _power(per, claim, _composed_power)
    return _bound("gdp-composed", per, composition.mu_total, compose_mu(per.ceilings).mu_total, power, claim, no_power, {
        "composition": composition.to_dict(),
        "reference": "Nasr et al. 2023 (tight auditing, white-box composition); Dong, Roth & Su 2022 Cor. 3.3",
    })


BEST_ROUND_VALIDITY = (
    "valid without any composition assumption: each round's bound is computed at α/T (Bonferroni over the T rounds), "
    "and any one round's release is a post-processing of the whole transcript, so its ε lower-bounds the run's"
)


def gdp_best_round_lower_bound(
    rounds: Sequence[tuple[object, object]],
    *,
    significance: float = 0.05,
    delta: float = 1e-5,
    strategy: ThresholdStrategy | None = None,
    claim: ClaimPower = NO_CLAIM,
) -> LowerBound:
    """ε lower bound from the single most revealing round: max_t μ_t,lb with every μ_t,lb at α/T.

    Each round's bound is the GDP route of Nasr et al. 2023 (μ ≥ Φ⁻¹(1 − FPR⁺) − Φ⁻¹(FNR⁺), Dong, Roth & Su 2022
    trade-off T_μ; :func:`privaudit.stats.gdp.gdp_bound`). With every round at α/T, all T bounds hold together with
    probability ≥ 1 − α (Bonferroni), so their maximum does too; a round's release is a post-processing of the whole
    run's transcript, so the run is at least max_t μ_t,lb-GDP with no assumption on how rounds compose. Converted to
    ε at δ (Dong, Roth & Su 2022, Cor. 2.13). With a ``claim`` the power is a lower bound on that of an
    optimal attack on any run of T Gaussian rounds of total μ_alt (module docstring).
    """
    per = _per_round(rounds, significance, delta, strategy, "gdp_best_round_lower_bound")
    best = int(np.argmax(per.mus))
    power, no_power = _power(per, claim, _best_round_power)
    return _bound("gdp-best-round", per, per.mus[best], max(per.ceilings), power, claim, no_power, {
        "best_round_index": best,
        "per_round_mu_lb": per.mus,
        "per_round_ceiling_mu": per.ceilings,
        "validity": BEST_ROUND_VALIDITY,
        "reference": "Nasr et al. 2023 (GDP estimate per step); Dong, Roth & Su 2022 Cor. 2.13; Bonferroni over rounds",
    })
