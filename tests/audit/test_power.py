"""Power: the estimators find leakage that is there (deterministic Gaussian scores, 10⁴ per side)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy import stats

from privaudit.accounting.gaussian import gaussian_epsilon
from privaudit.audit import epsilon_cp, epsilon_gdp
from privaudit.audit.clopper_pearson import cp_bound
from privaudit.audit.power import simulated_power
from privaudit.audit.strategies import Bonferroni
from privaudit.errors import InvalidParameterError

from .helpers import deterministic_normal

N = 10_000
ALPHA = 0.05
DELTA = 1e-5


@pytest.mark.parametrize("mu", [0.5, 1.0, 2.0])
def test_gdp_route_recovers_most_of_the_true_epsilon(mu):
    """Scores N(μ, 1) vs N(0, 1) are exactly μ-GDP; the GDP route must certify ≥ 85% of ε(μ, δ) and no more than it."""
    true_epsilon = gaussian_epsilon(mu, DELTA)
    result = epsilon_gdp(deterministic_normal(mu, N), deterministic_normal(0.0, N), significance=ALPHA, delta=DELTA)
    assert 0.85 * true_epsilon <= result.epsilon_lb <= true_epsilon
    assert result.ceiling > true_epsilon


def _ideal_cp(mu: float, n_in: int, n_out: int) -> float:
    """CP at the *expected* counts of N(μ, 1) vs N(0, 1), same family (all order statistics: α/min(n) per test).

    Independent of the package: expected counts n_out·Φ(−t) and n_in·Φ(t − μ) on a fine grid of
    thresholds t, Clopper–Pearson upper bounds from scipy's Beta quantiles with the Bonferroni share
    α/(2·min(n_in, n_out)) per rate, both (ε, δ) inequalities, best threshold.
    """
    share = ALPHA / (2 * min(n_in, n_out))
    t = np.linspace(-6.0, 6.0 + mu, 40_001)
    fp, fn = n_out * stats.norm.sf(t), n_in * stats.norm.cdf(t - mu)
    fpr_u = stats.beta.isf(share, fp + 1, n_out - fp)
    fnr_u = stats.beta.isf(share, fn + 1, n_in - fn)
    with np.errstate(invalid="ignore", divide="ignore"):
        first = np.log((1 - DELTA - fnr_u) / fpr_u)
        second = np.log((1 - DELTA - fpr_u) / fnr_u)
    return float(np.nanmax(np.maximum(first, second)))


@pytest.mark.parametrize("mu", [0.5, 1.0, 2.0])
def test_cp_is_within_ten_percent_of_what_cp_itself_could_certify(mu):
    """"Ideal" = CP at the expected counts of the true distributions with the same threshold family (see _ideal_cp)."""
    ideal = _ideal_cp(mu, N, N)
    result = epsilon_cp(deterministic_normal(mu, N), deterministic_normal(0.0, N), significance=ALPHA, delta=DELTA)
    assert result.epsilon_lb == pytest.approx(ideal, rel=0.10)
    assert result.epsilon_lb <= gaussian_epsilon(mu, DELTA)


def test_simulated_power_grows_with_the_factor_and_gdp_beats_cp():
    """Refuting (ε = 2, δ = 1e-5) with 2000 per side: spec §5.3 — the GDP route catches a 2× noise bug, CP hardly."""

    def gdp(scores):
        from privaudit.audit.gdp import gdp_bound
        from privaudit.audit.strategies import DEFAULT_GDP_FAMILY

        return gdp_bound(scores, ALPHA, DELTA, Bonferroni(DEFAULT_GDP_FAMILY))[0]

    def cp(scores):
        return cp_bound(scores, ALPHA, DELTA, Bonferroni())[0]

    sizes = {"claimed_epsilon": 2.0, "delta": DELTA, "n_in": 2000, "n_out": 2000, "trials": 40, "seed": 1}
    gdp_1, gdp_2, gdp_3 = (simulated_power(gdp, factor=f, **sizes).probability for f in (1.0, 2.0, 3.0))
    cp_2 = simulated_power(cp, factor=2.0, **sizes).probability
    assert gdp_1 <= 0.1 < gdp_2 <= gdp_3
    assert gdp_3 == 1.0
    assert cp_2 < gdp_2


def test_pure_claims_get_a_laplace_alternative_whose_power_grows_with_the_factor():
    """δ = 0 (Upcycled-FL Thm 6.3): no Gaussian is ε-DP, so power is simulated on the Laplace mechanism."""

    def cp(scores):
        return cp_bound(scores, ALPHA, 0.0, Bonferroni())[0]

    sizes = {"claimed_epsilon": 1.0, "delta": 0.0, "n_in": 2000, "n_out": 2000, "trials": 40, "seed": 2}
    p1, p3 = (simulated_power(cp, factor=f, **sizes) for f in (1.0, 3.0))
    assert p1.probability <= 0.1 < p3.probability
    assert "Lap" in p3.method and p3.mu_alternative == pytest.approx(3.0)
    result = epsilon_cp(np.arange(5.0), np.arange(5.0) - 1, delta=0.0, claimed_epsilon=2.0, power_trials=5)
    assert result.power is not None and result.power.delta == 0.0


def test_power_is_reported_with_the_bound_and_serialises():
    rng = np.random.default_rng(0)
    result = epsilon_gdp(rng.normal(1.0, 1, 1000), rng.normal(0, 1, 1000), claimed_epsilon=1.4, power_factor=2.0, power_trials=20, power_seed=5)
    power = result.power
    assert power is not None and power.trials == 20 and power.seed == 5 and power.factor == 2.0
    assert power.mu_alternative == pytest.approx(2 * power.mu_claimed)
    assert power.interval[0] <= power.probability <= power.interval[1]
    assert "simulation" in power.method
    json.dumps(result.to_dict())
    assert epsilon_gdp(rng.normal(1.0, 1, 100), rng.normal(0, 1, 100)).power is None


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"claimed_epsilon": -1.0}, "claimed_epsilon"),
        ({"claimed_epsilon": 1.0, "power_factor": 0.0}, "factor"),
        ({"claimed_epsilon": 1.0, "power_trials": 0}, "trials"),
        ({"claimed_epsilon": 0.0, "delta": 0.0}, "pure claim of ε = 0"),
    ],
)
def test_power_arguments_are_validated(options, message):
    with pytest.raises(InvalidParameterError, match=message):
        epsilon_cp([1.0, 2.0, 3.0], [0.0, 1.0, 2.0], **options)
