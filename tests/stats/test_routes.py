"""Routes know what they assume: a bound is computed only where it is valid, and the reason is given otherwise."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from privaudit.accounting.mechanisms import (
    Gaussian,
    Laplace,
    Neighbouring,
    PureDP,
    Skellam,
    SubsampledGaussian,
)
from privaudit.audit import ROUTES, ClaimPower, audit_scores, estimate
from privaudit.errors import InvalidParameterError, RouteNotApplicable
from privaudit.stats.assumptions import MechanismFamily, family_of_mechanisms
from privaudit.stats.one_run_paired import pair_parameters
from privaudit.stats.trade_off import dp_inverse_blow_up, gaussian_inverse_blow_up
from tests.audit.helpers import binomial_upper_tolerance

RNG = np.random.default_rng(0)
IN, OUT = RNG.normal(1.0, 1.0, 400), RNG.normal(0.0, 1.0, 400)


@pytest.mark.parametrize("name", ["gdp", "one-run-fdp"])
@pytest.mark.parametrize("mechanism", ["any", "pure"])
def test_gaussian_curve_routes_refuse_other_mechanisms(name, mechanism):
    with pytest.raises(RouteNotApplicable, match="Gaussian-shaped"):
        estimate(name, IN, OUT, mechanism=mechanism, delta=1e-5)


@pytest.mark.parametrize("name", ["one-run", "one-run-fdp-box"])
@pytest.mark.parametrize("design", ["fixed", "trials"])
def test_fair_coin_routes_refuse_fixed_counts(name, design):
    with pytest.raises(RouteNotApplicable, match="independently with probability ½"):
        estimate(name, IN, OUT, design=design)


def test_threshold_routes_need_independent_trials():
    with pytest.raises(RouteNotApplicable, match="independent trials"):
        estimate("cp", IN, OUT, design="bernoulli")


def test_unknown_assumptions_are_one_clear_error():
    with pytest.raises(InvalidParameterError, match="unknown mechanism family"):
        estimate("cp", IN, OUT, mechanism="laplacian")
    with pytest.raises(InvalidParameterError, match="unknown design"):
        estimate("cp", IN, OUT, design="poisson")


def test_every_route_declares_families_designs_and_a_reference():
    for name, route in ROUTES.items():
        assert route.families and route.designs and route.reference and route.summary
        assert route.to_dict()["route"] == name
    assert {d.value for d in ROUTES["one-run-paired"].designs} == {"trials", "bernoulli", "fixed"}


def test_the_bound_records_its_assumptions():
    result = estimate("gdp", IN, OUT, mechanism="gaussian")
    assert (result.mechanism, result.design) == ("gaussian", "trials")
    encoded = result.to_dict()
    assert encoded["mechanism"] == "gaussian" and encoded["design"] == "trials"


def test_audit_scores_lists_every_route_with_its_bound_or_reason():
    outcomes = audit_scores(IN, OUT, mechanism="any", design="trials", claim=ClaimPower(claimed_epsilon=1.0, trials=10))
    by_name = {o.route: o for o in outcomes}
    assert set(by_name) == set(ROUTES)
    assert by_name["gdp"].bound is None and "Gaussian-shaped" in by_name["gdp"].reason
    assert by_name["cp"].bound is not None and by_name["one-run-paired"].bound is not None
    run = [o for o in outcomes if o.bound is not None]
    assert all(o.bound.significance == pytest.approx(0.05 / len(run)) for o in run)  # α split over what runs
    assert all(o.to_dict()["run"] == (o.bound is not None) for o in outcomes)


def test_audit_scores_at_delta_zero_skips_routes_that_need_delta():
    outcomes = {o.route: o for o in audit_scores(IN, OUT, mechanism="gaussian", design="trials", delta=0.0)}
    assert outcomes["gdp"].bound is None and "δ > 0" in outcomes["gdp"].reason


def test_curves_inverse_blow_up():
    g = dp_inverse_blow_up(1.0, 0.0)
    assert g(0.0) == 0.0 and g(1.0) == 1.0
    assert g(0.2) == pytest.approx(math.exp(-1) * 0.2)  # randomized response: the posterior shrinks by e^{-ε}
    assert g(0.99) == pytest.approx(max(math.e * 0.99 - (math.e - 1), math.exp(-1) * 0.99))
    assert dp_inverse_blow_up(0.0, 0.0)(0.3) == pytest.approx(0.3)  # ε = 0: no information
    assert gaussian_inverse_blow_up(0.0)(0.3) == pytest.approx(0.3)
    xs = np.linspace(0.0, 1.0, 101)
    values = [dp_inverse_blow_up(2.0, 1e-5)(x) for x in xs]
    assert all(0.0 <= v <= x + 1e-12 for v, x in zip(values, xs, strict=True))  # a guess's odds only shrink
    assert all(a <= b + 1e-12 for a, b in itertools.pairwise(values))  # non-decreasing


def test_pair_parameters_are_group_privacy_for_two():
    assert pair_parameters(1.0, 1e-5) == pytest.approx((2.0, (1 + math.e) * 1e-5))
    assert pair_parameters(1.0, 1e-5, Neighbouring.REPLACE_ONE) == (1.0, 1e-5)


@pytest.mark.parametrize(("n_in", "n_out"), [(900, 100), (100, 900), (500, 500)])
def test_paired_route_is_valid_for_fixed_unequal_counts(n_in, n_out):
    """Identical in/out scores with fixed counts: ε_lb > 0 in at most a fraction α of runs (one-run would not be)."""
    rng = np.random.default_rng(n_in)
    repetitions, alpha = 150, 0.1
    positive = sum(
        estimate("one-run-paired", rng.normal(size=n_in), rng.normal(size=n_out), design="fixed", significance=alpha,
                 delta=1e-5).epsilon_lb > 0 for _ in range(repetitions))
    assert positive / repetitions <= binomial_upper_tolerance(alpha, repetitions)


def test_paired_route_finds_a_real_signal_with_unequal_counts():
    rng = np.random.default_rng(3)
    result = estimate("one-run-paired", rng.normal(3.0, 1.0, 900), rng.normal(0.0, 1.0, 100), design="fixed", delta=0.0)
    assert 0.0 < result.epsilon_lb <= result.ceiling and result.details["pairs"] == 100


@pytest.mark.parametrize(
    ("mechanisms", "family"),
    [
        ([Gaussian(1.0), Gaussian(2.0, 0.5)], MechanismFamily.GAUSSIAN),
        ([SubsampledGaussian(1.0, 1.0)], MechanismFamily.GAUSSIAN),
        ([SubsampledGaussian(1.0, 0.01)], MechanismFamily.ANY),
        ([Laplace(1.0), PureDP(2.0)], MechanismFamily.PURE),
        ([PureDP(math.inf)], MechanismFamily.ANY),
        ([Gaussian(1.0), Laplace(1.0)], MechanismFamily.ANY),
        ([], MechanismFamily.ANY),
    ],
)
def test_family_of_a_run_from_its_mechanisms(mechanisms, family):
    found, reason = family_of_mechanisms(mechanisms)
    assert found is family and reason


def test_skellam_is_not_gaussian():
    assert family_of_mechanisms([Skellam(100.0, 1.0, 1.0)])[0] is MechanismFamily.ANY
