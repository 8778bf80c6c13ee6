"""The membership readings of FedReg's claims at tiny size: a DP-SGD client at σ = 0.01 and FedReg+MG (no noise)."""

import numpy as np
import pytest
import torch

from privaudit.audit.claims import FEDREG_TRAINING
from privaudit.audit.recipes.fedreg_trials import membership_trial, reference_distance_score
from privaudit.audit.runner import AuditSettings, run_claim
from privaudit.report.results import read_result

torch.set_num_threads(1)


def audit(claim_id, tmp_path, trials):
    result = run_claim(claim_id, AuditSettings(trials=trials, out=tmp_path, progress=False, power_trials=40,
                                               bootstrap_resamples=50))
    stored = read_result(result.path)
    assert stored.kind == "claim-audit" and stored.data["verdict"] == result.verdict.value
    return stored.data, {r["reading"]: r for r in stored.data["readings"]}


def test_reference_distance_score_sign():
    r_out, r_in = np.zeros(3), np.array([1.0, 0.0, 0.0])
    assert reference_distance_score(r_in, (r_out, r_in)) == pytest.approx(1.0)
    assert reference_distance_score(r_out, (r_out, r_in)) == pytest.approx(-1.0)
    assert reference_distance_score(np.array([0.5, 3.0, 0.0]), (r_out, r_in)) == pytest.approx(0.0)


def test_dpsgd_client_at_sigma_001_is_refuted_by_the_attack(tmp_path):
    data, readings = audit("fedreg-dpsgd-baselines", tmp_path, 1)
    assert data["pending"] == []
    reading = readings["dpsgd-membership"]
    d = reading["details"]
    assert reading["trials"] == 40 and d["separated"]  # σ = 0.01: the canary's in- and out-worlds never overlap
    assert d["noise_multiplier"] == 0.01 and d["steps"] == 20
    bounds = {b["estimator"]: b for b in reading["lower_bounds"]}
    assert bounds["gdp"]["epsilon_lb"] == pytest.approx(bounds["gdp"]["ceiling"])  # a perfect attack at this size
    assert bounds["gdp"]["epsilon_lb"] > 10 and bounds["cp"]["epsilon_lb"] < 10  # cp tops out near ln N
    assert reading["verdict"] == "refuted" and reading["refuted_by"] == ["attack:gdp"]


def test_dpsgd_trial_trains_through_local_dp_sgd():
    spec = {"data": {"dataset": "mnist5k", "client_size": 16, "data_seed": 0},
            "training": {"algorithm": "fedavg", "model": "pfa-lr", "init_seed": 0, "steps": 3, "lr": 0.5},
            "auditor_seed": 7, "privacy": {"sigma": 0.01, "clip": 1.0}}
    result = membership_trial(spec, 5)
    assert result["in_mechanisms"] == result["out_mechanisms"] == ["SubsampledGaussian"]
    assert result["in_steps"] == result["out_steps"] == 3
    assert result["in"] > 0 > result["out"] and result == membership_trial(spec, 5)  # seeded, repeatable


@pytest.mark.skipif(not FEDREG_TRAINING.available(), reason="FedReg training has not landed")
def test_fedreg_mg_release_is_noise_free_and_gives_membership_away(tmp_path):
    data, readings = audit("fedreg-mg-membership", tmp_path, 12)
    reading = readings["mg-canary-audit"]
    d = reading["details"]
    assert reading["trials"] == 12 and d["separated"] and d["ledger_mechanisms"] == ["PureDP"]
    # the training's own randomness moves the release orders of magnitude less than the canary does (no noise, R1)
    assert d["repeat_distance"]["max"] < 1e-3 * d["in_out_distance"]["min"]
    bounds = {b["estimator"]: b for b in reading["lower_bounds"]}
    assert set(bounds) == {"cp"}  # no GDP route for a noiseless release (its profile is not Gaussian-shaped)
    assert bounds["cp"]["epsilon_lb"] == pytest.approx(bounds["cp"]["ceiling"])  # perfect separation: the ceiling
    assert data["claimed"]["epsilon"] == 1.0 and bounds["cp"]["epsilon_lb"] > 1.0
    assert reading["verdict"] == "refuted" and reading["refuted_by"] == ["attack:cp"]
    assert data["verdict"] == reading["verdict"]
