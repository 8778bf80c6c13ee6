"""Verdict rules: refutation needs a lower bound (attack or certified); consistency needs a proof, or an attack declared
optimal for a declared Gaussian mechanism whose optimal-attack power at 2× the claim is ≥ min_power (issue 24)."""

import math

import numpy as np
import pytest

from privaudit.audit import ClaimPower, epsilon_gdp
from privaudit.audit.verdict import AccountingEvidence, Verdict, decide

CLAIM, DELTA = 1.4, 1e-3


def gaussian_scores(mu, n=4000, seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(mu, 1.0, n), rng.normal(0.0, 1.0, n)


def test_attack_refutes_a_four_times_noise_bug():
    # noise 4× too small against Upcycled-FL's (1.4, 1e-3) claim: μ ≈ 4·0.515
    ins, outs = gaussian_scores(4 * 0.515)
    lb = epsilon_gdp(ins, outs, mechanism="gaussian", significance=0.05, delta=DELTA, claim=ClaimPower(claimed_epsilon=CLAIM, trials=50))
    res = decide(CLAIM, DELTA, [lb])
    assert res.verdict is Verdict.REFUTED and res.refuted_by == ("attack:gdp",)
    assert "family-wise confidence 0.95" in res.reason


def test_upper_bound_above_claim_alone_refutes_nothing():
    loose = AccountingEvidence("implementation", "rdp", upper=2.0, lower=None, implementation=True)
    res = decide(CLAIM, DELTA, [], [loose])
    assert res.verdict is Verdict.INCONCLUSIVE


def test_certified_lower_bound_refutes():
    exact = AccountingEvidence("per-tensor clipping σ/√3", "prv (exact)", upper=15.13, lower=15.13, implementation=True)
    res = decide(8.0, 1e-3, [], [exact])
    assert res.verdict is Verdict.REFUTED and "15.1" in res.reason
    paper_only = AccountingEvidence("paper's assumptions", "prv", upper=15.13, lower=15.13, implementation=False)
    assert decide(8.0, 1e-3, [], [paper_only]).verdict is not Verdict.REFUTED


def test_infinite_epsilon_refutes():
    clock = AccountingEvidence("clock-seeded noise (≤ 1000 noise vectors)", "support argument", upper=math.inf,
                               lower=math.inf, implementation=True)
    assert decide(CLAIM, DELTA, [], [clock]).verdict is Verdict.REFUTED


def test_certified_upper_bound_under_valid_assumptions_is_consistent():
    ok = AccountingEvidence("implementation", "prv", upper=1.03, lower=1.03, implementation=True)
    res = decide(CLAIM, DELTA, [], [ok])
    assert res.verdict is Verdict.CONSISTENT and "certified" in res.reason
    broken = AccountingEvidence("implementation", "prv", upper=1.03, lower=1.03, implementation=True, assumptions_hold=False)
    assert decide(CLAIM, DELTA, [], [broken]).verdict is Verdict.INCONCLUSIVE


def test_a_powerful_attack_declared_optimal_that_finds_nothing_is_consistent_not_proof():
    ins, outs = gaussian_scores(0.515, n=20000, seed=3)  # a mechanism exactly at the claim
    lb = epsilon_gdp(ins, outs, mechanism="gaussian", significance=0.05, delta=DELTA, claim=ClaimPower(claimed_epsilon=CLAIM, trials=40, attack_optimal=True))
    res = decide(CLAIM, DELTA, [lb])
    assert res.verdict is Verdict.CONSISTENT and "not a proof of privacy" in res.reason
    assert "declared optimal" in res.reason and f"ε = {2 * CLAIM:g}" in res.reason and "≥ 0." in res.reason


def test_the_same_attack_not_declared_optimal_is_inconclusive_and_says_why():
    ins, outs = gaussian_scores(0.515, n=20000, seed=3)
    lb = epsilon_gdp(ins, outs, mechanism="gaussian", significance=0.05, delta=DELTA, claim=ClaimPower(claimed_epsilon=CLAIM, trials=40))
    assert lb.power.lower >= 0.8 and not lb.attack_optimal
    res = decide(CLAIM, DELTA, [lb])
    assert res.verdict is Verdict.INCONCLUSIVE
    assert "not declared optimal, so its silence is no evidence of privacy" in res.reason


def test_a_declared_optimal_attack_without_power_stays_inconclusive():
    ins, outs = gaussian_scores(0.515, n=200, seed=3)  # 200 per side cannot tell ε = 1.4 from 2.8
    lb = epsilon_gdp(ins, outs, mechanism="gaussian", significance=0.05, delta=DELTA, claim=ClaimPower(claimed_epsilon=CLAIM, trials=40, attack_optimal=True))
    res = decide(CLAIM, DELTA, [lb])
    assert res.verdict is Verdict.INCONCLUSIVE and "probability only about" in res.reason


def test_a_reason_never_says_epsilon_at_least_zero_was_found():
    ins, outs = gaussian_scores(0.0, n=20000, seed=4)  # no signal at all: the attack certifies nothing
    lb = epsilon_gdp(ins, outs, mechanism="gaussian", significance=0.05, delta=DELTA, claim=ClaimPower(claimed_epsilon=0.3, trials=40, attack_optimal=True))
    assert lb.epsilon_lb == 0.0
    res = decide(0.3, DELTA, [lb])
    assert "ε ≥ 0 " not in res.reason and "(ε ≥ 0" not in res.reason
    if res.verdict is Verdict.CONSISTENT:
        assert "found no ε > 0" in res.reason


def test_weak_attack_is_inconclusive_with_reason():
    ins, outs = gaussian_scores(0.2, n=50, seed=1)
    lb = epsilon_gdp(ins, outs, mechanism="gaussian", significance=0.05, delta=DELTA, claim=ClaimPower(claimed_epsilon=CLAIM, factor=1.2, trials=40))
    res = decide(CLAIM, DELTA, [lb])
    assert res.verdict is Verdict.INCONCLUSIVE and "power" in res.reason


def test_bounds_at_another_delta_are_ignored():
    ins, outs = gaussian_scores(4 * 0.515)
    lb = epsilon_gdp(ins, outs, mechanism="gaussian", significance=0.05, delta=1e-5)
    res = decide(CLAIM, DELTA, [lb])
    assert res.verdict is Verdict.INCONCLUSIVE and any("not the claimed" in n for n in res.notes)


@pytest.mark.parametrize("verdict", list(Verdict))
def test_to_dict(verdict):
    from privaudit.audit.verdict import VerdictResult

    assert VerdictResult(verdict, "r").to_dict()["verdict"] == verdict.value
