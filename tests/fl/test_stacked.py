"""Stacked forward passes: the ``layers`` construction, the ``vmap`` fallback, and refusals."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.func import functional_call

from privaudit.fl.engine.stacked import build_stacked_model
from privaudit.models import build_model


def _check(model: nn.Module, input_shape: tuple[int, ...], expected_kind: str) -> None:
    stacked = build_stacked_model(model, input_shape)
    assert stacked is not None and stacked.kind == expected_kind
    generator = torch.Generator().manual_seed(0)
    params = {n: torch.stack([p.detach() + torch.randn(p.shape, generator=generator) for _ in range(3)]) for n, p in model.named_parameters()}
    x = torch.randn((3, 4, *input_shape), generator=generator)
    got = stacked.forward(params, x)
    for lane in range(3):
        want = functional_call(model, {n: t[lane] for n, t in params.items()}, (x[lane],))
        torch.testing.assert_close(got[lane], want, rtol=1e-4, atol=1e-4)


def test_logistic_regression_and_mlps_use_the_layer_program():
    _check(build_model("logreg", (20,), 2), (20,), "layers")
    _check(build_model("privatefl-dnn", (1, 8, 8), 10), (1, 8, 8), "layers")
    _check(nn.Sequential(nn.Linear(6, 5), nn.LeakyReLU(0.1), nn.Linear(5, 4), nn.LogSoftmax(dim=1)), (6,), "layers")


def test_convolutional_models_use_grouped_convolutions_in_the_layer_program():
    """Lane by lane what the model computes with that lane's weights (float32 summation order aside)."""
    for name, shape in (("pfa-cnn", (1, 28, 28)), ("fedreg-cnn", (1, 28, 28)), ("convnet", (3, 16, 16)), ("lenet-dlg", (3, 16, 16))):
        model = build_model(name, shape, 10)
        stacked = build_stacked_model(model, shape)
        assert stacked is not None and stacked.kind == "layers" and stacked.convolutional
        generator = torch.Generator().manual_seed(0)
        params = {n: torch.stack([p.detach() * (1 + 0.2 * torch.randn(p.shape, generator=generator)) for _ in range(3)])
                  for n, p in model.named_parameters()}
        x = torch.randn((3, 4, *shape), generator=generator)
        got = stacked.forward(params, x)
        for lane in range(3):
            want = functional_call(model, {n: t[lane] for n, t in params.items()}, (x[lane],))
            torch.testing.assert_close(got[lane], want, rtol=1e-4, atol=1e-5 * float(want.abs().max()) + 1e-6)


def test_convolutions_the_layer_program_cannot_stack_fall_back_to_vmap():
    model = nn.Sequential(nn.Conv2d(1, 2, 3, padding=1, padding_mode="circular"), nn.Flatten(), nn.Linear(2 * 36, 3))
    _check(model, (1, 6, 6), "vmap")


def test_dropout_lanes_draw_their_own_seeded_masks():
    """Lane i's masks are those nn.Dropout draws from the global generator seeded like lane i's generator."""
    model = build_model("upcycled-mlp", (20,), 2)
    stacked = build_stacked_model(model, (20,))
    assert stacked is not None and stacked.kind == "layers" and stacked.random
    generator = torch.Generator().manual_seed(0)
    params = {n: torch.stack([p.detach() + 0.1 * torch.randn(p.shape, generator=generator) for _ in range(3)])
              for n, p in model.named_parameters()}
    x = torch.randn((3, 5, 20), generator=generator)
    seeds, lengths = (7, 8, 9), (5, 3, 1)  # lanes 1 and 2 end in padding rows
    got = stacked.forward(params, x, generators=[torch.Generator().manual_seed(s) for s in seeds], lengths=lengths)
    for lane in range(3):
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seeds[lane])
            want = functional_call(model, {n: t[lane] for n, t in params.items()}, (x[lane, : lengths[lane]],))
        torch.testing.assert_close(got[lane, : lengths[lane]], want)
    with pytest.raises(ValueError, match="one generator per lane"):
        stacked.forward(params, x)


def test_models_with_buffers_are_not_batched():
    assert build_stacked_model(nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4), nn.Linear(4, 2)), (4,)) is None
