"""Public/private division of clients by budget: top-K, exact 1-D two-means, two-component GMM (seeded EM)."""

from __future__ import annotations

import numpy as np
import pytest

from privaudit.errors import InvalidParameterError
from privaudit.papers.pfa.budgets import draw_budgets
from privaudit.papers.pfa.public_private import (
    fit_two_gaussians,
    split_clients,
    split_gmm,
    split_kmeans,
    split_topk,
)

BIMODAL = [0.11, 0.09, 10.2, 0.1, 0.12, 9.9, 0.08, 0.1, 0.13, 0.095]
HIGH = (2, 5)


@pytest.mark.parametrize("method", ["topk", "kmeans", "gmm"])
def test_clear_bimodal_budgets_are_divided_exactly(method):
    split = split_clients(BIMODAL, method, public_clients=2 if method == "topk" else None, seed=3)
    assert split.public == HIGH
    assert set(split.private) == set(range(len(BIMODAL))) - set(HIGH)


@pytest.mark.parametrize("seed", range(5))
def test_methods_agree_on_mixgauss1_draws(seed):
    budgets = draw_budgets("mixgauss1", 30, seed=seed).as_array()
    truth = tuple(int(i) for i in np.flatnonzero(budgets > 5))
    if not truth:
        pytest.skip("this draw has no public client")
    assert split_kmeans(budgets).public == truth
    assert split_gmm(budgets, seed=seed).public == truth
    assert split_topk(budgets, len(truth)).public == truth


def test_topk_ties_keep_client_order_and_bad_counts():
    assert split_topk([1.0, 5.0, 5.0, 5.0], 2).public == (1, 2)
    with pytest.raises(InvalidParameterError, match="cannot choose 5 public clients among 4"):
        split_topk([1, 2, 3, 4], 5)
    with pytest.raises(InvalidParameterError, match="positive integer"):
        split_topk([1, 2], 0)
    with pytest.raises(InvalidParameterError, match="needs the number of public clients"):
        split_clients([1, 2], "topk")


def test_kmeans_is_the_exact_two_means_optimum():
    values = np.array([1.0, 1.2, 1.4, 3.0, 3.3, 7.0])
    split = split_kmeans(values)
    best = min(
        (np.var(values[values <= t]) * np.sum(values <= t) + np.var(values[values > t]) * np.sum(values > t), t)
        for t in values[:-1]
    )
    assert set(split.public) == set(np.flatnonzero(values > best[1]).tolist())
    assert split_kmeans([2.0, 2.0, 2.0]).public == (0, 1, 2)  # nothing to divide: all public


def test_gmm_is_seeded_and_finds_the_two_components():
    values = np.concatenate([np.full(40, 0.5) + np.linspace(-0.05, 0.05, 40), np.full(6, 10.0) + np.linspace(-0.3, 0.3, 6)])
    a = split_gmm(values, seed=1)
    assert a == split_gmm(values, seed=1)
    assert a.public == tuple(range(40, 46))
    weights, means, variances, _ = fit_two_gaussians(values, np.random.default_rng(0))
    assert means[0] == pytest.approx(0.5, abs=1e-6) and means[1] == pytest.approx(10.0, abs=1e-6)
    assert weights[1] == pytest.approx(6 / 46, abs=1e-6) and np.all(variances > 0)


def test_invalid_budgets_and_methods():
    with pytest.raises(InvalidParameterError, match="positive finite"):
        split_kmeans([1.0, -1.0])
    with pytest.raises(InvalidParameterError, match="empty"):
        split_gmm([])
    with pytest.raises(InvalidParameterError, match="unknown public/private split"):
        split_clients([1.0, 2.0], "dbscan")
