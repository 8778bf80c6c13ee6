"""Validity of the Upcycled audit: a correctly implemented Gaussian mechanism is never refuted by the GDP route,
and the same audit does refute a claim that is too small — with enough trials to have power."""

import dataclasses

import pytest
import torch

from privaudit.audit.claims import get_claim
from privaudit.audit.runner import AuditSettings, run_reading
from privaudit.audit.verdict import Verdict
from privaudit.papers.upcycled.recipe import output_perturbation

torch.set_num_threads(1)
TRIALS = 400


@pytest.fixture(scope="module")
def theorem_setting(tmp_path_factory):
    claim = get_claim("upcycled-thm6.2-fig3")
    reading = next(r for r in output_perturbation(claim, TRIALS) if getattr(r, "reading_id", "") == "theorem-setting")
    # both tests share one trials directory: the second one resumes the first one's trials
    return claim, dataclasses.replace(reading, trials=dataclasses.replace(reading.trials, count=TRIALS)), tmp_path_factory.mktemp("trials")


def test_correct_mechanism_is_not_refuted_and_the_audit_has_power(theorem_setting):
    claim, reading, out = theorem_setting
    # power is calibrated to the claim (issue 24): an optimal attack on a Gaussian mechanism at 3× the claim (ε = 4.2)
    # with these sample sizes; cp's explicit threshold sits on the score's own scale, so it has none
    outcome = run_reading(claim, reading, AuditSettings(progress=False, power_trials=100, power_factor=3.0, out=out))
    exact = next(e for e in outcome.analysis.evidence if e.implementation)
    assert outcome.verdict.verdict is not Verdict.REFUTED
    gdp = next(b for b in outcome.bounds if b.estimator == "gdp")
    assert gdp.power.alternative_epsilon == pytest.approx(3 * claim.epsilon) and gdp.power.lower >= 0.8
    cp = next(b for b in outcome.bounds if b.estimator == "cp")
    assert cp.power is None and "numeric thresholds" in cp.no_power_reason
    assert all(b.epsilon_lb <= exact.upper for b in outcome.bounds)  # a valid lower bound of the true ε
    assert gdp.epsilon_lb > 0  # the attack sees the canary (μ = √40·(τ/|D|)/σ ≈ 0.35)


def test_the_same_attack_refutes_a_claim_that_is_too_small(theorem_setting):
    claim, reading, out = theorem_setting
    # no accounting evidence, so only the attack can decide; the true ε is ≈ 0.89 at δ = 1e-3
    attack_only = dataclasses.replace(reading, claimed_epsilon=0.03,
                                      analyse=lambda results: dataclasses.replace(reading.analyse(results), evidence=()))
    outcome = run_reading(claim, attack_only, AuditSettings(progress=False, power_trials=20, out=out))
    assert outcome.verdict.verdict is Verdict.REFUTED and "attack:gdp" in outcome.verdict.refuted_by
    assert all(r.startswith("attack:") for r in outcome.verdict.refuted_by)
