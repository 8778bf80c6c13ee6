"""Every ready claim's recipe at tiny size: a valid result file and the verdicts whose answer is known."""

import math

import pytest
import torch

from privaudit.accounting.gaussian import gaussian_epsilon
from privaudit.audit.runner import AuditSettings, run_claim
from privaudit.models import build_model
from privaudit.report.results import read_result

torch.set_num_threads(1)


def audit(claim_id, tmp_path, trials):
    result = run_claim(claim_id, AuditSettings(trials=trials, out=tmp_path, progress=False, power_trials=40,
                                               bootstrap_resamples=50))
    assert result.path == tmp_path / f"{claim_id}.json"
    stored = read_result(result.path)  # the envelope and the claim-audit keys validate
    assert stored.kind == "claim-audit" and stored.data["claim_id"] == claim_id
    assert stored.data["verdict"] == result.verdict.value and stored.data["reason"]
    # the claim's verdict names its basis, one verdict per role, and the claim carries its sources
    by_role = stored.data["verdicts_by_role"]
    assert stored.data["verdict_basis"] == result.basis and by_role == result.by_role
    assert {r["role"] for r in stored.data["readings"]} == set(by_role)
    for role, v in by_role.items():
        assert v["readings"] == {r["reading"]: r["verdict"] for r in stored.data["readings"] if r["role"] == role}
    assert (stored.data["verdict"] == "refuted") == any(v["verdict"] == "refuted" for r, v in by_role.items() if r != "validity")
    assert {"quotes", "numbers", "stated", "chosen", "claimed_provenance"} <= set(stored.data)
    return stored.data, {r["reading"]: r for r in stored.data["readings"]}


def evidence(reading, needle):
    found = [e for e in reading["accountant"] if needle in e["label"]]
    assert found, [e["label"] for e in reading["accountant"]]
    return found[0]


def test_privatefl_cdp_per_tensor_is_refuted_by_accounting(tmp_path):
    data, readings = audit("privatefl-cdp-eps8", tmp_path, 1)
    assert data["verdict"] == "refuted"
    mnist = readings["reference-mnist-dnn"]
    assert mnist["verdict"] == "refuted" and mnist["refuted_by"] == ["accounting:" + evidence(mnist, "reference code:")["label"]]
    details = mnist["details"]
    assert details["aggregated_tensors"] == 3  # counted from the privatefl-dnn architecture
    assert details["effective_multiplier"] == pytest.approx(details["noise_multiplier"] / math.sqrt(3))
    exact = gaussian_epsilon(math.sqrt(150) / details["effective_multiplier"], 1e-3)  # q = 1: μ = √T/z
    assert evidence(mnist, "reference code:")["lower"] == pytest.approx(exact, rel=1e-3) and exact > 14
    assert evidence(mnist, "as calibrated")["upper"] <= 8.0  # what the calibration believed
    assert readings["paper-alg1"]["verdict"] == "inconclusive"  # unprivatised median: no valid bound
    # one trained PrivateFL-CDP run with 30 canary clients: the inserted canaries' cosines stand out of the null
    canary = readings["client-canary-attack"]
    assert canary["trials"] == 1 and canary["role"] == "implementation"
    d = canary["details"]
    assert d["inserted"] + d["unseen"] == 30 and d["inserted"] > 0 and d["unseen"] > 0
    body = build_model("privatefl-dnn", (1, 28, 28), 10)  # the directions span the aggregated parameters only
    assert d["aggregated_tensors"] == 3 and d["dimension"] == sum(p.numel() for p in body.parameters())
    scores = d["scores_times_sqrt_d"]
    assert abs(scores["final_model_out"]["mean"]) < 1.5  # unseen canaries follow the ≈ N(0, 1) null
    assert scores["final_model_in"]["mean"] > scores["final_model_out"]["mean"] + 1.0
    assert d["per_tensor_clip_norms"]["max"] < 10  # the median stayed a real client's norm, below the cap
    bounds = {b["estimator"]: b for b in canary["lower_bounds"]}
    assert set(bounds) == {"one-run", "one-run-fdp-box"}  # per-tensor median clipping: not Gaussian-shaped
    assert all(0 <= b["epsilon_lb"] <= b["ceiling"] for b in bounds.values())
    # family "any": no attack-based power (issue 24), and every bound says why
    assert all(b["power"] is None and "no attack-based power" in b["no_power_reason"] for b in bounds.values())
    assert canary["verdict"] != "refuted"  # 30 canaries at δ = 1e-3: the ceiling is far below 8


def test_privatefl_ldp_participation(tmp_path):
    data, readings = audit("privatefl-ldp-participation", tmp_path, 2)
    reference = readings["reference-expected-participation"]
    assert reference["details"]["stop_round"]["max"] < 150  # the run stops early (audit point P4: ≈ 107 of 150)
    assert reference["details"]["ledger_first_run"]["over_budget"] >= 1  # opacus' own accountant: > 8 at the stop
    nominal = readings["paper-reported-rounds"]
    assert nominal["details"]["max_participations"]["min"] > 45  # more than the expected E·R·sr
    prv = evidence(nominal, "PRV")
    assert nominal["verdict"] == "refuted" and prv["lower"] > 8.0
    assert readings["every-round-calibration"]["verdict"] == "consistent"
    assert data["verdict"] == "refuted"
    trained = readings["trained-run"]  # a real run of PrivateFL's training code: its ledger's per-client ε
    assert trained["details"]["config"]["rounds"] == 8 and trained["details"]["per_client"]
    assert evidence(trained, "ledger")["upper"] == pytest.approx(trained["details"]["max_epsilon"])


def test_pfa_reference_calibration(tmp_path):
    data, readings = audit("pfa-heterogeneous-calibration", tmp_path, 2)
    defaults = readings["calibration-code-defaults"]
    # the implementation reading uses the code's fixed-size batches: one interval for that one mechanism, a certified
    # lower end (the attaining dataset: the Poisson pair at B/(N+1) with shift 2C) and a certified upper end (ctd's
    # fixed-size add/remove pair) that bracket the code's ε tightly; the Poisson accounting (Thm 1's assumption) is
    # shown, not used. (Before issue 24 the lower end was a separate entry with upper = ∞, which reports printed as
    # "∞" beside the certified 271.6.)
    code = [e for e in defaults["accountant"] if e["implementation"]]
    assert len(code) == 1 and code[0]["label"].endswith("certified lower and upper end")
    fixed = code[0]
    assert fixed["assumptions_hold"] and math.isfinite(fixed["upper"])
    assert defaults["verdict"] == "refuted" and fixed["lower"] > 2 * defaults["claimed"]["epsilon"]  # audit point F1
    poisson = evidence(defaults, "Poisson batches")
    assert not poisson["implementation"] and not poisson["assumptions_hold"]
    assert fixed["lower"] <= fixed["upper"] <= 1.01 * fixed["lower"]  # the interval is tight: attained by one dataset
    assert fixed["upper"] > poisson["upper"]  # fixed-size batches are far less private than Poisson at the same q
    assert defaults["details"]["sampling_examined"].startswith("fixed-size")
    paper = readings["calibration-paper"]
    assert paper["verdict"] == "consistent" and evidence(paper, "Poisson batches")["implementation"]
    assert not evidence(paper, "fixed-size batches without replacement")["implementation"]
    assert paper["details"]["private_ratio"]["max"] < 0.2  # private clients ≈ 7–8× over-noised (audit point F1)
    participation = readings["participation-without-cap"]
    assert participation["details"]["most_sampled_participations"]["min"] > participation["details"]["expected_participations"]
    assert data["verdict"] == "refuted" and data["verdict_basis"].startswith("refuted (as implemented), ")
    assert data["claimed_provenance"] == {"epsilon": "stated", "delta": "chosen"}
    trained = readings["trained-run"]  # a real run of PFA's training code with the reference calibration
    budgets = [row["claimed_epsilon"] for row in trained["details"]["per_client"]]
    assert trained["claimed"]["epsilon"] == pytest.approx(max(budgets))


def test_upcycled_output_perturbation_readings(tmp_path):
    data, readings = audit("upcycled-thm6.2-fig3", tmp_path, 6)
    # σ² with the paper's sensitivity: the printed formula gives 1.75 > 1.59 (and > 1.40), but that is an upper bound:
    # no accounting evidence refutes the reading; only an attack could.
    squared = readings["reference-sigma-squared"]
    draft = evidence(squared, "000 Thm 5.2 as printed")
    assert draft["upper"] == pytest.approx(1.7529, abs=1e-3) and draft["lower"] is None
    assert evidence(squared, "003 Thm 6.2 as printed")["upper"] == pytest.approx(1.7355, abs=1e-3)
    # each version's printed closed form, labelled by the version that prints it: 003's gives 1.373, 000's 1.402
    domain = readings["paper-sgd-domain"]
    assert evidence(domain, "003 Thm 6.2 as printed")["upper"] == pytest.approx(1.3728, abs=1e-3)
    assert evidence(domain, "000 Thm 5.2 as printed")["upper"] == pytest.approx(1.4023, abs=1e-3)
    assert not any(r.startswith("accounting:") for r in squared["refuted_by"])
    assert evidence(squared, "exact Gaussian")["upper"] < data["claimed"]["epsilon"]  # exact ε 1.16 rests on τ/|D|
    comparison = data["details"]["fig3_comparison"]
    assert comparison["sigma"]["upcycled_more_private"] and not comparison["sigma-squared"]["upcycled_more_private"]
    assert comparison["sigma"]["fedprox"]["draft_thm5_2"] == pytest.approx(1.5865, abs=1e-3)
    assert comparison["sigma"]["fedprox"]["tmlr_thm6_2"] == pytest.approx(1.5624, abs=1e-3)
    # the clock-seeded generator: ε = ∞ by the support argument, and the seed-recovery attack recovers the model
    clock = readings["reference-clock-rng"]
    assert clock["verdict"] == "refuted" and any(r.startswith("accounting:") for r in clock["refuted_by"])
    assert evidence(clock, "support")["lower"] == math.inf
    assert clock["details"]["seed_recovered_fraction"] == 1.0 and clock["details"]["recovery_error"]["max"] < 1e-5
    # the worst-case record moves the clipped model by ≈ τ, not τ/|D| (audit point U2)
    assert readings["paper-sgd-worst-case"]["details"]["shift_over_assumed"] > 50
    assert readings["theorem-setting"]["verdict"] != "refuted"
    # the likelihood-ratio attack is not declared optimal for the SGD-trained mechanism (its canary pair is not
    # known to be worst-case), so its silence never makes a reading consistent (issue 24)
    assert not readings["paper-sgd-domain"]["attack_optimal"] and readings["paper-sgd-domain"]["verdict"] != "consistent"
    assert data["verdict"] == "refuted"
    stored = data["lower_bounds"]
    assert stored and {"ceiling", "power", "significance", "reading"} <= set(stored[0])
    assert stored[0]["significance"] == pytest.approx(0.025)  # α split over the reading's two estimators


def test_upcycled_objective_perturbation_readings(tmp_path):
    data, readings = audit("upcycled-thm6.3-fig4", tmp_path, 4)
    theorem = readings["theorem-setting"]
    # held to the stated 7.25; Thm 6.3 evaluated for this client (7.36) is an independent upper bound above it, which
    # certifies nothing: the reading is not "consistent" by its own closed form (no circularity)
    assert theorem["claimed"]["epsilon"] == 7.25 and theorem["details"]["events_valid_fraction"] == 1.0
    own = theorem["details"]["theorem_for_this_client"]
    assert own == pytest.approx(40 * (2 * 20 * 0.5 + 2.8 * 0.25) / (225 * 0.5)) and own > 7.25
    assert evidence(theorem, "Thm 6.3 evaluated")["upper"] == pytest.approx(own)
    assert not theorem["details"]["theorem_certifies_stated"] and theorem["verdict"] != "consistent"
    assert "certified ε ≤" not in theorem["reason"]
    readme = readings["reference-readme"]
    failed = " ".join(readme["details"]["failed_assumptions"])
    assert "μ > 0" in failed and "Gamma(feature_len" in failed and "exact minimiser" in failed
    assert evidence(readme, "μ = 0")["upper"] == math.inf and readme["verdict"] != "consistent"
    assert data["details"]["theorem_at_mean_size"]["mu=0.5"]["upcycled"] > data["claimed"]["epsilon"]
    assert data["verdict"] == "inconclusive"
