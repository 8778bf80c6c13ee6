"""The adaptive FedReg attacker: its client model is exact for plain FedReg and FedReg+MG, with the defence's settings;
the options that make it invert plain FedReg (analytic start, continuation, best iterate)."""

import dataclasses

import pytest
import torch

from attacks.inversion import release_update
from attacks.inversion.experiment import InversionExperiment, attack_options_for, parse_defence
from attacks.inversion.functional_model import FunctionalModel, one_hot
from attacks.inversion.objectives import cosine_distance
from attacks.inversion.smooth_activation import (
    SmoothLeakyReLU,
    Temperature,
    annealed_temperature,
    smoothed_copy,
)
from attacks.metrics import score_reconstruction
from privaudit.errors import InvalidParameterError
from privaudit.papers.fedreg.attacks import AdaptiveMGAttack, AdaptiveMGConfig, fedreg_simulator
from privaudit.papers.fedreg.defences import FedRegMGRelease
from tests.attacks.toy_models import COLOUR_8, fc_first, seeded_weights, small_cnn, unit_images

FEDREG = {"lr": 0.1, "local_steps": 1, "gamma": 0.5, "pseudo_step": 1e-3, "fgsm_steps": 10}


@pytest.mark.parametrize("spec", ["fedreg", "fedreg-mg"])
@pytest.mark.parametrize("fgsm_gradient", ["straight-through", "identity"])
def test_simulating_the_true_example_reproduces_the_release(spec, fgsm_gradient):
    defence = parse_defence(spec, FEDREG)
    options = attack_options_for(InversionExperiment(attack="adaptive-mg", defence=spec, defence_options=FEDREG), defence)
    assert options["use_modified_gradient"] is (spec == "fedreg-mg")  # the attacker assumes the defence's protocol
    config = AdaptiveMGConfig(**options, fgsm_gradient=fgsm_gradient)
    x = COLOUR_8.from_unit_range(unit_images(1, COLOUR_8, 3))
    label = torch.tensor([2])
    payload = release_update(defence, small_cnn, seeded_weights(small_cnn, 3), x, label, COLOUR_8)
    model = FunctionalModel.from_payload(payload)
    candidate = x.clone().requires_grad_(True)
    simulated = fedreg_simulator(payload, config).simulate(model, candidate, one_hot(label, 10), create_graph=True)
    assert float(cosine_distance(simulated, payload.update).detach()) == pytest.approx(0.0, abs=1e-6)
    (grad,) = torch.autograd.grad(cosine_distance(simulated, payload.update), candidate)
    assert torch.isfinite(grad).all()  # differentiable through the unrolled step


def test_a_wrong_protocol_does_not_reproduce_the_release():
    defence = parse_defence("fedreg", FEDREG)
    x = COLOUR_8.from_unit_range(unit_images(1, COLOUR_8, 3))
    label = torch.tensor([2])
    payload = release_update(defence, small_cnn, seeded_weights(small_cnn, 3), x, label, COLOUR_8)
    model = FunctionalModel.from_payload(payload)
    right = AdaptiveMGConfig(use_modified_gradient=False, pseudo_step=1e-3)
    wrong = dataclasses.replace(right, use_modified_gradient=True)  # assumes MG the client did not use
    targets = one_hot(label, 10)
    exact = fedreg_simulator(payload, right).simulate(model, x, targets, create_graph=False)
    off = fedreg_simulator(payload, wrong).simulate(model, x, targets, create_graph=False)
    assert float(cosine_distance(exact, payload.update)) < 1e-6 < float(cosine_distance(off, payload.update))


# -- the options that make the adaptive attack invert plain FedReg ---------------------------------------------------
PLAIN = {"gamma": 0.5, "pseudo_step": 1e-3, "fgsm_steps": 10, "use_modified_gradient": False, "fgsm_gradient": "identity"}


def _plain_fedreg_payload(factory, seed):
    truth = unit_images(1, COLOUR_8, seed)
    defence = FedRegMGRelease(lr=0.1, local_steps=1, gamma=0.5, pseudo_step=1e-3, fgsm_steps=10,
                              use_modified_gradient=False)
    payload = release_update(defence, factory, seeded_weights(factory, seed), COLOUR_8.from_unit_range(truth),
                             torch.tensor([3]), COLOUR_8, labels_known=True)
    return truth, payload


def _psnr(truth, result):
    return score_reconstruction(truth, COLOUR_8.to_unit_range(result.images)).psnr[0]


@pytest.mark.parametrize("seed", [0, 2])
def test_the_analytic_start_inverts_plain_fedreg_where_random_starts_do_not(seed):
    # measured (100 iterations, seeds 0/1/2): random start 20.4 / 18.5 / 14.5 dB, analytic start 85.8 / 84.9 / 71.2 dB
    truth, payload = _plain_fedreg_payload(fc_first, seed)
    common = {"iterations": 50, "tv_weight": 0.0, **PLAIN}
    random_start = AdaptiveMGAttack(AdaptiveMGConfig(**common)).reconstruct(payload, seed=0)
    seeded = AdaptiveMGAttack(AdaptiveMGConfig(**common, start="analytic", lr=1e-3, keep_best_iterate=True)).reconstruct(
        payload, seed=0)
    assert _psnr(truth, seeded) >= 40.0 and _psnr(truth, seeded) >= _psnr(truth, random_start) + 20.0
    assert seeded.settings["restart_starts"] == ["analytic"] and seeded.settings["config"]["start"] == "analytic"


def test_the_analytic_start_needs_a_fully_connected_first_layer():
    _, payload = _plain_fedreg_payload(small_cnn, 0)
    with pytest.raises(InvalidParameterError, match="fully connected first layer"):
        AdaptiveMGAttack(AdaptiveMGConfig(iterations=2, start="analytic", **PLAIN)).reconstruct(payload)


def test_keeping_the_best_iterate_never_returns_a_worse_one():
    _, payload = _plain_fedreg_payload(small_cnn, 1)
    common = {"iterations": 30, **PLAIN}
    last = AdaptiveMGAttack(AdaptiveMGConfig(**common, smooth_temperature=0.1)).reconstruct(payload, seed=0)
    best = AdaptiveMGAttack(AdaptiveMGConfig(**common, smooth_temperature=0.1, keep_best_iterate=True)).reconstruct(
        payload, seed=0)  # the same trajectory: only the returned iterate differs
    assert best.matching_loss <= last.matching_loss and best.settings["returned_iterate"] <= 30


def test_continuation_ends_on_the_exact_model_and_records_its_schedule():
    _, payload = _plain_fedreg_payload(small_cnn, 0)
    config = AdaptiveMGConfig(iterations=8, smooth_temperature=0.5, smooth_fraction=0.5, **PLAIN)
    result = AdaptiveMGAttack(config).reconstruct(payload, seed=0)
    assert result.settings["continuation"]["annealed_iterations"] == 4
    assert result.settings["continuation"]["exact_iterations"] == 4
    model = FunctionalModel.from_payload(payload)
    exact = cosine_distance(fedreg_simulator(payload, config).simulate(model, result.images, one_hot(torch.tensor([3]), 10),
                                                                        create_graph=False), payload.update)
    assert result.matching_loss == pytest.approx(float(exact), abs=1e-5)  # scored on the exact activation


@pytest.mark.parametrize(("options", "message"), [
    ({"start": "zeros"}, "unknown start 'zeros'"), ({"smooth_temperature": -1.0}, "smooth_temperature"),
    ({"smooth_fraction": 0.0}, "smooth_fraction")])
def test_bad_continuation_options_are_one_clear_error(options, message):
    with pytest.raises(InvalidParameterError, match=message):
        AdaptiveMGConfig(**options)


def test_the_smooth_surrogate_tends_to_the_exact_activation():
    z = torch.linspace(-3, 3, 101)
    temperature = Temperature(0.0)
    act = SmoothLeakyReLU(0.2, temperature)
    assert torch.equal(act(z), torch.nn.functional.leaky_relu(z, 0.2))
    for tau in (0.1, 0.01):
        temperature.value = tau
        error = (act(z) - torch.nn.functional.leaky_relu(z, 0.2)).abs().max()
        assert 0 < error <= 0.8 * tau * 0.6932  # (1 − a)·τ·log 2
    assert [annealed_temperature(1.0, k, 4) for k in (0, 4, 5)] == [1.0, 0.0, 0.0]
    assert annealed_temperature(1.0, 2, 4) == pytest.approx(1e-3 ** 0.5)


def test_the_smoothed_copy_shares_parameters_and_refuses_models_without_relu():
    _, payload = _plain_fedreg_payload(small_cnn, 0)
    model = FunctionalModel.from_payload(payload)
    smooth, temperature = smoothed_copy(model)
    x = torch.randn(2, *COLOUR_8.shape)
    assert torch.equal(smooth(smooth.params, x), model(model.params, x)) and smooth.params is model.params
    temperature.value = 0.5
    assert not torch.allclose(smooth(smooth.params, x), model(model.params, x))
    assert sum(isinstance(m, SmoothLeakyReLU) for m in smooth.module.modules()) == 2
    linear = FunctionalModel.build(lambda: torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(192, 10)), {})
    with pytest.raises(InvalidParameterError, match=r"nn\.ReLU or nn\.LeakyReLU"):
        smoothed_copy(linear)
