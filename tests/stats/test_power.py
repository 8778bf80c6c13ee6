"""Power: the estimators find leakage that is there, and the power figure is calibrated to the claim (issue 24).

The power of :mod:`privaudit.stats.power` is that of an optimal attack on a Gaussian mechanism at factor × the claim,
never of the observed scores; its Monte-Carlo lower limit stays valid under the early-stopping rule; the routes it
applies to give the same bound for every strictly increasing transform of the scores.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy import stats

from privaudit.accounting.gaussian import gaussian_epsilon, gaussian_mu_for
from privaudit.audit import ClaimPower, RouteOptions, epsilon_cp, epsilon_gdp, estimate
from privaudit.audit.verdict import Verdict, decide
from privaudit.errors import InvalidParameterError
from privaudit.stats.assumptions import Design, MechanismFamily
from privaudit.stats.gdp import gdp_bound
from privaudit.stats.power import (
    LOOK_FRACTIONS,
    PowerRequest,
    canonical_power,
    clear_power_cache,
    power_unavailable,
    simulate,
)
from privaudit.stats.routes import ROUTES
from privaudit.stats.strategies import (
    DEFAULT_GDP_FAMILY,
    Bonferroni,
    Explicit,
    MultiSplit,
    OrderStatistics,
    Split,
)
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


def _gdp(scores, alpha=ALPHA):
    return gdp_bound(scores, alpha, DELTA, Bonferroni(DEFAULT_GDP_FAMILY))[0]


def test_the_power_does_not_depend_on_the_observed_scores():
    """Issue 24: resampling a leaky mechanism's own scores made "2× less private" even leakier. The figure must be
    a function of the claim and the audit's shape only: a leaky, a private and a signal-free attack get the same."""
    clear_power_cache()
    rng = np.random.default_rng(0)
    leaky = epsilon_gdp(rng.normal(3.0, 1, 500), rng.normal(0, 1, 500), mechanism="gaussian", delta=DELTA, claim=ClaimPower(claimed_epsilon=1.0, trials=80))
    clear_power_cache()  # recomputed, not read back from the cache
    null = epsilon_gdp(rng.normal(0.0, 1, 500), rng.normal(0, 1, 500), mechanism="gaussian", delta=DELTA, claim=ClaimPower(claimed_epsilon=1.0, trials=80))
    assert leaky.power == null.power
    assert leaky.power.alternative_epsilon == 2.0
    assert leaky.power.alternative_mu == pytest.approx(gaussian_mu_for(2.0, DELTA))
    assert gaussian_epsilon(leaky.power.alternative_mu, DELTA) == pytest.approx(2.0, rel=1e-9)


def test_the_simulated_power_matches_an_independent_simulation_of_the_alternative():
    """P[gdp bound > claim] for N(μ_alt, 1) vs N(0, 1) at 300 per side, simulated here without privaudit.stats.power."""
    claim, n = 1.2, 300
    mu_alt = gaussian_mu_for(2 * claim, DELTA)
    rng = np.random.default_rng(123)
    from privaudit.stats.scores import AuditScores

    independent = np.mean([_gdp(AuditScores.trusted(rng.normal(mu_alt, 1, n), rng.normal(0, 1, n))) > claim
                           for _ in range(400)])
    power = canonical_power(_gdp, PowerRequest(claim, DELTA, trials=200, seed=5, min_power=0.45), sizes=(n, n),
                            design=Design.TRIALS)  # a target inside every look's interval: all run
    assert power.trials == 200
    assert power.interval[0] - 0.05 <= independent <= power.interval[1] + 0.05
    assert abs(power.probability - independent) < 0.12


def test_the_lower_limit_is_valid_under_the_stopping_rule():
    """Over 400 seeds of a simulation whose true refutation rate is 0.85, the reported lower limit exceeds 0.85 in at
    most 5 % of them (plus binomial tolerance), although the rule stops at the first clear look."""
    p = 0.85

    def audit_once(rng: np.random.Generator) -> float:
        return 1.0 if rng.random() < p else 0.0

    runs = [simulate(audit_once, claimed_epsilon=0.5, trials=200, seed=seed, min_power=0.8) for seed in range(400)]
    above = sum(r.lower > p for r in runs)
    assert above <= 400 * binomial_upper_tolerance(0.05, 400)
    assert {r.runs for r in runs} <= {int(np.ceil(200 * f)) for f in LOOK_FRACTIONS}
    assert any(r.runs < 200 for r in runs)  # it does stop early when the answer is clear


def test_a_clearly_powerful_audit_stops_after_an_eighth_of_the_simulations_and_is_cached():
    clear_power_cache()
    calls = []

    def counted(scores):
        calls.append(1)
        return _gdp(scores)

    first = canonical_power(counted, PowerRequest(2.0, DELTA, trials=200, seed=0), sizes=(2000, 2000),
                            design=Design.TRIALS, key="counted")
    assert first.trials == 25 and first.lower >= 0.8 and len(calls) == 25
    again = canonical_power(counted, PowerRequest(2.0, DELTA, trials=200, seed=0), sizes=(2000, 2000),
                            design=Design.TRIALS, key="counted")
    assert again is first and len(calls) == 25  # data-independent: computed once per process


@pytest.mark.parametrize(("route", "strategy", "design"), [
    ("cp", None, "trials"), ("cp", Bonferroni(OrderStatistics()), "trials"), ("cp", Split(0.5, seed=3), "trials"),
    ("gdp", None, "trials"), ("gdp", MultiSplit(3, seed=1), "trials"),
    ("one-run", None, "bernoulli"), ("one-run-fdp", None, "bernoulli"), ("one-run-fdp-box", None, "bernoulli"),
])
def test_routes_with_power_give_the_same_bound_for_every_increasing_transform(route, strategy, design):
    """What makes one simulation the power of every optimal attack: the bound depends on the scores' order only."""
    rng = np.random.default_rng(4)
    ins, outs = rng.normal(1.0, 1, 400), rng.normal(0.0, 1, 400)
    options = {"mechanism": "gaussian", "design": design, "delta": DELTA, "significance": ALPHA,
               "route_options": RouteOptions(strategy)}
    plain = estimate(route, ins, outs, **options).epsilon_lb
    for transform in (np.exp, lambda x: 5.0 * x**3 + x - 7.0, np.arctan):
        assert estimate(route, transform(ins), transform(outs), **options).epsilon_lb == pytest.approx(plain, rel=1e-12)
    used = estimate(route, ins, outs, **options).strategy
    assert power_unavailable(MechanismFamily.GAUSSIAN, ROUTES[route], used, DELTA, 2.0) is None


def test_scale_dependent_routes_and_other_families_have_no_power_and_say_why():
    rng = np.random.default_rng(5)
    ins, outs = rng.normal(1.0, 1, 300), rng.normal(0.0, 1, 300)
    common = {"delta": DELTA, "claim": ClaimPower(5.0, trials=20)}  # above the true ε ≈ 4.38: never refuted
    cases = {
        "explicit threshold": estimate("cp", ins, outs, mechanism="gaussian", route_options=RouteOptions(strategy=Explicit(0.5)), **common),
        "pair differences": estimate("one-run-paired", ins, outs, mechanism="gaussian", design="trials", **common),
        "family any": estimate("cp", ins, outs, mechanism="any", **common),
        "family pure": estimate("cp", ins, outs, mechanism="pure", **common),
    }
    for name, bound in cases.items():
        assert bound.power is None and bound.no_power_reason, name
        verdict = decide(5.0, DELTA, [bound])
        assert verdict.verdict is not Verdict.CONSISTENT and bound.no_power_reason in verdict.reason, name
    assert "'any'" in cases["family any"].no_power_reason and "'pure'" in cases["family pure"].no_power_reason
    # the Gaussian curve's order-only routes do have one; it cannot earn "consistent" undeclared
    gaussian = estimate("cp", ins, outs, mechanism="gaussian", **common)
    assert gaussian.power is not None and gaussian.no_power_reason is None and not gaussian.attack_optimal
    pure_zero = estimate("cp", ins, outs, mechanism="gaussian", delta=0.0, claim=ClaimPower(claimed_epsilon=1.0, trials=5))
    assert pure_zero.power is None and "δ = 0" in pure_zero.no_power_reason


@pytest.mark.parametrize("shape", ["normal", "integers", "constant"])
def test_an_attack_without_signal_is_never_consistent_even_if_declared_optimal(shape):
    """Identical in/out laws under a claim of 0.05 (issue 24 saw one "consistent" in 150 such audits): the power of an
    optimal attack at 0.1 with 2000 scores per side is low, so nothing can earn the word."""
    rng = np.random.default_rng(7)
    draw = {"normal": lambda n: rng.normal(size=n), "integers": lambda n: rng.integers(0, 3, n).astype(float),
            "constant": lambda n: np.zeros(n)}[shape]
    result = epsilon_gdp(draw(2000), draw(2000), mechanism="gaussian", delta=DELTA, significance=ALPHA, claim=ClaimPower(claimed_epsilon=0.05, trials=60, attack_optimal=True))
    assert result.power.lower < 0.8
    assert decide(0.05, DELTA, [result]).verdict is Verdict.INCONCLUSIVE


def test_power_is_reported_with_the_bound_and_serialises():
    rng = np.random.default_rng(0)
    result = epsilon_gdp(rng.normal(1.0, 1, 1000), rng.normal(0, 1, 1000), mechanism="gaussian", claim=ClaimPower(claimed_epsilon=1.4, factor=2.0, trials=20, seed=5, attack_optimal=True))
    power = result.power
    assert power is not None and power.max_trials == 20 and power.seed == 5 and power.factor == 2.0
    assert power.trials in {int(np.ceil(20 * f)) for f in LOOK_FRACTIONS}
    assert power.interval[0] == power.lower <= power.probability <= power.interval[1]
    assert power.attack_optimal and "optimal attack on a Gaussian mechanism" in power.method
    data = json.loads(json.dumps(result.to_dict()))
    assert data["attack_optimal"] is True and data["no_power_reason"] is None and data["power"]["lower"] == power.lower
    assert epsilon_gdp(rng.normal(1.0, 1, 100), rng.normal(0, 1, 100), mechanism="gaussian").power is None


def test_power_entries_validate_against_the_result_schema():
    pytest.importorskip("jsonschema")
    from privaudit.report.results import make_result
    from privaudit.schemas import validate

    rng = np.random.default_rng(1)
    ins, outs = rng.normal(1.0, 1, 300), rng.normal(0, 1, 300)
    bounds = [epsilon_gdp(ins, outs, mechanism="gaussian", delta=DELTA, claim=ClaimPower(claimed_epsilon=1.0, trials=10)).to_dict(),
              epsilon_cp(ins, outs, delta=DELTA, claim=ClaimPower(claimed_epsilon=1.0, trials=10)).to_dict()]
    data = {"claim_id": "x", "claimed": {"epsilon": 1.0, "delta": DELTA}, "accountant": [], "lower_bounds": bounds,
            "verdict": "inconclusive", "reason": "r"}
    validate(make_result("claim-audit", "t", data, {}).to_dict())
    broken = json.loads(json.dumps(bounds[0]))
    broken["power"]["lower"] = 1.5
    with pytest.raises(InvalidParameterError, match="lower_bounds/0/power"):
        validate(make_result("claim-audit", "t", {**data, "lower_bounds": [broken]}, {}).to_dict())


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"claimed_epsilon": -1.0}, "claimed_epsilon"),
        ({"claimed_epsilon": 1.0, "factor": 0.5}, "factor"),
        ({"claimed_epsilon": 1.0, "trials": 0}, "trials"),
        ({"claimed_epsilon": 1.0, "min_power": 1.0}, "min_power"),
    ],
)
def test_power_arguments_are_validated(options, message):
    with pytest.raises(InvalidParameterError, match=message):
        epsilon_cp([1.0, 2.0, 3.0], [0.0, 1.0, 2.0], claim=ClaimPower(**options))
