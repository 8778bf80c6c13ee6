import json
import math

import numpy as np
import pytest

from privaudit.audit import (
    DEFAULT_GDP_FAMILY,
    DEFAULT_GUESS_GRID,
    ESTIMATORS,
    Bonferroni,
    Explicit,
    Guesses,
    GuessGrid,
    LowerBound,
    MultiSplit,
    OrderStatistics,
    RouteOptions,
    Split,
    default_strategy,
    describe_estimators,
    estimate,
)
from privaudit.errors import InvalidParameterError
from privaudit.stats.clopper_pearson import cp_bound
from privaudit.stats.gdp import gdp_bound
from privaudit.stats.one_run import one_run_bound
from privaudit.stats.one_run_fdp import one_run_fdp_bound
from privaudit.stats.scores import AuditScores
from privaudit.stats.threshold_selection import multi_split_index
from tests.audit.helpers import deterministic_normal, family

IN, OUT = deterministic_normal(1.5, 800), deterministic_normal(0.0, 700)


def test_registry_lists_the_estimators_with_descriptions():
    assert list(ESTIMATORS) == ["cp", "gdp", "one-run", "one-run-fdp", "one-run-fdp-box", "one-run-paired",
                                "one-run-fdp-ledger"]
    descriptions = describe_estimators()
    assert all(descriptions[name] for name in ESTIMATORS)
    with pytest.raises(InvalidParameterError, match="unknown estimator"):
        estimate("lira", IN, OUT)
    with pytest.raises(TypeError):
        ESTIMATORS["new"] = None  # read-only registry


def test_default_strategies():
    assert default_strategy("cp") == Bonferroni(OrderStatistics())
    assert default_strategy("gdp") == Bonferroni(DEFAULT_GDP_FAMILY)
    assert default_strategy("one-run") == default_strategy("one-run-fdp") == Bonferroni(DEFAULT_GUESS_GRID)


@pytest.mark.parametrize(
    ("name", "bound"),
    [("cp", cp_bound), ("gdp", gdp_bound), ("one-run", one_run_bound), ("one-run-fdp", one_run_fdp_bound)],
)
def test_each_registered_function_reports_its_bound_ceiling_and_sizes(name, bound):
    result = ESTIMATORS[name](IN, OUT, mechanism=family(name), significance=0.05, delta=1e-5)
    scores = AuditScores.of(IN, OUT)
    args = (scores, 0.05, 1e-5, default_strategy(name)) + ((False,) if name in ("cp", "gdp") else ())
    assert result.epsilon_lb == bound(*args)[0]
    assert 0.0 < result.epsilon_lb <= result.ceiling
    assert (result.n_in, result.n_out, result.estimator) == (800, 700, name)
    assert result.confidence == pytest.approx(0.95)
    encoded = result.to_dict()
    assert json.loads(json.dumps(encoded))["strategy"] == encoded["strategy"]
    assert "reference" in encoded["details"]


def test_to_dict_keeps_infinities_as_floats():
    result = LowerBound("cp", 0.0, 0.05, 0.0, Explicit(0.0), math.inf, None, 1, 1, {"x": np.float64(np.inf), "n": np.int64(3)})
    encoded = result.to_dict()
    assert encoded["ceiling"] == math.inf and encoded["details"]["x"] == math.inf
    assert type(encoded["details"]["n"]) is int


@pytest.mark.parametrize(
    ("name", "strategy"),
    [
        ("cp", Guesses(1, 1)),
        ("gdp", Bonferroni(GuessGrid((0.5,)))),
        ("one-run", Explicit(0.0)),
        ("one-run-fdp", Bonferroni(OrderStatistics())),
    ],
)
def test_strategies_of_the_wrong_kind_are_rejected(name, strategy):
    with pytest.raises(InvalidParameterError):
        estimate(name, IN, OUT, mechanism=family(name), route_options=RouteOptions(strategy=strategy))


def test_multi_split_reports_the_ceil_half_largest_split_bound():
    assert multi_split_index(21) == 10 and multi_split_index(20) == 9 and multi_split_index(1) == 0
    for name in ("cp", "gdp", "one-run"):
        result = estimate(name, IN, OUT, mechanism=family(name), route_options=RouteOptions(strategy=MultiSplit(6, seed=4)))
        splits = sorted(result.details["split_epsilons" if name != "gdp" else "split_mus"], reverse=True)
        assert len(splits) == 6
        if name == "gdp":
            assert result.details["mu_lb"] == pytest.approx(splits[2])
        else:
            assert result.epsilon_lb == pytest.approx(splits[2])
        assert result.details["test_significance"] <= 0.025 + 1e-12


@pytest.mark.parametrize("name", ["cp", "gdp", "one-run", "one-run-fdp"])
def test_split_is_reproducible_from_its_seed(name):
    first = estimate(name, IN, OUT, mechanism=family(name), route_options=RouteOptions(strategy=Split(0.5, seed=9)))
    second = estimate(name, IN, OUT, mechanism=family(name), route_options=RouteOptions(strategy=Split(0.5, seed=9)))
    assert first.epsilon_lb == second.epsilon_lb and first.details == second.details
    assert first.ceiling >= first.epsilon_lb


def test_split_bounds_on_held_out_scores_only():
    result = estimate("cp", IN, OUT, route_options=RouteOptions(strategy=Split(0.25, seed=1)))
    assert (result.details["n_in"], result.details["n_out"]) == (600, 525)
    assert (result.details["selection_n_in"], result.details["selection_n_out"]) == (200, 175)


@pytest.mark.parametrize("name", ["cp", "gdp"])
def test_threshold_splits_need_two_scores_per_side(name):
    with pytest.raises(InvalidParameterError, match="split needs at least 2"):
        estimate(name, [1.0], [0.0, 1.0], mechanism=family(name), route_options=RouteOptions(strategy=Split()))
