"""Upcycled-FL output perturbation, white-box: the U2 worst-case record, the exact likelihood-ratio test
(μ recovered for both noise conventions), and clock-seeded noise recovery (audit point U5)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from attacks.membership import (
    RecordedReleases,
    clock_noise,
    gaussian_separation,
    in_domain_record,
    neighbouring_clipped_models,
    output_perturbation_lr_test,
    recover_clock_seeds,
    recover_from_releases,
    worst_case_record,
)
from privaudit.data import load_dataset
from privaudit.errors import InvalidParameterError
from privaudit.fl.algorithms.fedprox import FedProx
from privaudit.fl.engine.config import FederationConfig, LocalTrainingConfig
from privaudit.fl.engine.params import global_norm, model_state
from privaudit.fl.engine.recording import ReleaseRecorder
from privaudit.fl.engine.round_loop import run_federation
from privaudit.fl.engine.seeding import seeded_torch_global
from privaudit.fl.privacy import noise
from privaudit.fl.privacy.perturbation import OutputPerturbation, OutputPerturbationConfig
from privaudit.models import build_model

TAU = 10.0
#: the reference README's output-perturbation run: lr 0.07, momentum 0.5, 10 epochs, batch 32, FedProx μ = 0.1
REFERENCE_LOCAL = LocalTrainingConfig(epochs=10, batch_size=32, lr=0.07, momentum=0.5)


@pytest.fixture(scope="module")
def smallest_client():
    """Synthetic iid data shaped like Upcycled-FL's (d = 20, 2 classes); the client with the fewest records."""
    dataset = load_dataset("synthetic:iid", dim=20, num_classes=2, seed=0)
    client = dataset.clients[int(np.argmin(dataset.client_sizes))]
    model = seeded_torch_global(0, lambda: build_model("logreg", (20,), 2))
    return model, model_state(model), client


@pytest.fixture(scope="module")
def worst_pair(smallest_client):
    model, start, client = smallest_client
    return neighbouring_clipped_models(model, start, client, worst_case_record((20,), seed=1), local=REFERENCE_LOCAL,
                                       clip=TAU, prox=0.1, seed=0)


def test_one_worst_case_record_moves_the_clipped_model_by_tau(worst_pair):
    """Audit point U2: ≈ τ = 10 instead of the claimed τ/|D| (|D| = 45 here: 0.22)."""
    assert worst_pair.num_examples < 60
    assert worst_pair.displacement == pytest.approx(TAU, rel=0.1)
    assert worst_pair.displacement > 20 * worst_pair.claimed_sensitivity
    assert worst_pair.norms_before_clip[1] > TAU  # the record pushed the model far outside the τ-ball
    assert global_norm(worst_pair.with_record) == pytest.approx(TAU, rel=1e-6)


def test_a_record_inside_the_domain_moves_it_by_less_than_the_claim(smallest_client, worst_pair):
    model, start, client = smallest_client
    pair = neighbouring_clipped_models(model, start, client, in_domain_record((20,), seed=1), local=REFERENCE_LOCAL,
                                       clip=TAU, prox=0.1, seed=0)
    assert pair.record_norm == pytest.approx(1.0, rel=1e-6)
    assert 0 < pair.displacement < pair.claimed_sensitivity
    assert pair.displacement < worst_pair.displacement / 100


def test_coupled_schedule_differs_only_by_the_record():
    """D ∪ {z} reuses D's mini-batches, with z in exactly one batch per epoch: the runs differ only by z."""
    from attacks.membership.neighbouring_models import _coupled_schedule
    from privaudit.fl.engine.local_training import make_schedule

    base = make_schedule(45, 10, 32, np.random.default_rng(0))
    coupled = _coupled_schedule(base, 2, 45, np.random.default_rng(1))
    holds = [np.any(coupled.indices[s] == 45) for s in range(coupled.steps)]
    assert [sum(holds[2 * e : 2 * e + 2]) for e in range(10)] == [1] * 10
    for s in range(coupled.steps):
        rows = coupled.indices[s, : coupled.sizes[s]]
        np.testing.assert_array_equal(rows[rows != 45], base.indices[s, : base.sizes[s]])


def test_neighbouring_models_are_repeatable(smallest_client):
    model, start, client = smallest_client
    runs = [neighbouring_clipped_models(model, start, client, in_domain_record((20,), seed=1), local=REFERENCE_LOCAL,
                                        clip=TAU, prox=0.1, seed=0) for _ in range(2)]
    assert runs[0].displacement == runs[1].displacement
    assert all(torch.equal(runs[0].with_record[k], runs[1].with_record[k]) for k in runs[0].with_record)


@pytest.mark.parametrize(("convention", "sigma"), [("sigma", 8.0), ("sigma-squared", 3.0)])
def test_likelihood_ratio_test_recovers_mu(worst_pair, convention, sigma):
    config = OutputPerturbationConfig(clip=TAU, sigma=sigma, noise_std=convention)
    trials = 2000
    scores = output_perturbation_lr_test(worst_pair, config, trials=trials, seed=3)
    std = sigma if convention == "sigma" else sigma**2
    mu = worst_pair.displacement / std
    assert scores.meta["mu"] == pytest.approx(mu) and scores.meta["noise_std"] == std
    assert scores.meta["claimed_mu"] == pytest.approx(TAU / worst_pair.num_examples / std)
    # Λ ~ N(±μ²/2, μ²): the separation (mean_in − mean_out)/sd estimates μ with standard error ≈ √((2 + μ²/4)/T)
    tolerance = 4 * math.sqrt((2 + mu**2 / 4) / trials)
    assert gaussian_separation(scores) == pytest.approx(mu, abs=tolerance)
    assert scores.in_scores.mean() == pytest.approx(mu**2 / 2, abs=4 * mu / math.sqrt(trials))
    assert scores.out_scores.std() == pytest.approx(mu, rel=0.1)


def test_likelihood_ratio_test_with_clock_seeded_noise(worst_pair):
    config = OutputPerturbationConfig(clip=TAU, sigma=8.0, rng="clock-ms")
    scores = output_perturbation_lr_test(worst_pair, config, trials=500, seed=1)
    assert scores.meta["noise_rng"] == "clock-ms"
    assert gaussian_separation(scores) == pytest.approx(scores.meta["mu"], abs=4 * math.sqrt((2 + scores.meta["mu"] ** 2 / 4) / 500))
    with pytest.raises(InvalidParameterError, match="clipped to"):
        output_perturbation_lr_test(worst_pair, OutputPerturbationConfig(clip=5.0, sigma=1.0))


# -- clock-seeded noise ----------------------------------------------------------------------------
def test_engine_clock_noise_is_the_reference_codes_draw():
    like = {"linear.weight": torch.zeros(2, 20), "linear.bias": torch.zeros(2)}
    for seed in (0, 417, 999):
        torch.manual_seed(seed)  # the reference code: global seed, then torch.normal per key in order
        reference = {k: torch.normal(0, 0.64, size=v.shape) for k, v in like.items()}
        ours = clock_noise(like, 0.64, seed)
        assert all(torch.equal(reference[k], ours[k]) for k in like)


class _Clock:
    """Clock readings whose milliseconds are the given seeds (the third and fourth release share one)."""

    def __init__(self, milliseconds):
        self.readings = [1.7e9 + ms / 1000 + 4e-4 for ms in milliseconds]
        self.calls = 0

    def __call__(self):
        value = self.readings[self.calls % len(self.readings)]
        self.calls += 1
        return value


def _clock_run(monkeypatch, clip: float, milliseconds):
    dataset = load_dataset("synthetic:iid", dim=20, num_classes=2, seed=0, num_clients=4)
    truths = []
    original = noise.clip_to_norm

    def spy(state, tau):
        clipped, norm = original(state, tau)
        truths.append({k: v.clone() for k, v in clipped.items()})
        return clipped, norm

    monkeypatch.setattr(noise, "clip_to_norm", spy)
    config = OutputPerturbationConfig(clip=clip, sigma=0.8, noise_std="sigma-squared", rng="clock-ms")
    algorithm = OutputPerturbation(FedProx(0.1), config, clock=_Clock(milliseconds))
    recorder = ReleaseRecorder()
    run_federation(dataset, "logreg", algorithm, FederationConfig(rounds=2, local=REFERENCE_LOCAL, seed=0), observers=[recorder], progress=False)
    return recorder, truths


@pytest.mark.parametrize(("clip", "method"), [(0.5, "exact-clip-norm"), (100.0, "nearest-reference")])
def test_clock_recovery_finds_the_seed_and_the_clipped_model(monkeypatch, clip, method):
    milliseconds = [17, 523, 998, 998, 5, 640, 301, 77]  # 2 rounds × 4 clients
    recorder, truths = _clock_run(monkeypatch, clip, milliseconds)
    report = recover_from_releases(recorder)
    assert len(report.recoveries) == 8 and report.recovered_fraction == 1.0
    assert [r.seed for r in report.recoveries] == milliseconds
    assert {r.method for r in report.recoveries} == {method}
    assert report.shared_seeds == {998: [2, 3]}
    assert "ε = ∞" in report.consequence and report.to_dict()["epsilon"] == "inf"
    direct = recover_clock_seeds([recorder.client_states[1][c] for c in range(4)], clip=clip, std=0.64,
                                 references=[recorder.global_states[0]] * 4, truths=truths[:4])
    assert max(r.error for r in direct.recoveries) < 1e-6  # float32 precision


def test_clock_recovery_refuses_runs_without_clock_noise():
    dataset = load_dataset("synthetic:iid", dim=20, num_classes=2, seed=0, num_clients=2)
    recorder = ReleaseRecorder()
    algorithm = OutputPerturbation(FedProx(0.1), OutputPerturbationConfig(clip=10, sigma=1.0))
    run_federation(dataset, "logreg", algorithm, FederationConfig(rounds=1, local=REFERENCE_LOCAL), observers=[recorder], progress=False)
    with pytest.raises(InvalidParameterError, match="seeded streams"):
        recover_from_releases(RecordedReleases(recorder))


def test_clock_recovery_on_the_784_196_10_mlp():
    model = seeded_torch_global(0, lambda: build_model("upcycled-mlp", (1, 28, 28), 10))
    clipped, _ = noise.clip_to_norm(model_state(model), TAU)
    release = {k: v + clock_noise(clipped, 0.04, 731)[k] for k, v in clipped.items()}
    report = recover_clock_seeds([release], clip=TAU, std=0.04, truths=[clipped])
    assert report.recoveries[0].seed == 731 and report.recoveries[0].error < 1e-6
