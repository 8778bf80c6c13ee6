"""The attacker's client simulations agree with ordinary torch training; DP-SGD release properties."""

import pytest
import torch
import torch.nn.functional as F

from attacks.inversion import DPSGDRelease, FedAvgRelease, FedSGDRelease, release_update
from attacks.inversion.client_simulation import FedSGDGradient, UnrolledLocalSGD
from attacks.inversion.functional_model import FunctionalModel, one_hot
from tests.attacks.toy_models import COLOUR_8, seeded_weights, small_cnn, unit_images


def _setup(count=4, seed=0):
    weights = seeded_weights(small_cnn, seed)
    x = COLOUR_8.from_unit_range(unit_images(count, COLOUR_8, seed))
    y = torch.arange(count) % 10
    return weights, x, y


def test_fedsgd_gradient_equals_module_backward():
    weights, x, y = _setup()
    module = small_cnn()
    module.load_state_dict(weights)
    F.cross_entropy(module(x), y).backward()
    model = FunctionalModel.build(small_cnn, weights)
    simulated = FedSGDGradient().simulate(model, x, one_hot(y, 10), create_graph=False)
    for name, p in module.named_parameters():
        assert torch.allclose(simulated[name], p.grad, atol=1e-6)


@pytest.mark.parametrize("mu", [0.0, 0.5])
def test_unrolled_sgd_equals_an_optimizer_loop(mu):
    weights, x, y = _setup(count=6, seed=1)
    module = small_cnn()
    module.load_state_dict(weights)
    start = {n: p.detach().clone() for n, p in module.named_parameters()}
    optimizer = torch.optim.SGD(module.parameters(), lr=0.3)
    batches = [slice(0, 4), slice(4, 6)]
    for step in range(3):
        optimizer.zero_grad()
        batch = batches[step % 2]
        loss = F.cross_entropy(module(x[batch]), y[batch])
        loss = loss + 0.5 * mu * sum(((p - start[n]) ** 2).sum() for n, p in module.named_parameters())
        loss.backward()
        optimizer.step()
    model = FunctionalModel.build(small_cnn, weights)
    sgd = UnrolledLocalSGD(lr=0.3, local_steps=3, batch_size=4, proximal_mu=mu)
    for create_graph in (False, True):
        delta = sgd.simulate(model, x, one_hot(y, 10), create_graph=create_graph)
        for name, p in module.named_parameters():
            assert torch.allclose(delta[name], p.detach() - start[name], atol=1e-5)


def test_unrolled_delta_is_differentiable_in_the_inputs():
    weights, x, y = _setup(count=2, seed=2)
    model = FunctionalModel.build(small_cnn, weights)
    candidate = x.clone().requires_grad_(True)
    delta = UnrolledLocalSGD(lr=0.1, local_steps=2).simulate(model, candidate, one_hot(y, 10), create_graph=True)
    (grad,) = torch.autograd.grad(sum(v.sum() for v in delta.values()), candidate)
    assert torch.isfinite(grad).all() and grad.abs().sum() > 0


def test_dpsgd_without_noise_and_with_a_large_clip_is_fedavg():
    weights, x, y = _setup(count=3, seed=3)
    fedavg = release_update(FedAvgRelease(lr=0.1, local_steps=2), small_cnn, weights, x, y, COLOUR_8)
    dp = release_update(DPSGDRelease(lr=0.1, local_steps=2, clip_norm=1e6, noise_multiplier=0.0), small_cnn, weights, x, y, COLOUR_8)
    for name in fedavg.update:
        assert torch.allclose(fedavg.update[name], dp.update[name], atol=1e-6)


def test_dpsgd_clips_each_example():
    weights, x, y = _setup(count=3, seed=4)
    clip, lr = 1e-3, 1.0
    dp = release_update(DPSGDRelease(lr=lr, local_steps=1, clip_norm=clip, noise_multiplier=0.0), small_cnn, weights, x, y, COLOUR_8)
    norm = torch.sqrt(sum((v**2).sum() for v in dp.update.values()))
    assert norm <= lr * clip * (1 + 1e-5)  # mean of 3 vectors of norm ≤ C
    assert norm > 0.5 * lr * clip  # the examples' gradients are far above C, so clipping binds


def test_dpsgd_noise_is_seeded_and_has_the_right_scale():
    weights, x, y = _setup(count=2, seed=5)
    defence = DPSGDRelease(lr=1.0, local_steps=1, clip_norm=1.0, noise_multiplier=10.0)
    a = release_update(defence, small_cnn, weights, x, y, COLOUR_8, seed=11)
    b = release_update(defence, small_cnn, weights, x, y, COLOUR_8, seed=11)
    c = release_update(defence, small_cnn, weights, x, y, COLOUR_8, seed=12)
    flat = torch.cat([v.flatten() for v in a.update.values()])
    assert torch.equal(flat, torch.cat([v.flatten() for v in b.update.values()]))
    assert not torch.equal(flat, torch.cat([v.flatten() for v in c.update.values()]))
    # noise std per coordinate = lr·σ·C / B = 5; the clipped signal (norm ≤ 1) is negligible
    assert flat.std().item() == pytest.approx(5.0, rel=0.05)


def test_release_records_what_the_server_knows():
    weights, x, y = _setup(count=2, seed=6)
    payload = release_update(FedSGDRelease(), small_cnn, weights, x, y, COLOUR_8)
    assert payload.knowledge.update_kind == "gradient" and payload.knowledge.labels is None
    payload = release_update(FedAvgRelease(lr=0.2, local_steps=3, batch_size=1), small_cnn, weights, x, y, COLOUR_8, labels_known=True)
    assert payload.knowledge.labels == tuple(y.tolist())
    assert (payload.knowledge.lr, payload.knowledge.local_steps, payload.knowledge.batch_size) == (0.2, 3, 1)
