"""Server rules of the PFA family on synthetic updates, against formulas written out densely in the test."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from privaudit.accounting.ledger import PrivacyLedger
from privaudit.errors import InvalidParameterError
from privaudit.fl.engine.algorithm import ClientContext, ClientResult, SetupContext
from privaudit.fl.engine.config import Execution, FederationConfig, LocalTrainingConfig
from privaudit.fl.engine.params import model_state
from privaudit.fl.engine.seeding import SeedTree
from privaudit.fl.engine.trainer import ClientTrainer
from privaudit.papers.pfa.algorithm import build
from privaudit.papers.pfa.budget_participation import RoundParticipation
from privaudit.papers.pfa.uplink import FLOAT32_BYTES
from tests.fl.conftest import make_dataset, tiny_model

BUDGETS = [0.1, 0.2, 0.3, 0.4, 5.0, 6.0]  # clients 4 and 5 are public
PUBLIC, PRIVATE = [4, 5], [0, 1, 2, 3]


def started(name: str, tmp_path, **options):
    path = tmp_path / "eps.txt"
    path.write_text("\n".join(map(str, BUDGETS)))
    dataset = make_dataset(sizes=(30,) * 6, dim=5, num_classes=3)
    model = tiny_model(dim=5, num_classes=3)
    seeds = SeedTree(0)
    local = LocalTrainingConfig(epochs=1, batch_size=5, lr=0.1, momentum=0.0)
    trainer = ClientTrainer(model, dataset.input_shape, dataset.num_classes, local, Execution.SEQUENTIAL, seeds)
    state = model_state(model)
    context = SetupContext(model, state, tuple(n for n, _ in model.named_parameters()), (5,), 6, (30,) * 6, 0.1, 0.0, seeds, trainer)
    options = {"budgets": f"file:{path}", "split": "topk", "public_clients": 2, **options}
    algorithm = build(name, **options)
    algorithm.setup(context)
    ledger = PrivacyLedger()
    algorithm.start_federation(FederationConfig(rounds=10, local=local, clients_per_round=1.0), ledger)
    return algorithm, dataset, state, ledger


def _round(algorithm, round_: int):
    assert algorithm.trains_clients(round_)
    return algorithm.select_clients(round_, np.random.default_rng(round_))


def _results(state, round_: int, clients, scale: float = 1.0):
    g = torch.Generator().manual_seed(100 + round_)
    out = {}
    for c in clients:
        local = {k: v - scale * torch.randn(v.shape, generator=g) for k, v in state.items()}
        out[c] = ClientResult(c, 30, local, 0.0, 1, 1)
    return out


def _update(state, result):
    return {k: (state[k] - result.state[k]).double() for k in state}


def test_weiavg_fedavg_and_public_only(tmp_path):
    for name, weights in (("weiavg", BUDGETS), ("fedavg-hdp", [1.0] * 6)):
        algorithm, _, state, _ = started(name, tmp_path)
        clients = _round(algorithm, 1)
        results = _results(state, 1, clients)
        new = algorithm.server_aggregate(1, state, list(results.values()))
        for k in state:
            expected = sum(w * results[c].state[k] for c, w in zip(range(6), weights, strict=True)) / sum(weights)
            assert torch.allclose(new[k], expected, atol=1e-6), name
    algorithm, _, state, _ = started("public-only", tmp_path)
    assert _round(algorithm, 1) == PUBLIC  # private clients do not train


@pytest.mark.parametrize("scope", ["tensor", "model"])
def test_pfa_paper_projection_equals_dense_formula(tmp_path, scope):
    algorithm, _, state, _ = started("pfa", tmp_path, projection_scope=scope, eigensolver="lanczos")
    clients = _round(algorithm, 1)
    assert algorithm.sampler.roles(1) == (tuple(PUBLIC), tuple(PRIVATE))
    results = _results(state, 1, clients)
    new = algorithm.server_aggregate(1, state, list(results.values()))
    blocks = [[k] for k in state] if scope == "tensor" else [list(state)]
    eps_pub, eps_pri = sum(BUDGETS[c] for c in PUBLIC), sum(BUDGETS[c] for c in PRIVATE)
    for names in blocks:
        flat = {c: torch.cat([_update(state, results[c])[n].reshape(-1) for n in names]) for c in clients}
        pub = sum(BUDGETS[c] * flat[c] for c in PUBLIC) / eps_pub
        pri = sum(BUDGETS[c] * flat[c] for c in PRIVATE) / eps_pri
        _, eigvecs = torch.linalg.eigh(torch.outer(pub, pub))  # the dense p×p Σ of Alg. 3
        v = eigvecs[:, -1:]
        expected = (eps_pub * pub + eps_pri * (v @ (v.T @ pri))) / (eps_pub + eps_pri)
        got = torch.cat([(state[n] - new[n]).double().reshape(-1) for n in names])
        assert torch.allclose(got, expected, atol=1e-5)


def test_pfa_reference_projection_centres_per_tensor(tmp_path):
    algorithm, _, state, _ = started("pfa", tmp_path, projection="reference", projection_dims=1)
    clients = _round(algorithm, 1)
    results = _results(state, 1, clients)
    new = algorithm.server_aggregate(1, state, list(results.values()))
    eps_pub, eps_pri = sum(BUDGETS[c] for c in PUBLIC), sum(BUDGETS[c] for c in PRIVATE)
    for k in state:
        flat = {c: _update(state, results[c])[k].reshape(-1) for c in clients}
        centre = (flat[4] + flat[5]) / 2  # unweighted
        deviation = flat[4] - centre
        v = deviation / deviation.norm()
        pri = sum(BUDGETS[c] * flat[c] for c in PRIVATE) / eps_pri
        projected = v * (v @ (pri - centre)) + centre
        pub = sum(BUDGETS[c] * flat[c] for c in PUBLIC) / eps_pub
        expected = (eps_pub * pub + eps_pri * projected) / (eps_pub + eps_pri)
        assert torch.allclose((state[k] - new[k]).double().reshape(-1), expected, atol=1e-5)


def test_pfa_plus_uses_the_previous_round_subspace(tmp_path):
    algorithm, dataset, state, _ = started("pfa-plus", tmp_path)
    full_bytes = FLOAT32_BYTES * sum(v.numel() for v in state.values())
    # round 1: warm-up, everyone uploads in full; the server keeps V_k[1] from the public updates
    clients = _round(algorithm, 1)
    first = _results(state, 1, clients)
    released = [algorithm.release(state, ClientContext(1, 1, c, dataset.clients[c], 1, SeedTree(0)), first[c]) for c in clients]
    assert all("pfa_coefficients" not in r.extras for r in released)
    state1 = algorithm.server_aggregate(1, state, released)
    eps_pub = sum(BUDGETS[c] for c in PUBLIC)
    previous = {}
    for k in state:
        pub = sum(BUDGETS[c] * _update(state, first[c])[k].reshape(-1) for c in PUBLIC) / eps_pub
        previous[k] = pub / pub.norm()
    # round 2: private clients upload one number per tensor against V_k[1]
    clients = _round(algorithm, 2)
    second = _results(state1, 2, clients)
    released = [algorithm.release(state1, ClientContext(2, 2, c, dataset.clients[c], 1, SeedTree(0)), second[c]) for c in clients]
    by_client = {r.client_id: r for r in released}
    for c in PRIVATE:
        coefficients = by_client[c].extras["pfa_coefficients"]
        assert {k: v.numel() for k, v in coefficients.items()} == {k: 1 for k in state}
        for k in state:
            basis = algorithm.previous[k].basis[:, 0]  # V_k[1] up to sign
            assert torch.allclose(basis.abs(), previous[k].abs(), atol=1e-8)
            assert float(coefficients[k][0]) == pytest.approx(float(basis @ _update(state1, second[c])[k].reshape(-1)), abs=1e-5)
    state2 = algorithm.server_aggregate(2, state1, released)
    eps_pri = sum(BUDGETS[c] for c in PRIVATE)
    for k in state:
        flat = {c: _update(state1, second[c])[k].reshape(-1) for c in clients}
        pub = sum(BUDGETS[c] * flat[c] for c in PUBLIC) / eps_pub
        pri = sum(BUDGETS[c] * flat[c] for c in PRIVATE) / eps_pri
        v = previous[k]
        expected = (eps_pub * pub + eps_pri * v * (v @ pri)) / (eps_pub + eps_pri)
        assert torch.allclose((state1[k] - state2[k]).double().reshape(-1), expected, atol=1e-5)
    # uplink: round 1 all in full; round 2 private clients send one float32 per tensor
    summary = algorithm.uplink.summary()
    private_bytes = summary["by_role"]["private"]["bytes"]
    assert private_bytes == 4 * full_bytes + 4 * FLOAT32_BYTES * len(state)
    assert summary["by_role"]["public"]["bytes"] == 4 * full_bytes
    assert summary["reduction_private"] == pytest.approx(1 - private_bytes / (8 * full_bytes))


def test_pfa_round_without_public_clients_falls_back_to_weiavg(tmp_path):
    algorithm, _, state, _ = started("pfa", tmp_path, split_scope="population")
    algorithm.trains_clients(1)
    results = _results(state, 1, PRIVATE)
    algorithm.sampler.rounds.append(RoundParticipation(1, 6, tuple(PRIVATE), (), tuple(PRIVATE), ()))  # a sample of private clients
    new = algorithm.server_aggregate(1, state, list(results.values()))
    for k in state:
        expected = sum(BUDGETS[c] * results[c].state[k] for c in PRIVATE) / sum(BUDGETS[c] for c in PRIVATE)
        assert torch.allclose(new[k], expected, atol=1e-6)
    assert algorithm.records[-1].aggregation == "weiavg" and "no public" in algorithm.records[-1].note


def test_more_public_clients_than_sampled_is_refused(tmp_path):
    with pytest.raises(InvalidParameterError, match="7 public clients is more than the 6 sampled per round"):
        started("pfa", tmp_path, public_clients=7)
