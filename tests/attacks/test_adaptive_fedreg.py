"""The adaptive FedReg attacker's client model: exact for plain FedReg and FedReg+MG, with the defence's settings."""

import dataclasses

import pytest
import torch

from attacks.inversion import release_update
from attacks.inversion.adaptive_mg import AdaptiveMGConfig, fedreg_simulator
from attacks.inversion.experiment import InversionExperiment, _attack_options, parse_defence
from attacks.inversion.functional_model import FunctionalModel, one_hot
from attacks.inversion.objectives import cosine_distance
from tests.attacks.toy_models import COLOUR_8, seeded_weights, small_cnn, unit_images

FEDREG = {"lr": 0.1, "local_steps": 1, "gamma": 0.5, "pseudo_step": 1e-3, "fgsm_steps": 10}


@pytest.mark.parametrize("spec", ["fedreg", "fedreg-mg"])
@pytest.mark.parametrize("fgsm_gradient", ["straight-through", "identity"])
def test_simulating_the_true_example_reproduces_the_release(spec, fgsm_gradient):
    defence = parse_defence(spec, FEDREG)
    options = _attack_options(InversionExperiment(attack="adaptive-mg", defence=spec, defence_options=FEDREG), defence)
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
