"""The simulated clock of the reference code's clock-seeded noise (audit point U5) and its coupling to the next
client's straggler draw and shuffles; the clock-seed recovery attack on runs that use it."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from attacks.membership import recover_from_releases
from privaudit.fl.algorithms.fedavg import FedAvg
from privaudit.fl.engine.config import FederationConfig, LocalTrainingConfig
from privaudit.fl.engine.recording import ReleaseRecorder
from privaudit.fl.engine.round_loop import run_federation
from privaudit.fl.engine.seeding import SeedTree
from privaudit.fl.privacy import clock_seed
from privaudit.fl.privacy.perturbation import OutputPerturbation, OutputPerturbationConfig
from tests.fl.conftest import make_dataset

LIKE = {"linear.weight": torch.zeros(2, 20), "linear.bias": torch.zeros(2)}


def test_simulated_clock_gives_each_client_its_own_millisecond():
    clock = clock_seed.ReferenceClock(SeedTree(0))
    sampled = list(range(30))
    distinct, gaps = [], []
    for r in range(1, 41):
        planned = clock.round(r, sampled)
        assert sorted(planned.order) == sampled
        assert all(0 <= s <= 999 for s in planned.seeds)
        distinct.append(len(set(planned.seeds)))
        gaps.extend(np.diff(planned.readings))
    # 30 independent uniform milliseconds: ≈ 29.6 distinct on average (birthday collisions only)
    assert np.mean(distinct) > 28.5 and min(distinct) >= 26
    assert np.mean(gaps) == pytest.approx(clock_seed.MEAN_GAP_MS / 1000, rel=0.1)
    assert min(gaps) > 0


def test_simulated_clock_is_reproducible_for_a_seed():
    sampled = [3, 5, 8, 13]
    first = clock_seed.ReferenceClock(SeedTree(7)).round(2, sampled)
    assert first == clock_seed.ReferenceClock(SeedTree(7)).round(2, sampled)
    assert first != clock_seed.ReferenceClock(SeedTree(8)).round(2, sampled)
    assert first.seeds != clock_seed.ReferenceClock(SeedTree(7)).round(3, sampled).seeds


def _reference_client(seed: int, n: int, epochs: int, straggler: float, batch: int = 32):
    """The reference code itself, on torch's global generator: client k's release seeded with ``seed`` (noise per
    key), then client k+1's straggler test and ``DataLoader(shuffle=True)`` epochs (client/avg.py)."""
    with torch.random.fork_rng(devices=[]):
        torch.random.manual_seed(seed)
        for v in LIKE.values():
            torch.normal(0, 0.64, size=tuple(v.shape))
        early_stop = epochs
        if torch.rand(1) < straggler:
            early_stop = int(torch.torch.rand(1) * epochs)
            while early_stop == 0:
                early_stop = int(torch.torch.rand(1) * epochs)
        loader = DataLoader(TensorDataset(torch.arange(n)), batch_size=batch, shuffle=True)
        batches = []
        for it in range(epochs):
            if it >= early_stop:
                break
            batches.extend(b[0].tolist() for b in loader)
    return early_stop, batches


@pytest.mark.parametrize(("seed", "n", "straggler"), [(17, 70, 0.0), (523, 33, 0.0), (998, 45, 0.9), (4, 100, 0.5)])
def test_coupled_draws_are_the_reference_codes_draws(seed, n, straggler):
    epochs, batches = _reference_client(seed, n, 10, straggler)
    generator = clock_seed.after_output_noise(seed, LIKE, 0.64)
    ran, schedule = clock_seed.coupled_draws(generator, num_examples=n, epochs=10, batch_size=32, straggler=straggler)
    assert ran == epochs and schedule.epochs == epochs
    ours = [row[: int(size)].tolist() for row, size in zip(schedule.indices, schedule.sizes, strict=True)]
    assert ours == batches


def _run(seed: int, rounds: int = 2, recorder=None):
    dataset = make_dataset(sizes=(23, 41, 17, 60, 35, 9, 50, 28))
    config = OutputPerturbationConfig(clip=3.0, sigma=0.8, noise_std="sigma-squared", rng="clock-ms")
    algorithm = OutputPerturbation(FedAvg(), config)
    federation = FederationConfig(rounds=rounds, local=LocalTrainingConfig(epochs=3, batch_size=8, lr=0.05), seed=seed,
                                  stragglers=0.5)
    observers = [recorder] if recorder is not None else []
    return algorithm, run_federation(dataset, "logreg", algorithm, federation, observers=observers, progress=False)


def test_clock_ms_run_is_reproducible_and_couples_the_next_client():
    algorithm, first = _run(3)
    _, again = _run(3)
    _, other = _run(4)
    assert all(torch.equal(first.state[k], again.state[k]) for k in first.state)
    assert not all(torch.equal(first.state[k], other.state[k]) for k in first.state)
    # the last round's plan: client k+1 ran the epochs drawn from client k's clock seed, after k's noise
    planned = algorithm._clock_seeds.rounds[2]
    metrics = first.history[-1]
    ran = dict(zip(metrics.clients, metrics.epochs, strict=True))
    assert set(ran.values()) != {3}  # some stragglers, so the comparison below can fail
    sizes = [23, 41, 17, 60, 35, 9, 50, 28]
    for previous, client in zip(planned.seeds, planned.order[1:], strict=False):
        generator = clock_seed.after_output_noise(previous, first.info.initial_state, 0.64)
        epochs, _ = clock_seed.coupled_draws(generator, num_examples=sizes[client], epochs=3, batch_size=8, straggler=0.5)
        assert ran[client] == epochs


def test_clock_recovery_finds_the_simulated_seeds():
    recorder = ReleaseRecorder()
    algorithm, _ = _run(5, rounds=2, recorder=recorder)
    report = recover_from_releases(recorder)
    assert report.recovered_fraction == 1.0 and len(report.recoveries) == 16
    planned = algorithm._clock_seeds.rounds[2]
    last_round = [r.seed for r in report.recoveries[8:]]  # clients 0..7 of round 2, in id order
    assert last_round == [planned.seed_of(c) for c in range(8)]
    assert len(set(last_round)) >= 7  # one millisecond per client (a collision is a 1-in-36 event here)


def _reference_objective_client(seed: int, n: int, epochs: int, straggler: float, alpha: float = 10.0, feature_len: int = 20):
    """client/avg.py's ``update_weights`` with objective perturbation: reseed from the clock, draw the noise, then the
    client's own straggler test and shuffled epochs — all from torch's global generator."""
    with torch.random.fork_rng(devices=[]):
        torch.random.manual_seed(seed)
        directions = [torch.rand(v.shape) - 0.5 for v in LIKE.values()]
        norm = torch.distributions.gamma.Gamma(feature_len, alpha).sample()
        early_stop = epochs
        if torch.rand(1) < straggler:
            early_stop = int(torch.torch.rand(1) * epochs)
            while early_stop == 0:
                early_stop = int(torch.torch.rand(1) * epochs)
        loader = DataLoader(TensorDataset(torch.arange(n)), batch_size=32, shuffle=True)
        batches = []
        for it in range(epochs):
            if it >= early_stop:
                break
            batches.extend(b[0].tolist() for b in loader)
    return directions, norm, early_stop, batches


@pytest.mark.parametrize(("seed", "straggler"), [(31, 0.0), (640, 0.9)])
def test_objective_coupling_follows_the_clients_own_noise(seed, straggler):
    _, _, epochs, batches = _reference_objective_client(seed, 57, 10, straggler)
    generator = clock_seed.after_global_draw(seed, clock_seed.objective_noise_draws(LIKE, 10.0, feature_len=20))
    ran, schedule = clock_seed.coupled_draws(generator, num_examples=57, epochs=10, batch_size=32, straggler=straggler)
    assert ran == epochs
    assert [row[: int(size)].tolist() for row, size in zip(schedule.indices, schedule.sizes, strict=True)] == batches


def test_objective_perturbation_run_uses_one_seed_per_client_and_its_draws():
    from privaudit.fl.algorithms.fedprox import FedProx
    from privaudit.papers.upcycled.objective_perturbation import (
        ObjectivePerturbation,
        ObjectivePerturbationConfig,
    )

    dataset = make_dataset(sizes=(23, 41, 17, 60, 35, 9))
    algorithm = ObjectivePerturbation(FedProx(0.5), ObjectivePerturbationConfig(alpha=10.0, noise_law="reference", rng="clock-ms"))
    federation = FederationConfig(rounds=1, local=LocalTrainingConfig(epochs=3, batch_size=8, lr=0.05), seed=1, stragglers=0.5)
    result = run_federation(dataset, "logreg", algorithm, federation, progress=False)
    planned = algorithm._clock_seeds.rounds[1]
    assert len(set(planned.seeds)) == 6
    trainable = {n: result.info.initial_state[n] for n in ("linear.weight", "linear.bias")}
    ran = dict(zip(result.history[0].clients, result.history[0].epochs, strict=True))
    assert set(ran.values()) != {3}
    for client, seed in zip(planned.order, planned.seeds, strict=True):
        generator = clock_seed.after_global_draw(seed, clock_seed.objective_noise_draws(trainable, 10.0, feature_len=5))
        epochs, _ = clock_seed.coupled_draws(generator, num_examples=dataset.clients[client].num_train, epochs=3, batch_size=8,
                                             straggler=0.5)
        assert ran[client] == epochs
