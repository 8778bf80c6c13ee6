"""The validity suite's fast subset (the full grid is ``make validity`` → ``reports/validity.md``).

Two properties: every route's coverage (below), and at the end the verdict's — "consistent" is rare when the true ε
is at least twice the claim, for every attack (:mod:`privaudit.audit.verdict_validity`).

Every route that the auditor offers (read from ``privaudit.stats.routes.ROUTES``, so a new route is tested the
moment it is registered) must keep P[ε_lb > ε_true] ≤ α on scores whose true ε is known: identical in/out scores
of several shapes, and the Gaussian, Laplace and randomized-response mechanisms, in balanced and unbalanced
designs. The check is a one-sided binomial test, so a valid route fails it with probability ≤ 1e-3
(:data:`privaudit.stats.validity.TEST_LEVEL`). Routes that are not valid for a scenario must refuse it
(:class:`~privaudit.errors.RouteNotApplicable`) instead of over-claiming; the exact privacy profiles the suite
relies on are checked against numerical integration and brute force.
"""

from __future__ import annotations

import itertools
import math
import zlib

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy import integrate, stats

from privaudit.accounting.gaussian import gaussian_epsilon
from privaudit.audit import RouteOptions, estimate
from privaudit.audit.verdict_validity import ConsistencyCell, consistency_grid, evaluate_consistency
from privaudit.errors import InvalidParameterError, RouteNotApplicable
from privaudit.stats.assumptions import mechanism_family
from privaudit.stats.strategies import Guesses
from privaudit.stats.validity import (
    NULL_SHAPES,
    TEST_LEVEL,
    Attack,
    Bernoulli,
    Cell,
    Fixed,
    GaussianMechanism,
    LaplaceMechanism,
    NullScores,
    RandomizedResponse,
    SubsampledGaussian,
    Trials,
    available_routes,
    build_strategy,
    coverage_verdict,
    design_of_size,
    draw_scores,
    draw_seed,
    evaluate_cell,
    laplace_delta,
    laplace_epsilon,
    natural_design,
    over_claim_p_value,
    randomized_response_delta,
    randomized_response_epsilon,
    strategy_names,
)
from privaudit.stats.validity_scenarios import CLAIM_GAUSSIAN_LEDGER

ALPHA = 0.1
RUNS = 60
ROUTES = available_routes()
ROUTE_NAMES = [route.name for route in ROUTES]


# ------------------------------------------------------------------------------------------------
# The exact privacy profiles
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("epsilon0", [0.5, 2.0, 6.0])
@pytest.mark.parametrize("epsilon", [0.0, 0.1, 0.45, 1.0, 1.9, 5.0])
def test_laplace_profile_matches_the_hockey_stick_integral(epsilon0, epsilon):
    b = 1.0 / epsilon0

    def excess(x: float) -> float:
        return max(0.0, stats.laplace.pdf(x, 1.0, b) - math.exp(epsilon) * stats.laplace.pdf(x, 0.0, b))

    numeric = integrate.quad(excess, -40 * b, 1 + 40 * b, points=[0.0, 0.5, 1.0], limit=400, epsabs=1e-13)[0]
    assert laplace_delta(epsilon, epsilon0) == pytest.approx(numeric, abs=1e-9)


@pytest.mark.parametrize("epsilon0", [0.5, 2.0, 6.0])
@pytest.mark.parametrize("epsilon", [0.0, 0.3, 1.0, 1.99, 4.0, 7.0])
def test_randomized_response_profile_matches_brute_force_over_all_events(epsilon0, epsilon):
    p = math.exp(epsilon0) / (1.0 + math.exp(epsilon0))
    in_law, out_law = {0: 1.0 - p, 1: p}, {0: p, 1: 1.0 - p}
    events = [set(s) for k in range(3) for s in itertools.combinations((0, 1), k)]
    brute = max(sum(in_law[x] for x in e) - math.exp(epsilon) * sum(out_law[x] for x in e) for e in events)
    assert randomized_response_delta(epsilon, epsilon0) == pytest.approx(max(0.0, brute), abs=1e-12)


@pytest.mark.parametrize("profile", ["laplace", "randomized-response"])
@pytest.mark.parametrize("epsilon0", [0.5, 2.0, 6.0])
@pytest.mark.parametrize("delta", [0.0, 1e-10, 1e-5, 1e-2, 0.3])
def test_the_epsilon_of_a_profile_inverts_its_delta(profile, epsilon0, delta):
    delta_of, epsilon_of = {"laplace": (laplace_delta, laplace_epsilon),
                            "randomized-response": (randomized_response_delta, randomized_response_epsilon)}[profile]
    epsilon = epsilon_of(delta, epsilon0)
    assert 0.0 <= epsilon <= epsilon0
    assert delta_of(epsilon, epsilon0) <= delta + 1e-12
    if epsilon > 1e-9:  # the smallest such ε: a little less fails
        assert delta_of(epsilon * (1 - 1e-7), epsilon0) > delta
    assert epsilon_of(0.0, epsilon0) == epsilon0


def test_true_epsilons_of_the_scenarios():
    assert GaussianMechanism(1.0).true_epsilon(1e-5) == gaussian_epsilon(1.0, 1e-5)
    assert math.isinf(GaussianMechanism(1.0).true_epsilon(0.0))
    assert LaplaceMechanism(2.0).true_epsilon(0.0) == 2.0
    assert LaplaceMechanism(2.0).true_epsilon(1e-5) == pytest.approx(2.0 + 2.0 * math.log1p(-1e-5))
    assert RandomizedResponse(2.0).true_epsilon(0.0) == pytest.approx(2.0)
    assert all(NullScores(shape).true_epsilon(1e-5) == 0.0 for shape in NULL_SHAPES)
    with pytest.raises(InvalidParameterError):
        laplace_delta(-0.1, 1.0)
    with pytest.raises(InvalidParameterError):
        LaplaceMechanism(0.0)
    with pytest.raises(InvalidParameterError):
        NullScores("uniform")


def test_the_scenarios_draw_from_the_stated_laws():
    rng = np.random.default_rng(0)
    n = 200_000
    assert np.mean(GaussianMechanism(1.5).sample(rng, True, n)) == pytest.approx(1.5, abs=0.02)
    assert np.mean(LaplaceMechanism(2.0).sample(rng, False, n) > 0.5) == pytest.approx(0.5 * math.exp(-1.0), abs=0.01)
    assert np.mean(RandomizedResponse(2.0).sample(rng, True, n)) == pytest.approx(1 / (1 + math.exp(-2.0)), abs=0.01)
    assert set(np.unique(NullScores("discrete").sample(rng, True, 1000))) == {0.0, 1.0, 2.0, 3.0}
    assert not np.any(NullScores("constant").sample(rng, False, 10))


# ------------------------------------------------------------------------------------------------
# Designs and seeds
# ------------------------------------------------------------------------------------------------


def test_designs_draw_the_stated_memberships():
    rng = np.random.default_rng(1)
    fixed = Fixed(900, 100)
    in_scores, out_scores = draw_scores(NullScores(), fixed, rng)
    assert (in_scores.size, out_scores.size) == (900, 100)
    assert Trials(3, 5).memberships(rng).sum() == 3
    counts = [Bernoulli(1000).memberships(rng).sum() for _ in range(400)]
    assert np.mean(counts) == pytest.approx(500, abs=3)  # fair coins: mean 500, sd of the mean 0.8
    assert np.std(counts) == pytest.approx(math.sqrt(250), rel=0.15)
    positions = np.mean([Fixed(2, 8).memberships(rng) for _ in range(4000)], axis=0)
    assert np.allclose(positions, 0.2, atol=0.03)  # which canaries are in is uniform
    assert isinstance(design_of_size("bernoulli", 10), Bernoulli)
    with pytest.raises(InvalidParameterError):
        design_of_size("poisson", 10)


def test_draws_are_seeded_and_shared_across_routes():
    seed = draw_seed(7, GaussianMechanism(1.0), Bernoulli(50), 3)
    first = draw_scores(GaussianMechanism(1.0), Bernoulli(50), np.random.default_rng(seed))
    again = draw_scores(GaussianMechanism(1.0), Bernoulli(50), np.random.default_rng(seed))
    assert all(np.array_equal(a, b) for a, b in zip(first, again, strict=True))
    other = draw_seed(7, GaussianMechanism(1.0), Bernoulli(50), 4)
    assert not np.array_equal(draw_scores(GaussianMechanism(1.0), Bernoulli(50), np.random.default_rng(other))[0], first[0])


def test_coverage_verdicts():
    assert coverage_verdict(0, 100, 0.05)[0] == "pass"
    assert coverage_verdict(7, 100, 0.05)[0] == "flag"  # above α, but the interval reaches it
    assert coverage_verdict(30, 100, 0.05)[0] == "fail"
    assert over_claim_p_value(0, 100, 0.05) == 1.0
    assert over_claim_p_value(30, 100, 0.05) < 1e-9


# ------------------------------------------------------------------------------------------------
# The routes: refusals where they would over-claim, coverage ≤ α where they run
# ------------------------------------------------------------------------------------------------


def _route(name: str):
    return next(route for route in ROUTES if route.name == name)


def _applies(route, scenario, design) -> bool:
    """Whether the route declares itself valid for some true claim about ``scenario`` under ``design``."""
    return design.design in route.designs and any(mechanism_family(claim).value in route.families for claim in scenario.claims)


def _true_claim(route) -> object:
    """A mechanism claim the route takes that is true of identical in/out laws (``ledger``: a Gaussian release's
    curve family, whose noise → ∞ limit they are)."""
    if "any" in route.families:
        return "any"
    return CLAIM_GAUSSIAN_LEDGER if "ledger" in route.families else "gaussian"


def _assert_valid(result) -> None:
    cell = result.cell
    assert result.p_value >= TEST_LEVEL, (
        f"{cell.key}: ε_lb > ε_true = {result.true_epsilon:.4g} in {result.exceed} of {result.runs} audits "
        f"(α = {cell.significance}; binomial p = {result.p_value:.2g}; mean ε_lb {result.mean_lb:.3g})"
    )


FAST_SCENARIOS = [NullScores("continuous"), NullScores("discrete"), GaussianMechanism(1.0), LaplaceMechanism(2.0),
                  RandomizedResponse(1.0)]


@pytest.mark.parametrize("scenario", FAST_SCENARIOS, ids=lambda s: s.name)
@pytest.mark.parametrize("route", ROUTE_NAMES)
def test_every_route_is_valid_or_refuses_in_its_natural_design(route, scenario):
    info = _route(route)
    design = design_of_size(natural_design(info), 200 if natural_design(info) == "trials" else 300)
    result = evaluate_cell(Cell(route, "default", scenario, design, 1e-5, ALPHA), RUNS, base_seed=11)
    if not _applies(info, scenario, design):
        assert result.status == "not run", f"{route} ran on {scenario.name} although it declares {info.families}"
        assert result.refusals, result.reason
        return
    assert result.status != "not run", result.reason
    _assert_valid(result)


UNBALANCED = [Trials(180, 20), Trials(20, 180), Fixed(270, 30), Fixed(30, 270)]


@pytest.mark.parametrize("design", UNBALANCED, ids=lambda d: d.label)
@pytest.mark.parametrize("route", ROUTE_NAMES)
def test_unbalanced_splits_are_refused_or_valid_under_identical_scores(route, design):
    """With 90 % of the canaries on one side, guessing the majority is right 90 % of the time with no signal."""
    info = _route(route)
    strategies = ("default", "guesses in-only", "guesses out-only") if info.kind == "guess" else ("default",)
    for strategy in strategies:
        result = evaluate_cell(Cell(route, strategy, NullScores("continuous"), design, 1e-5, ALPHA), RUNS, base_seed=12)
        if result.status == "not run":
            assert not _applies(info, NullScores(), design) or "Guesses" in result.reason, result.reason
            continue
        _assert_valid(result)


@pytest.mark.parametrize("route", ["gdp", "one-run-fdp"])
@pytest.mark.parametrize("scenario", [LaplaceMechanism(2.0), RandomizedResponse(2.0)], ids=lambda s: s.name)
@pytest.mark.parametrize("mechanism", ["any", "pure"])
def test_gaussian_curve_routes_refuse_laplace_and_randomized_response_scores(route, scenario, mechanism):
    """Through G_μ these scores certify ε several times the truth (gdp: ≈ 6.9 for Laplace ε₀ = 2); they must refuse."""
    design = design_of_size(natural_design(_route(route)), 400)
    in_scores, out_scores = draw_scores(scenario, design, np.random.default_rng(0))
    with pytest.raises(RouteNotApplicable, match=r"[Gg]aussian"):
        estimate(route, in_scores, out_scores, mechanism=mechanism, significance=0.05, delta=1e-5)


def test_the_steinke_route_refuses_fixed_unbalanced_counts_or_stays_valid():
    """one-run on a fixed 900/100 split of identical scores, guessing "in" for the top tenth."""
    design = Fixed(900, 100)
    in_scores, out_scores = draw_scores(NullScores(), design, np.random.default_rng(0))
    try:
        estimate("one-run", in_scores, out_scores, design="fixed", significance=0.05, delta=1e-5, route_options=RouteOptions(strategy=Guesses(100, 0)))
    except RouteNotApplicable:
        return
    result = evaluate_cell(Cell("one-run", "guesses in-only", NullScores(), design, 1e-5, 0.05), RUNS, base_seed=13)
    _assert_valid(result)


@pytest.mark.parametrize("route", ROUTE_NAMES)
def test_every_strategy_of_every_route_on_identical_heavy_tailed_scores(route):
    info = _route(route)
    design = design_of_size(natural_design(info), 200 if natural_design(info) == "trials" else 300)
    for strategy in strategy_names(info.kind):
        if strategy == "default":
            continue
        result = evaluate_cell(Cell(route, strategy, NullScores("heavy-tailed"), design, 1e-5, ALPHA), 40, base_seed=14)
        if result.status == "not run":  # a strategy the route does not take, with its reason
            assert result.reason and not result.refusals, result.reason
            continue
        _assert_valid(result)


@pytest.mark.parametrize("route", ROUTE_NAMES)
def test_pure_audits_at_delta_zero_are_valid_where_a_route_takes_them(route):
    info = _route(route)
    design = design_of_size(natural_design(info), 200 if natural_design(info) == "trials" else 300)
    result = evaluate_cell(Cell(route, "default", LaplaceMechanism(1.0), design, 0.0, ALPHA), RUNS, base_seed=15)
    if result.status == "not run":
        assert not _applies(info, LaplaceMechanism(1.0), design) or "delta > 0" in result.reason, result.reason
        return
    _assert_valid(result)


# ------------------------------------------------------------------------------------------------
# Properties over score shapes (hypothesis)
# ------------------------------------------------------------------------------------------------

_finite = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, allow_infinity=False)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(values=st.lists(_finite, min_size=4, max_size=60), route=st.sampled_from([r for r in ROUTE_NAMES if r != "one-run-paired"]))
def test_mirrored_scores_never_give_a_positive_bound(values, route):
    """In and out scores that are the same multiset carry no evidence: ε_lb = 0 exactly, for every fixed strategy.

    (Not for one-run-paired: its random pairing of two equal multisets can still, by chance, favour one side.)
    """
    info = _route(route)
    claim = _true_claim(info)
    scores = np.asarray(values)
    for strategy_name in strategy_names(info.kind):
        if strategy_name in ("split", "multi-split"):
            continue
        strategy, two_sided = build_strategy(strategy_name, 0, 2 * scores.size)
        bound = estimate(route, scores, scores[::-1], mechanism=claim, design=natural_design(info), significance=0.1, delta=1e-5, route_options=RouteOptions(strategy=strategy, two_sided=two_sided))
        assert bound.epsilon_lb == 0.0, (strategy_name, bound.details)


@settings(max_examples=40, deadline=None)
@given(n_in=st.integers(1, 60), n_out=st.integers(1, 60), route=st.sampled_from(ROUTE_NAMES))
def test_constant_scores_never_give_a_positive_bound_in_any_design(n_in, n_out, route):
    """All scores tied: ties go against the auditor, so the default strategies find no evidence whatever the counts.

    (A one-sided guess strategy can validly reject under ``bernoulli`` here: 7 "in" of 8 fair coins is itself
    unlikely. That is the design's assumption doing its work, not a tie effect.)
    """
    info = _route(route)
    for design in info.designs:
        bound = estimate(route, np.zeros(n_in), np.zeros(n_out), mechanism=_true_claim(info) if info.families == ("ledger",)
                         else "gaussian", design=design, significance=0.1,
                         delta=1e-5)
        assert bound.epsilon_lb == 0.0, design


_shapes = st.lists(st.tuples(st.floats(-5, 5, allow_nan=False), st.integers(1, 20)), min_size=1, max_size=6)
HYPOTHESIS_EXAMPLES = 3


@settings(max_examples=HYPOTHESIS_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(atoms=_shapes, spread=st.sampled_from([0.0, 0.3, 3.0]), route=st.sampled_from(ROUTE_NAMES))
def test_null_scores_of_any_shape_over_claim_at_most_alpha(atoms, spread, route):
    """Identical in/out laws drawn by hypothesis (a weighted set of atoms, optionally smeared by Laplace noise).

    Each example is tested at TEST_LEVEL / HYPOTHESIS_EXAMPLES, so a valid route fails with probability ≤ 1e-3.
    """
    info = _route(route)
    values = np.array([a for a, _ in atoms])
    weights = np.array([w for _, w in atoms], dtype=float)
    weights /= weights.sum()
    design = design_of_size(natural_design(info), 100 if natural_design(info) == "trials" else 200)
    rng = np.random.default_rng(zlib.crc32(repr((values.tolist(), spread, route)).encode()))
    claim = _true_claim(info)
    exceed = 0
    for _ in range(RUNS):
        member = design.memberships(rng)
        scores = rng.choice(values, size=member.size, p=weights) + spread * rng.laplace(size=member.size)
        if member.all() or not member.any():
            continue
        bound = estimate(route, scores[member], scores[~member], mechanism=claim, design=design.design,
                         significance=ALPHA, delta=1e-5)
        exceed += bound.epsilon_lb > 0.0
    assert over_claim_p_value(exceed, RUNS, ALPHA) >= TEST_LEVEL / HYPOTHESIS_EXAMPLES, (exceed, RUNS)


# ------------------------------------------------------------------------------------------------
# "consistent" is earned against the claim (issue 24): P[consistent | true ε ≥ 2 × claim] ≤ 1 − min_power
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("mu", "q"), [(2.0, 0.5), (1.0, 0.1), (3.0, 0.2), (1.0, 1.0)])
def test_the_subsampled_gaussian_profile_matches_privaudits_ctd_accountant(mu, q):
    """The exact profile of the subsampled scenario agrees with ctd's certified upper bound (both directions)."""
    from privaudit.accounting.accountants import get_accountant
    from privaudit.accounting.mechanisms import Composition
    from privaudit.accounting.mechanisms import SubsampledGaussian as Step

    exact = SubsampledGaussian(mu, q).true_epsilon(1e-5)
    certified = get_accountant("ctd").epsilon(Composition.of(Step(1.0 / mu, q)), 1e-5).epsilon
    assert exact <= certified * (1 + 1e-9) and certified == pytest.approx(exact, rel=1e-3)
    if q == 1.0:
        assert exact == pytest.approx(gaussian_epsilon(mu, 1e-5), rel=1e-9)


def test_attacks_are_post_processings_of_the_output():
    rng = np.random.default_rng(0)
    output = rng.normal(1.0, 1.0, 10_000)
    assert np.array_equal(Attack("optimal").apply(rng, output), output)
    assert Attack("saturating", 0.5).apply(rng, output).max() == 0.5
    assert set(np.unique(Attack("discrete", 1.0).apply(rng, np.array([0.2, 0.7, 1.6])))) == {0.0, 1.0, 2.0}
    assert np.std(Attack("weak", 2.0).apply(rng, output) - output) == pytest.approx(2.0, rel=0.05)
    silent = Attack("zero-signal").apply(rng, output)
    assert abs(np.corrcoef(silent, output)[0, 1]) < 0.05
    with pytest.raises(InvalidParameterError):
        Attack("strong")
    with pytest.raises(InvalidParameterError):
        Attack("weak", 0.0)
    mixed = SubsampledGaussian(2.0, 0.5).sample(rng, True, 100_000)
    assert np.mean(mixed) == pytest.approx(1.0, abs=0.02)


def test_consistency_cells_refuse_false_gates():
    with pytest.raises(InvalidParameterError, match="true mechanism claim"):
        ConsistencyCell(LaplaceMechanism(2.0), Attack(), Trials(10, 10), "gaussian")
    with pytest.raises(InvalidParameterError, match="claim_divisor"):
        ConsistencyCell(GaussianMechanism(1.0), Attack(), Trials(10, 10), "gaussian", claim_divisor=1.5)


GRID = consistency_grid()
GATES = [c for c in GRID if c.kind == "gate" and c.design.m <= 2000]


def test_the_grid_covers_what_the_issue_asks():
    gates = [c for c in GRID if c.kind == "gate"]
    assert len(gates) >= 12
    assert {c.scenario.family for c in gates} >= {"gaussian", "laplace", "randomized-response", "subsampled-gaussian"}
    assert {c.attack.kind for c in gates} == {"optimal", "weak", "saturating", "discrete", "zero-signal"}
    assert {c.design.design for c in gates} >= {"trials", "bernoulli"}
    assert any(c.attack_optimal and c.mechanism == "gaussian" for c in gates)


@pytest.mark.parametrize("cell", GATES, ids=lambda c: c.key)
def test_consistent_is_rare_when_the_mechanism_is_twice_as_leaky_as_claimed(cell):
    """The gate: a one-sided binomial test of P[consistent] ≤ 0.2 at TEST_LEVEL, 60 audits (40 for one-run designs).

    The μ = 0.2996 cell is issue 24's measurement (true ε = 1.13, claim 0.377, 300 per side): the power resampled
    from the observed scores said "consistent" in 23 of 40 audits there (36 of 60 with these seeds), which fails this
    test; the calibrated power says it in none."""
    runs = 40 if cell.design.design == "bernoulli" else 60
    result = evaluate_consistency(cell, runs, base_seed=21)
    assert result.p_value >= TEST_LEVEL, (
        f"{cell.key}: consistent in {result.consistent} of {runs} audits (> 1 − min_power = 0.2; p = {result.p_value:.2g}); "
        f"e.g. {result.example_reason}")


def test_consistent_is_earnable_when_the_claim_is_true_and_the_attack_is_optimal():
    """Not a test that cannot fail: with the claim true and 400 scores per side, the word must actually be issued."""
    cell = next(c for c in GRID if c.kind == "earnable" and c.design == Trials(400, 400))
    result = evaluate_consistency(cell, 30, base_seed=22)
    assert result.consistent >= 27, result.example_reason
    assert "declared optimal" in result.example_reason and "not a proof of privacy" in result.example_reason
