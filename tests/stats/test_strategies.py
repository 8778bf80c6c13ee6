import json

import pytest

from privaudit.errors import InvalidParameterError
from privaudit.stats.strategies import (
    DEFAULT_GDP_FAMILY,
    DEFAULT_GUESS_GRID,
    Bonferroni,
    Explicit,
    Guesses,
    GuessGrid,
    MultiSplit,
    OrderStatistics,
    QuantileGrid,
    Split,
    ThresholdGrid,
    strategy_to_dict,
)


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: Explicit(float("inf")), "finite"),
        (lambda: Guesses(-1, 2), "non-negative"),
        (lambda: Guesses(0, 0), "at least one guess"),
        (lambda: Guesses(1.5, 0), "integer"),
        (lambda: Split(fraction=1.0), "fraction"),
        (lambda: Split(seed=-1), "seed"),
        (lambda: MultiSplit(n_splits=0), "n_splits"),
        (lambda: ThresholdGrid(()), "at least one"),
        (lambda: ThresholdGrid((0.0, 1.0), weights=(1.0,)), "weights"),
        (lambda: ThresholdGrid((0.0,), weights=(-1.0,)), "positive"),
        (lambda: QuantileGrid((1.0,)), r"\[0, 1\)"),
        (lambda: GuessGrid((0.0,)), r"\(0, 1\]"),
        (lambda: GuessGrid((0.5,), plus_share=2.0), "plus_share"),
        (lambda: Bonferroni("all"), "family"),
    ],
)
def test_invalid_strategies_are_rejected_at_construction(build, message):
    with pytest.raises(InvalidParameterError, match=message):
        build()


def test_weights_are_normalised_and_default_to_equal():
    assert ThresholdGrid((0.0, 1.0, 2.0, 3.0)).weights == (0.25, 0.25, 0.25, 0.25)
    assert QuantileGrid((0.5, 0.1), weights=(3.0, 1.0)).weights == (0.75, 0.25)
    assert sum(DEFAULT_GDP_FAMILY.weights) == pytest.approx(1.0)


def test_guess_grid_counts_depend_on_m_only_and_are_distinct():
    assert GuessGrid((0.1, 0.5, 1.0)).guess_counts(100) == ((5, 5), (25, 25), (50, 50))
    assert GuessGrid((0.01, 0.02), plus_share=1.0).guess_counts(10) == ((1, 0),)  # both round to one guess
    assert all(kp + km <= 37 for kp, km in DEFAULT_GUESS_GRID.guess_counts(37))


@pytest.mark.parametrize(
    "strategy",
    [
        Explicit(0.5),
        Guesses(3, 2),
        Bonferroni(),
        Bonferroni(OrderStatistics()),
        Bonferroni(ThresholdGrid((0.0, 1.0))),
        Bonferroni(DEFAULT_GDP_FAMILY),
        Bonferroni(DEFAULT_GUESS_GRID),
        Split(0.3, 7),
        MultiSplit(5, 2, 0.4),
    ],
)
def test_strategies_serialise_to_json(strategy):
    encoded = strategy_to_dict(strategy)
    assert json.loads(json.dumps(encoded)) == encoded
    assert encoded["kind"] in {"explicit", "guesses", "bonferroni", "split", "multi_split"}


def test_strategies_are_hashable_values():
    assert Split(0.5, 1) == Split(0.5, 1)
    assert len({Bonferroni(), Bonferroni(OrderStatistics())}) == 1
