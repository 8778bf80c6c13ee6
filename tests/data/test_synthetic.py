"""Synthetic(α, β): FedProx's generator (Li et al., MLSys 2020; litian96/FedProx generate_synthetic.py)."""

from __future__ import annotations

import numpy as np
import pytest

from privaudit.data import synthetic
from privaudit.errors import InvalidParameterError


def _totals(dataset) -> np.ndarray:
    return np.array([c.num_train + c.num_test for c in dataset.clients])


def test_shapes_and_defaults_are_fedprox():
    data = synthetic(0.5, 0.5, seed=0)
    assert data.num_clients == 30
    assert data.input_shape == (60,)
    assert data.num_classes == 10
    assert data.name == "synthetic:0.5,0.5"
    for client in data.clients:
        assert client.x_train.shape[1] == 60 and client.x_train.dtype == np.float32
        assert set(np.unique(np.concatenate([client.y_train, client.y_test]))) <= set(range(10))


def test_upcycled_shape():
    data = synthetic(0.5, 0.5, dim=20, num_classes=2, seed=1)
    assert data.input_shape == (20,) and data.num_classes == 2
    labels = np.concatenate([c.y_train for c in data.clients])
    assert set(np.unique(labels)) == {0, 1}


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_client_sizes_at_least_50_and_90_10_split(seed):
    data = synthetic(1.0, 1.0, seed=seed)
    totals = _totals(data)
    assert totals.min() >= 50
    for client, total in zip(data.clients, totals, strict=True):
        assert client.num_train == int(0.9 * total)
        assert client.num_test == total - int(0.9 * total)
    assert len(data.test[1]) == sum(c.num_test for c in data.clients)


def test_sizes_follow_lognormal_4_2_plus_50():
    # n_k − 50 = int(lognormal(4, 2)): its median is about e^4 ≈ 54.6 and its log-spread is 2.
    extra = np.concatenate([_totals(synthetic(0, 0, seed=s, dim=2, num_classes=2)) - 50 for s in range(20)])
    assert 40 <= np.median(extra) <= 72
    logs = np.log(extra[extra > 0] + 0.5)
    assert 1.6 <= logs.std() <= 2.4


def test_reproducible_with_seed_and_seeds_differ():
    a, b, c = synthetic(0.5, 0.5, seed=7), synthetic(0.5, 0.5, seed=7), synthetic(0.5, 0.5, seed=8)
    assert a.fingerprint() == b.fingerprint()
    assert a.fingerprint() != c.fingerprint()


def test_feature_covariance_is_diag_j_pow_minus_1_2():
    data = synthetic(0.0, 0.0, iid=True, num_clients=4, dim=10, seed=3)
    x = np.concatenate([np.concatenate([c.x_train, c.x_test]) for c in data.clients])
    expected = np.arange(1, 11) ** -1.2
    assert np.allclose(x.var(axis=0), expected, rtol=0.2)
    assert np.abs(x.mean(axis=0)).max() < 0.1  # iid: v_k = 0


def test_beta_spreads_client_means():
    def spread(beta: float) -> float:
        data = synthetic(0.0, beta, dim=20, num_classes=2, seed=4)
        means = np.array([c.x_train.mean() for c in data.clients])
        return float(means.std())

    assert spread(0.0) < 0.5 < spread(3.0)


def _pooled_linear_accuracy(data) -> float:
    from sklearn.linear_model import LogisticRegression

    x = np.concatenate([c.x_train for c in data.clients])
    y = np.concatenate([c.y_train for c in data.clients])
    return LogisticRegression(C=1e4, max_iter=2000).fit(x, y).score(x, y)


def test_iid_labels_come_from_one_global_linear_model():
    # y = argmax(xW + b) with one W, b: the pooled data is linearly separable; with client-specific
    # W_k (α = 1) it is not.
    iid = synthetic(0, 0, iid=True, num_clients=10, dim=20, num_classes=2, seed=5)
    heterogeneous = synthetic(1.0, 1.0, num_clients=10, dim=20, num_classes=2, seed=5)
    assert _pooled_linear_accuracy(iid) > 0.98
    assert _pooled_linear_accuracy(heterogeneous) < 0.95


def test_each_client_is_linearly_labelled():
    from sklearn.linear_model import LogisticRegression

    data = synthetic(1.0, 1.0, num_clients=3, dim=20, num_classes=2, seed=6)
    for client in data.clients:
        if len(np.unique(client.y_train)) < 2:
            continue
        model = LogisticRegression(C=1e4, max_iter=2000).fit(client.x_train, client.y_train)
        assert model.score(client.x_train, client.y_train) > 0.98


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"alpha": -1.0, "beta": 0.0}, "≥ 0"),
        ({"alpha": 0.5, "beta": 0.0, "iid": True}, "iid"),
        ({"alpha": 0.0, "beta": 0.0, "num_classes": 1}, "num_classes"),
    ],
)
def test_bad_parameters(kwargs, message):
    with pytest.raises(InvalidParameterError, match=message):
        synthetic(**kwargs)
