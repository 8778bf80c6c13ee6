"""White-box gradient-canary audit of a checkpoint: the per-round bound that needs no composition (null coverage, and
a deliberately invalid variant that the same check catches), the per-run composition decision, and
``privaudit audit --checkpoint DIR --gradient-canaries K`` end to end (valid and invalid composition, weak vs strong
noise, every bad input → one line, exit 2)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from privaudit.audit import ClaimPower
from privaudit.audit.workflows.gradient_canaries import composition_validity
from privaudit.cli.app import main
from privaudit.stats.gdp import gdp_bound
from privaudit.stats.gdp_composition import gdp_best_round_lower_bound
from privaudit.stats.scores import AuditScores
from privaudit.stats.strategies import Explicit
from tests.audit.helpers import (
    binomial_upper_tolerance,
    checkpoint_without_recipe,
    deterministic_normal,
    one_line_audit_error,
    run_audit,
)

torch.set_num_threads(1)

ALPHA = 0.1
REPETITIONS = 200


# -- gdp-best-round: validity is tested, not assumed ------------------------------------------------
def _draw(rng: np.random.Generator, size: int, tied: bool) -> np.ndarray:
    return rng.binomial(4, 0.5, size).astype(float) if tied else rng.normal(size=size)


@pytest.mark.parametrize("tied", [False, True])
def test_best_round_null_coverage(tied):
    """In and out scores of every round from one law (true ε = 0): P[ε_lb > 0] ≤ α + 3·√(α(1−α)/R)."""
    rng = np.random.default_rng(20_240_612)
    positive = 0
    for _ in range(REPETITIONS):
        rounds = [(_draw(rng, 40, tied), _draw(rng, 40, tied)) for _ in range(8)]
        positive += gdp_best_round_lower_bound(rounds, significance=ALPHA, delta=1e-5).epsilon_lb > 0
    assert positive / REPETITIONS <= binomial_upper_tolerance(ALPHA, REPETITIONS)


def test_best_round_null_check_can_fail():
    """The maximum over rounds each bounded at the *full* α (no Bonferroni) fails the same check; α/T passes it."""
    rng = np.random.default_rng(7)
    strategy = Explicit(0.0)
    valid = invalid = 0
    for _ in range(REPETITIONS):
        rounds = [(rng.normal(size=20), rng.normal(size=20)) for _ in range(100)]
        valid += gdp_best_round_lower_bound(rounds, significance=ALPHA, strategy=strategy).epsilon_lb > 0
        invalid += max(gdp_bound(AuditScores.of(a, b), ALPHA, 1e-5, strategy)[0] for a, b in rounds) > 0
    tolerance = binomial_upper_tolerance(ALPHA, REPETITIONS)
    assert valid / REPETITIONS <= tolerance < invalid / REPETITIONS


def test_best_round_finds_the_leaking_round_with_ceiling_and_power():
    null = (deterministic_normal(0.0, 100), deterministic_normal(0.0, 100))
    leaking = (deterministic_normal(3.0, 100), deterministic_normal(0.0, 100))
    bound = gdp_best_round_lower_bound([null, null, leaking, null, null], significance=0.05, delta=1e-5, claim=ClaimPower(claimed_epsilon=1.0, trials=50))
    assert bound.estimator == "gdp-best-round" and bound.details["best_round_index"] == 2
    assert bound.details["per_round_significance"] == pytest.approx(0.05 / 5)
    assert bound.details["per_round_mu_lb"][0] == 0.0 and 1.0 < bound.details["mu_lb"] < 3.0
    assert 0 < bound.epsilon_lb <= bound.ceiling and bound.n_in == bound.n_out == 500
    assert bound.power is not None and bound.power.max_trials == 50 and bound.power.claimed_epsilon == 1.0
    assert bound.power.rounds == 5 and bound.mechanism == "gaussian" and not bound.attack_optimal


# -- the per-run composition decision ---------------------------------------------------------------
SEEDED = {"mechanism": "output-perturbation", "clip": 10.0, "sigma": 0.5, "rng": "seeded"}


@pytest.mark.parametrize(("privacy", "view", "q", "missing", "failing"), [
    (SEEDED, "client", 1.0, [], []),
    (SEEDED, "aggregate", 1.0, [], []),
    ({**SEEDED, "rng": "clock-ms"}, "client", 1.0, [], ["mechanism"]),
    (None, "client", 1.0, [], ["mechanism"]),
    ({"mechanism": "dp-sgd"}, "client", 1.0, [], ["mechanism"]),
    (SEEDED, "client", 0.5, [3], ["participation"]),
    (SEEDED, "aggregate", 0.5, [], ["view"]),
    (SEEDED, "aggregate", 0.5, [2], ["participation", "view"]),
])
def test_composition_validity_is_decided_per_run(privacy, view, q, missing, failing):
    decision = composition_validity(privacy, view, q, missing)
    assert decision.valid is (not failing)
    assert [name for name, check in decision.checks.items() if not check["holds"]] == failing
    assert decision.statement.startswith("gdp-composed is valid" if not failing else "gdp-composed is NOT valid")
    assert len(decision.reasons) == len(failing)
    assert decision.to_dict()["checks"]["participation"]["rounds_without_client"] == missing


# -- end to end through the CLI ---------------------------------------------------------------------
def _train(path, noise: float | None, clients_per_round: float = 1.0, clip: float = 10.0):
    from privaudit.fl.engine.config import LocalTrainingConfig
    from privaudit.fl.run import TrainSpec, run_training

    privacy = {"privacy": "output-perturbation", "privacy_options": {"clip": clip, "noise": noise}} if noise else {}
    spec = TrainSpec(algorithm="fedavg", dataset="synthetic:iid", rounds=2, num_clients=10,
                     local=LocalTrainingConfig(epochs=1, batch_size=32, lr=0.1), clients_per_round=clients_per_round,
                     dataset_options={"dim": 60, "num_classes": 10}, **privacy)  # logreg: d = 610 scalars
    run_training(spec, path, progress=False)
    return path


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("gc-runs")
    return {"priv": _train(root / "priv", 0.5), "weak": _train(root / "weak", 0.01), "strong": _train(root / "strong", 5.0),
            "sampled": _train(root / "sampled", 0.5, clients_per_round=0.5), "plain": _train(root / "plain", None),
            "clipped": _train(root / "clipped", 0.01, clip=0.05)}


def audit(capsys, tmp_path, checkpoint, *extra):
    code, out, err = run_audit(capsys, "--checkpoint", str(checkpoint), "--out", str(tmp_path), "--power-trials", "20", "--quiet",
                         *extra)
    assert code == 0, err
    return json.loads((tmp_path / "gradient-canaries.json").read_text())["data"], out


def test_client_view_audit_reports_both_estimators_and_a_valid_composition(capsys, tmp_path, runs):
    data, out = audit(capsys, tmp_path, runs["priv"], "--gradient-canaries", "100")
    bounds = {b["estimator"]: b for b in data["lower_bounds"]}
    assert list(bounds) == ["gdp-composed", "gdp-best-round"]
    for b in bounds.values():
        assert b["significance"] == pytest.approx(0.025) and b["ceiling"] >= b["epsilon_lb"] >= 0
        assert b["power"] is not None and b["details"]["valid"] is True
    composition = data["details"]["composition"]
    assert composition["valid"] is True and composition["reasons"] == []
    assert data["details"]["deciding_estimators"] == ["gdp-best-round", "gdp-composed"]
    # the default magnitude is the ledger's sensitivity τ/|D_0|, so the canary's μ per round is exactly Δ/σ
    assert data["details"]["magnitude"]["source"].startswith("the ledger's per-release L2 sensitivity")
    assert data["details"]["mechanism_mu"]["composed"] == pytest.approx(data["details"]["ledger_mu"]["composed"])
    assert data["details"]["claim_source"].startswith("the checkpoint's ledger") and "certified ε ≤" not in data["reason"]
    assert any(n.startswith("gdp-composed is valid") for n in data["notes"])
    assert any("adversarial update" in n and "not measure what a natural training record leaks" in n for n in data["notes"])
    assert "gdp-best-round" in out and "composition: gdp-composed is valid" in out and "verdict:" in out
    # the validity statement reaches the rendered report
    assert main(["report", str(tmp_path), "--out", str(tmp_path / "report")]) == 0
    capsys.readouterr()
    report = (tmp_path / "report" / "report.md").read_text()
    assert "Notes — checkpoint:priv:gradient-canaries: gdp-composed is valid for this run" in report


def test_aggregate_view_with_client_sampling_is_not_composable(capsys, tmp_path, runs):
    data, out = audit(capsys, tmp_path, runs["sampled"], "--gradient-canaries", "100", "--canary-view", "aggregate",
                      "--canary-magnitude", "0.1")
    composed = next(b for b in data["lower_bounds"] if b["estimator"] == "gdp-composed")
    assert composed["details"]["valid"] is False
    composition = data["details"]["composition"]
    assert composition["valid"] is False and composition["checks"]["view"]["holds"] is False
    # a subsampled aggregate is a mixture, not a Gaussian shift: no GDP bound decides, the one-run bound does
    best = next(b for b in data["lower_bounds"] if b["estimator"] == "gdp-best-round")
    assert best["details"]["valid"] is False and best["details"]["gaussian_rounds"] is False
    assert data["details"]["deciding_estimators"] == ["one-run-best-round"]
    assert all("gdp" not in r for r in data["refuted_by"])
    assert any(n.startswith("gdp-composed is NOT valid") and "aggregate view with client subsampling" in n for n in data["notes"])
    assert data["details"]["magnitude"]["source"] == "--canary-magnitude" and data["attack"]["view"] == "aggregate"
    assert "not used for the verdict" in out


def test_weak_noise_gives_a_large_bound_and_strong_noise_a_small_one(capsys, tmp_path, runs):
    weak, _ = audit(capsys, tmp_path / "weak", runs["weak"], "--gradient-canaries", "200", "--claimed-epsilon", "5")
    strong, _ = audit(capsys, tmp_path / "strong", runs["strong"], "--gradient-canaries", "200", "--claimed-epsilon", "5")
    lb = {d: {b["estimator"]: b["epsilon_lb"] for b in data["lower_bounds"]} for d, data in (("weak", weak), ("strong", strong))}
    # noise 0.01 against Δ = τ/|D_0| ≈ 0.09: μ ≈ 9 per round, far beyond what 200 canaries can certify
    assert lb["weak"]["gdp-composed"] > 15 and lb["weak"]["gdp-best-round"] > 10
    assert weak["verdict"] == "refuted" and "attack:gdp-composed" in weak["refuted_by"]
    # noise 5: μ ≈ 0.02 per round, nothing to find
    assert lb["strong"]["gdp-composed"] < 0.5 and lb["strong"]["gdp-best-round"] < 0.5 and strong["verdict"] != "refuted"
    magnitude = weak["details"]["magnitude"]["value"]
    for row in weak["details"]["per_round"]:  # each inserted canary shifts its projection by C (the clip never binds)
        assert row["mean_in"] - row["mean_out"] == pytest.approx(magnitude, rel=0.15)
    assert weak["details"]["rounds_clipped"] == []


def test_when_clipping_binds_only_the_one_run_bound_decides(capsys, tmp_path, runs):
    """Clipping rescales the model by a factor that depends on how many canaries are in: the trials are coupled, so
    the GDP bounds (independent trials) step aside and the one-run bound (no independence needed) decides."""
    data, out = audit(capsys, tmp_path, runs["clipped"], "--gradient-canaries", "100", "--claimed-epsilon", "1")
    assert data["details"]["rounds_clipped"] and data["details"]["deciding_estimators"] == ["one-run-best-round"]
    bounds = {b["estimator"]: b for b in data["lower_bounds"]}
    assert not bounds["gdp-composed"]["details"]["valid"] and not bounds["gdp-best-round"]["details"]["valid"]
    one_run = bounds["one-run-best-round"]
    assert one_run["details"]["valid"] and one_run["significance"] == pytest.approx(0.025)
    assert 0 <= one_run["epsilon_lb"] <= one_run["ceiling"]
    # coupled rounds are audited as family "any": no attack-based power, and the bound says why (issue 24)
    assert one_run["power"] is None and "no attack-based power" in one_run["no_power_reason"]
    assert all("gdp" not in r for r in data["refuted_by"])
    assert any("no longer independent trials" in n for n in data["notes"]) and "only the one-run bound" in out


def test_one_run_best_round_null_coverage():
    """Identical in/out laws in every round: the Bonferroni maximum of per-round one-run bounds stays within α."""
    from privaudit.stats.one_run_rounds import one_run_best_round_lower_bound

    rng = np.random.default_rng(5)
    repetitions = 100
    positive = sum(one_run_best_round_lower_bound([(rng.normal(size=30), rng.normal(size=30)) for _ in range(4)],
                                                  significance=ALPHA).epsilon_lb > 0 for _ in range(repetitions))
    assert positive / repetitions <= binomial_upper_tolerance(ALPHA, repetitions)


@pytest.mark.parametrize(("args", "match"), [
    (("--gradient-canaries", "1"), "needs at least 2 canaries"),
    (("--gradient-canaries", "10", "--canary-view", "server"), "unknown --canary-view 'server'"),
    (("--gradient-canaries", "10", "--canary-magnitude", "0"), "--canary-magnitude must be a positive number"),
    (("--gradient-canaries", "10", "--canary-magnitude", "-1"), "--canary-magnitude must be a positive number"),
    (("--gradient-canaries", "10", "--one-run"), "mutually exclusive"),
    (("--gradient-canaries", "10", "--canaries", "10"), "--canaries counts the input canaries"),
    (("--gradient-canaries", "10", "--trials", "3"), "--trials does not apply"),
    (("--canary-view", "client"), "need --gradient-canaries K"),
    (("--gradient-canaries", "611"), "exceed the model's 610 scalars"),
    (("--gradient-canaries", "10", "--canary-client", "99"), "canary client 99"),
    (("--gradient-canaries", "10", "--canary-kind", "ood"), "--canary-kind chooses input canaries"),
])
def test_bad_gradient_canary_input_is_one_line_and_exit_2(capsys, runs, args, match):
    one_line_audit_error(capsys, "--checkpoint", str(runs["priv"]), *args, match=match)


def test_bad_gradient_canary_checkpoints(capsys, tmp_path, runs):
    one_line_audit_error(capsys, "--checkpoint", str(checkpoint_without_recipe(runs["priv"], tmp_path)), "--gradient-canaries", "10",
                   match="records no training recipe")
    one_line_audit_error(capsys, "--checkpoint", str(runs["plain"]), "--gradient-canaries", "10",
                   match="records no privacy mechanism")  # the claim comes first: a run without privacy claims nothing
    one_line_audit_error(capsys, "--checkpoint", str(runs["plain"]), "--gradient-canaries", "10", "--claimed-epsilon", "1",
                   match="give --canary-magnitude C")
    one_line_audit_error(capsys, "--checkpoint", "/no/such/run", "--gradient-canaries", "10", match="manifest.json is missing")
    one_line_audit_error(capsys, "--claim", "pfa-heterogeneous-calibration", "--gradient-canaries", "10",
                   match="apply to --checkpoint audits only")
