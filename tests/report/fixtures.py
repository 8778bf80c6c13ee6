"""Result files covering every report section (written with the real writer)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from privaudit.audit.claims import get_claim
from privaudit.report.results import make_result, write_result


def write_fixture_results(root: Path) -> list[Path]:
    rng = np.random.default_rng(0)
    paths = []
    claim = {
        "claim_id": "upcycled-thm6.2-fig3", "paper": "003_a806a4129da32579.txt", "where": "Theorem 6.2 / Fig. 3",
        "claimed": {"epsilon": 1.402, "delta": 1e-3},
        "accountant": [
            {"label": "paper's assumptions", "accountant": "prv", "upper": 1.03, "lower": 1.03, "implementation": False},
            {"label": "reference code: σ² noise, clock RNG", "accountant": "support argument", "upper": math.inf,
             "lower": math.inf, "implementation": True},
        ],
        "lower_bounds": [{"estimator": "gdp", "epsilon_lb": 2.4, "significance": 0.025, "delta": 1e-3, "ceiling": 9.1,
                          "power": {"probability": 0.93, "factor": 2.0}}],
        "verdict": "refuted", "reason": "the mechanism as implemented has ε ≥ ∞ > claimed 1.4",
    }
    claim["readings"] = [
        {"reading": "reference-clock-rng", "role": "implementation", "title": "reference code: clock-seeded noise",
         "claimed": claim["claimed"], "accountant": claim["accountant"][1:], "lower_bounds": claim["lower_bounds"],
         "verdict": "refuted", "reason": "ε = ∞: the noise takes at most 1000 values"},
    ]
    older = dict(claim)  # a result file written before claims carried their sources and verdict bases
    claim.update(get_claim("upcycled-thm6.2-fig3").sources_dict())
    claim["verdict_basis"] = "refuted (as implemented)"
    claim["verdicts_by_role"] = {"implementation": {
        "verdict": "refuted", "basis": "as implemented", "reason": "reference-clock-rng: ε = ∞: the noise takes at most 1000 values",
        "readings": {"reference-clock-rng": "refuted"}}}
    paths.append(write_result(root / "claims" / "upcycled.json", make_result("claim-audit", "Upcycled-FL Thm 6.2", claim, {"trials": 200}, seed=0)))
    consistent = dict(older, claim_id="upcycled-thm6.3-fig4", verdict="consistent", reason="certified ε ≤ 7.2 ≤ claimed 7.39",
                      claimed={"epsilon": 7.39, "delta": 0.0}, lower_bounds=[])
    paths.append(write_result(root / "claims" / "objective.json", make_result("claim-audit", "Upcycled-FL Thm 6.3", consistent)))
    per_client = {str(i): {"epsilon": float(e), "budget": 2.0, "rounds": 10, "assumptions": ["Δ = τ/|D|"], "valid": True}
                  for i, e in enumerate(rng.uniform(0.5, 2.6, 12))}
    paths.append(write_result(root / "ledger.json", make_result("ledger", "PFA per-client ε", {
        "accountant": "rdp", "delta": 1e-5, "max_epsilon": max(v["epsilon"] for v in per_client.values()),
        "mean_epsilon": float(np.mean([v["epsilon"] for v in per_client.values()])), "per_client": per_client})))
    rounds = list(range(1, 21))
    paths.append(write_result(root / "eps.json", make_result("epsilon-curve", "ε vs rounds", {
        "rounds": rounds, "delta": 1e-5, "epsilon": {"prv": [0.1 * r ** 0.5 for r in rounds], "rdp": [0.12 * r ** 0.5 for r in rounds]}})))
    fpr = np.concatenate([[0.0], np.logspace(-4, 0, 50)])
    paths.append(write_result(root / "mia.json", make_result("membership-attack", "LiRA", {
        "attack": "lira-online", "roc": {"fpr": fpr.tolist(), "tpr": np.sqrt(fpr).tolist()},
        "auc": {"estimate": 0.71, "low": 0.68, "high": 0.74}, "tpr_at_fpr": {"0.001": 0.03, "0.01": 0.1},
        "n_in": 500, "n_out": 500})))
    grid = root / "inv" / "grid.png"
    grid.parent.mkdir(parents=True, exist_ok=True)
    from privaudit.report.figures import lines_figure

    grid.write_bytes(lines_figure([0, 1], {"stand-in image": [0, 1]}, "grid", "x", "y"))
    paths.append(write_result(root / "inv" / "ig.json", make_result("inversion", "IG vs FedAvg", {
        "attack": "ig", "defense": "fedavg", "psnr": [21.9, 27.0], "ssim": [0.89, 0.84], "label_accuracy": 1.0,
        "epsilon": math.inf, "grid": "grid.png"})))
    paths.append(write_result(root / "train.json", make_result("training", "FedProx", {
        "algorithm": "fedprox", "rounds": rounds, "accuracy": [0.5 + 0.02 * r for r in rounds]})))
    paths.append(write_result(root / "table.json", make_result("table", "PFA+ uplink", {
        "columns": ["method", "MB"], "rows": [["PFA", 113.0], ["PFA+", 1.2]]})))
    return paths
