"""Power: the estimators find leakage that is there (deterministic Gaussian scores, 10⁴ per side)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy import stats

from privaudit.accounting.gaussian import gaussian_epsilon, gaussian_mu_for
from privaudit.audit import epsilon_cp, epsilon_gdp
from privaudit.audit.verdict import Verdict, decide
from privaudit.errors import InvalidParameterError
from privaudit.stats.clopper_pearson import cp_bound
from privaudit.stats.power import attack_power
from privaudit.stats.strategies import Bonferroni
from tests.audit.helpers import binomial_upper_tolerance, deterministic_normal

N = 10_000
ALPHA = 0.05
DELTA = 1e-5


@pytest.mark.parametrize("mu", [0.5, 1.0, 2.0])
def test_gdp_route_recovers_most_of_the_true_epsilon(mu):
    """Scores N(μ, 1) vs N(0, 1) are exactly μ-GDP; the GDP route must certify ≥ 85% of ε(μ, δ) and no more than it."""
    true_epsilon = gaussian_epsilon(mu, DELTA)
    result = epsilon_gdp(deterministic_normal(mu, N), deterministic_normal(0.0, N), mechanism="gaussian", significance=ALPHA,
                         delta=DELTA)
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


def test_power_grows_with_the_factor_and_gdp_beats_cp():
    """Refuting (ε = 2, δ = 1e-5) from an attack whose scores sit at the claim: resampled k = ⌊factor²⌋ compositions."""

    def gdp(scores):
        from privaudit.stats.gdp import gdp_bound
        from privaudit.stats.strategies import DEFAULT_GDP_FAMILY

        return gdp_bound(scores, ALPHA, DELTA, Bonferroni(DEFAULT_GDP_FAMILY))[0]

    def cp(scores):
        return cp_bound(scores, ALPHA, DELTA, Bonferroni())[0]

    rng = np.random.default_rng(3)
    mu = gaussian_mu_for(2.0, DELTA)
    observed = (rng.normal(mu, 1.0, 2000), rng.normal(0.0, 1.0, 2000))
    sizes = {"claimed_epsilon": 2.0, "delta": DELTA, "trials": 40, "seed": 1}
    gdp_1, gdp_2, gdp_3 = (attack_power(gdp, *observed, factor=f, **sizes) for f in (1.0, 2.0, 3.0))
    cp_2 = attack_power(cp, *observed, factor=2.0, **sizes).probability
    assert (gdp_1.compositions, gdp_2.compositions, gdp_3.compositions) == (1, 4, 9)
    assert gdp_1.probability <= 0.2 < gdp_2.probability <= gdp_3.probability
    assert gdp_3.probability == 1.0
    assert cp_2 < gdp_2.probability


@pytest.mark.parametrize("shape", ["normal", "integers", "constant"])
def test_an_attack_without_signal_has_no_power_and_is_never_consistent(shape):
    """Identical in/out distributions: sums of k draws stay identical, so power is the false-refutation rate (≤ α)."""
    rng = np.random.default_rng(7)
    draw = {"normal": lambda n: rng.normal(size=n), "integers": lambda n: rng.integers(0, 3, n).astype(float),
            "constant": lambda n: np.zeros(n)}[shape]
    result = epsilon_cp(draw(2000), draw(2000), delta=DELTA, claimed_epsilon=0.5, power_factor=3.0, power_trials=60,
                        significance=ALPHA)
    assert result.power.compositions == 9
    assert result.power.probability <= binomial_upper_tolerance(ALPHA, 60)
    assert decide(0.5, DELTA, [result]).verdict is not Verdict.CONSISTENT


def test_pure_claims_compose_the_attack_factor_times():
    """δ = 0 (Upcycled-FL Thm 6.3): ε-DP composes to kε, so the alternative is k = ⌊factor⌋ runs."""

    def cp(scores):
        return cp_bound(scores, ALPHA, 0.0, Bonferroni())[0]

    rng = np.random.default_rng(2)
    observed = (rng.laplace(1.0, 1.0, 2000), rng.laplace(0.0, 1.0, 2000))  # exactly 1-DP
    sizes = {"claimed_epsilon": 1.0, "delta": 0.0, "trials": 40, "seed": 2}
    p1, p3 = (attack_power(cp, *observed, factor=f, **sizes) for f in (1.0, 3.0))
    assert (p1.compositions, p3.compositions) == (1, 3)
    assert p1.probability <= 0.2 < p3.probability
    result = epsilon_cp(np.arange(5.0), np.arange(5.0) - 1, delta=0.0, claimed_epsilon=2.0, power_trials=5)
    assert result.power is not None and result.power.delta == 0.0


def test_power_is_reported_with_the_bound_and_serialises():
    rng = np.random.default_rng(0)
    result = epsilon_gdp(rng.normal(1.0, 1, 1000), rng.normal(0, 1, 1000), mechanism="gaussian", claimed_epsilon=1.4,
                         power_factor=2.0, power_trials=20, power_seed=5)
    power = result.power
    assert power is not None and power.trials == 20 and power.seed == 5 and power.factor == 2.0
    assert power.compositions == 4
    assert power.interval[0] <= power.probability <= power.interval[1]
    assert "resampled" in power.method
    json.dumps(result.to_dict())
    assert epsilon_gdp(rng.normal(1.0, 1, 100), rng.normal(0, 1, 100), mechanism="gaussian").power is None


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"claimed_epsilon": -1.0}, "claimed_epsilon"),
        ({"claimed_epsilon": 1.0, "power_factor": 0.5}, "factor"),
        ({"claimed_epsilon": 1.0, "power_trials": 0}, "trials"),
    ],
)
def test_power_arguments_are_validated(options, message):
    with pytest.raises(InvalidParameterError, match=message):
        epsilon_cp([1.0, 2.0, 3.0], [0.0, 1.0, 2.0], **options)
