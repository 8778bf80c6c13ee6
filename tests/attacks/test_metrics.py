"""Scoring: PSNR/SSIM conventions, Hungarian matching, label accuracy, ROC helpers."""

import math

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score
from sklearn.metrics import roc_curve as sk_roc_curve

from attacks.metrics import (
    label_accuracy,
    match_order,
    psnr,
    roc_auc,
    roc_curve,
    score_reconstruction,
    ssim,
    ssim_window,
    tpr_at_fpr,
)
from privaudit.errors import InvalidParameterError


def test_psnr_of_a_known_mse():
    rng = np.random.default_rng(0)
    reference = rng.uniform(0.2, 0.8, size=(16, 16, 3))
    shifted = reference + 0.1  # MSE = 0.01 → 10·log10(1/0.01) = 20 dB
    assert psnr(reference, shifted) == pytest.approx(20.0, abs=1e-9)
    noisy = reference.copy()
    noisy[0, 0, 0] += 0.5  # MSE = 0.25 / 768
    assert psnr(reference, noisy) == pytest.approx(10 * math.log10(768 / 0.25), abs=1e-9)


def test_psnr_identical_images_is_infinite():
    image = np.full((4, 4, 1), 0.3)
    assert psnr(image, image) == math.inf


def test_ssim_is_one_for_identical_and_lower_for_noise():
    rng = np.random.default_rng(1)
    image = rng.uniform(size=(32, 32, 3))
    assert ssim(image, image) == pytest.approx(1.0)
    assert ssim(image, np.clip(image + rng.normal(0, 0.2, image.shape), 0, 1)) < 0.9


def test_ssim_window_handles_small_images():
    assert ssim_window(32, 32) == 7
    assert ssim_window(8, 8) == 7
    assert ssim_window(6, 9) == 5
    assert ssim_window(4, 4) == 3
    with pytest.raises(InvalidParameterError, match="at least 3×3"):
        ssim_window(2, 5)
    tiny = np.random.default_rng(2).uniform(size=(5, 5, 1))
    assert ssim(tiny, tiny) == pytest.approx(1.0)


def test_hungarian_matching_undoes_a_permutation():
    rng = np.random.default_rng(3)
    truth = rng.uniform(size=(5, 3, 8, 8))
    permutation = np.array([3, 0, 4, 1, 2])
    shuffled = truth[permutation]
    order = match_order(truth, shuffled)
    # truth[i] sits at position j of the shuffled batch where permutation[j] == i
    assert np.array_equal(shuffled[order], truth)
    assert np.array_equal(order, np.argsort(permutation))


def test_matching_is_a_joint_assignment_not_best_match_each():
    # Both reconstructions resemble image 0 best; a per-image best match would use reconstruction 0 twice.
    truth = np.stack([np.full((1, 4, 4), 0.0), np.full((1, 4, 4), 1.0)])
    recon = np.stack([np.full((1, 4, 4), 0.1), np.full((1, 4, 4), 0.4)])
    assert list(match_order(truth, recon)) == [0, 1]


def test_score_reconstruction_pairs_labels_with_matched_images():
    rng = np.random.default_rng(4)
    truth = rng.uniform(size=(3, 1, 8, 8))
    recon = truth[[2, 0, 1]]
    scores = score_reconstruction(truth, recon, true_labels=[7, 8, 9], predicted_labels=[9, 7, 8])
    assert all(math.isinf(v) for v in scores.psnr)
    assert scores.ssim == pytest.approx([1.0, 1.0, 1.0])
    assert scores.label_accuracy == 1.0
    assert scores.ssim_window == 7
    wrong = score_reconstruction(truth, recon, true_labels=[7, 8, 9], predicted_labels=[7, 8, 9])
    assert wrong.label_accuracy == 0.0
    unpaired = score_reconstruction(truth, recon, true_labels=[7, 8, 9], predicted_labels=[7, 8, 9], labels_paired=False)
    assert unpaired.label_accuracy == 1.0
    assert scores.to_dict()["psnr_mean"] == "inf"


def test_scores_refuse_normalised_images():
    truth = np.zeros((1, 3, 8, 8))
    with pytest.raises(InvalidParameterError, match=r"de-normalised to \[0, 1\]"):
        score_reconstruction(truth, truth - 1.5)


def test_label_accuracy_multiset():
    assert label_accuracy([1, 1, 2, 3], [1, 2, 2, 3], paired=False) == pytest.approx(0.75)
    assert label_accuracy([1, 1, 2, 3], [1, 2, 2, 3]) == pytest.approx(0.75)
    assert label_accuracy([0, 1], [1, 0]) == 0.0


def test_roc_matches_sklearn_including_ties():
    rng = np.random.default_rng(5)
    members = np.round(rng.normal(1.0, 1.0, 300), 1)  # rounding creates ties
    others = np.round(rng.normal(0.0, 1.0, 400), 1)
    fpr, tpr, thresholds = roc_curve(members, others)
    labels = np.r_[np.ones(300), np.zeros(400)]
    sk_fpr, sk_tpr, _ = sk_roc_curve(labels, np.r_[members, others], drop_intermediate=False)
    assert np.allclose(fpr, sk_fpr) and np.allclose(tpr, sk_tpr)
    assert thresholds[0] == np.inf and np.all(np.diff(thresholds[1:]) < 0)
    assert roc_auc(members, others) == pytest.approx(roc_auc_score(labels, np.r_[members, others]))


def test_tpr_at_fixed_fpr_by_hand():
    members = [0.9, 0.8, 0.7, 0.3]
    others = [0.85, 0.4, 0.2, 0.1, 0.05]
    # t = 0.9: tpr 1/4, fpr 0; t = 0.85: fpr 1/5; t = 0.7: tpr 3/4, fpr 1/5
    assert tpr_at_fpr(members, others, 0.0) == pytest.approx(0.25)
    assert tpr_at_fpr(members, others, 0.2) == pytest.approx(0.75)
    assert tpr_at_fpr(members, others, 1.0) == pytest.approx(1.0)
    with pytest.raises(InvalidParameterError):
        tpr_at_fpr(members, others, 1.5)
    with pytest.raises(InvalidParameterError, match="empty"):
        roc_curve([], others)
