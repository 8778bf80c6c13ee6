"""FedCurv (Shoham et al. 2019): EWC penalty from the other clients' Fisher diagonals, λ = 0 is FedAvg."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.func import functional_call

from privaudit.errors import InvalidParameterError
from privaudit.fl.algorithms.fedavg import FedAvg
from privaudit.fl.algorithms.fedcurv import FedCurv, empirical_fisher_diagonal
from privaudit.fl.engine.config import FederationConfig, LocalTrainingConfig
from privaudit.fl.engine.round_loop import run_federation
from tests.fl.conftest import make_dataset, tiny_model


def _config(rounds=2, epochs=2, batch=8, lr=0.1, momentum=0.0, q=1.0, seed=0, execution="sequential"):
    return FederationConfig(rounds=rounds, local=LocalTrainingConfig(epochs=epochs, batch_size=batch, lr=lr, momentum=momentum),
                            clients_per_round=q, seed=seed, execution=execution)


def test_lambda_zero_is_fedavg_exactly():
    data = make_dataset()
    for momentum in (0.0, 0.5):
        cfg = _config(momentum=momentum, q=0.5)
        plain = run_federation(data, tiny_model(hidden=4), FedAvg(), cfg, progress=False)
        curv = run_federation(data, tiny_model(hidden=4), FedCurv(lam=0.0), cfg, progress=False)
        assert all(torch.equal(plain.state[k], curv.state[k]) for k in plain.state)
    penalised = run_federation(data, tiny_model(hidden=4), FedCurv(lam=1.0), _config(rounds=3), progress=False)
    plain = run_federation(data, tiny_model(hidden=4), FedAvg(), _config(rounds=3), progress=False)
    assert any(not torch.equal(plain.state[k], penalised.state[k]) for k in plain.state)


def test_empirical_fisher_matches_a_per_example_loop():
    data = make_dataset()
    model = tiny_model(hidden=4)
    params = {k: v.detach() for k, v in model.named_parameters()}
    x, y = torch.from_numpy(data.clients[0].x_train), torch.from_numpy(data.clients[0].y_train)
    fisher = empirical_fisher_diagonal(model, params, {}, x, y)
    expected = {k: torch.zeros_like(v) for k, v in params.items()}
    for i in range(len(y)):
        leaves = {k: v.clone().requires_grad_() for k, v in params.items()}
        loss = F.cross_entropy(functional_call(model, leaves, (x[i : i + 1],)), y[i : i + 1])
        for k, g in zip(leaves, torch.autograd.grad(loss, list(leaves.values())), strict=True):
            expected[k] += g**2 / len(y)
    for k in params:
        assert torch.allclose(fisher[k], expected[k], atol=1e-6)


def test_server_sums_exclude_the_clients_own_term():
    data = make_dataset()
    algorithm = FedCurv(lam=0.5)
    result = run_federation(data, tiny_model(hidden=4), algorithm, _config(rounds=3, q=0.5), progress=False)
    assert result.final_accuracy is not None
    reports = algorithm.reports
    assert 0 < len(reports) <= data.num_clients
    for client in range(data.num_clients):
        u, v = algorithm.penalty_terms(client)
        others = [term for cid, term in reports.items() if cid != client]
        for name in u:
            assert torch.allclose(u[name], sum(t[0][name] for t in others), atol=1e-6)
            assert torch.allclose(v[name], sum(t[1][name] for t in others), atol=1e-6)
    # each report is the client's released Fisher diagonal at its released local model, and F ⊙ θ̂
    last = result.history[-1].clients
    model = tiny_model(hidden=4)
    for client in last:
        fisher, weighted = reports[client]
        client_data = data.clients[client]
        x, y = torch.from_numpy(client_data.x_train), torch.from_numpy(client_data.y_train)
        theta = {n: weighted[n] / fisher[n].clamp_min(1e-30) for n in fisher}
        recomputed = empirical_fisher_diagonal(model, theta, {}, x, y)
        for n in fisher:
            mask = fisher[n] > 1e-8
            assert torch.allclose(recomputed[n][mask], fisher[n][mask], rtol=1e-3, atol=1e-7)


def test_penalty_gradient_is_two_lambda_u_theta_minus_v():
    """One full-batch local step: θ₁ = θ₀ − η(∇L(θ₀) + 2λ(u_{−i} ⊙ θ₀ − v_{−i}))."""
    data = make_dataset(sizes=(10, 12))
    algorithm = FedCurv(lam=0.3)
    cfg = _config(rounds=1, epochs=1, batch=64, lr=0.2)
    first = run_federation(data, tiny_model(hidden=4), algorithm, cfg, progress=False)  # fills the server's sums
    from privaudit.fl.engine.algorithm import ClientContext

    u, v = algorithm.penalty_terms(0)
    context = ClientContext(2, 2, 0, data.clients[0], 1, algorithm.context.seeds)
    released = algorithm.client_update(first.state, context)
    model = tiny_model(hidden=4)
    x, y = torch.from_numpy(data.clients[0].x_train), torch.from_numpy(data.clients[0].y_train)
    leaves = {k: v_.clone().requires_grad_() for k, v_ in first.state.items()}
    grads = torch.autograd.grad(F.cross_entropy(functional_call(model, leaves, (x,)), y), list(leaves.values()))
    for (k, theta0), g in zip(first.state.items(), grads, strict=True):
        expected = theta0 - 0.2 * (g + 2 * 0.3 * (u[k] * theta0 - v[k]))
        assert torch.allclose(released.state[k], expected, atol=1e-6)
    assert "fisher" in released.extras and "fisher" not in released.info


def test_bad_lambda_is_rejected():
    for bad in (-1.0, float("inf"), float("nan")):
        with pytest.raises(InvalidParameterError):
            FedCurv(lam=bad)


def test_dropout_models_train_and_repeat_under_a_seed():
    from privaudit.fl.engine.seeding import seeded_torch_global

    def model():
        return seeded_torch_global(0, lambda: torch.nn.Sequential(torch.nn.Linear(5, 6), torch.nn.ReLU(), torch.nn.Dropout(0.5),
                                                                  torch.nn.Linear(6, 3)))

    data = make_dataset()
    runs = [run_federation(data, model(), FedCurv(lam=0.1), _config(rounds=2, q=0.5), progress=False) for _ in range(2)]
    assert all(torch.equal(runs[0].state[k], runs[1].state[k]) for k in runs[0].state)


def test_fedcurv_under_dp_sgd_keeps_the_penalty_and_records_the_unnoised_fisher():
    """FedCurv+DPSGD: λ = 0 is FedAvg+DPSGD exactly; λ > 0 changes the model; every client round carries a DP-SGD
    event *and* a no-guarantee event for its Fisher diagonal, so the ledger's ε is ∞."""
    import math

    from privaudit.accounting.mechanisms import PureDP, SubsampledGaussian
    from privaudit.fl.privacy.local_dp import LocalDP, LocalDPConfig

    data = make_dataset()
    cfg = _config(rounds=3)
    private = lambda algorithm: LocalDP(algorithm, LocalDPConfig(noise_multiplier=1.0, clip_norm=1.0))  # noqa: E731
    plain = run_federation(data, tiny_model(hidden=4), private(FedAvg()), cfg, progress=False)
    flat = run_federation(data, tiny_model(hidden=4), private(FedCurv(lam=0.0)), cfg, progress=False)
    assert all(torch.equal(plain.state[k], flat.state[k]) for k in plain.state)
    curved = run_federation(data, tiny_model(hidden=4), private(FedCurv(lam=5.0)), cfg, progress=False)
    assert any(not torch.equal(plain.state[k], curved.state[k]) for k in plain.state)
    kinds = {type(e.mechanism) for e in curved.ledger.events}
    assert kinds == {SubsampledGaussian, PureDP}
    assert all("Fisher diagonal" in e.assumptions[0] for e in curved.ledger.events if isinstance(e.mechanism, PureDP))
    assert math.isinf(curved.ledger.summary(1e-5, "rdp").max_epsilon)
    assert all(isinstance(e.mechanism, SubsampledGaussian) for e in plain.ledger.events)
