"""Small result files of every evidence kind (written with the real writer), with their declared inputs beside them.

The numbers are made up and few; each fixture holds every key its page reads, so a page that reads a key the
evidence module does not write fails here.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from privaudit.report.results import make_result, merged_dict, write_result

#: a 1×1 PNG: the declared figure inputs only need to be files the page can show
PNG = bytes.fromhex("89504e470d0a1a0a0000000d4948445200000001000000010806000000"
                    "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082")
COMMANDS = {
    "upcycled-table1": "python benchmarks/evidence_upcycled.py table1 --rounds 4",
    "upcycled-private": "python benchmarks/evidence_upcycled.py private --rounds 2",
    "privatefl": "python benchmarks/evidence_privatefl.py --quick",
    "fedreg": "python benchmarks/evidence_fedreg.py --rounds 3",
    "inversion": "python benchmarks/evidence_inversion.py --images 2 --adaptive-images 1 --iterations 2 --seed 0",
    "pfa": "python benchmarks/evidence_pfa.py --quick",
}


def _write(root: Path, name: str, kind: str, data: dict, inputs: dict[str, str] | None = None) -> Path:
    result = make_result(kind, f"fixture {name}", data, {"fixture": True}, command=COMMANDS[name], seed=0, inputs=inputs)
    return write_result(root / "evidence" / f"{name}.json", result)


def upcycled_table1(root: Path) -> Path:
    runs = []
    accuracy = {"fedprox": (0.80, 0.82), "upcycled-fedprox": (0.84, 0.86), "pfedme": (0.83, 0.85), "upcycled-pfedme": (0.81, 0.83)}
    for algorithm, values in accuracy.items():
        for seed, acc in enumerate(values):
            runs.append({"dataset": "0.5,0.5", "algorithm": algorithm, "seed": seed, "rounds": 4, "accuracy": acc,
                         "personalised_accuracy": acc + 0.05 if "pfedme" in algorithm else None, "seconds": 2.0 + seed})
    data = {"seeds": [0, 1], "rounds": 4, "datasets": ["0.5,0.5"], "upcycle": {"0.5,0.5": 0.7}, "algorithm_options": {"fedprox": {"mu": 0.5}},
            "display": {"fedprox": "FedProx", "pfedme": "pFedMe"}, "runs": runs, "wall_minutes": 0.25, "workers": 1, "cpus": 2}
    return _write(root, "upcycled-table1", "upcycled-table1", data)


def upcycled_private(root: Path) -> Path:
    runs = [{"label": "FedProx, σ = 1", "algorithm": "fedprox", "sigma": 1.0, "convention": "sigma", "noise_std": 1.0, "noisy_rounds": 2,
             "test_accuracy": 0.9, "train_loss": 0.25, "epsilon_max": 2.5, "epsilon_mean": 1.25, "mean_client_size": 100.0,
             "paper_epsilon": 0.75, "history": [[1, 0.5, 0.8], [2, 0.25, 0.9]]},
            {"label": "Upcycled-FedProx, σ = 0.8", "algorithm": "upcycled-fedprox", "sigma": 0.8, "convention": "sigma-squared",
             "noise_std": 0.64, "noisy_rounds": 1, "test_accuracy": 0.92, "train_loss": 0.2, "epsilon_max": 3.0, "epsilon_mean": 1.5,
             "mean_client_size": 100.0, "paper_epsilon": 0.8, "history": [[1, 0.45, 0.82], [2, 0.2, 0.92]]}]
    data = {"delta": 1e-3, "tau": 10.0, "rounds": 2, "seed": 0, "accountant": "rdp", "runs": runs,
            "paper_size_epsilon": {"size": 224.2, "fedprox_sigma": 1.587, "upcycled_sigma": 1.402, "upcycled_sigma_squared": 1.753},
            "wall_minutes": 0.1, "workers": 1, "cpus": 2}
    return _write(root, "upcycled-private", "upcycled-private", data)


def _privatefl_run(label: str, group: str, personalised: float, global_: float, config: dict, ledger: dict | None = None,
                   **extra) -> dict:
    run = {"label": label, "group": group, "config": {"epsilon": None, **config}, "seconds": 3.0,
           "evaluation": {"personalised_accuracy": personalised, "global_accuracy": global_, "global_balanced_accuracy": global_ - 0.01},
           "history": [{"round": 1, "global": global_ / 2, "personalised": personalised / 2},
                       {"round": 2, "global": global_, "personalised": personalised}], **extra}
    if ledger is not None:
        run["ledger"] = {"max_epsilon": 8.0, "mean_epsilon": 8.0, "valid": True, "subjects": 4, "over_budget": 0,
                         "rounds_per_client": [2, 2, 2, 2], "notes": [], "mechanisms": ["Gaussian"], **ledger}
    return run


def privatefl(root: Path) -> Path:
    runs = []
    for family, bump in (("FedAvg", 0.0), ("PrivateFL", 0.1)):
        runs.append(_privatefl_run(f"{family}, no DP", "none", 0.7 + bump, 0.7, {}))
        runs.append(_privatefl_run(f"{family}, LDP ε=8", "ldp", 0.6 + bump, 0.6, {"epsilon": 8.0}, {}))
        runs.append(_privatefl_run(f"{family}, CDP reference ε=8", "cdp", 0.3 + bump, 0.2, {"epsilon": 8.0, "cdp_variant": "reference"},
                                   {"max_epsilon": 16.6, "valid": False, "notes": ["the clip norms are unprivatised medians"]}))
        runs.append(_privatefl_run(f"{family}, DDP digits ε=8", "ddp", 0.3 + bump, 0.3, {"epsilon": 8.0}, {},
                                   ddp={"diagnostics": [{"overflow_coordinates": 0, "decoding_error": 1.0, "expected_noise_norm": 1.0}],
                                        "encoding": {"scale": 2.2e4, "signal_bound": 6.2, "padded": 1024}}))
    runs.append(_privatefl_run("PrivateFL, LDP ε=8, sr 0.3, expected / stop", "ldp-participation", 0.3, 0.3, {"epsilon": 8.0},
                               {"max_epsilon": 7.99}, ldp={"excluded": 0, "overruns": 0, "stopped_at": 2}))
    data = {"runs": runs, "rounds": 2, "epsilons": [8.0], "dataset": "digits", "delta": 1e-3, "wall_minutes": 0.5, "workers": 1, "cpus": 2,
            "dpsgd_speed": {"examples": 100.0, "sgd": 0.01, "dpsgd_ghost": 0.02, "dpsgd_materialise": 0.5},
            "ddp_roundtrip": {"dimension": 1000, "padded": 1024, "clients": 20, "bits": 16, "relative_error": 3e-4,
                              "rounding_bound": 6e-4, "overflow_coordinates": 0}}
    return _write(root, "privatefl", "privatefl-evidence", data)


def inversion(root: Path) -> Path:
    def record(defence: str, attack: str, psnr: list[float], sigma: float | None = None, labels_known: bool = False) -> dict:
        return {"defence": defence, "sigma": sigma, "epsilon": "no DP guarantee" if sigma is None else 4.38, "attack": attack,
                "dataset": "digits", "model": "upcycled-mlp" if attack == "analytic" else "convnet", "images": len(psnr),
                "psnr": psnr, "ssim": [0.5] * len(psnr), "psnr_mean": sum(psnr) / len(psnr), "ssim_mean": 0.5,
                "label_accuracy": 1.0 if labels_known else 0.5, "iterations": 2, "seconds": 0.5, "labels_known": labels_known}

    records = [record("FedAvg", "analytic", [math.inf, 40.0]), record("FedAvg", "ig", [16.0, 15.0]),
               record("FedAvg+DP-SGD σ=1", "ig", [4.0, 4.5], sigma=1.0), record("FedReg+MG", "analytic", [24.0, 26.0]),
               record("FedReg", "ig (naive)", [6.5, 7.5]), record("FedReg+MG", "ig (naive)", [6.0, 7.0]),
               record("FedReg", "adaptive", [8.5]), record("FedReg", "adaptive (labels known)", [9.5], labels_known=True),
               record("FedReg+MG", "adaptive", [8.0]),
               record("FedReg+MG", "adaptive (labels known)", [9.0], labels_known=True)]
    settings = {"images": 2, "adaptive_images": 1, "iterations": 2, "seed": 0, "threads": 1, "datasets": ["digits"],
                "dataset_names": {"digits": "sklearn digits (8×8)"}, "local": {"lr": 0.1, "local_steps": 1, "batch_size": None},
                "fedreg": {"gamma": 0.5, "pseudo_step": 1e-3, "fgsm_steps": 10}, "clip": 1.0, "delta": 1e-5,
                "analytic_model": "upcycled-mlp", "ig_model": "convnet", "machine": "x86_64", "torch": "2.13.0+cpu"}
    root.mkdir(parents=True, exist_ok=True)
    (root / "inversion-digits.png").write_bytes(PNG)
    return _write(root, "inversion", "inversion-evidence", {"settings": settings, "seconds": 30.0, "records": records},
                  inputs={"inversion-digits": "../inversion-digits.png"})


def claims_audit(root: Path) -> Path:
    """A claims-audit report's merged results.json holding FedReg's PSNR claim (the fedreg page's second input)."""
    claim = make_result("claim-audit", "fedreg-mg-vs-dpsgd-psnr", {
        "claim_id": "fedreg-mg-vs-dpsgd-psnr", "claimed": {"epsilon": None, "delta": None}, "accountant": [], "lower_bounds": [],
        "verdict": "not supported", "reason": "r", "verdict_basis": "not supported (as stated)",
        "readings": [{"reading": "psnr-analytic", "role": "paper", "verdict": "not supported",
                      "details": {"images": 16, "attack": "analytic", "effective_psnr_mean": {"FedReg+MG": 27.5}}},
                     {"reading": "mg-no-dp-guarantee", "role": "fact", "verdict": "fact", "reason": "no noise",
                      "details": {"decision": {"fact": "no DP guarantee"}}}]})
    path = root / "claims-audit" / "results.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(merged_dict([claim], []), indent=1, ensure_ascii=False))
    return path


def fedreg(root: Path) -> Path:
    partitions = [["one class per client", "shards:1", 0.01, 0.3], ["two classes per client", "shards:2", 0.001, 0.4]]
    settings = {"dataset": "mnist5k", "model": "fedreg-mlp", "num_clients": 10, "clients_per_round": 0.1, "rounds": 3, "local_epochs": 1,
                "batch_size": 10, "lr": 0.1, "seed": 0, "data_seed": 0, "partitions": partitions,
                "convergence_methods": ["sgd", "fedavg", "fedreg"], "fedreg_eta_s": 0.2, "fedcurv_lambda": 1e-4, "fgsm_steps": 10,
                "mg_eta_s": 0.03, "privacy_partition": 0, "sigmas": [1.0], "clip": 1.0, "delta": 1e-5, "accountant": "rdp",
                "threads": 1, "extra": {}}
    dataset = {"source": "fixture", "train_size_total": 100, "train_size_min_mean_max": [10, 10.0, 10], "test_fraction": 0.1}
    runs = []
    for label, *_ in partitions:
        for method, curve in (("sgd", [0.2, 0.4, 0.5]), ("fedavg", [0.3, 0.45, 0.6]), ("fedreg", [0.35, 0.6, 0.7])):
            runs.append({"partition": label, "method": method, "sigma": None, "curve": curve, "final_accuracy": curve[-1],
                         "epsilon": math.inf, "delta": 1e-5, "guarantee": "no DP guarantee", "seconds": 1.0, "dataset": dataset})
    first = partitions[0][0]
    runs += [{"partition": first, "method": "fedavg+dp-sgd", "sigma": 1.0, "curve": [0.1, 0.2, 0.25], "final_accuracy": 0.25,
              "epsilon": 9.0, "delta": 1e-5, "guarantee": "dp", "seconds": 1.0, "dataset": dataset},
             {"partition": first, "method": "fedreg-mg", "sigma": None, "curve": [0.2, 0.3, 0.55], "final_accuracy": 0.55,
              "epsilon": math.inf, "delta": 1e-5, "guarantee": "no DP guarantee", "seconds": 1.0, "dataset": dataset}]
    r_a = {label: [{"method": m, "R_0.5": 1, "R_0.9": 2, "R_1.0": None if m == "sgd" else 3, "accuracy": 0.6, "seconds": 1.0}
                   for m in ("sgd", "fedavg", "fedreg")] for label, *_ in partitions}
    accuracy = [{"method": "fedavg", "sigma": None, "epsilon": "inf", "delta": 1e-5, "accuracy": 0.6, "guarantee": "no DP guarantee"},
                {"method": "fedavg+dp-sgd", "sigma": 1.0, "epsilon": 9.0, "delta": 1e-5, "accuracy": 0.25, "guarantee": "dp"},
                {"method": "fedreg", "sigma": None, "epsilon": "inf", "delta": 1e-5, "accuracy": 0.7, "guarantee": "no DP guarantee"},
                {"method": "fedreg-mg", "sigma": None, "epsilon": "inf", "delta": 1e-5, "accuracy": 0.55, "guarantee": "no DP guarantee"}]
    inversion(root)
    claims_audit(root)
    data = {"settings": settings, "runs": runs, "seconds": 12.0, "r_a": r_a, "sgd_reference": {p[0]: 0.5 for p in partitions},
            "accuracy": accuracy}
    return _write(root, "fedreg", "fedreg-evidence", data,
                  inputs={"inversion": "inversion.json", "claims_audit": "../claims-audit/results.json"})


def pfa(root: Path) -> Path:
    methods = ["np-fedavg", "maximum", "pfa", "pfa-plus", "weiavg", "public-only", "fedavg-hdp", "minimum"]
    display = {m: m.upper() for m in methods} | {"pfa": "PFA", "pfa-plus": "PFA+", "public-only": "public-only FedAvg",
                                                 "weiavg": "WeiAvg", "fedavg-hdp": "FedAvg (HDP)"}
    key = {"model": "pfa-lr", "partition": "iid", "clients": 20}
    accuracy = [{**key, "algorithm": m, "calibration": "rdp", "final": 0.5 + i / 100, "stop": 2 if m == "pfa" else None,
                 "curve": [0.1, 0.3, 0.5 + i / 100]} for i, m in enumerate(methods)]
    accuracy += [{**key, "algorithm": "pfa", "calibration": "reference", "final": 0.4, "stop": None, "curve": [0.1, 0.2, 0.4]}]
    series = [[1, 1000.0], [2, 2000.0]]
    settings = {"configs": [["pfa-lr", "iid", 20]], "methods": methods, "display": display, "delta": 1e-5, "rounds": {"pfa-lr": 3},
                "model_names": {"pfa-lr": "logistic regression", "pfa-cnn": "CNN"},
                "model_parameters": {"pfa-lr": 7850, "pfa-cnn": 26010},
                "partition_names": {"iid": "IID", "shards:10": "non-IID (10 label shards per client)"},
                "budgets": [0.1] * 17 + [10.0] * 3, "public": [2, 10, 19]}
    data = {
        "settings": settings, "wall_seconds": 60.0, "workers": 1, "training_seconds": 50.0, "accuracy": accuracy,
        "comparisons": [{**key, "pfa_minus_public_only": -0.03}],
        "privacy": [{**key, "algorithm": "pfa", "calibration": c, "max_epsilon": 9.3, "mean_epsilon": 1.4, "private_ratio": 0.93,
                     "public_ratio": None, "over_budget": 0, "fill": 1.0} for c in ("rdp", "reference")],
        "uplink": [{**key, "pfa_private_bytes": 5.62e6, "plus_private_bytes": 0.41e6, "reduction_private": 0.9271,
                    "reduction_all": 0.798, "accuracy_gap": 0.002,
                    "cumulative": {"pfa": {"all": series, "private": series}, "pfa-plus": {"all": series, "private": series}}}],
        "claim_table": {"rounds": 3, "planned_steps_rdp": 58.0, "planned_steps_reference": 69.6,
                        "rows": [{"claimed": 1.0, "sigma_reference": 14.8, "epsilon_reference": 0.159, "sigma_rdp": 2.87, "epsilon_rdp": 1.0}]},
        "participation": [{"clients": 20, "rounds": 3, "policy": "exclude", "planned_rounds": 2, "max_rounds": 2, "stopped": 3,
                           "over_budget": 0, "max_ratio": 0.99}],
        "paper_scale_uplink": [{"label": "logistic regression", "parameters": 7850, "tensors": 2, "full_bytes": 125.6e6,
                                "plus_bytes": 13.7e6, "private_full_bytes": 113e6, "private_plus_bytes": 1.16e6}],
    }
    return _write(root, "pfa", "pfa-evidence", data)


WRITERS = {"upcycled-table1": upcycled_table1, "upcycled-private": upcycled_private, "privatefl": privatefl, "fedreg": fedreg,
           "inversion": inversion, "pfa": pfa}


def write_evidence_fixture(root: Path, name: str) -> Path:
    return WRITERS[name](root)


