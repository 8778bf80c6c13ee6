"""PFA's budget pre-check and K-of-M sampling, simulated on a ledger without training (audit point F2)."""

from __future__ import annotations

import numpy as np
import pytest

from privaudit.accounting.ledger import PrivacyEvent, PrivacyLedger
from privaudit.errors import InvalidParameterError
from privaudit.papers.pfa.budget_calibration import calibrate_clients
from privaudit.papers.pfa.budget_participation import BudgetedSampler, BudgetGate, recorded_steps

M, K, ROUNDS, TAU = 10, 8, 20, 25
EPS = [0.2, 0.3, 0.5, 0.5, 0.8, 1.0, 2.0, 3.0, 8.0, 10.0]


def _simulate(method: str, policy: str, seed: int = 0, rounds: int = ROUNDS):
    calibrations = calibrate_clients(EPS, [0.05] * M, [TAU] * M, delta=1e-5, clients_per_round=K, rounds=rounds, method=method)
    ledger = PrivacyLedger()
    for c in range(M):
        ledger.set_budget(c, EPS[c], 1e-5)
    sampler = BudgetedSampler(M, K, BudgetGate(calibrations, ledger), lambda ids: ((), tuple(ids)), policy=policy)
    for round_ in range(1, rounds + 1):
        if not sampler.can_train(round_):
            continue
        for client in sampler.sample(round_, np.random.default_rng([seed, round_])):
            ledger.record(PrivacyEvent(client, round_, calibrations[client].mechanism, TAU))
    return calibrations, ledger, sampler


@pytest.mark.parametrize("method", ["rdp", "reference"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_precheck_never_lets_a_client_exceed_its_planned_steps(method, seed):
    calibrations, ledger, sampler = _simulate(method, "exclude", seed)
    planned = calibrations[0].planned_steps  # T* = K·R/M = 16 rounds of τ steps
    assert planned == 16 * TAU
    for c in range(M):
        assert recorded_steps(ledger, c) <= planned
    summary = ledger.summary(1e-5, accountant="rdp")
    if method == "rdp":
        assert not any(c.over_budget for c in summary.per_client.values())
    # uniform sampling exhausts some clients before R rounds: the run stops and says why
    assert sampler.stopped is not None and sampler.stopped.round <= ROUNDS
    assert sampler.stopped.candidates < K and len(sampler.stopped.exhausted) > M - K
    assert "fewer than the 8 sampled per round" in sampler.stopped.reason
    assert all(len(r.sampled) == K for r in sampler.rounds)
    for record in sampler.rounds:  # an exhausted client is never sampled
        assert not set(record.sampled) & set(record.exhausted)


def test_without_precheck_clients_overrun_their_expected_steps():
    calibrations, ledger, sampler = _simulate("rdp", "record", seed=0)
    steps = [recorded_steps(ledger, c) for c in range(M)]
    assert sampler.stopped is None and len(sampler.rounds) == ROUNDS
    assert max(steps) > calibrations[0].planned_steps  # T* = KT/M is only an expectation (audit point F2)
    over = [c for c in ledger.summary(1e-5, accountant="rdp").per_client.values() if c.over_budget]
    assert over and all(recorded_steps(ledger, int(c.client_id)) > calibrations[0].planned_steps for c in over)


def test_sampling_is_uniform_among_candidates():
    counts = np.zeros(M)
    sampler = BudgetedSampler(M, K, None, lambda ids: (tuple(ids), ()))
    for round_ in range(1, 2001):
        assert sampler.can_train(round_)
        for c in sampler.sample(round_, np.random.default_rng(round_)):
            counts[c] += 1
    assert np.allclose(counts / 2000, K / M, atol=0.03)


def test_resample_until_a_public_client_is_sampled():
    public = {9}
    split = lambda ids: (tuple(c for c in ids if c in public), tuple(c for c in ids if c not in public))  # noqa: E731
    sampler = BudgetedSampler(M, 2, None, split, require_public=True)
    for round_ in range(1, 50):
        sampler.can_train(round_)
        assert 9 in sampler.sample(round_, np.random.default_rng(round_))
    assert any(r.resamples > 0 for r in sampler.rounds)


def test_public_only_trains_the_public_part_of_each_sample():
    split = lambda ids: (tuple(c for c in ids if c >= 8), tuple(c for c in ids if c < 8))  # noqa: E731
    sampler = BudgetedSampler(M, 9, None, split, public_only=True)
    sampler.can_train(1)
    trained = sampler.sample(1, np.random.default_rng(0))
    assert set(trained) <= {8, 9} and len(sampler.rounds[0].sampled) == 9


def test_bad_sampler_arguments():
    with pytest.raises(InvalidParameterError, match="cannot sample 11 of 10"):
        BudgetedSampler(M, 11, None, lambda ids: ((), ()))
    with pytest.raises(InvalidParameterError, match="unknown budget policy"):
        BudgetedSampler(M, 2, None, lambda ids: ((), ()), policy="ignore")
