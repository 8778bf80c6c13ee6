"""The round loop: repeatability, batched == sequential, sampling, stragglers and metrics."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from privaudit.accounting.mechanisms import Neighbouring, Sampling
from privaudit.errors import InvalidParameterError
from privaudit.fl.algorithms.fedavg import FedAvg
from privaudit.fl.algorithms.fedprox import FedProx
from privaudit.fl.engine.capabilities import ClientSelection, NeighbouringRelation, RunCompletion, RunPlanning
from privaudit.fl.engine.config import Execution, FederationConfig, LocalTrainingConfig
from privaudit.fl.engine.params import equal
from privaudit.fl.engine.round_loop import RoundObserver, run_federation
from privaudit.fl.engine.sampling import local_epochs, sample_clients
from privaudit.fl.engine.seeding import SeedTree
from tests.fl.conftest import make_dataset, tiny_model


class StateRecorder(RoundObserver):
    def __init__(self) -> None:
        self.states = []

    def on_start(self, info) -> None:
        self.states.append({k: v.clone() for k, v in info.initial_state.items()})

    def on_round_end(self, round, state, results, metrics) -> None:
        self.states.append({k: v.clone() for k, v in state.items()})


def _config(**overrides) -> FederationConfig:
    values = {
        "rounds": 4,
        "local": LocalTrainingConfig(epochs=2, batch_size=8, lr=0.1),
        "clients_per_round": 0.5,
        "stragglers": 0.5,
        "seed": 11,
    }
    values.update(overrides)
    return FederationConfig(**values)


def _run(config, algorithm=None, model_seed=0, dataset=None):
    recorder = StateRecorder()
    result = run_federation(
        dataset or make_dataset(), tiny_model(seed=model_seed), algorithm or FedProx(0.1), config, observers=[recorder], progress=False
    )
    return result, recorder.states


def test_same_seed_is_bit_for_bit_repeatable():
    first, states_a = _run(_config())
    second, states_b = _run(_config())
    assert len(states_a) == 5
    assert all(equal(a, b) for a, b in zip(states_a, states_b, strict=True))
    assert [m.to_dict() | {"seconds": 0} for m in first.history] == [m.to_dict() | {"seconds": 0} for m in second.history]


def test_a_different_seed_changes_the_run():
    first, states_a = _run(_config(seed=1))
    second, states_b = _run(_config(seed=2))
    assert not equal(states_a[-1], states_b[-1])
    assert [m.clients for m in first.history] != [m.clients for m in second.history]


def test_named_models_are_initialised_from_the_seed():
    data = make_dataset(dim=20, num_classes=2)
    runs = [run_federation(data, "logreg", FedAvg(), _config(rounds=1, seed=s), progress=False) for s in (5, 5, 6)]
    assert equal(runs[0].info.initial_state, runs[1].info.initial_state)
    assert not equal(runs[0].info.initial_state, runs[2].info.initial_state)


def test_batched_and_sequential_federations_agree():
    batched, states_b = _run(_config(execution=Execution.BATCHED))
    sequential, states_s = _run(_config(execution=Execution.SEQUENTIAL))
    assert batched.info.execution_mode.startswith("batched") and sequential.info.execution_mode == "sequential"
    for a, b in zip(states_b, states_s, strict=True):
        for k in a:
            torch.testing.assert_close(a[k], b[k], rtol=1e-4, atol=1e-5)
    assert batched.final_accuracy == pytest.approx(sequential.final_accuracy, abs=1e-9)


def test_batched_dropout_draws_each_clients_sequential_masks():
    """The Upcycled MLP (dropout 0.5) trains batched; every lane draws the masks its client draws when trained alone."""
    data = make_dataset(dim=20, num_classes=2)
    runs = {}
    for mode in (Execution.BATCHED, Execution.SEQUENTIAL):
        recorder = StateRecorder()
        result = run_federation(data, "upcycled-mlp", FedProx(0.1), _config(execution=mode, rounds=2), observers=[recorder],
                                progress=False)
        runs[mode] = (result, recorder.states)
    (batched, states_b), (sequential, states_s) = runs[Execution.BATCHED], runs[Execution.SEQUENTIAL]
    assert batched.info.execution_mode == "batched (layers)" and sequential.info.execution_mode == "sequential"
    for a, b in zip(states_b, states_s, strict=True):
        for k in a:
            torch.testing.assert_close(a[k], b[k], rtol=1e-4, atol=1e-5)
    # the masks really act: the same run with dropout switched off ends elsewhere
    model = batched.info.model
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0
    model.load_state_dict(states_b[0])
    plain = run_federation(data, model, FedProx(0.1), _config(execution=Execution.BATCHED, rounds=2), progress=False)
    assert not equal(plain.state, batched.state)


def test_fixed_size_and_poisson_sampling():
    rng = np.random.default_rng(0)
    for _ in range(20):
        chosen = sample_clients(30, 0.3, Sampling.FIXED_SIZE_WITHOUT_REPLACEMENT, rng)
        assert len(chosen) == 9 and len(set(chosen.tolist())) == 9 and list(chosen) == sorted(chosen)
    assert len(sample_clients(30, 0.01, Sampling.FIXED_SIZE_WITHOUT_REPLACEMENT, rng)) == 1
    sizes = [len(sample_clients(200, 0.25, Sampling.POISSON, rng)) for _ in range(200)]
    assert abs(np.mean(sizes) - 50) < 2 and np.std(sizes) > 3  # Binomial(200, 0.25): mean 50, std 6.1


def test_poisson_rounds_can_be_empty_and_keep_the_model():
    result, states = _run(_config(clients_per_round=0.05, sampling="poisson", rounds=6))
    empty = [m.round for m in result.history if not m.clients]
    assert empty, "with q = 0.05 and 6 clients some rounds are empty"
    for r in empty:
        assert equal(states[r], states[r - 1])


def test_stragglers_run_fewer_epochs():
    epochs = local_epochs(10_000, 10, 0.9, np.random.default_rng(0))
    stragglers = epochs[epochs < 10]
    assert 0.88 < len(stragglers) / len(epochs) < 0.92
    assert set(np.unique(stragglers).tolist()) == set(range(1, 10))
    result, _ = _run(_config(stragglers=1.0, rounds=3, clients_per_round=1.0))
    for metrics in result.history:
        assert all(1 <= e < 2 for e in metrics.epochs) and metrics.stragglers == metrics.clients
    none, _ = _run(_config(stragglers=0.0, rounds=2))
    assert all(e == 2 for m in none.history for e in m.epochs)


def test_round_metrics():
    result, _ = _run(_config(eval_every=2, rounds=5, eval_train_loss=True))
    assert [m.test_accuracy is not None for m in result.history] == [False, True, False, True, True]
    last = result.history[-1]
    assert 0 <= last.test_accuracy <= 1 and last.test_loss > 0 and last.global_train_loss > 0
    assert len(last.per_client_accuracy) == 6 and all(0 <= a <= 1 for a in last.per_client_accuracy)
    assert all(m.train_loss > 0 and len(m.clients) == 3 for m in result.history)


def test_config_validation():
    with pytest.raises(InvalidParameterError, match="clients per round"):
        FederationConfig(rounds=1, clients_per_round=0)
    with pytest.raises(InvalidParameterError, match="rounds"):
        FederationConfig(rounds=0)
    with pytest.raises(InvalidParameterError, match="learning rate"):
        LocalTrainingConfig(lr=-1)
    with pytest.raises(InvalidParameterError, match="at least 2 local epochs"):
        FederationConfig(rounds=1, stragglers=0.5, local=LocalTrainingConfig(epochs=1))
    with pytest.raises(InvalidParameterError, match="unknown sampling 'sometimes'"):  # the accounting's one vocabulary
        FederationConfig(rounds=1, sampling="sometimes")
    assert FederationConfig(rounds=1, sampling="fixed-size").sampling is Sampling.FIXED_SIZE_WITHOUT_REPLACEMENT
    config = _config()
    assert FederationConfig.from_dict(config.to_dict()) == config


# -- the algorithm's hooks -------------------------------------------------------------------------
class _ChoosingFedAvg(FedAvg, NeighbouringRelation, RunPlanning, ClientSelection, RunCompletion):
    """FedAvg that plans at start, chooses its own clients, states replace-one guarantees and completes the record
    (capabilities it declares)."""

    neighbouring = Neighbouring.REPLACE_ONE

    def setup(self, context) -> None:
        super().setup(context)
        self.calls: list[str] = []

    def start_federation(self, config, ledger) -> None:
        self.calls.append("start")
        ledger.set_budget(0, 1.0, 1e-5)

    def select_clients(self, training_round, rng):
        self.calls.append(f"select {training_round}")
        return [training_round % 6, 5]

    def end_federation(self, result) -> None:
        self.calls.append("end")
        result.ledger.set_budget(1, 2.0, 1e-5)


class _EndSeen(RoundObserver):
    def on_end(self, result) -> None:
        self.budgets = sorted(result.ledger.budgets)


def test_hooks_run_once_each_in_order_and_through_any_wrapper():
    from privaudit.fl.privacy.perturbation import NoPrivacy
    from privaudit.papers.upcycled.algorithm import Upcycled

    inner = _ChoosingFedAvg()
    observer = _EndSeen()
    result = run_federation(make_dataset(), tiny_model(), Upcycled(NoPrivacy(inner)), _config(rounds=4, stragglers=0.0),
                            observers=[observer], progress=False)
    assert inner.calls == ["start", "select 1", "select 2", "end"]  # Upcycled trains in rounds 1 and 3 only
    assert [m.clients for m in result.history if m.trained] == [[1, 5], [2, 5]]
    assert result.ledger.neighbouring is Neighbouring.REPLACE_ONE
    assert observer.budgets == ["0", "1"]  # end_federation completed the ledger before the observers saw the end
    assert result.algorithm.inner.inner is inner


def test_without_hooks_the_federation_samples_as_before():
    chosen = _run(_config(stragglers=0.0), FedAvg())[0]
    expected = [sorted(int(c) for c in sample_clients(6, 0.5, Sampling.FIXED_SIZE_WITHOUT_REPLACEMENT, SeedTree(11).numpy("sampling", r)))
                for r in range(1, 5)]
    assert [m.clients for m in chosen.history] == expected
