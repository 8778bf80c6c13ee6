"""Validity is tested, not assumed: under the null the bound may exceed 0 with probability at most α.

In- and out-scores are drawn from the same distribution (the mechanism leaks nothing, so its true ε is
0 at every δ); a valid level-α estimator reports ε_lb > 0 in at most a fraction α of repetitions. We
allow Monte-Carlo slack α + 3·√(α(1 − α)/R). Every estimator × strategy (× sidedness) shipped is
checked, on continuous scores and on heavily tied integer scores. Two deliberately invalid estimators
show that the check can fail. A second test checks coverage at a non-null claim: scores of a Gaussian
mechanism exactly at (ε, δ) must refute the claim in at most a fraction α of runs.
"""

from __future__ import annotations

import numpy as np
import pytest

from privaudit.accounting.gaussian import gaussian_mu_for
from privaudit.stats.clopper_pearson import cp_bound
from privaudit.stats.estimators import default_strategy
from privaudit.stats.gdp import gdp_bound, gdp_statistic
from privaudit.stats.one_run import one_run_bound
from privaudit.stats.one_run_fdp import one_run_fdp_bound
from privaudit.stats.scores import AuditScores
from privaudit.stats.strategies import (
    DEFAULT_GDP_FAMILY,
    DEFAULT_GUESS_GRID,
    Bonferroni,
    Explicit,
    Guesses,
    MultiSplit,
    OrderStatistics,
    Split,
    ThresholdGrid,
)
from privaudit.stats.threshold_selection import bound_with_strategy
from tests.audit.helpers import binomial_upper_tolerance

ALPHA = 0.1
N_PER_SIDE = 100  # threshold estimators: scores per side
M_CANARIES = 200  # one-run estimators: canaries, each "in" with probability ½


def _threshold_strategies(rep: int):
    return {
        "explicit": Explicit(0.0),
        "bonferroni-order-statistics": Bonferroni(OrderStatistics()),
        "bonferroni-threshold-grid": Bonferroni(ThresholdGrid((-1.0, -0.5, 0.0, 0.5, 1.0, 2.0))),
        "bonferroni-quantile-grid": Bonferroni(DEFAULT_GDP_FAMILY),
        "split": Split(0.5, seed=rep),
        "multi-split": MultiSplit(5, seed=rep),
    }


def _guess_strategies(rep: int):
    return {
        "guesses": Guesses(10, 10),
        "bonferroni-guess-grid": Bonferroni(DEFAULT_GUESS_GRID),
        "split": Split(0.5, seed=rep),
        "multi-split": MultiSplit(5, seed=rep),
    }


def _draw(rng: np.random.Generator, size: int, tied: bool) -> np.ndarray:
    return rng.binomial(4, 0.5, size).astype(float) if tied else rng.normal(size=size)


def _null_rate(estimator: str, strategy_name: str, two_sided: bool, tied: bool, repetitions: int) -> float:
    rng = np.random.default_rng(20_240_611)
    refuted = 0
    for rep in range(repetitions):
        if estimator in ("cp", "gdp"):
            scores = AuditScores.of(_draw(rng, N_PER_SIDE, tied), _draw(rng, N_PER_SIDE, tied))
            strategy = _threshold_strategies(rep)[strategy_name]
            bound = cp_bound if estimator == "cp" else gdp_bound
            delta = 0.0 if estimator == "cp" else 1e-5
            epsilon, _ = bound(scores, ALPHA, delta, strategy, two_sided)
        else:
            values, member = _draw(rng, M_CANARIES, tied), rng.random(M_CANARIES) < 0.5
            if member.all() or not member.any():
                continue
            scores = AuditScores.of(values[member], values[~member])
            strategy = _guess_strategies(rep)[strategy_name]
            if estimator == "one-run":
                epsilon, _ = one_run_bound(scores, ALPHA, 0.0, strategy)
            else:
                epsilon, _ = one_run_fdp_bound(scores, ALPHA, 1e-5, strategy)
        refuted += epsilon > 0.0
    return refuted / repetitions


THRESHOLD_CASES = [
    pytest.param(est, name, two_sided, id=f"{est}-{name}-{'two' if two_sided else 'one'}-sided")
    for est in ("cp", "gdp")
    for name in _threshold_strategies(0)
    for two_sided in (False, True)
]
GUESS_CASES = [pytest.param(est, name, False, id=f"{est}-{name}") for est in ("one-run", "one-run-fdp") for name in _guess_strategies(0)]
TIED_CASES = [
    pytest.param("cp", "bonferroni-order-statistics", False, id="cp-order-statistics"),
    pytest.param("gdp", "bonferroni-order-statistics", True, id="gdp-order-statistics-two-sided"),
    pytest.param("gdp", "bonferroni-quantile-grid", False, id="gdp-quantile-grid"),
    pytest.param("cp", "explicit", False, id="cp-explicit"),
    pytest.param("gdp", "split", False, id="gdp-split"),
    pytest.param("one-run", "bonferroni-guess-grid", False, id="one-run-guess-grid"),
    pytest.param("one-run-fdp", "guesses", False, id="one-run-fdp-guesses"),
]


@pytest.mark.parametrize(("estimator", "strategy_name", "two_sided"), THRESHOLD_CASES + GUESS_CASES)
def test_null_coverage_continuous_scores(estimator, strategy_name, two_sided):
    repetitions = 300 if "multi-split" not in strategy_name else 150
    rate = _null_rate(estimator, strategy_name, two_sided, tied=False, repetitions=repetitions)
    assert rate <= binomial_upper_tolerance(ALPHA, repetitions), rate


@pytest.mark.parametrize(("estimator", "strategy_name", "two_sided"), TIED_CASES)
def test_null_coverage_tied_integer_scores(estimator, strategy_name, two_sided):
    rate = _null_rate(estimator, strategy_name, two_sided, tied=True, repetitions=300)
    assert rate <= binomial_upper_tolerance(ALPHA, 300), rate


@pytest.mark.slow
@pytest.mark.parametrize(("estimator", "strategy_name", "two_sided"), THRESHOLD_CASES + GUESS_CASES)
def test_null_coverage_many_repetitions(estimator, strategy_name, two_sided):
    for tied in (False, True):
        rate = _null_rate(estimator, strategy_name, two_sided, tied=tied, repetitions=2000)
        assert rate <= binomial_upper_tolerance(ALPHA, 2000), (tied, rate)


def _rate_of(statistic, strategy, repetitions: int = 300) -> float:
    rng = np.random.default_rng(7)
    hits = 0
    for _ in range(repetitions):
        scores = AuditScores.of(rng.normal(size=N_PER_SIDE), rng.normal(size=N_PER_SIDE))
        hits += bound_with_strategy(scores, strategy, ALPHA, statistic).value > 0.0
    return hits / repetitions


def test_the_check_catches_the_absolute_value_bug():
    """|μ| of the forward statistic (jax-privacy ≤ 2.0.0) must fail the same check the shipped code passes."""

    def absolute_mu(fp, fn, n_out, n_in, significance):
        return np.abs(gdp_statistic(fp, fn, n_out, n_in, significance))

    assert _rate_of(absolute_mu, Bonferroni(OrderStatistics())) > binomial_upper_tolerance(ALPHA, 300)


def test_the_check_catches_a_threshold_tuned_on_the_same_scores():
    """The naive estimator — each rate bounded at the full α, best of all cuts, no correction — must fail."""

    def uncorrected_mu(fp, fn, n_out, n_in, significance):
        return gdp_statistic(fp, fn, n_out, n_in, np.full(np.shape(fp), 2 * ALPHA))  # α per rate, per cut

    assert _rate_of(uncorrected_mu, Bonferroni(OrderStatistics())) > binomial_upper_tolerance(ALPHA, 300)


def _refutation_rate(bound, sample, claimed: float, repetitions: int, seed: int) -> float:
    """Fraction of repetitions in which ``bound`` on freshly sampled scores exceeds ``claimed``."""
    rng = np.random.default_rng(seed)
    return sum(bound(AuditScores.of(*sample(rng))) > claimed for _ in range(repetitions)) / repetitions


@pytest.mark.parametrize(
    ("estimator", "n_per_side", "repetitions"),
    [("cp", 500, 200), ("gdp", 500, 300), ("one-run", 500, 150), ("one-run-fdp", 500, 100)],
)
def test_coverage_at_a_true_claim(estimator, n_per_side, repetitions):
    """A Gaussian mechanism exactly at (ε = 2, δ = 1e-5) must be refuted in at most a fraction α of runs."""
    strategy = default_strategy(estimator)
    bounds = {"cp": cp_bound, "gdp": gdp_bound, "one-run": one_run_bound, "one-run-fdp": one_run_fdp_bound}

    def bound(scores: AuditScores) -> float:
        if estimator in ("cp", "gdp"):
            return bounds[estimator](scores, ALPHA, 1e-5, strategy, False)[0]
        return bounds[estimator](scores, ALPHA, 1e-5, strategy)[0]

    mu = gaussian_mu_for(2.0, 1e-5)
    rate = _refutation_rate(bound, lambda rng: (rng.normal(mu, 1.0, n_per_side), rng.normal(0.0, 1.0, n_per_side)),
                            2.0, repetitions, seed=3)
    assert rate <= binomial_upper_tolerance(ALPHA, repetitions), rate


def test_coverage_at_a_true_pure_claim():
    """A Laplace mechanism exactly ε-DP (ε = 1, δ = 0) must be refuted by CP in at most a fraction α of runs."""
    strategy = default_strategy("cp")

    def bound(scores: AuditScores) -> float:
        return cp_bound(scores, ALPHA, 0.0, strategy, False)[0]

    rate = _refutation_rate(bound, lambda rng: (rng.laplace(1.0, 1.0, 500), rng.laplace(0.0, 1.0, 500)), 1.0, 200, seed=4)
    assert rate <= binomial_upper_tolerance(ALPHA, 200), rate


@pytest.mark.parametrize("rounds", [1, 4])
def test_null_coverage_of_the_composed_per_round_gdp_bound(rounds):
    """``gdp-composed`` (per-round μ at α/T, μ_total = √Σμ_t²): identical in/out scores in every round."""
    from privaudit.stats.gdp_composition import gdp_rounds_lower_bound

    rng = np.random.default_rng(11)
    repetitions = 200
    refuted = 0
    for _ in range(repetitions):
        per_round = [(rng.normal(size=N_PER_SIDE), rng.normal(size=N_PER_SIDE)) for _ in range(rounds)]
        refuted += gdp_rounds_lower_bound(per_round, significance=ALPHA, delta=1e-5).epsilon_lb > 0.0
    assert refuted / repetitions <= binomial_upper_tolerance(ALPHA, repetitions)


def test_coverage_of_the_composed_bound_at_a_true_claim():
    """T Gaussian rounds that compose exactly to (ε = 2, δ = 1e-5) must be refuted in at most a fraction α of runs."""
    from privaudit.stats.gdp_composition import gdp_rounds_lower_bound

    rounds, n, repetitions = 4, 300, 100
    mu_round = gaussian_mu_for(2.0, 1e-5) / np.sqrt(rounds)
    rng = np.random.default_rng(9)
    refuted = sum(
        gdp_rounds_lower_bound([(rng.normal(mu_round, 1.0, n), rng.normal(0.0, 1.0, n)) for _ in range(rounds)],
                               significance=ALPHA, delta=1e-5).epsilon_lb > 2.0
        for _ in range(repetitions))
    assert refuted / repetitions <= binomial_upper_tolerance(ALPHA, repetitions)
