"""Label inference: iDLG for one example, bias-corrected counts for a small batch."""

import functools

import pytest
import torch
from torch import nn

from attacks.inversion import FedAvgRelease, FedSGDRelease, build_attack, release_update
from attacks.inversion.labels import round_counts
from tests.attacks.toy_models import COLOUR_8, fc_first, seeded_weights, small_cnn, unit_images


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("factory", [small_cnn, fc_first], ids=["cnn", "mlp"])
def test_idlg_recovers_the_label_on_random_models(seed, factory):
    weights = seeded_weights(factory, 100 + seed)
    label = seed % 10
    x = COLOUR_8.from_unit_range(unit_images(1, COLOUR_8, seed))
    payload = release_update(FedSGDRelease(), factory, weights, x, torch.tensor([label]), COLOUR_8)
    result = build_attack("label").reconstruct(payload, seed=seed)
    assert result.labels.tolist() == [label]
    assert result.settings["label_strategy"] == "idlg"


def test_idlg_without_a_logit_bias_uses_weight_rows():
    factory = functools.partial(nn.Sequential, nn.Flatten(), nn.Linear(192, 32), nn.ReLU(), nn.Linear(32, 10, bias=False))
    for seed in range(4):
        weights = seeded_weights(factory, seed)
        x = COLOUR_8.from_unit_range(unit_images(1, COLOUR_8, seed))
        payload = release_update(FedSGDRelease(), factory, weights, x, torch.tensor([9 - seed]), COLOUR_8)
        assert build_attack("label").reconstruct(payload).labels.tolist() == [9 - seed]


def test_idlg_reads_the_sign_of_a_parameter_delta():
    weights = seeded_weights(small_cnn, 3)
    x = COLOUR_8.from_unit_range(unit_images(1, COLOUR_8, 3))
    payload = release_update(FedAvgRelease(lr=0.1, local_steps=1), small_cnn, weights, x, torch.tensor([6]), COLOUR_8)
    assert build_attack("label").reconstruct(payload).labels.tolist() == [6]


@pytest.mark.parametrize("seed", range(4))
def test_bias_corrected_counts_on_a_batch_with_distinct_labels(seed):
    weights = seeded_weights(small_cnn, 200 + seed)
    labels = torch.randperm(10, generator=torch.Generator().manual_seed(seed))[:4]
    x = COLOUR_8.from_unit_range(unit_images(4, COLOUR_8, seed))
    payload = release_update(FedSGDRelease(), small_cnn, weights, x, labels, COLOUR_8)
    result = build_attack("label").reconstruct(payload, seed=seed)
    assert result.settings["label_strategy"] == "bias-corrected"
    assert sorted(result.labels.tolist()) == sorted(labels.tolist())


def test_bias_corrected_counts_with_a_repeated_label():
    weights = seeded_weights(small_cnn, 9)
    labels = torch.tensor([2, 2, 5])
    x = COLOUR_8.from_unit_range(unit_images(3, COLOUR_8, 9))
    payload = release_update(FedSGDRelease(), small_cnn, weights, x, labels, COLOUR_8)
    assert build_attack("label").reconstruct(payload).labels.tolist() == [2, 2, 5]


def test_round_counts_respects_total_and_required_classes():
    counts = round_counts(torch.tensor([1.6, 0.2, 0.1, 1.4]), 4, torch.tensor([True, False, True, True]))
    assert counts.tolist() == [2, 0, 1, 1]
    assert round_counts(torch.tensor([-0.5, 3.7]), 3, torch.tensor([False, True])).tolist() == [0, 3]


def test_label_inference_needs_a_linear_logit_layer():
    from privaudit.errors import InvalidParameterError

    factory = functools.partial(nn.Sequential, nn.Conv2d(3, 10, 8), nn.Flatten())
    weights = seeded_weights(factory, 0)
    payload = release_update(FedSGDRelease(), factory, weights, torch.rand(1, 3, 8, 8), torch.tensor([0]), COLOUR_8)
    with pytest.raises(InvalidParameterError, match=r"final nn\.Linear"):
        build_attack("label").reconstruct(payload)
