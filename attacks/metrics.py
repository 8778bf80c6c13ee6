"""Scores for attacks: reconstruction quality (PSNR, SSIM, label accuracy) and ROC helpers.

Reconstruction quality follows one fixed convention:

* images are de-normalised to [0, 1] and clamped before scoring (the caller passes [0, 1] arrays);
* PSNR = 10·log10(1 / MSE) with ``data_range = 1`` (scikit-image ``peak_signal_noise_ratio``); identical
  images score +inf;
* SSIM is scikit-image ``structural_similarity`` (Wang et al. 2004) with ``data_range = 1``,
  ``channel_axis`` for colour and the default 7×7 window — smaller images use the largest odd window
  that fits (at least 3; the window used is reported). It is *not* breaching's CW-SSIM;
* reconstructions are put in ground-truth order first by the Hungarian algorithm on pairwise MSE
  (``scipy.optimize.linear_sum_assignment``), never by taking each image's best match (which flatters
  batches, as GradAttack's ``calc_metric`` does).

Membership scores: :func:`roc_curve` and :func:`tpr_at_fpr` treat higher scores as "member". They are
plain empirical curves; confidence intervals are the auditor's job.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.optimize import linear_sum_assignment
from skimage.metrics import peak_signal_noise_ratio, structural_similarity

from privaudit.errors import InvalidParameterError
from privaudit.stats.scores import score_array

# ---------------------------------------------------------------------------------------------------
# image layout


def to_hwc(images: Any) -> np.ndarray:
    """Images as a float64 array (N, H, W, C) from (N, C, H, W) or (N, H, W) arrays/tensors in [0, 1]."""
    if hasattr(images, "detach"):
        images = images.detach().cpu().numpy()
    array = np.asarray(images, dtype=np.float64)
    if array.ndim == 3:
        return array[..., None]
    if array.ndim == 4:
        return np.transpose(array, (0, 2, 3, 1))
    raise InvalidParameterError(f"images must have 3 or 4 dimensions (N, [C,] H, W), got shape {array.shape}")


def _check_unit_range(array: np.ndarray, what: str) -> None:
    if not np.all(np.isfinite(array)):
        raise InvalidParameterError(f"{what} contain NaN or infinite values")
    if array.min() < -1e-6 or array.max() > 1 + 1e-6:
        raise InvalidParameterError(
            f"{what} must be de-normalised to [0, 1] before scoring (found values in [{array.min():.3g}, {array.max():.3g}])"
        )


# ---------------------------------------------------------------------------------------------------
# per-image metrics


def mse(reference: np.ndarray, test: np.ndarray) -> float:
    return float(np.mean((np.asarray(reference, np.float64) - np.asarray(test, np.float64)) ** 2))


def psnr(reference: np.ndarray, test: np.ndarray) -> float:
    """PSNR in dB of one image pair in [0, 1] (``data_range = 1``); +inf for identical images."""
    if mse(reference, test) == 0.0:
        return math.inf
    return float(peak_signal_noise_ratio(np.asarray(reference, np.float64), np.asarray(test, np.float64), data_range=1.0))


def ssim_window(height: int, width: int) -> int:
    """scikit-image's default window 7, or the largest odd size ≤ min(H, W) for smaller images (≥ 3)."""
    side = min(height, width)
    if side < 3:
        raise InvalidParameterError(f"SSIM needs images of at least 3×3 pixels, got {height}×{width}")
    return 7 if side >= 7 else (side if side % 2 == 1 else side - 1)


def ssim(reference: np.ndarray, test: np.ndarray) -> float:
    """SSIM of one (H, W, C) image pair in [0, 1]; ``channel_axis`` is used for C > 1."""
    ref = np.asarray(reference, np.float64)
    tst = np.asarray(test, np.float64)
    win = ssim_window(ref.shape[0], ref.shape[1])
    if ref.shape[-1] == 1:
        return float(structural_similarity(ref[..., 0], tst[..., 0], data_range=1.0, win_size=win))
    return float(structural_similarity(ref, tst, data_range=1.0, channel_axis=-1, win_size=win))


# ---------------------------------------------------------------------------------------------------
# matching and aggregate scores


def match_order(reference: np.ndarray, reconstructions: np.ndarray) -> np.ndarray:
    """For each ground-truth image i, the index of the reconstruction assigned to it.

    Minimum-total-MSE assignment (Hungarian algorithm); needs at least as many reconstructions as
    ground-truth images.
    """
    ref = to_hwc(reference)
    rec = to_hwc(reconstructions)
    if rec.shape[0] < ref.shape[0] or ref.shape[1:] != rec.shape[1:]:
        raise InvalidParameterError(
            f"cannot match {rec.shape[0]} reconstructions of shape {rec.shape[1:]} to {ref.shape[0]} images of shape {ref.shape[1:]}"
        )
    diff = ref.reshape(ref.shape[0], 1, -1) - rec.reshape(1, rec.shape[0], -1)
    cost = np.mean(diff**2, axis=2)
    rows, cols = linear_sum_assignment(cost)
    order = np.empty(ref.shape[0], dtype=np.int64)
    order[rows] = cols
    return order


def label_accuracy(true_labels: Sequence[int], predicted: Sequence[int], *, paired: bool = True) -> float:
    """Fraction of correct labels: position-wise when ``paired``, else as multisets (Σ_c min(n_c, n̂_c)/N)."""
    truth = np.asarray(true_labels, dtype=np.int64)
    guess = np.asarray(predicted, dtype=np.int64)
    if truth.size == 0:
        raise InvalidParameterError("no labels to score")
    if paired:
        if truth.shape != guess.shape:
            raise InvalidParameterError(f"{guess.size} predicted labels for {truth.size} examples")
        return float(np.mean(truth == guess))
    classes = np.union1d(truth, guess)
    overlap = sum(min(int(np.sum(truth == c)), int(np.sum(guess == c))) for c in classes)
    return overlap / truth.size


@dataclass
class ReconstructionScores:
    """Per-image and aggregated quality of one reconstruction batch (after Hungarian matching)."""

    psnr: list[float]
    ssim: list[float]
    mse: list[float]
    order: list[int]
    ssim_window: int
    label_accuracy: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def mean_psnr(self) -> float:
        return float(np.mean(self.psnr))

    @property
    def mean_ssim(self) -> float:
        return float(np.mean(self.ssim))

    def to_dict(self) -> dict[str, Any]:
        def safe(v: float) -> float | str:
            return v if math.isfinite(v) else str(v)

        return {
            "psnr": [safe(v) for v in self.psnr],
            "ssim": self.ssim,
            "mse": self.mse,
            "psnr_mean": safe(self.mean_psnr),
            "psnr_median": safe(float(np.median(self.psnr))),
            "psnr_max": safe(float(np.max(self.psnr))),
            "ssim_mean": self.mean_ssim,
            "mse_mean": float(np.mean(self.mse)),
            "order": self.order,
            "ssim_window": self.ssim_window,
            "label_accuracy": self.label_accuracy,
            **self.extra,
        }


def score_reconstruction(
    reference: Any,
    reconstructions: Any,
    *,
    true_labels: Sequence[int] | None = None,
    predicted_labels: Sequence[int] | None = None,
    labels_paired: bool = True,
) -> ReconstructionScores:
    """PSNR/SSIM/MSE per ground-truth image after Hungarian matching, plus label accuracy.

    ``reference`` and ``reconstructions`` are image batches already de-normalised to [0, 1] (see
    :meth:`attacks.inversion.threat_model.DataSpec.to_unit_range`). With ``labels_paired`` the predicted
    label i belongs to reconstruction i and is compared after matching; otherwise labels are compared as
    multisets.
    """
    ref = to_hwc(reference)
    rec = to_hwc(reconstructions)
    _check_unit_range(ref, "ground-truth images")
    _check_unit_range(rec, "reconstructions")
    order = match_order(ref, rec)
    psnrs, ssims, mses = [], [], []
    for i, j in enumerate(order):
        psnrs.append(psnr(ref[i], rec[j]))
        ssims.append(ssim(ref[i], rec[j]))
        mses.append(mse(ref[i], rec[j]))
    accuracy = None
    if true_labels is not None and predicted_labels is not None:
        predicted = np.asarray(predicted_labels, dtype=np.int64)
        if labels_paired:
            if predicted.size != rec.shape[0]:
                raise InvalidParameterError(f"{predicted.size} labels for {rec.shape[0]} reconstructions")
            predicted = predicted[order]
        accuracy = label_accuracy(true_labels, predicted, paired=labels_paired)
    return ReconstructionScores(
        psnr=psnrs, ssim=ssims, mse=mses, order=[int(v) for v in order],
        ssim_window=ssim_window(ref.shape[1], ref.shape[2]), label_accuracy=accuracy,
    )


# ---------------------------------------------------------------------------------------------------
# ROC for membership scores


def roc_curve(member_scores: Any, nonmember_scores: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Empirical ROC of the rule "member iff score ≥ t" over all distinct thresholds t.

    Returns (fpr, tpr, thresholds) with thresholds in decreasing order, starting at +inf (the point
    (0, 0)) and ending at the smallest score (the point (1, 1)). Tied scores move together.
    """
    members = score_array("member scores", member_scores)  # the one validation of scores (privaudit.stats.scores)
    others = score_array("non-member scores", nonmember_scores)
    thresholds = np.unique(np.concatenate([members, others]))[::-1]
    members_sorted = np.sort(members)
    others_sorted = np.sort(others)
    tpr = (members.size - np.searchsorted(members_sorted, thresholds, side="left")) / members.size
    fpr = (others.size - np.searchsorted(others_sorted, thresholds, side="left")) / others.size
    return (
        np.concatenate([[0.0], fpr]),
        np.concatenate([[0.0], tpr]),
        np.concatenate([[np.inf], thresholds]),
    )


def roc_auc(member_scores: Any, nonmember_scores: Any) -> float:
    """Area under the empirical ROC (trapezoids; equals P(member > non-member) + ½ P(tie))."""
    fpr, tpr, _ = roc_curve(member_scores, nonmember_scores)
    return float(np.sum(np.diff(fpr) * (tpr[1:] + tpr[:-1]) / 2.0))


def tpr_at_fpr(member_scores: Any, nonmember_scores: Any, max_fpr: float) -> float:
    """Largest TPR over thresholds whose FPR ≤ ``max_fpr`` (no interpolation between ROC points)."""
    if not 0.0 <= max_fpr <= 1.0:
        raise InvalidParameterError(f"max_fpr must lie in [0, 1], got {max_fpr}")
    fpr, tpr, _ = roc_curve(member_scores, nonmember_scores)
    return float(np.max(tpr[fpr <= max_fpr + 1e-12]))
