"""FedReg / FedReg+MG training (Xu et al. 2022 eq. 10–12), the SGD baseline, the no-guarantee ledger, CLI, Table 4 join."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch.func import functional_call

from privaudit.accounting.mechanisms import PureDP
from privaudit.cli.app import main
from privaudit.data.base import ClientData, FederatedDataset
from privaudit.errors import InvalidParameterError
from privaudit.fl.algorithms.fedavg import FedAvg
from privaudit.fl.algorithms.fedsgd import FedSGD
from privaudit.fl.algorithms.registry import make_algorithm
from privaudit.fl.engine.config import FederationConfig, LocalTrainingConfig
from privaudit.fl.engine.round_loop import input_bounds, run_federation
from privaudit.fl.privacy.registry import privatize
from privaudit.papers.fedreg.algorithm import FedReg, FedRegConfig
from privaudit.papers.fedreg.evidence import r_a
from privaudit.papers.fedreg.local_step import (
    fgsm_pseudo_inputs,
    flat_dot,
    regulariser_step,
    soft_cross_entropy,
)
from privaudit.papers.fedreg.table4 import table4
from tests.fl.conftest import make_dataset, tiny_model


def _image_dataset(num_clients: int = 3, per_client: int = 12, seed: int = 0) -> FederatedDataset:
    """Small 1×4×4 'images' in [0, 1], two classes per client."""
    rng = np.random.default_rng(seed)
    clients = []
    for i in range(num_clients):
        y = rng.choice([i % 3, (i + 1) % 3], size=per_client + 4).astype(np.int64)
        x = np.clip(rng.normal(0.3 + 0.2 * y[:, None, None, None], 0.2, size=(per_client + 4, 1, 4, 4)), 0, 1).astype(np.float32)
        clients.append(ClientData(x[:per_client], y[:per_client], x[per_client:], y[per_client:]))
    return FederatedDataset(name="tiny-images", clients=clients, num_classes=3, input_shape=(1, 4, 4))


def _mlp(seed: int = 0) -> torch.nn.Module:
    from privaudit.fl.engine.seeding import seeded_torch_global

    return seeded_torch_global(seed, lambda: torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(16, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3)))


def _config(rounds=2, epochs=2, batch=5, lr=0.1, momentum=0.0, execution="sequential", seed=0, q=1.0):
    return FederationConfig(rounds=rounds, local=LocalTrainingConfig(epochs=epochs, batch_size=batch, lr=lr, momentum=momentum),
                            clients_per_round=q, seed=seed, execution=execution)


def test_degenerate_fedreg_is_fedavg_exactly():
    """γ = 1 (θ_γ = θ) and no regulariser: FedReg's local step is FedAvg's SGD step, bit for bit (with momentum too)."""
    data = _image_dataset()
    for momentum in (0.0, 0.5):
        cfg = _config(momentum=momentum)
        plain = run_federation(data, _mlp(), FedAvg(), cfg, progress=False)
        degenerate = run_federation(data, _mlp(), FedReg(FedRegConfig(gamma=1.0, regularise=False)), cfg, progress=False)
        for k in plain.state:
            assert torch.equal(plain.state[k], degenerate.state[k]), k
    full = run_federation(data, _mlp(), FedReg(FedRegConfig(gamma=1.0)), _config(), progress=False)
    assert any(not torch.equal(plain.state[k], full.state[k]) for k in plain.state)  # the regulariser does act


def test_modified_gradient_step_is_orthogonal_to_uniform_label_pseudo_gradient():
    """One full-batch MG step from θ^{(t−1)}: Δθ = −η g̃ with ⟨g̃, g_γ(D^{s'})⟩ = 0 (eq. 12), and the removed part is non-zero."""
    data = _image_dataset(num_clients=1, per_client=10)
    model = _mlp()
    theta0 = {k: v.detach().clone() for k, v in model.state_dict().items()}
    cfg = _config(rounds=1, epochs=1, batch=10, lr=0.5)
    mg = run_federation(data, _mlp(), FedReg(FedRegConfig(gamma=0.3, eta_s=0.05, modified_gradient=True, regularise=False)), cfg,
                        progress=False)
    plain = run_federation(data, _mlp(), FedAvg(), cfg, progress=False)
    client = data.clients[0]
    x, y = torch.from_numpy(client.x_train), torch.from_numpy(client.y_train)

    def forward(p, inputs):
        return functional_call(model, p, (inputs,))

    pseudo = fgsm_pseudo_inputs(forward, theta0, x, F.one_hot(y, 3).float(), 0.05, 10, (torch.tensor(0.0), torch.tensor(1.0)))
    leaves = {k: v.clone().requires_grad_() for k, v in theta0.items()}
    g_u = dict(zip(leaves, torch.autograd.grad(soft_cross_entropy(forward(leaves, pseudo), torch.full((10, 3), 1 / 3)), list(leaves.values())),
                   strict=True))
    delta_mg = {k: mg.state[k] - theta0[k] for k in theta0}
    delta_plain = {k: plain.state[k] - theta0[k] for k in theta0}
    norm = math.sqrt(float(flat_dot(g_u, g_u))) * math.sqrt(float(flat_dot(delta_plain, delta_plain)))
    assert abs(float(flat_dot(delta_mg, g_u))) < 1e-5 * norm
    assert abs(float(flat_dot(delta_plain, g_u))) > 1e-2 * norm
    assert mg.history[-1].test_accuracy is not None


def test_regulariser_weights_are_clamped_at_zero():
    theta0 = {"w": torch.zeros(3)}
    theta = {"w": torch.tensor([1.0, 0.0, 0.0])}
    away = {"w": torch.tensor([-2.0, 0.0, 0.0])}  # ⟨θ − θ0, g⟩ < 0 → w = 0, θ unchanged
    along = {"w": torch.tensor([0.0, 3.0, 0.0])}  # orthogonal → w = 0
    out, weights = regulariser_step(theta, theta0, [away, along])
    assert [float(w) for w in weights] == [0.0, 0.0] and torch.equal(out["w"], theta["w"])
    towards = {"w": torch.tensor([2.0, 2.0, 0.0])}
    out, weights = regulariser_step(theta, theta0, [towards, away])
    assert float(weights[0]) == pytest.approx(0.25) and float(weights[1]) == 0.0
    assert float(flat_dot({"w": out["w"] - theta0["w"]}, towards)) == pytest.approx(0.0, abs=1e-7)
    # w_p is computed from θ after the w_s subtraction
    second = {"w": torch.tensor([0.0, -1.0, 0.0])}
    out, weights = regulariser_step(theta, theta0, [towards, second])
    assert float(weights[1]) == pytest.approx(0.5) and torch.allclose(out["w"], torch.tensor([0.5, 0.0, 0.0]), atol=1e-7)


def test_training_reports_nonnegative_weights():
    data = _image_dataset()
    result = run_federation(data, _mlp(), FedReg(FedRegConfig(gamma=0.4, eta_s=0.2)), _config(), progress=False)
    assert result.final_accuracy is not None
    algorithm = FedReg(FedRegConfig(gamma=0.4, eta_s=0.2))
    from privaudit.fl.engine.algorithm import ClientContext

    run_federation(data, _mlp(), algorithm, _config(rounds=1), progress=False)
    context = ClientContext(2, 2, 0, data.clients[0], 2, algorithm.context.seeds)
    outcome = algorithm.client_update(result.state, context)
    assert outcome.info["fedreg_w_s_mean"] >= 0 and outcome.info["fedreg_w_p_mean"] >= 0
    assert 0 <= outcome.info["fedreg_w_s_zero_fraction"] <= 1


def test_fgsm_pseudo_data_stay_in_the_data_range():
    model = _mlp()
    params = dict(model.named_parameters())
    x = torch.rand(20, 1, 4, 4)
    y = F.one_hot(torch.randint(0, 3, (20,)), 3).float()

    def forward(p, inputs):
        return functional_call(model, p, (inputs,))

    box = (torch.tensor(0.0), torch.tensor(1.0))
    clamped = fgsm_pseudo_inputs(forward, params, x, y, 0.3, 10, box)
    assert float(clamped.min()) >= 0.0 and float(clamped.max()) <= 1.0
    unclamped = fgsm_pseudo_inputs(forward, params, x, y, 0.3, 10, None)  # the reference code (audit R6)
    assert float(unclamped.min()) < 0.0 or float(unclamped.max()) > 1.0
    # batching does not change the pseudo data (sign of each example's own input gradient)
    halves = torch.cat([fgsm_pseudo_inputs(forward, params, x[:7], y[:7], 0.3, 10, box),
                        fgsm_pseudo_inputs(forward, params, x[7:], y[7:], 0.3, 10, box)])
    assert torch.allclose(halves, clamped)


def test_input_bounds_follow_normalisation():
    data = _image_dataset()
    low, high = input_bounds(data)
    assert float(low) == 0.0 and float(high) == 1.0
    data.normalization = ((0.5,), (0.25,))
    low, high = input_bounds(data)
    assert low.shape == (1, 1, 1) and float(low) == pytest.approx(-2.0) and float(high) == pytest.approx(2.0)


def test_fedreg_ledger_says_no_dp_guarantee():
    data = _image_dataset()
    result = run_federation(data, _mlp(), make_algorithm("fedreg-mg", {"fedreg_gamma": 0.5}), _config(), progress=False)
    events = result.ledger.events
    assert len(events) == 2 * data.num_clients
    assert all(isinstance(e.mechanism, PureDP) and math.isinf(e.mechanism.epsilon) for e in events)
    assert all("no DP guarantee" in e.assumptions[0] for e in events)
    summary = result.ledger.summary(1e-5)
    assert math.isinf(summary.max_epsilon)
    assert result.info.algorithm["name"] == "fedreg-mg"


def test_fedreg_is_deterministic_under_a_seed():
    data = _image_dataset()
    runs = [run_federation(data, _mlp(), FedReg(FedRegConfig(gamma=0.4, eta_s=0.1, modified_gradient=True)), _config(seed=s, q=0.7),
                           progress=False) for s in (3, 3, 4)]
    assert all(torch.equal(runs[0].state[k], runs[1].state[k]) for k in runs[0].state)
    assert any(not torch.equal(runs[0].state[k], runs[2].state[k]) for k in runs[0].state)


def test_sgd_is_one_full_batch_step_on_the_union():
    data = make_dataset()
    model = tiny_model()
    theta0 = {k: v.detach().clone() for k, v in model.state_dict().items()}
    result = run_federation(data, tiny_model(), FedSGD(), _config(rounds=1, lr=0.3), progress=False)
    x = torch.from_numpy(np.concatenate([c.x_train for c in data.clients]))
    y = torch.from_numpy(np.concatenate([c.y_train for c in data.clients]))
    leaves = {k: v.clone().requires_grad_() for k, v in theta0.items()}
    grads = torch.autograd.grad(F.cross_entropy(functional_call(model, leaves, (x,)), y), list(leaves.values()))
    for (k, v), g in zip(theta0.items(), grads, strict=True):
        assert torch.allclose(result.state[k], v - 0.3 * g, atol=1e-6)


def test_bad_configurations_raise_typed_errors():
    for bad in ({"gamma": 1.5}, {"eta_s": -1.0}, {"fgsm_steps": 2.5}, {"fgsm_clamp": "sometimes"}, {"eta_p": float("inf")}):
        with pytest.raises(InvalidParameterError):
            FedRegConfig(**bad)
    with pytest.raises(InvalidParameterError, match="no DP-SGD form"):
        privatize(make_algorithm("fedreg"), "dp-sgd", {"clip": 1.0, "noise": 1.0})


def _cli(capsys, *args):
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


TINY = ["--dataset", "synthetic:iid", "--num-clients", "3", "--dataset-option", "dim=5", "--dataset-option", "num_classes=2",
        "--local-epochs", "1", "--batch-size", "16", "--quiet"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--algorithm", "fedreg", "--fedreg-gamma", "1.5"], "γ"),
        (["--algorithm", "fedreg-mg", "--fgsm-clamp", "maybe"], "--fgsm-clamp"),
        (["--algorithm", "fedreg", "--fgsm-steps", "x"], ""),
        (["--algorithm", "fedcurv", "--fedcurv-lambda", "-1"], "λ"),
        (["--algorithm", "fedavg", "--fedreg-gamma", "0.5"], "--fedreg-gamma"),
        (["--algorithm", "fedreg", "--privacy", "dp-sgd", "--clip", "1", "--noise", "1"], "no DP-SGD form"),
        (["--algorithm", "fedavg", "--privacy", "dp-sgd", "--clip", "1"], "--noise"),
    ],
)
def test_cli_bad_input_is_one_line_exit_2(capsys, args, message):
    code, _, stderr = _cli(capsys, "train", "--rounds", "1", *TINY, *args)
    assert code == 2
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in stderr and message in lines[0]


def test_cli_fedreg_checkpoint_has_no_guarantee(capsys, tmp_path):
    out = tmp_path / "fedreg"
    code, stdout, stderr = _cli(capsys, "train", "--algorithm", "fedreg", "--rounds", "2", "--fedreg-gamma", "0.4", "--fedreg-eta-s", "0.2",
                                "--fgsm-steps", "3", "--fgsm-clamp", "data-range", "--out", str(out), "--json", *TINY)
    assert code == 0, stderr
    assert json.loads(stdout)["privacy_events"] == 6
    code, stdout, stderr = _cli(capsys, "compute-epsilon", "--checkpoint", str(out), "--delta", "1e-5")
    assert code == 0, stderr
    assert "no DP guarantee" in stdout and "max ε = inf" in stdout
    code, stdout, _ = _cli(capsys, "compute-epsilon", "--checkpoint", str(out), "--delta", "1e-5", "--json")
    assert json.loads(stdout)["max_epsilon"] in ("inf", "Infinity", None) or math.isinf(float(json.loads(stdout)["max_epsilon"]))


def test_cli_dp_sgd_baseline_records_subsampled_gaussian_events(capsys, tmp_path):
    out = tmp_path / "dpsgd"
    code, stdout, stderr = _cli(capsys, "train", "--algorithm", "fedavg", "--privacy", "dp-sgd", "--clip", "1.0", "--noise", "1.0",
                                "--rounds", "2", "--out", str(out), "--json", *TINY)
    assert code == 0, stderr
    code, stdout, _ = _cli(capsys, "compute-epsilon", "--checkpoint", str(out), "--delta", "1e-5", "--accountant", "rdp", "--json")
    eps = json.loads(stdout)["max_epsilon"]
    assert 0 < float(eps) < 100


def test_cli_full_batch_dp_sgd_is_the_papers_dpsgd_baseline(capsys, tmp_path):
    """``--algorithm sgd --privacy dp-sgd``: one full-batch (q = 1) noisy step per client and round, as a Gaussian event."""
    from privaudit.accounting.mechanisms import SubsampledGaussian
    from privaudit.fl.engine.checkpoint import read_ledger

    out = tmp_path / "sgd-dp"
    code, _, stderr = _cli(capsys, "train", "--algorithm", "sgd", "--privacy", "dp-sgd", "--clip", "1.0", "--noise", "2.0",
                           "--rounds", "2", "--out", str(out), *TINY)
    assert code == 0, stderr
    events = read_ledger(out).events
    assert len(events) == 6 and all(e.count == 1 for e in events)
    assert all(isinstance(e.mechanism, SubsampledGaussian) and e.mechanism.sample_rate == 1.0 for e in events)


def test_r_a_counts_rounds_to_a_fraction_of_the_reference():
    curve = [0.1, 0.3, 0.5, 0.45, 0.8, 0.9]
    assert r_a(curve, 0.8, 0.5) == 3  # 0.4 first reached in round 3 (1-based)
    assert r_a(curve, 0.8, 1.0) == 5
    assert r_a(curve, 0.95, 1.0) is None


def test_table4_joins_accuracy_and_psnr_at_matched_psnr():
    accuracy = [
        {"method": "fedavg", "sigma": None, "epsilon": "inf", "delta": 1e-5, "accuracy": 0.9},
        {"method": "fedavg+dp-sgd", "sigma": 0.01, "epsilon": 5e4, "delta": 1e-5, "accuracy": 0.8},
        {"method": "fedavg+dp-sgd", "sigma": 1.0, "epsilon": 3.0, "delta": 1e-5, "accuracy": 0.5},
        {"method": "fedreg-mg", "sigma": None, "epsilon": "inf", "delta": 1e-5, "accuracy": 0.85},
    ]
    inversion = {"runs": [
        {"defence": "fedavg", "psnr_mean": 30.0},
        {"defence": "dpsgd:0.01", "psnr_mean": 14.0},
        {"defence": "dpsgd:1", "psnr_mean": 8.0},
        {"defence": "fedreg-mg", "psnr_mean": 13.0},
    ]}
    (group,) = table4(accuracy, inversion)["groups"]
    rows = {(r["method"], r["sigma"]): r for r in group["rows"]}
    assert rows[("fedavg+dp-sgd", 0.01)]["psnr"] == 14.0 and rows[("fedreg-mg", None)]["psnr"] == 13.0
    assert rows[("fedavg+dp-sgd", 1.0)]["epsilon"] == 3.0
    match = group["matched"]
    assert match["fedreg-mg"]["psnr"] == 13.0 and match["dp-sgd"]["sigma"] == 0.01 and match["dp-sgd"]["accuracy"] == 0.8
    # list-shaped input and a missing PSNR are both handled
    (group,) = table4(accuracy, [{"defence": "fedreg-mg", "psnr": [12.0, 14.0]}])["groups"]
    assert {r["method"]: r["psnr"] for r in group["rows"]}["fedreg-mg"] == 13.0 and group["matched"] is None
    # the inversion helper's shape: display names, σ field, several attacks and datasets; strongest attack wins
    records = [
        {"defence": "FedAvg", "sigma": None, "attack": "ig", "dataset": "digits", "model": "convnet", "psnr_mean": 16.0},
        {"defence": "FedAvg+DP-SGD σ=0.01", "sigma": 0.01, "attack": "ig", "dataset": "digits", "model": "convnet", "psnr_mean": 5.3},
        {"defence": "FedAvg+DP-SGD σ=1", "sigma": 1.0, "attack": "ig", "dataset": "digits", "model": "convnet", "psnr_mean": 4.2},
        {"defence": "FedReg+MG", "sigma": None, "attack": "ig (naive)", "dataset": "digits", "model": "convnet", "psnr_mean": 6.3},
        {"defence": "FedReg+MG", "sigma": None, "attack": "adaptive-mg", "dataset": "digits", "model": "convnet", "psnr_mean": 4.6},
        {"defence": "FedReg+MG", "sigma": None, "attack": "analytic", "dataset": "lfw", "model": "mlp", "psnr_mean": 24.0},
    ]
    groups = {(g["dataset"], g["model"]): g for g in table4(accuracy, records)["groups"]}
    digits = {(r["method"], r["sigma"]): r for r in groups[("digits", "convnet")]["rows"]}
    assert digits[("fedreg-mg", None)]["psnr"] == 6.3 and digits[("fedreg-mg", None)]["attack"] == "ig (naive)"
    assert digits[("fedavg", None)]["psnr"] == 16.0 and digits[("fedavg+dp-sgd", 1.0)]["psnr"] == 4.2
    assert groups[("digits", "convnet")]["matched"]["dp-sgd"]["sigma"] == 0.01
    assert groups[("lfw", "mlp")]["matched"] is None
    with pytest.raises(InvalidParameterError):
        table4(accuracy, {"notes": "no runs yet"})


def test_evidence_result_file_declares_its_inputs_and_renders_the_page(tmp_path):
    from dataclasses import asdict

    from privaudit.papers.fedreg.evidence import EvidenceConfig, derive_tables, write_evidence
    from privaudit.report.evidence import write_page
    from privaudit.report.results import make_result, merged_dict, read_result, write_result

    cfg = EvidenceConfig(rounds=3, sigmas=(0.1, 1.0), out_dir=str(tmp_path))
    runs = []
    for label, *_ in cfg.partitions:
        for method, curve in (("sgd", [0.2, 0.4, 0.5]), ("fedavg", [0.3, 0.45, 0.6]), ("fedprox", [0.3, 0.4, 0.45]),
                              ("fedcurv", [0.1, 0.2, 0.3]), ("fedreg", [0.35, 0.6, 0.7])):
            runs.append({"partition": label, "method": method, "sigma": None, "curve": curve, "final_accuracy": curve[-1],
                         "epsilon": math.inf, "delta": 1e-5, "guarantee": "no DP guarantee", "seconds": 1.0, "dataset": {}})
    first = cfg.partitions[0][0]
    runs += [{"partition": first, "method": "fedavg+dp-sgd", "sigma": s, "curve": [0.1, 0.2, acc], "final_accuracy": acc,
              "epsilon": eps, "delta": 1e-5, "guarantee": "dp", "seconds": 1.0, "dataset": {}}
             for s, acc, eps in ((0.1, 0.4, 900.0), (1.0, 0.2, 9.0))]
    runs.append({"partition": first, "method": "fedreg-mg", "sigma": None, "curve": [0.2, 0.3, 0.55], "final_accuracy": 0.55,
                 "epsilon": math.inf, "delta": 1e-5, "guarantee": "no DP guarantee", "seconds": 1.0, "dataset": {}})
    evidence = {"config": asdict(cfg), "runs": runs, "seconds": 12.0, **derive_tables(cfg, runs)}
    ra = {r["method"]: r for r in evidence["r_a"][first]}
    assert ra["fedreg"]["R_0.5"] == 1 and ra["fedreg"]["R_1.0"] == 2 and ra["fedcurv"]["R_1.0"] is None and ra["sgd"]["R_1.0"] == 3
    assert [r["method"] for r in evidence["accuracy"]] == ["fedavg", "fedavg+dp-sgd", "fedavg+dp-sgd", "fedreg", "fedreg-mg"]
    # the page joins two declared inputs; without them it is one clear error naming the file, not a dropped section
    with pytest.raises(InvalidParameterError, match=r"declared input\(s\) missing: inversion = .*inversion\.json"):
        write_evidence(evidence, cfg)
    result = read_result(tmp_path / "evidence" / "fedreg.json")
    assert result.inputs == {"inversion": "inversion.json", "claims_audit": "../claims-audit/results.json"}
    assert result.data["accuracy"][0]["epsilon"] == math.inf and result.data["accuracy"][2]["epsilon"] == 9.0
    inversion = {"settings": {}, "seconds": 1.0, "records": [
        {"defence": "FedReg+MG", "psnr_mean": 6.0, "dataset": "digits", "model": "convnet", "attack": "ig"},
        {"defence": "FedAvg+DP-SGD σ=1", "sigma": 1.0, "psnr_mean": 5.0, "dataset": "digits", "model": "convnet", "attack": "ig"}]}
    write_result(tmp_path / "evidence" / "inversion.json", make_result("inversion-evidence", "inversion", inversion))
    claim = make_result("claim-audit", "psnr", {
        "claim_id": "fedreg-mg-vs-dpsgd-psnr", "verdict": "not supported", "claimed": {"epsilon": None, "delta": None},
        "accountant": [], "lower_bounds": [], "reason": "",
        "verdict_basis": "not supported (as stated), no DP guarantee for FedReg+MG (ε = ∞) (fact)", "readings": [
            {"reading": "psnr-analytic", "role": "paper", "verdict": "not supported",
             "details": {"images": 16, "attack": "analytic", "effective_psnr_mean": {"FedReg+MG": 27.5}}},
            {"reading": "mg-no-dp-guarantee", "role": "fact", "verdict": "fact", "reason": "no DP guarantee for FedReg+MG (ε = ∞): no noise",
             "details": {"decision": {"fact": "no DP guarantee for FedReg+MG (ε = ∞)"}}}]})
    (tmp_path / "claims-audit").mkdir()
    (tmp_path / "claims-audit" / "results.json").write_text(json.dumps(merged_dict([claim], [])))
    report = write_page(tmp_path / "evidence" / "fedreg.json", tmp_path / "fedreg.md").markdown.read_text()
    assert "| fedreg | 1 | 2 | 2 | 0.700 |" in report and "Matched PSNR: FedReg+MG 6.000 dB" in report
    assert "Verdict: **not supported** — not supported (as stated)" in report and "FedReg+MG 27.50" in report
    assert "* fact — no DP guarantee for FedReg+MG (ε = ∞): no noise" in report and "refuted" not in report
    assert (tmp_path / "fedreg-convergence.png").exists() and (tmp_path / "fedreg-accuracy.png").exists()


@pytest.mark.parametrize(("algorithm", "expected"), [("fedreg", "sequential (the local solver has no stacked form)"),
                                                     ("fedavg", "batched (layers)")])
def test_train_reports_how_clients_actually_ran(tmp_path, capsys, algorithm, expected):
    code = main(["train", "--algorithm", algorithm, "--dataset", "synthetic:iid", "--rounds", "1",
                 "--out", str(tmp_path / "run"), "--json", "--quiet"])
    assert code == 0
    assert json.loads(capsys.readouterr().out)["execution"] == expected
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["model"]["execution"] == expected
