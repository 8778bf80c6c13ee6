"""FedReg's modified gradient (eq. 12), FGSM pseudo data with a straight-through sign, and the local step."""

import pytest
import torch

from attacks.inversion import FedAvgRelease, release_update
from attacks.inversion.functional_model import FunctionalModel, flat_dot, one_hot
from privaudit.errors import InvalidParameterError
from privaudit.papers.fedreg.defences import FedRegMGRelease
from privaudit.papers.fedreg.forward import FedRegLocalTraining
from privaudit.papers.fedreg.local_step import fgsm_pseudo_inputs, modified_gradient, sign_straight_through
from tests.attacks.toy_models import COLOUR_8, seeded_weights, small_cnn, unit_images


def _random_grads(seed):
    g = torch.Generator().manual_seed(seed)
    return {"w": torch.randn(4, 3, generator=g), "b": torch.randn(4, generator=g)}


def test_modified_gradient_removes_the_pseudo_direction():
    data, pseudo = _random_grads(0), _random_grads(1)
    mg = modified_gradient(data, pseudo)
    assert abs(float(flat_dot(mg, pseudo))) < 1e-5
    v = flat_dot(data, pseudo) / flat_dot(pseudo, pseudo)
    for k in data:
        assert torch.allclose(mg[k], data[k] - v * pseudo[k])
    again = modified_gradient(mg, pseudo)  # a projection: applying it twice changes nothing
    for k in mg:
        assert torch.allclose(again[k], mg[k], atol=1e-6)


def test_modified_gradient_edge_cases():
    data = _random_grads(2)
    zero = {k: torch.zeros_like(v) for k, v in data.items()}
    unchanged = modified_gradient(data, zero)
    assert all(torch.equal(unchanged[k], data[k]) for k in data)
    parallel = {k: 3.0 * v for k, v in data.items()}
    assert all(torch.allclose(v, torch.zeros_like(v), atol=1e-6) for v in modified_gradient(data, parallel).values())
    with pytest.raises(InvalidParameterError):
        modified_gradient(data, {"w": data["w"]})


def test_straight_through_sign():
    v = torch.tensor([-2.0, -0.5, 0.0, 0.3, 1.5], requires_grad=True)
    out = sign_straight_through(v)
    assert torch.equal(out, torch.sign(v))
    (grad,) = torch.autograd.grad(out.sum(), v)
    assert grad.tolist() == [0.0, 1.0, 1.0, 1.0, 0.0]


def test_fgsm_ascends_the_loss_and_respects_the_box():
    weights = seeded_weights(small_cnn, 0)
    model = FunctionalModel.build(small_cnn, weights)
    x = COLOUR_8.from_unit_range(unit_images(2, COLOUR_8, 0))
    y = one_hot(torch.tensor([1, 2]), 10)
    box = COLOUR_8.box()
    pseudo = fgsm_pseudo_inputs(model, model.params, x, y, step_size=0.5, steps=5, box=box)
    assert torch.all(pseudo >= box[0] - 1e-6) and torch.all(pseudo <= box[1] + 1e-6)
    unclamped = fgsm_pseudo_inputs(model, model.params, x, y, step_size=0.5, steps=5, box=None)
    assert (unclamped < box[0] - 0.1).any() or (unclamped > box[1] + 0.1).any()  # the reference code's bug
    from attacks.inversion.functional_model import soft_cross_entropy

    small = fgsm_pseudo_inputs(model, model.params, x, y, step_size=0.01, steps=3, box=box)
    with torch.no_grad():
        assert soft_cross_entropy(model(model.params, small), y) > soft_cross_entropy(model(model.params, x), y)
    candidate = x.clone().requires_grad_(True)
    differentiable = fgsm_pseudo_inputs(model, model.params, candidate, y, 0.1, 3, box, gradient="straight-through")
    assert torch.allclose(differentiable, fgsm_pseudo_inputs(model, model.params, x, y, 0.1, 3, box))
    (grad,) = torch.autograd.grad(differentiable.sum(), candidate)
    assert torch.isfinite(grad).all() and grad.abs().sum() > 0
    held = fgsm_pseudo_inputs(model, model.params, candidate, y, 0.1, 3, box, gradient="identity")
    assert torch.allclose(held, differentiable.detach(), atol=1e-6)
    (grad,) = torch.autograd.grad(held.sum(), candidate)
    assert torch.equal(grad, torch.ones_like(grad))
    with pytest.raises(InvalidParameterError, match="unknown FGSM gradient"):
        fgsm_pseudo_inputs(model, model.params, x, y, 0.1, 1, box, gradient="sign")


def _fedreg(**kw):
    defaults = dict(lr=0.1, local_steps=2, gamma=0.5, pseudo_step=0.1, fgsm_steps=3, box=COLOUR_8.box())
    return FedRegLocalTraining(**{**defaults, **kw})


@pytest.mark.parametrize("fgsm_gradient", ["straight-through", "identity"])
def test_release_and_attacker_simulation_agree(fgsm_gradient):
    weights = seeded_weights(small_cnn, 1)
    model = FunctionalModel.build(small_cnn, weights)
    x = COLOUR_8.from_unit_range(unit_images(2, COLOUR_8, 1))
    y = one_hot(torch.tensor([3, 4]), 10)
    released = _fedreg().simulate(model, x, y, create_graph=False)
    candidate = x.clone().requires_grad_(True)
    simulated = _fedreg(fgsm_gradient=fgsm_gradient).simulate(model, candidate, y, create_graph=True)
    for k in released:
        assert torch.allclose(released[k], simulated[k].detach(), atol=1e-6)
    (grad,) = torch.autograd.grad(sum((v**2).sum() for v in simulated.values()), candidate)
    assert torch.isfinite(grad).all() and grad.abs().sum() > 0


def test_without_mg_and_regulariser_fedreg_with_gamma_one_is_fedavg():
    weights = seeded_weights(small_cnn, 2)
    x = COLOUR_8.from_unit_range(unit_images(2, COLOUR_8, 2))
    y = torch.tensor([5, 6])
    plain = release_update(FedAvgRelease(lr=0.1, local_steps=3), small_cnn, weights, x, y, COLOUR_8)
    fedreg = release_update(
        FedRegMGRelease(lr=0.1, local_steps=3, gamma=1.0, use_modified_gradient=False, regularize=False, fgsm_steps=2),
        small_cnn, weights, x, y, COLOUR_8,
    )
    for k in plain.update:
        assert torch.allclose(plain.update[k], fedreg.update[k], atol=1e-6)


def test_one_mg_step_is_orthogonal_to_the_uniform_label_pseudo_gradient():
    weights = seeded_weights(small_cnn, 3)
    model = FunctionalModel.build(small_cnn, weights)
    x = COLOUR_8.from_unit_range(unit_images(1, COLOUR_8, 3))
    y = one_hot(torch.tensor([7]), 10)
    delta = _fedreg(local_steps=1, regularize=False).simulate(model, x, y, create_graph=False)
    pseudo = fgsm_pseudo_inputs(model, model.params, x, y, 0.1, 3, COLOUR_8.box())
    from attacks.inversion.client_simulation import fresh_leaves, loss_gradient

    uniform = torch.full((1, 10), 0.1)
    g_uniform = loss_gradient(model, fresh_leaves(model.params), pseudo, uniform, create_graph=False)
    cosine = flat_dot(delta, g_uniform) / torch.sqrt(flat_dot(delta, delta) * flat_dot(g_uniform, g_uniform))
    assert abs(float(cosine)) < 1e-4
