"""Route ``one-run-fdp-ledger``: the run's own trade-off curve (privaudit/stats/one_run_fdp_ledger.py, ledger_family.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from privaudit.accounting.ctd import CtdAccountant
from privaudit.accounting.gaussian import gaussian_mu_for
from privaudit.accounting.mechanisms import Composition, Laplace
from privaudit.errors import InvalidParameterError, RouteNotApplicable
from privaudit.stats.curve_family import EpsilonCurves, profile_inverse_blow_up, upper_envelope
from privaudit.stats.estimators import audit_scores, estimate
from privaudit.stats.ledger_family import LedgerFamily, member_curve, member_epsilon
from privaudit.stats.ledger_scenarios import LedgerMechanism
from privaudit.stats.one_run_fdp import curve_falsified
from privaudit.stats.routes import ROUTES
from privaudit.stats.trade_off import dp_inverse_blow_up, gaussian_inverse_blow_up
from privaudit.stats.validity import TEST_LEVEL, Bernoulli, Cell, evaluate_cell

ROUTE = "one-run-fdp-ledger"
XS = np.concatenate([np.geomspace(1e-9, 0.5, 120), np.linspace(0.5, 1.0 - 1e-9, 120)])
ENVELOPE_GAP = 1e-4  # how far below the true curve the envelope of the profile's tangents may lie


def _scores(seed: int, m: int, mu: float, q: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    member = rng.random(m) < 0.5
    scores = rng.normal(size=m) + mu * member * (rng.random(m) < q)
    return scores[member], scores[~member]


# -- the declared route -------------------------------------------------------------------------------------------


def test_the_route_is_declared_with_its_family_design_and_ceiling():
    chosen = ROUTES[ROUTE]
    assert [f.value for f in chosen.families] == ["ledger"] and [d.value for d in chosen.designs] == ["bernoulli"]
    assert chosen.one_run and chosen.positive_delta and "Mahloujifar" in chosen.reference
    family = LedgerFamily.subsampled_gaussian(10, 0.5, 1.0)
    a, b = _scores(0, 1000, 2.0, 0.5)
    bound = estimate(ROUTE, a, b, mechanism=family, design="bernoulli", delta=1e-5)
    assert 0.0 < bound.epsilon_lb < bound.ceiling < family.claimed_epsilon(1e-5)
    assert bound.mechanism == "ledger" and "noise scaled" in bound.details["curve"]
    assert bound.power is None


def test_the_route_refuses_a_mechanism_that_is_not_a_curve_family():
    a, b = _scores(1, 200, 1.0)
    for mechanism in ("any", "gaussian"):
        with pytest.raises(RouteNotApplicable):
            estimate(ROUTE, a, b, mechanism=mechanism, design="bernoulli")
    with pytest.raises(RouteNotApplicable, match="curve family"):
        estimate(ROUTE, a, b, mechanism="ledger", design="bernoulli")
    with pytest.raises(RouteNotApplicable):  # one run only: fair coins
        estimate(ROUTE, a, b, mechanism=LedgerFamily.subsampled_gaussian(1, 1.0), design="fixed")
    with pytest.raises(InvalidParameterError):
        LedgerFamily(Composition.of(Laplace(1.0), 3))
    with pytest.raises(InvalidParameterError):
        LedgerFamily.subsampled_gaussian(0, 0.5)


def test_a_declared_ledger_also_runs_every_route_valid_for_any_mechanism():
    a, b = _scores(2, 400, 1.5)
    outcomes = {o.route: o for o in audit_scores(a, b, mechanism=LedgerFamily.subsampled_gaussian(5, 0.5), design="bernoulli")}
    assert outcomes[ROUTE].bound is not None and outcomes["one-run-fdp-box"].bound is not None
    assert outcomes["one-run-fdp"].bound is None and outcomes["gdp"].bound is None
    plain = {o.route: o for o in audit_scores(a, b, mechanism="any", design="bernoulli")}
    assert plain[ROUTE].bound is None and "ledger" in plain[ROUTE].reason


# -- q = 1 reduces to the Gaussian curve ------------------------------------------------------------------------------


@pytest.mark.parametrize(("seed", "mu", "m"), [(3, 1.0, 1000), (4, 2.0, 1000), (5, 3.0, 2000)])
def test_without_subsampling_the_bound_is_the_gaussian_routes(seed, mu, m):
    a, b = _scores(seed, m, mu)
    family = LedgerFamily.subsampled_gaussian(4, 1.0, 2.0)  # any T, σ: the family is all Gaussian mechanisms
    ledger = estimate(ROUTE, a, b, mechanism=family, design="bernoulli", delta=1e-5)
    gaussian = estimate("one-run-fdp", a, b, mechanism="gaussian", design="bernoulli", delta=1e-5)
    assert ledger.epsilon_lb <= gaussian.epsilon_lb + 1e-6  # the grid and the envelope only lose
    assert ledger.epsilon_lb == pytest.approx(gaussian.epsilon_lb, rel=5e-3, abs=1e-3)
    assert ledger.ceiling <= gaussian.ceiling + 1e-6
    assert ledger.ceiling == pytest.approx(gaussian.ceiling, rel=5e-3)


def test_a_callable_curve_indexed_by_epsilon_reproduces_the_gaussian_route():
    a, b = _scores(6, 1000, 2.0)
    curves = EpsilonCurves(lambda eps, delta: gaussian_inverse_blow_up(gaussian_mu_for(eps, delta)), "Gaussian")
    own = estimate(ROUTE, a, b, mechanism=curves, design="bernoulli", delta=1e-5).epsilon_lb
    assert own == pytest.approx(estimate("one-run-fdp", a, b, mechanism="gaussian", design="bernoulli").epsilon_lb, abs=1e-9)


def test_the_gaussian_envelope_is_below_and_close_to_g_mu():
    family = LedgerFamily.subsampled_gaussian(10, 1.0, 3.0)
    g, exact = member_curve(family.composition, 0), gaussian_inverse_blow_up(math.sqrt(10) / 3.0)
    gaps = np.array([exact(x) - g(x) for x in XS])
    assert gaps.min() >= -1e-12 and gaps.max() < ENVELOPE_GAP


# -- the curves are trade-off curves ----------------------------------------------------------------------------------


@settings(max_examples=20, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.integers(1, 30), q=st.floats(0.05, 1.0), sigma=st.floats(0.6, 6.0))
def test_a_ledger_curve_is_a_valid_trade_off_curve_between_the_gaussian_and_the_box(steps, q, sigma):
    family = LedgerFamily.subsampled_gaussian(steps, q, sigma)
    g = member_curve(family.composition, 0)
    values = np.array([g(x) for x in XS])
    assert g(0.0) == 0.0 and g(1.0) == 1.0
    assert np.all(values <= XS + 1e-12)  # f(α) ≤ 1 − α: no test does better than guessing at random
    assert np.all(np.diff(values) >= -1e-12)  # non-decreasing
    mids = np.linspace(0.0, 1.0, 201)
    at = np.array([g(x) for x in mids])
    assert np.all(at[1:-1] <= (at[:-2] + at[2:]) / 2.0 + 1e-12)  # convex (f convex)
    # symmetric (f = f⁻¹, both neighbouring directions): f(f(α)) = α wherever f(α) > 0, with f(α) = g(1 − α)
    for alpha in np.linspace(0.0, 1.0, 41):
        beta = g(1.0 - alpha)
        if beta > 1e-9:
            assert g(1.0 - beta) == pytest.approx(alpha, abs=1e-7)
    # subsampling only amplifies: at least as private as T full Gaussian steps (μ = √T/σ), up to the envelope's gap
    # (finitely many tangents: ≤ 4.1e-5 below G_μ for μ = 0.05 … 8, measured) and, for q < 1, the accountant's
    # pessimism (ctd's δ(ε) is an upper bound at relative accuracy 1e-3: 2.9e-4 below G_μ at q = 0.99999, T = 10, σ = 3)
    gaussian = gaussian_inverse_blow_up(math.sqrt(steps) / sigma)
    slack = ENVELOPE_GAP if q >= 1.0 else 1e-3
    assert all(g(x) >= gaussian(x) - slack for x in XS)
    # and (ε, δ)-DP at its own ε: above the box curve of (ε(δ), δ), up to the profile's 1 % ε spacing
    delta = 1e-5
    box = dp_inverse_blow_up(family.claimed_epsilon(delta) * 1.011 + 2e-3, delta)
    assert all(g(x) >= box(x) - 1e-12 for x in XS)


def test_members_lose_privacy_as_the_noise_shrinks():
    family = LedgerFamily.subsampled_gaussian(10, 0.5, 1.0)
    eps = [member_epsilon(family.composition, k, 1e-5) for k in (-200, 0, 200)]
    assert eps[0] < eps[1] < eps[2]
    lower, upper = member_curve(family.composition, 200), member_curve(family.composition, -200)
    assert all(lower(x) <= upper(x) + 1e-12 for x in XS)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(m=st.integers(10, 5000), guessed=st.floats(0.01, 1.0), right=st.floats(0.0, 1.0),
       mus=st.tuples(st.floats(0.05, 6.0), st.floats(0.05, 6.0)))
def test_the_recursion_is_monotone_in_the_curve(m, guessed, right, mus):
    """A higher curve (more private hypothesis) is rejected whenever a lower one is: the search relies on it."""
    r = max(1, int(guessed * m))
    v = round(right * r)
    private, leaky = max(mus), min(mus)  # larger μ: lower curve
    if curve_falsified(m, r, v, 0.05, gaussian_inverse_blow_up(private)):
        assert curve_falsified(m, r, v, 0.05, gaussian_inverse_blow_up(leaky))


def test_the_upper_envelope_is_the_maximum_of_its_lines():
    rng = np.random.default_rng(7)
    for _ in range(100):
        n = int(rng.integers(1, 25))
        slopes, intercepts = np.round(rng.normal(size=n), 1), rng.normal(size=n)
        starts, kept_s, kept_b = upper_envelope(slopes, intercepts)
        for x in rng.normal(size=50) * 3:
            i = int(np.searchsorted(starts, x, side="right")) - 1
            assert kept_s[i] * x + kept_b[i] == pytest.approx(np.max(slopes * x + intercepts), abs=1e-9)
    g = profile_inverse_blow_up(np.array([1.0]), np.array([1e-5]))  # one (ε, δ) point is the box curve itself
    box = dp_inverse_blow_up(1.0, 1e-5)
    assert all(g(x) == pytest.approx(box(x), abs=1e-12) for x in XS)


# -- validity: scores from the exact mechanism at the claim -----------------------------------------------------------


@pytest.mark.parametrize("scenario", [LedgerMechanism(10, 0.5, 3.0), LedgerMechanism(10, 1.0, 8.0)], ids=lambda s: s.name)
def test_null_coverage_at_the_claim_fast(scenario):
    result = evaluate_cell(Cell(ROUTE, "default", scenario, Bernoulli(1000), 1e-5, 0.1), 40, base_seed=21)
    assert result.status != "not run" and result.claim == scenario.ledger
    assert result.p_value >= TEST_LEVEL, (result.exceed, result.runs, result.true_epsilon, result.max_lb)
    assert result.mean_lb > 0.0  # the route does find evidence: the cell is not passed by silence


@pytest.mark.slow
@pytest.mark.parametrize("scenario", [LedgerMechanism(10, 0.5, 1.0), LedgerMechanism(10, 0.5, 3.0),
                                      LedgerMechanism(1, 0.5, 0.5), LedgerMechanism(10, 1.0, 8.0)], ids=lambda s: s.name)
@pytest.mark.parametrize("strategy", ["default", "guesses balanced", "split"])
def test_null_coverage_at_the_claim_many_repetitions(scenario, strategy):
    result = evaluate_cell(Cell(ROUTE, strategy, scenario, Bernoulli(1000), 1e-5, 0.05), 200, base_seed=22)
    assert result.p_value >= TEST_LEVEL, (result.exceed, result.runs, result.true_epsilon, result.max_lb)


def test_the_ledger_scenario_scores_and_true_epsilon():
    scenario = LedgerMechanism(10, 1.0, 3.0)
    assert scenario.true_epsilon(1e-5) == pytest.approx(4.652984530968506, rel=1e-9)  # μ = √10/3 exactly
    assert math.isinf(scenario.true_epsilon(0.0))
    rng = np.random.default_rng(0)
    inside, outside = scenario.sample(rng, True, 4000), scenario.sample(rng, False, 4000)
    mu2 = 10 / 9.0  # q = 1: the loss is N(±μ²/2, μ²) with μ² = T/σ²
    assert np.mean(inside) == pytest.approx(mu2 / 2, abs=0.1) and np.mean(outside) == pytest.approx(-mu2 / 2, abs=0.1)
    with pytest.raises(InvalidParameterError):
        LedgerMechanism(10, 1.5, 1.0)


@pytest.mark.parametrize(("q", "sigma"), [(0.5, 1.0), (1.0, 2.0), (0.1, 0.8)])
def test_the_accountants_profile_is_its_delta_at_every_point(q, sigma):
    """CtdAccountant.privacy_profile (one composition, many ε) agrees with CtdAccountant.delta (one ε per call)."""
    accountant, composition = CtdAccountant(), LedgerFamily.subsampled_gaussian(10, q, sigma).composition
    epsilons = np.array([0.0, 0.3, 1.0, 2.5, 6.0])
    profile = accountant.privacy_profile(composition, epsilons)
    single = [accountant.delta(composition, float(e)).delta for e in epsilons]
    assert profile == pytest.approx(single, rel=1e-9, abs=1e-15)


def test_declaring_only_the_family_name_lists_the_route_with_its_reason():
    a, b = _scores(8, 300, 1.0)
    outcomes = {o.route: o for o in audit_scores(a, b, mechanism="ledger", design="bernoulli")}
    assert outcomes[ROUTE].bound is None and "curve family itself" in outcomes[ROUTE].reason
    assert outcomes["one-run-fdp-box"].bound is not None  # a declared mechanism is one (ε, δ)-DP mechanism among all
