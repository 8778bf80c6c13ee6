"""Local DP-SGD (privaudit.fl.privacy.dpsgd), the transformation's per-sample rule, and the LocalDP wrapper's events and budgets."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn

from privaudit.accounting.accountants import get_accountant
from privaudit.accounting.calibrate import calibrate_noise
from privaudit.accounting.mechanisms import Composition, SubsampledGaussian
from privaudit.data.base import ClientData, FederatedDataset
from privaudit.errors import InvalidParameterError
from privaudit.fl.algorithms.fedavg import FedAvg
from privaudit.fl.engine.config import Execution, FederationConfig, LocalTrainingConfig
from privaudit.fl.engine.local_solver import LocalTask
from privaudit.fl.engine.local_training import LocalObjective
from privaudit.fl.engine.round_loop import run_federation
from privaudit.fl.engine.seeding import SeedTree
from privaudit.fl.engine.trainer import ClientTrainer
from privaudit.fl.privacy import dpsgd
from privaudit.fl.privacy.dpsgd import DPSGD, clip_and_sum, noisy_average, poisson_batches, steps_per_epoch
from privaudit.fl.privacy.local_dp import (
    CalibrationTarget,
    LocalDP,
    LocalDPConfig,
    calibrate_client_noise,
    planned_steps,
)
from privaudit.papers.privatefl.transform import (
    PersonalAffine,
    PersonalisedModel,
    affine_per_sample_gradients,
    build_transform,
)
from tests.fl.conftest import make_dataset, tiny_model


def _trainer(model: nn.Module, *, lr: float = 1.0, batch_size: int = 8, seed: int = 0) -> ClientTrainer:
    local = LocalTrainingConfig(epochs=1, batch_size=batch_size, lr=lr, momentum=0.0)
    return ClientTrainer(model, (model_input_dim(model),), 2, local, Execution.SEQUENTIAL, SeedTree(seed))


def model_input_dim(model: nn.Module) -> int:
    return next(m for m in model.modules() if isinstance(m, nn.Linear)).in_features


def _linear(dim: int, classes: int = 2) -> nn.Module:
    model = nn.Sequential(nn.Linear(dim, classes, bias=False))
    with torch.no_grad():
        model[0].weight.zero_()
    return model


def _task(x: np.ndarray, y: np.ndarray, solver, client: int = 0, epochs: int = 1) -> LocalTask:
    data = ClientData(x, y, x[:0], y[:0])
    return LocalTask(client, data, epochs, LocalObjective(solver=solver))


def _state(model: nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.named_parameters()}


# -- the pieces -------------------------------------------------------------------------------------
def test_clip_and_sum_scales_each_example_to_the_bound():
    g = torch.zeros(3, 2, 2)
    g[0, 0, 0] = 10.0  # norm 10 → scaled to 1
    g[1, 1, 1] = 0.5  # within the bound → unchanged
    g[2] = 3.0  # norm 6 → scaled to 1
    bias = torch.zeros(3, 2)
    bias[2, 0] = 8.0  # example 2's norm over both parameters: √(36 + 64) = 10
    sums, norms = clip_and_sum([g, bias], 1.0)
    assert torch.allclose(norms, torch.tensor([10.0, 0.5, 10.0]))
    assert torch.allclose(sums[0], g[0] / 10.0 + g[1] + g[2] / 10.0, atol=1e-6)
    assert torch.allclose(sums[1], bias[2] / 10.0, atol=1e-6)


def test_noise_std_is_sigma_times_clip_over_the_expected_batch_size():
    generator = torch.Generator().manual_seed(1)
    out = noisy_average([torch.zeros(200_000)], noise_multiplier=1.5, clip_norm=2.0, expected_batch_size=4.0, generator=generator)
    assert float(out[0].std()) == pytest.approx(1.5 * 2.0 / 4.0, rel=0.01)
    assert abs(float(out[0].mean())) < 0.01


def test_poisson_batch_sizes_have_mean_qn():
    batches = poisson_batches(200, 0.1, 3000, np.random.default_rng(0))
    sizes = np.array([len(b) for b in batches])
    assert sizes.mean() == pytest.approx(20.0, abs=0.25)
    assert sizes.var() == pytest.approx(200 * 0.1 * 0.9, rel=0.1)
    assert all(np.all(np.diff(b) > 0) for b in batches)  # each example at most once per batch
    assert steps_per_epoch(64 / 225) == 4 and steps_per_epoch(0.25) == 4 and steps_per_epoch(1.0) == 1


# -- the solver on a model with known per-example gradients -----------------------------------------
@pytest.mark.parametrize("mode", ["ghost", "materialise"])
def test_per_example_clipping_bounds_each_contribution(mode):
    """Bias-free linear model at W = 0: example i's gradient is (½ − 1[c = y_i])·x_i per class row, norm ‖x_i‖/√2."""
    rng = np.random.default_rng(0)
    x = (rng.normal(size=(6, 5)) * 50).astype(np.float32)
    y = np.array([0, 1, 0, 1, 1, 0])
    model = _linear(5)
    trainer = _trainer(model, lr=1.0)
    solver = DPSGD(noise_multiplier=0.0, clip_norm=1.0, sample_rate=1.0, per_sample=mode)
    outcome = trainer.train_one(_state(model), _task(x, y, solver), training_round=1)
    expected = np.zeros((2, 5))
    for xi, yi in zip(x, y, strict=True):
        grad = np.outer(0.5 - (np.arange(2) == yi), xi)
        expected += grad / max(1.0, np.linalg.norm(grad) / 1.0)
    expected /= len(x)  # q·|D| with q = 1
    assert outcome.steps == 1
    assert np.allclose(outcome.state["0.weight"].numpy(), -expected, atol=1e-5)
    assert np.linalg.norm(-expected) <= 1.0 + 1e-6  # an average of contributions of norm ≤ C
    assert outcome.info["clipped_fraction"] == 1.0


def test_noise_in_the_solver_has_std_sigma_c():
    """Zero inputs give zero gradients: one step moves W by −lr·N(0, σ²C²)/(q·|D|)."""
    x = np.zeros((10, 40), dtype=np.float32)
    y = np.zeros(10, dtype=np.int64)
    model = _linear(40, classes=50)
    trainer = _trainer(model, lr=1.0)
    outcome = trainer.train_one(_state(model), _task(x, y, DPSGD(2.0, 0.5, sample_rate=1.0)), training_round=3)
    step = outcome.state["0.weight"].numpy() * 10  # × q·|D|
    assert step.std() == pytest.approx(2.0 * 0.5, rel=0.05)


def test_dpsgd_keeps_the_objectives_proximal_and_linear_terms():
    """FedProx/FedDyn/SCAFFOLD + DP-SGD: the data-independent terms join each noisy step (zero inputs: zero data gradient)."""
    x = np.zeros((10, 6), dtype=np.float32)
    y = np.zeros(10, dtype=np.int64)
    model = _linear(6, classes=3)
    start = _state(model)
    solver = DPSGD(1.0, 1.0, sample_rate=0.5)  # 2 steps per epoch
    trainer = _trainer(model, lr=0.1)
    plain = trainer.train_one(start, LocalTask(0, ClientData(x, y, x[:0], y[:0]), 3, LocalObjective(solver=solver)), 1)
    c = {"0.weight": torch.full((3, 6), 0.25)}
    linear = trainer.train_one(start, LocalTask(0, ClientData(x, y, x[:0], y[:0]), 3, LocalObjective(linear=c, solver=solver)), 1)
    # same noise draws, so the linear term shifts the end point by exactly −lr·steps·c
    torch.testing.assert_close(linear.state["0.weight"], plain.state["0.weight"] - 0.1 * plain.steps * c["0.weight"])
    anchor = {"0.weight": torch.full((3, 6), 5.0)}
    prox = trainer.train_one(start, LocalTask(0, ClientData(x, y, x[:0], y[:0]), 3,
                                              LocalObjective(anchor=anchor, prox=1.0, solver=solver)), 1)
    distance = lambda out: float((out.state["0.weight"] - anchor["0.weight"]).norm())  # noqa: E731
    assert distance(prox) < 0.8 * distance(plain)  # pulled towards the anchor


def test_dp_sgd_is_refused_where_it_would_replace_the_algorithms_own_step():
    from privaudit.fl.algorithms.pfedme import PFedMe
    from privaudit.fl.privacy.registry import privatize

    with pytest.raises(InvalidParameterError, match="no DP-SGD form"):
        privatize(PFedMe(), "dp-sgd", clip=1.0, noise=1.0)


def test_dpsgd_is_repeatable_and_seeded_by_round_and_client():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(30, 5)).astype(np.float32)
    y = rng.integers(0, 2, 30)
    model = _linear(5)
    solver = DPSGD(1.0, 1.0)
    run = lambda r, c, seed=0: _trainer(model, batch_size=8, seed=seed).train_one(_state(model), _task(x, y, solver, client=c), r)  # noqa: E731
    a, b = run(1, 0), run(1, 0)
    assert torch.equal(a.state["0.weight"], b.state["0.weight"]) and a.info["batch_sizes"] == b.info["batch_sizes"]
    assert not torch.equal(a.state["0.weight"], run(2, 0).state["0.weight"])
    assert not torch.equal(a.state["0.weight"], run(1, 1).state["0.weight"])
    assert not torch.equal(a.state["0.weight"], run(1, 0, seed=1).state["0.weight"])
    assert a.steps == steps_per_epoch(8 / 30) == 4 and len(a.info["batch_sizes"]) == 4
    assert a.info["sample_rate"] == pytest.approx(8 / 30)


def test_ghost_and_materialised_per_sample_gradients_agree_with_the_transformation():
    torch.manual_seed(0)
    body = nn.Sequential(nn.Flatten(), nn.Linear(16, 12, bias=False), nn.ReLU(), nn.Linear(12, 3))
    model = PersonalisedModel(body, build_transform((1, 4, 4)))
    with torch.no_grad():
        model.transform.alpha.fill_(1.3)
        model.transform.beta.normal_()
    params = {}
    x, y = torch.randn(9, 1, 4, 4), torch.randint(0, 3, (9,))
    for mode in dpsgd.PER_SAMPLE_MODES:
        module = dpsgd._grad_sample_module(model, mode)
        trainable = list(module._module.parameters())
        params[mode] = dpsgd.clipped_gradient_sum(module, trainable, x, y, 0.7, mode)
    (s1, n1, l1), (s2, n2, l2) = params["ghost"], params["materialise"]
    assert torch.allclose(n1, n2, rtol=1e-4) and torch.allclose(l1, l2)
    assert all(torch.allclose(a, b, atol=1e-5, rtol=1e-4) for a, b in zip(s1, s2, strict=True))


def test_solver_validation():
    for bad in ({"noise_multiplier": -1, "clip_norm": 1}, {"noise_multiplier": 1, "clip_norm": 0},
                {"noise_multiplier": 1, "clip_norm": 1, "sample_rate": 1.5}, {"noise_multiplier": 1, "clip_norm": 1, "per_sample": "x"}):
        with pytest.raises(InvalidParameterError):
            DPSGD(**bad)


# -- the transformation's per-sample gradient rule --------------------------------------------------
@pytest.mark.parametrize(("shape", "alpha", "beta"), [
    ((1, 5, 5), "channel", "pixel"), ((3, 4, 4), "channel", "channel"), ((3, 4, 4), "pixel", "zero"),
    ((2, 3, 3), "fixed", "pixel"), ((7,), "channel", "pixel"), ((7,), "pixel", "channel"),
])
def test_affine_rule_matches_autograd_on_single_examples(shape, alpha, beta):
    torch.manual_seed(2)
    layer = PersonalAffine(shape, alpha, beta)
    with torch.no_grad():
        for p in layer.parameters():
            p.normal_()
    head = nn.Sequential(nn.Flatten(), nn.Linear(math.prod(shape), 3))
    x, y = torch.randn(5, *shape), torch.randint(0, 3, (5,))
    out = layer(x)
    backprops = torch.autograd.grad(nn.functional.cross_entropy(head(out), y, reduction="sum"), out)[0]
    rule = affine_per_sample_gradients(layer, [x], backprops)
    assert set(rule) == set(layer.parameters())
    for i in range(len(x)):
        loss = nn.functional.cross_entropy(head(layer(x[i : i + 1])), y[i : i + 1])
        expected = torch.autograd.grad(loss, list(layer.parameters()))
        for p, g in zip(layer.parameters(), expected, strict=True):
            assert rule[p][i].shape == p.shape
            assert torch.allclose(rule[p][i], g, atol=1e-6)


@pytest.mark.filterwarnings("ignore:Full backward hook is firing")
def test_opacus_uses_the_rule_for_the_whole_extended_model():
    from opacus.grad_sample import GradSampleModule

    torch.manual_seed(3)
    model = PersonalisedModel(nn.Sequential(nn.Flatten(), nn.Linear(12, 4)), build_transform((3, 2, 2), "tanh"))
    x, y = torch.randn(4, 3, 2, 2), torch.randint(0, 4, (4,))
    expected = [torch.autograd.grad(nn.functional.cross_entropy(model(x[i : i + 1]), y[i : i + 1]), list(model.parameters()))
                for i in range(4)]
    dpsgd._install_rules()
    wrapped = GradSampleModule(model, batch_first=True, loss_reduction="sum", strict=True)
    nn.functional.cross_entropy(wrapped(x), y, reduction="sum").backward()
    for i in range(4):
        for p, g in zip(model.parameters(), expected[i], strict=True):
            assert torch.allclose(p.grad_sample[i], g, atol=1e-6)


# -- LocalDP: events, per-client σ, budgets ---------------------------------------------------------
def _run(algorithm, rounds: int = 3, dataset: FederatedDataset | None = None, **config):
    settings = {"rounds": rounds, "local": LocalTrainingConfig(epochs=1, batch_size=8, lr=0.1, momentum=0.0), **config}
    return run_federation(dataset or make_dataset(), tiny_model(), algorithm, FederationConfig(**settings), progress=False)


def test_one_event_per_client_and_round_with_the_steps_taken_and_per_client_sigma():
    dataset = make_dataset()
    sigmas = {i: 1.0 + 0.5 * i for i in range(dataset.num_clients)}
    algorithm = LocalDP(FedAvg(), LocalDPConfig(noise_multiplier=sigmas, clip_norm=1.0))
    result = _run(algorithm, dataset=dataset, clients_per_round=0.5)
    events = result.ledger.events
    trained = [(c, m.round) for m in result.history for c in m.clients]
    assert sorted((int(e.client_id), e.round) for e in events) == sorted(trained)
    for e in events:
        cid = int(e.client_id)
        q = min(1.0, 8 / dataset.clients[cid].num_train)
        assert e.mechanism == SubsampledGaussian(sigmas[cid], q)
        assert e.count == steps_per_epoch(q) and e.valid
    assert result.ledger.neighbouring.value == "add_remove"


def _budget_after(rounds: int, sigma: float, q: float, steps: int, delta: float) -> float:
    """An ε budget between the ε after ``rounds`` and ``rounds + 1`` rounds."""
    acct = get_accountant("rdp")
    lo = acct.epsilon(Composition.of(SubsampledGaussian(sigma, q), rounds * steps), delta).epsilon
    hi = acct.epsilon(Composition.of(SubsampledGaussian(sigma, q), (rounds + 1) * steps), delta).epsilon
    return (lo + hi) / 2


def _one_client_dataset(n: int = 16) -> FederatedDataset:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(n, 5)).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.int64) % 3
    return FederatedDataset("one", [ClientData(x, y, x[:4], y[:4]), ClientData(x[::-1].copy(), y[::-1].copy(), x[:4], y[:4])], 3, (5,))


@pytest.mark.parametrize("policy", ["exclude", "stop", "record"])
def test_budget_policies(policy):
    dataset = _one_client_dataset()
    q = 8 / 16
    budget = _budget_after(2, 1.0, q, 2, 1e-3)
    budgets = {0: (budget, 1e-3), 1: (1e6, 1e-3)}  # client 0 can afford two rounds; client 1 anything
    algorithm = LocalDP(FedAvg(), LocalDPConfig(noise_multiplier=1.0, clip_norm=1.0, budget=budgets, budget_policy=policy))
    result = _run(algorithm, rounds=4, dataset=dataset)
    rounds_of = lambda cid: sorted(e.round for e in result.ledger.events if e.client_id == str(cid))  # noqa: E731
    if policy == "exclude":
        assert rounds_of(0) == [1, 2] and rounds_of(1) == [1, 2, 3, 4]
        assert algorithm.excluded == {3: [0], 4: [0]}
    elif policy == "stop":
        assert rounds_of(0) == [1, 2] and rounds_of(1) == [1, 2]
        assert algorithm.stopped_at == 3
        assert [m.trained for m in result.history] == [True, True, True, False]  # round 3's pre-check stops the run
        assert max(e.round for e in result.ledger.events) == 2
        assert torch.equal(result.state["1.weight"], _run(LocalDP(FedAvg(), LocalDPConfig(1.0, 1.0)), rounds=2, dataset=dataset).state["1.weight"])
    else:
        assert rounds_of(0) == [1, 2, 3, 4]
        assert [e.round for e in result.ledger.events if e.client_id == "0" and e.note] == [3, 4]
        assert algorithm.overruns == {3: [0], 4: [0]}
    eps = result.ledger.summary(1e-3, "rdp").per_client["0"].epsilon
    assert (eps > budget) == (policy == "record")


def test_calibrated_noise_meets_the_target_for_the_planned_steps():
    plan = calibrate_client_noise([100, 300], CalibrationTarget(epsilon=4.0, delta=1e-3, rounds=10, epochs=1, batch_size=32))
    for size, noise in zip((100, 300), plan.values(), strict=True):
        assert noise.sample_rate == pytest.approx(32 / size)
        assert noise.planned_steps == 10 * steps_per_epoch(32 / size)
        eps = get_accountant("rdp").epsilon(Composition.of(SubsampledGaussian(noise.noise_multiplier, noise.sample_rate), noise.planned_steps), 1e-3)
        assert 3.99 < eps.epsilon <= 4.0
    target = CalibrationTarget(epsilon=4.0, delta=1e-3, rounds=10, epochs=1, batch_size=32, participation="expected",
                               client_rate=0.3)
    expected = calibrate_client_noise([100], target)
    assert expected[0].planned_steps == planned_steps("expected", 10, 1, 0.32, 0.3) == math.floor(0.3 * 10 * 4)
    assert expected[0].noise_multiplier < plan[0].noise_multiplier  # fewer planned steps, less noise
    direct = calibrate_noise(lambda s: Composition.of(SubsampledGaussian(s, 0.32), 12), 4.0, 1e-3, accountant="rdp")
    assert expected[0].noise_multiplier == pytest.approx(direct.noise_multiplier)
