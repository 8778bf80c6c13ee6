"""Analytic first-layer recovery: exact for one example, through a transformation layer, batches."""

import functools

import pytest
import torch
from torch import nn

from attacks.inversion import FedAvgRelease, FedSGDRelease, build_attack, release_update
from attacks.metrics import psnr, score_reconstruction, to_hwc
from privaudit.errors import InvalidParameterError
from tests.attacks.toy_models import COLOUR_8, fc_first, seeded_weights, small_cnn, unit_images


def _attack(payload):
    return build_attack("analytic").reconstruct(payload, seed=0)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_one_example_is_recovered_exactly(seed):
    weights = seeded_weights(fc_first, seed)
    truth = unit_images(1, COLOUR_8, seed)
    label = torch.tensor([seed + 3])
    payload = release_update(FedSGDRelease(), fc_first, weights, COLOUR_8.from_unit_range(truth), label, COLOUR_8)
    result = _attack(payload)
    scores = score_reconstruction(truth, COLOUR_8.to_unit_range(result.images), true_labels=[seed + 3],
                                  predicted_labels=result.labels.tolist())
    assert scores.psnr[0] >= 60.0
    assert scores.label_accuracy == 1.0
    assert result.settings["input_map"] == "identity"
    assert result.settings["first_layer"] == "1"


def test_one_step_fedavg_delta_gives_the_same_ratio():
    weights = seeded_weights(fc_first, 5)
    truth = unit_images(1, COLOUR_8, 5)
    payload = release_update(FedAvgRelease(lr=0.5, local_steps=1), fc_first, weights,
                             COLOUR_8.from_unit_range(truth), torch.tensor([1]), COLOUR_8)
    rebuilt = COLOUR_8.to_unit_range(_attack(payload).images)
    assert psnr(to_hwc(truth)[0], to_hwc(rebuilt)[0]) >= 60.0


def _with_known_transform(seed):
    factory = functools.partial(fc_first, transform=True)
    weights = seeded_weights(factory, seed)
    g = torch.Generator().manual_seed(seed)
    weights["0.alpha"] = 0.5 + torch.rand(weights["0.alpha"].shape, generator=g)  # trained, not identity
    weights["0.beta"] = 0.3 * torch.randn(weights["0.beta"].shape, generator=g)
    return factory, weights


def test_recovery_through_a_known_transformation_layer():
    factory, weights = _with_known_transform(7)
    truth = unit_images(1, COLOUR_8, 7)
    payload = release_update(FedSGDRelease(), factory, weights, COLOUR_8.from_unit_range(truth), torch.tensor([4]), COLOUR_8)
    result = _attack(payload)
    assert result.settings["input_map"].startswith("elementwise-affine")
    assert result.settings["first_layer"] == "2"
    assert psnr(to_hwc(truth)[0], to_hwc(COLOUR_8.to_unit_range(result.images))[0]) >= 60.0


def test_unknown_transformation_layer_yields_the_transformed_input():
    factory, weights = _with_known_transform(8)
    truth = unit_images(1, COLOUR_8, 8)
    x = COLOUR_8.from_unit_range(truth)
    payload = release_update(FedSGDRelease(), factory, weights, x, torch.tensor([4]), COLOUR_8,
                             private_parameters=("0.alpha", "0.beta"))
    result = _attack(payload)
    assert result.settings["parameters_unknown_to_attacker"] == ["0.alpha", "0.beta"]
    assert result.settings["input_map"] == "identity"  # the attacker's copy keeps the identity init
    transformed = weights["0.alpha"] * x + weights["0.beta"]
    assert torch.allclose(result.images, transformed, atol=1e-4)
    assert psnr(to_hwc(truth)[0], to_hwc(COLOUR_8.to_unit_range(result.images))[0]) < 30.0


def test_batch_rows_with_a_single_active_example_separate_the_batch():
    factory = functools.partial(fc_first, hidden=256)
    weights = seeded_weights(factory, 3)
    truth = unit_images(4, COLOUR_8, 3)
    labels = torch.tensor([1, 4, 7, 2])
    payload = release_update(FedSGDRelease(), factory, weights, COLOUR_8.from_unit_range(truth), labels, COLOUR_8)
    result = _attack(payload)
    assert result.settings["candidates_with_agreeing_rows"] == 4
    assert result.settings["labels_paired"] is False
    scores = score_reconstruction(truth, COLOUR_8.to_unit_range(result.images), true_labels=labels.tolist(),
                                  predicted_labels=result.labels.tolist(), labels_paired=False)
    assert min(scores.psnr) >= 60.0
    assert scores.label_accuracy == 1.0


def test_batch_through_the_logit_layer_is_not_separable():
    factory = functools.partial(nn.Sequential, nn.Flatten(), nn.Linear(192, 10))
    weights = seeded_weights(factory, 4)
    truth = unit_images(3, COLOUR_8, 4)
    payload = release_update(FedSGDRelease(), factory, weights, COLOUR_8.from_unit_range(truth),
                             torch.tensor([0, 1, 2]), COLOUR_8)
    result = _attack(payload)
    assert result.settings["candidates_with_agreeing_rows"] == 0


def test_conv_first_model_is_rejected_with_one_line():
    weights = seeded_weights(small_cnn, 0)
    payload = release_update(FedSGDRelease(), small_cnn, weights, torch.zeros(1, 3, 8, 8), torch.tensor([0]), COLOUR_8)
    with pytest.raises(InvalidParameterError, match="fully connected first layer with bias; the first trainable layer is Conv2d") as info:
        _attack(payload)
    assert "\n" not in str(info.value)


def test_first_layer_without_bias_is_rejected():
    factory = functools.partial(nn.Sequential, nn.Flatten(), nn.Linear(192, 32, bias=False), nn.ReLU(), nn.Linear(32, 10))
    weights = seeded_weights(factory, 0)
    payload = release_update(FedSGDRelease(), factory, weights, torch.zeros(1, 3, 8, 8), torch.tensor([0]), COLOUR_8)
    with pytest.raises(InvalidParameterError, match="needs a bias"):
        _attack(payload)


def test_non_elementwise_map_before_the_fc_layer_is_rejected():
    factory = functools.partial(nn.Sequential, nn.Flatten(), nn.Tanh(), nn.Linear(192, 10))
    weights = seeded_weights(factory, 0)
    payload = release_update(FedSGDRelease(), factory, weights, torch.rand(1, 3, 8, 8), torch.tensor([0]), COLOUR_8)
    with pytest.raises(InvalidParameterError, match="elementwise affine"):
        _attack(payload)
