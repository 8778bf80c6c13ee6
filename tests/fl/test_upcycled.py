"""Upcycled-FL: even rounds read no client data and follow ω̄^{2m} = ω̄^{2m−1} + u(ω̄^{2m−1} − ω̄^{2m−2})."""

from __future__ import annotations

import pytest
import torch

from privaudit.data.base import ClientData
from privaudit.fl.algorithms.fedavgm import FedAvgM
from privaudit.fl.algorithms.fedprox import FedProx
from privaudit.fl.algorithms.scaffold import Scaffold
from privaudit.fl.engine.config import FederationConfig, LocalTrainingConfig
from privaudit.fl.engine.round_loop import RoundObserver, run_federation
from privaudit.fl.privacy.perturbation import OutputPerturbation, OutputPerturbationConfig
from privaudit.papers.upcycled.algorithm import Upcycled, extrapolate
from tests.fl.conftest import make_dataset, tiny_model

_DATA_FIELDS = frozenset({"x_train", "y_train", "x_test", "y_test"})


class DataGuard:
    """While ``armed``, any read of a client's arrays raises; ``reads`` counts reads while disarmed."""

    armed = False
    reads = 0


class GuardedClientData(ClientData):
    def __getattribute__(self, name):
        if name in _DATA_FIELDS:
            if DataGuard.armed:
                raise AssertionError(f"client data {name} was read in a server-only round")
            DataGuard.reads += 1
        return super().__getattribute__(name)


class ArmInEvenRounds(RoundObserver):
    """Arms the guard for every round in which the algorithm says it trains no client."""

    def __init__(self, arm_when_training: bool = False) -> None:
        self.arm_when_training = arm_when_training
        self.armed_rounds: list[int] = []
        self.reads_in_training_rounds = 0

    def on_round_start(self, round, trains_clients):
        DataGuard.armed = trains_clients if self.arm_when_training else not trains_clients
        if DataGuard.armed:
            self.armed_rounds.append(round)
        self._reads_before = DataGuard.reads

    def on_round_end(self, round, state, results, metrics):
        if not DataGuard.armed:
            self.reads_in_training_rounds += DataGuard.reads - self._reads_before
        DataGuard.armed = False


class StateRecorder(RoundObserver):
    def __init__(self):
        self.states = []

    def on_start(self, info):
        self.states.append({k: v.clone() for k, v in info.initial_state.items()})

    def on_round_end(self, round, state, results, metrics):
        self.states.append({k: v.clone() for k, v in state.items()})
        self.last_results = list(results)


@pytest.fixture(autouse=True)
def _disarm():
    DataGuard.armed, DataGuard.reads = False, 0
    yield
    DataGuard.armed = False


def _config(rounds=6):
    return FederationConfig(rounds=rounds, local=LocalTrainingConfig(epochs=2, batch_size=8, lr=0.1), clients_per_round=0.5, stragglers=0.5, seed=4)


@pytest.mark.parametrize("base", [lambda: FedProx(0.3), FedAvgM, Scaffold])
def test_even_rounds_read_no_client_data(base):
    data = make_dataset(client_type=GuardedClientData)
    guard = ArmInEvenRounds()
    private = OutputPerturbation(base(), OutputPerturbationConfig(clip=5.0, sigma=0.1))
    result = run_federation(data, tiny_model(), Upcycled(private, u=0.5), _config(), observers=[guard], progress=False)
    assert guard.armed_rounds == [2, 4, 6]
    assert guard.reads_in_training_rounds > 0  # the odd rounds did read data, so the guard is live
    assert [m.trained for m in result.history] == [True, False] * 3
    assert all(not m.clients and m.train_loss is None for m in result.history if not m.trained)


def test_the_guard_catches_reads():
    data = make_dataset(client_type=GuardedClientData)
    guard = ArmInEvenRounds(arm_when_training=True)  # arm it in the odd (training) rounds instead
    with pytest.raises(AssertionError, match=r"client data .* was read"):
        run_federation(data, tiny_model(), Upcycled(FedProx(0.3), u=0.5), _config(), observers=[guard], progress=False)


@pytest.mark.parametrize("u", [0.0, 0.7, 1.3])
def test_even_rounds_follow_the_extrapolation_formula_exactly(u):
    recorder = StateRecorder()
    run_federation(make_dataset(), tiny_model(), Upcycled(FedProx(0.3), u=u), _config(rounds=7), observers=[recorder], progress=False)
    states = recorder.states  # states[r] = ω̄^r
    for m in (1, 2, 3):
        latest, previous, even = states[2 * m - 1], states[2 * m - 2], states[2 * m]
        for k in even:
            assert torch.equal(even[k], latest[k] + u * (latest[k] - previous[k]))
        if u > 0:
            assert any(not torch.equal(even[k], latest[k]) for k in even)


def test_odd_rounds_are_the_base_algorithms_rounds():
    """Upcycled-X's m-th training round samples the same clients and stragglers as X's m-th round."""
    base = run_federation(make_dataset(), tiny_model(), FedProx(0.3), _config(rounds=3), progress=False)
    upcycled = run_federation(make_dataset(), tiny_model(), Upcycled(FedProx(0.3), u=0.0), _config(rounds=6), progress=False)
    trained = [m for m in upcycled.history if m.trained]
    assert [m.clients for m in trained] == [m.clients for m in base.history]
    assert [m.epochs for m in trained] == [m.epochs for m in base.history]
    # with u = 0 an even round repeats the model, so the two runs compute the same models
    torch.testing.assert_close(upcycled.state, base.state)


def test_privacy_events_only_in_odd_rounds():
    private = OutputPerturbation(FedProx(0.3), OutputPerturbationConfig(clip=5.0, sigma=0.1))
    result = run_federation(make_dataset(), tiny_model(), Upcycled(private, u=0.5), _config(), progress=False)
    rounds = {e.round for e in result.ledger.events}
    assert rounds == {1, 3, 5}
    assert len(result.ledger.events) == 3 * 3  # 3 sampled clients (q = 0.5 of 6) × 3 odd rounds


def test_extrapolate_is_the_printed_formula():
    out = extrapolate({"w": torch.tensor([3.0])}, {"w": torch.tensor([1.0])}, 0.25)
    assert torch.equal(out["w"], torch.tensor([3.5]))
