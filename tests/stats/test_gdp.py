import json

import numpy as np
import pytest
from scipy import stats

from privaudit.accounting.gaussian import gaussian_mu_for
from privaudit.audit import (
    ClaimPower,
    Explicit,
    RouteOptions,
    compose_mu,
    epsilon_gdp,
    gdp_best_round_lower_bound,
    gdp_rounds_lower_bound,
)
from privaudit.errors import InvalidParameterError
from privaudit.stats.gdp import gdp_bound, mu_from_rate_bounds, mu_to_epsilon
from privaudit.stats.scores import AuditScores
from privaudit.stats.strategies import DEFAULT_GDP_FAMILY, Bonferroni
from tests.audit.helpers import deterministic_normal


@pytest.mark.parametrize(("mu", "epsilon", "digits"), [(0.5, 1.99, 2), (1.0, 4.38, 2), (2.0, 10.0, 1)])
def test_mu_to_epsilon_reference_values(mu, epsilon, digits):
    # δ(ε; μ) of Dong, Roth & Su 2022, Cor. 2.13, solved independently at δ = 1e-5
    assert round(mu_to_epsilon(mu, 1e-5), digits) == epsilon


def test_mu_to_epsilon_is_zero_without_evidence_and_inverts_the_claim_mu():
    assert mu_to_epsilon(0.0, 1e-5) == 0.0
    assert mu_to_epsilon(-1.0, 1e-5) == 0.0
    assert round(gaussian_mu_for(1.4, 1e-3), 3) == 0.515  # Upcycled-FL's claim (1.4, 1e-3) ↔ μ = 0.515
    assert mu_to_epsilon(gaussian_mu_for(1.4, 1e-3), 1e-3) == pytest.approx(1.4, rel=1e-6)


def test_mu_from_rate_bounds_is_symmetric_and_minus_infinity_at_full_rate():
    a = mu_from_rate_bounds(np.array([0.1, 0.3]), np.array([0.3, 0.1]))
    assert a[0] == pytest.approx(a[1])
    assert a[0] == pytest.approx(stats.norm.ppf(0.9) - stats.norm.ppf(0.3))
    assert np.isneginf(mu_from_rate_bounds(np.array([1.0]), np.array([0.2])))[0]


@pytest.mark.parametrize("threshold", [0.0, 0.5, 1.2])
def test_explicit_threshold_mu_by_hand(threshold):
    alpha, delta = 0.05, 1e-5
    in_scores, out_scores = deterministic_normal(1.0, 3000), deterministic_normal(0.0, 2000)
    fp, fn = int(np.sum(out_scores >= threshold)), int(np.sum(in_scores < threshold))
    fpr_u = stats.beta.ppf(1 - alpha / 2, fp + 1, 2000 - fp)
    fnr_u = stats.beta.ppf(1 - alpha / 2, fn + 1, 3000 - fn)
    mu = stats.norm.ppf(1 - fpr_u) - stats.norm.ppf(fnr_u)
    epsilon, details = gdp_bound(AuditScores.of(in_scores, out_scores), alpha, delta, Explicit(threshold))
    assert details["mu_lb"] == pytest.approx(mu, rel=1e-9)
    assert epsilon == pytest.approx(mu_to_epsilon(mu, delta), rel=1e-9)


def test_low_in_scores_are_never_evidence_one_sided():
    """Regression for the google-deepmind/jax_privacy ≤ 2.0.0 bug: |μ| of a negative forward value is not a bound."""
    low_in, out = deterministic_normal(-3.0, 2000), deterministic_normal(0.0, 2000)
    one_sided = epsilon_gdp(low_in, out, mechanism="gaussian")
    assert one_sided.epsilon_lb == 0.0 and one_sided.details["mu_lb"] == 0.0
    two_sided = epsilon_gdp(low_in, out, mechanism="gaussian", route_options=RouteOptions(two_sided=True))
    assert two_sided.details["direction"] == "in-scores low"
    assert two_sided.epsilon_lb > 5.0


def test_default_family_spends_half_of_alpha_at_the_median_out_score():
    in_scores, out_scores = deterministic_normal(0.5, 4000), deterministic_normal(0.0, 4000)
    _, details = gdp_bound(AuditScores.of(in_scores, out_scores), 0.05, 1e-5, Bonferroni(DEFAULT_GDP_FAMILY))
    assert details["fp"] == 2000 and details["test_significance"] == pytest.approx(0.025)


def test_gdp_needs_positive_delta():
    with pytest.raises(InvalidParameterError, match="delta > 0"):
        epsilon_gdp([1.0, 2.0], [0.0, 1.0], mechanism="gaussian", delta=0.0)


def test_compose_mu_and_its_validity_statement():
    composition = compose_mu([3.0, 4.0])
    assert composition.mu_total == pytest.approx(5.0)
    text = composition.valid_when + composition.invalid_when
    for needle in ("Gaussian", "independent noise", "subsampled", "correlate", "α/T"):
        assert needle in text
    json.dumps(composition.to_dict())
    with pytest.raises(InvalidParameterError):
        compose_mu([])
    with pytest.raises(InvalidParameterError):
        compose_mu([1.0, -0.1])


def test_single_round_composition_equals_the_gdp_route():
    in_scores, out_scores = deterministic_normal(1.0, 2000), deterministic_normal(0.0, 2000)
    composed = gdp_rounds_lower_bound([(in_scores, out_scores)])
    direct = epsilon_gdp(in_scores, out_scores, mechanism="gaussian")
    assert composed.epsilon_lb == pytest.approx(direct.epsilon_lb)
    assert composed.ceiling == pytest.approx(direct.ceiling)


def test_rounds_are_audited_at_alpha_over_t_and_compose():
    rounds = [(deterministic_normal(0.4, 1500), deterministic_normal(0.0, 1500)) for _ in range(4)]
    composed = gdp_rounds_lower_bound(rounds, significance=0.05, claim=ClaimPower(claimed_epsilon=1.0, trials=5))
    assert composed.details["per_round_significance"] == pytest.approx(0.0125)
    per_round = composed.details["composition"]["per_round"]
    single = gdp_bound(AuditScores.of(*rounds[0]), 0.0125, 1e-5, Bonferroni(DEFAULT_GDP_FAMILY))[1]["mu_lb"]
    assert per_round == pytest.approx([single] * 4)
    assert composed.details["mu_lb"] == pytest.approx(2 * single)
    assert 0.0 <= composed.power.probability <= 1.0
    json.dumps(composed.to_dict())


def test_the_rounds_power_is_calibrated_to_the_claim_not_the_observed_rounds():
    """Issue 24: the composed and best-round power come from T Gaussian rounds of total μ_alt (ε(μ_alt) = 2 × claim),
    never from the observed per-round scores; the best-round figure is that of one round at μ_alt/√T."""
    from privaudit.stats.assumptions import Design
    from privaudit.stats.power import PowerRequest, canonical_power, clear_power_cache

    clear_power_cache()
    leaky = [(deterministic_normal(2.0, 400), deterministic_normal(0.0, 400)) for _ in range(4)]
    silent = [(deterministic_normal(0.0, 400), deterministic_normal(0.0, 400)) for _ in range(4)]
    options = {"significance": 0.05, "claim": ClaimPower(3.0, trials=40), "delta": 1e-5}
    composed = gdp_rounds_lower_bound(leaky, **options)
    clear_power_cache()
    assert gdp_rounds_lower_bound(silent, **options).power == composed.power
    assert composed.power.rounds == 4 and composed.power.alternative_mu == pytest.approx(gaussian_mu_for(6.0, 1e-5))
    best = gdp_best_round_lower_bound(leaky, **options)
    single = canonical_power(lambda s: mu_to_epsilon(gdp_bound(s, 0.0125, 1e-5, Bonferroni(DEFAULT_GDP_FAMILY))[1]["mu_lb"],
                                                     1e-5),
                             PowerRequest(3.0, 1e-5, trials=40), sizes=(400, 400), design=Design.TRIALS,
                             mu=best.power.alternative_mu / 2)
    assert best.power.probability == single.probability and best.power.lower == single.lower
    # composing the rounds' evidence is at least as powerful as the one round that must carry μ_alt/√T
    assert composed.power.probability >= best.power.probability
