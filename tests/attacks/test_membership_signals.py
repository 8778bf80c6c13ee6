"""Per-example signals against naive formulas, at ordinary and extreme logits; the score containers."""

from __future__ import annotations

import numpy as np
import pytest

from attacks.membership.scores import MembershipScores, RoundObservations, gaussian_separation
from attacks.membership.signals import (
    cross_entropy,
    logit_scaled_confidence,
    membership_signal,
    modified_entropy,
    prediction_entropy,
    true_class_probability,
)
from privaudit.errors import InvalidParameterError


def _naive(logits: np.ndarray, y: np.ndarray):
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    rows = np.arange(len(y))
    py = p[rows, y]
    mask = np.ones_like(p, dtype=bool)
    mask[rows, y] = False
    mentr = -(1 - py) * np.log(py) - np.where(mask, p * np.log(1 - p), 0).sum(axis=1)
    return -np.log(py), py, -(p * np.log(p)).sum(axis=1), mentr, np.log(py / (1 - py))


def test_signals_match_their_formulas():
    rng = np.random.default_rng(0)
    logits = rng.normal(scale=2.0, size=(50, 4))
    y = rng.integers(0, 4, 50)
    loss, py, entropy, mentr, phi = _naive(logits, y)
    np.testing.assert_allclose(cross_entropy(logits, y), loss, rtol=1e-12)
    np.testing.assert_allclose(true_class_probability(logits, y), py, rtol=1e-12)
    np.testing.assert_allclose(prediction_entropy(logits), entropy, rtol=1e-10)
    np.testing.assert_allclose(modified_entropy(logits, y), mentr, rtol=1e-10)
    np.testing.assert_allclose(logit_scaled_confidence(logits, y), phi, rtol=1e-10)
    np.testing.assert_allclose(membership_signal("loss", logits, y), -loss, rtol=1e-12)


def test_signals_stay_finite_when_the_model_is_certain():
    logits = np.array([[60.0, -60.0], [-60.0, 60.0], [0.0, 0.0]])
    y = np.array([0, 0, 1])
    phi = logit_scaled_confidence(logits, y)  # p_y rounds to 1 in float64, φ must not
    np.testing.assert_allclose(phi, [120.0, -120.0, 0.0])
    for name in ("loss", "confidence", "entropy", "modified-entropy", "logit-confidence"):
        assert np.all(np.isfinite(membership_signal(name, logits, y)))
    # more confident in the true label ⇒ larger (more "member") modified-entropy score
    scores = membership_signal("modified-entropy", np.array([[3.0, 0.0], [1.0, 0.0], [-2.0, 0.0]]), np.array([0, 0, 0]))
    assert scores[0] > scores[1] > scores[2]


def test_unknown_signal_and_bad_shapes():
    with pytest.raises(InvalidParameterError, match="unknown membership signal"):
        membership_signal("gradnorm", np.zeros((2, 2)), np.zeros(2, dtype=int))
    with pytest.raises(InvalidParameterError, match="labels"):
        cross_entropy(np.zeros((3, 2)), np.zeros(2, dtype=int))


def test_membership_scores_are_frozen_and_validated(tmp_path):
    scores = MembershipScores.from_labels([3.0, 1.0, 2.0, 0.0], [True, False, True, False], {"attack": "x"})
    assert scores.as_pair()[0].tolist() == [3.0, 2.0] and scores.out_scores.tolist() == [1.0, 0.0]
    with pytest.raises(ValueError):
        scores.in_scores[0] = 5.0
    assert scores.summary()["auc"] == 1.0
    loaded = MembershipScores.load_npz(scores.save_npz(tmp_path / "s.npz"))
    assert loaded.in_scores.tolist() == [3.0, 2.0]
    with pytest.raises(InvalidParameterError, match="non-finite"):
        MembershipScores([np.nan], [0.0])
    empty = MembershipScores([], [1.0])
    assert not empty.is_complete()
    rounds = RoundObservations((1, 3), (empty, scores))
    assert rounds.complete_rounds() == (3,) and len(rounds.pairs()) == 1 and rounds.pooled().n_out == 3


def test_gaussian_separation_recovers_mu():
    rng = np.random.default_rng(1)
    scores = MembershipScores(rng.normal(1.5, 1.0, 20_000), rng.normal(0.0, 1.0, 20_000))
    assert gaussian_separation(scores) == pytest.approx(1.5, abs=0.03)
