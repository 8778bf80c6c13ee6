"""Inverting Gradients on small CNNs: beats a random baseline; unrolling local steps beats FedSGD-assuming."""

import numpy as np
import pytest
import torch

from attacks.inversion import (
    ClientKnowledge,
    FedAvgRelease,
    FedSGDRelease,
    InversionPayload,
    build_attack,
    release_update,
)
from attacks.inversion.descent import step_milestones
from attacks.metrics import score_reconstruction
from tests.attacks.toy_models import COLOUR_8, seeded_weights, small_cnn, unit_images


def _psnr(truth, result):
    return score_reconstruction(truth, COLOUR_8.to_unit_range(result.images)).psnr[0]


def test_step_milestones_are_at_three_five_seven_eighths():
    assert step_milestones(800) == [300, 500, 700]
    assert step_milestones(24_000) == [9_000, 15_000, 21_000]


def test_ig_beats_a_random_image_within_a_few_hundred_iterations():
    weights = seeded_weights(small_cnn, 0)
    truth = unit_images(1, COLOUR_8, 0)
    payload = release_update(FedSGDRelease(), small_cnn, weights, COLOUR_8.from_unit_range(truth), torch.tensor([3]), COLOUR_8)
    result = build_attack("ig", iterations=250).reconstruct(payload, seed=0)
    baseline = np.mean([
        score_reconstruction(truth, torch.rand((1, 3, 8, 8), generator=torch.Generator().manual_seed(s))).psnr[0]
        for s in range(5)
    ])
    assert result.labels.tolist() == [3]
    assert _psnr(truth, result) >= baseline + 8.0
    assert result.matching_loss < result.loss_trace[0]
    assert result.settings["client_model"] == {"client_training": "fedsgd-gradient"}


def test_ig_is_reproducible_for_a_seed():
    weights = seeded_weights(small_cnn, 1)
    truth = unit_images(1, COLOUR_8, 1)
    payload = release_update(FedSGDRelease(), small_cnn, weights, COLOUR_8.from_unit_range(truth), torch.tensor([2]), COLOUR_8)
    attack = build_attack("ig", iterations=20, restarts=2)
    a, b = attack.reconstruct(payload, seed=4), attack.reconstruct(payload, seed=4)
    assert torch.equal(a.images, b.images)
    assert len(a.settings["restart_matching_losses"]) == 2
    assert a.matching_loss == min(a.settings["restart_matching_losses"])
    assert not torch.equal(a.images, attack.reconstruct(payload, seed=5).images)


def test_box_constraint_keeps_candidates_in_the_data_range():
    weights = seeded_weights(small_cnn, 2)
    payload = release_update(FedSGDRelease(), small_cnn, weights, COLOUR_8.from_unit_range(unit_images(1, COLOUR_8, 2)),
                             torch.tensor([0]), COLOUR_8)
    images = build_attack("ig", iterations=10, lr=1.0).reconstruct(payload).images
    low, high = COLOUR_8.box()
    assert torch.all(images >= low - 1e-6) and torch.all(images <= high + 1e-6)


@pytest.mark.parametrize("seed", [1, 2])
def test_unrolled_attack_beats_a_fedsgd_assuming_attacker_on_a_multi_step_update(seed):
    weights = seeded_weights(small_cnn, seed)
    truth = unit_images(1, COLOUR_8, seed)
    lr = 0.5
    payload = release_update(FedAvgRelease(lr=lr, local_steps=5), small_cnn, weights,
                             COLOUR_8.from_unit_range(truth), torch.tensor([3]), COLOUR_8)
    unrolled = build_attack("ig", iterations=200).reconstruct(payload, seed=0)
    assert unrolled.settings["client_model"]["client_training"] == "fedavg-unrolled"
    # The FedSGD-assuming attacker reads the delta as one gradient step: −Δ/η.
    as_gradient = InversionPayload(
        payload.model_factory, payload.global_weights, {k: -v / lr for k, v in payload.update.items()},
        payload.data, ClientKnowledge(num_examples=1),
    )
    single = build_attack("ig", iterations=200).reconstruct(as_gradient, seed=0)
    assert _psnr(truth, unrolled) >= _psnr(truth, single) + 5.0
