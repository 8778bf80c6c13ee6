"""Properties that must hold for any scores: never NaN, ≥ 0, ≤ ceiling, monotone in the separation."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from privaudit.audit import RouteOptions
from privaudit.audit import estimate as _estimate
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
from tests.audit.helpers import family


def estimate(name, *args, **options):
    """The route on these scores as the Gaussian-shift family where it needs it (the properties are about arithmetic)."""
    return _estimate(name, *args, mechanism=family(name), **options)


SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Scores on a coarse grid so that ties are common.
score_lists = st.lists(st.integers(-20, 20).map(lambda k: k / 4.0), min_size=2, max_size=30)
alphas = st.sampled_from([0.01, 0.05, 0.2])
deltas = st.sampled_from([1e-6, 1e-3, 0.1])

THRESHOLD_STRATEGIES = [
    Explicit(0.5),
    Bonferroni(OrderStatistics()),
    Bonferroni(ThresholdGrid((-1.0, 0.0, 1.0, 2.5))),
    Bonferroni(DEFAULT_GDP_FAMILY),
]
SPLIT_STRATEGIES = [Split(0.5, 3), MultiSplit(3, 3)]
GUESS_STRATEGIES = [Guesses(2, 1), Bonferroni(DEFAULT_GUESS_GRID)]


def _check_basic(result):
    assert not math.isnan(result.epsilon_lb) and not math.isnan(result.ceiling)
    assert 0.0 <= result.epsilon_lb <= result.ceiling + 1e-9


@pytest.mark.parametrize("estimator", ["cp", "gdp"])
@pytest.mark.parametrize("strategy", THRESHOLD_STRATEGIES + SPLIT_STRATEGIES, ids=repr)
@SETTINGS
@given(in_scores=score_lists, out_scores=score_lists, alpha=alphas, delta=deltas, two_sided=st.booleans())
def test_threshold_estimators_are_finite_non_negative_and_below_the_ceiling(
    estimator, strategy, in_scores, out_scores, alpha, delta, two_sided
):
    _check_basic(estimate(estimator, in_scores, out_scores, significance=alpha, delta=delta, route_options=RouteOptions(strategy=strategy, two_sided=two_sided)))


@pytest.mark.parametrize("estimator", ["one-run", "one-run-fdp", "one-run-fdp-box"])
@pytest.mark.parametrize("strategy", GUESS_STRATEGIES + SPLIT_STRATEGIES, ids=repr)
@SETTINGS
@given(in_scores=score_lists, out_scores=score_lists, alpha=alphas, delta=deltas)
def test_one_run_estimators_are_finite_non_negative_and_below_the_ceiling(estimator, strategy, in_scores, out_scores, alpha, delta):
    _check_basic(estimate(estimator, in_scores, out_scores, significance=alpha, delta=delta, route_options=RouteOptions(strategy=strategy)))


@pytest.mark.parametrize("strategy", GUESS_STRATEGIES, ids=repr)
@SETTINGS
@given(in_scores=score_lists, out_scores=score_lists, alpha=alphas, delta=deltas)
def test_paired_estimator_is_finite_non_negative_and_below_the_ceiling(strategy, in_scores, out_scores, alpha, delta):
    _check_basic(estimate("one-run-paired", in_scores, out_scores, design="fixed", significance=alpha, delta=delta, route_options=RouteOptions(strategy=strategy)))


@pytest.mark.parametrize(
    ("estimator", "strategy"),
    [("cp", s) for s in THRESHOLD_STRATEGIES]
    + [("gdp", s) for s in THRESHOLD_STRATEGIES]
    + [("one-run", s) for s in GUESS_STRATEGIES]
    + [("one-run-fdp", s) for s in GUESS_STRATEGIES]
    + [("one-run-fdp-box", s) for s in GUESS_STRATEGIES]
    + [("one-run-paired", s) for s in GUESS_STRATEGIES],
    ids=repr,
)
@SETTINGS
@given(
    in_scores=score_lists,
    out_scores=score_lists,
    shifts=st.tuples(st.integers(0, 12), st.integers(0, 12)).map(lambda p: (min(p) / 2.0, max(p) / 2.0)),
    alpha=alphas,
    delta=deltas,
)
def test_bound_is_monotone_in_the_separation_of_the_scores(estimator, strategy, in_scores, out_scores, shifts, alpha, delta):
    """Moving every in-score up (fixed-in-advance strategies) never lowers the bound."""
    low, high = shifts
    base = np.asarray(in_scores)
    options = {"significance": alpha, "delta": delta, "route_options": RouteOptions(strategy)}
    weaker = estimate(estimator, base + low, out_scores, **options).epsilon_lb
    stronger = estimate(estimator, base + high, out_scores, **options).epsilon_lb
    assert stronger >= weaker - 1e-6 * max(1.0, weaker)


@pytest.mark.parametrize("estimator", ["one-run", "one-run-fdp", "one-run-fdp-box"])
@pytest.mark.parametrize("strategy", [Split(0.5, seed=3), MultiSplit(5, seed=3)], ids=repr)
def test_split_ceiling_bounds_a_lucky_selection(estimator, strategy):
    # Found by hypothesis: the selection half picked guess counts that suit the held-out half better than a
    # perfect attack's selection does; the ceiling must bound every outcome, not only the perfect attack's.
    result = estimate(estimator, [0.25] * 4, [0.0] * 7 + [0.25], significance=0.2, delta=1e-6, route_options=RouteOptions(strategy=strategy))
    assert 0.0 <= result.epsilon_lb <= result.ceiling + 1e-9 and result.ceiling > 0
