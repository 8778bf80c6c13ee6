"""PrivateFL: the personalised transformation kept on each client, both evaluations (audit point P8), the entry point and the CLI."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from torch import nn

from privaudit.accounting.ledger import SERVER
from privaudit.cli.app import main
from privaudit.data.base import ClientData, FederatedDataset
from privaudit.errors import InvalidParameterError
from privaudit.fl.engine.algorithm import ClientContext
from privaudit.fl.engine.checkpoint import TrainedFederation, read_ledger
from privaudit.fl.engine.config import FederationConfig, LocalTrainingConfig
from privaudit.fl.engine.round_loop import run_federation
from privaudit.fl.engine.seeding import seeded_torch_global
from privaudit.models import build_model
from privaudit.papers.privatefl.algorithm import PrivateFL
from privaudit.papers.privatefl.experiment import PrivateFLConfig, evaluate_privatefl, train_privatefl
from privaudit.papers.privatefl.personal_start import PersonalStart
from privaudit.papers.privatefl.transform import (
    PersonalAffine,
    PersonalisedModel,
    build_transform,
    personal_names,
)
from tests.fl.conftest import make_dataset

torch.set_num_threads(1)


def _model() -> nn.Module:
    def build() -> nn.Module:
        body = nn.Sequential(nn.Linear(5, 6, bias=False), nn.Tanh(), nn.Linear(6, 3, bias=False))
        return PersonalisedModel(body, PersonalAffine((5,)))

    return seeded_torch_global(0, build)


def _federation(algorithm, rounds: int = 2, lr: float = 0.5, batch_size: int = 8, **config):
    local = LocalTrainingConfig(epochs=1, batch_size=batch_size, lr=lr, momentum=0.0)
    settings = {"rounds": rounds, "local": local, "execution": "sequential", **config}
    return run_federation(make_dataset(), _model(), algorithm, FederationConfig(**settings), progress=False)


def test_transformation_is_identity_at_start_and_has_the_papers_shapes():
    model = build_model("privatefl-dnn-in", (1, 28, 28), 10)
    assert personal_names(model) == ("transform.alpha", "transform.beta")
    assert model.transform.alpha.shape == (1, 1, 1) and model.transform.beta.shape == (1, 28, 28)  # α ∈ R^d, β ∈ R^{n×n×d}
    x = torch.rand(3, 1, 28, 28)
    assert torch.equal(model.transform(x), x)
    vector = build_transform((600,))
    assert vector.alpha.shape == (1,) and vector.beta.shape == (600,)  # FeatureNorm(600): γ ∈ R¹, β ∈ R^{1×F}
    conv = build_transform((3, 9, 9), "conv2d")
    image = torch.rand(2, 3, 9, 9)
    assert torch.allclose(conv(image), image, atol=1e-6)
    square = build_transform((1, 4, 4), "square")
    assert torch.allclose(square(image[:, :1, :4, :4]), image[:, :1, :4, :4] ** 2)
    with pytest.raises(InvalidParameterError, match="unknown transformation"):
        build_transform((1, 4, 4), "fourier")
    torch.manual_seed(0)
    plain = build_model("privatefl-dnn", (1, 28, 28), 10)
    torch.manual_seed(0)
    extended = build_model("privatefl-dnn-in", (1, 28, 28), 10)
    assert all(torch.equal(a, b) for a, b in zip(plain.parameters(), extended.body.parameters(), strict=True))


def test_transformation_is_kept_on_the_client_released_as_identity_and_resumed():
    algorithm = PrivateFL()
    result = _federation(algorithm, rounds=2)
    assert torch.equal(result.state["transform.alpha"], torch.ones(1))
    assert torch.equal(result.state["transform.beta"], torch.zeros(5))
    personal = result.personal_states
    assert sorted(personal) == list(range(6))
    moved = [cid for cid, state in personal.items() if not torch.equal(state["transform.beta"], torch.zeros(5))]
    assert moved == list(range(6))  # every client trained and kept its own β
    assert all(torch.equal(personal[c]["body.0.weight"], result.state["body.0.weight"]) for c in personal)
    context = ClientContext(3, 3, 2, make_dataset().clients[2], 1, algorithm.context.seeds)
    solver = algorithm.local_objective(result.state, context).solver
    assert isinstance(solver, PersonalStart) and torch.equal(solver.personal["transform.beta"], personal[2]["transform.beta"])


def test_released_models_exclude_the_transformation_and_are_averaged_without_weights():
    algorithm = PrivateFL()
    captured = {}

    class Capture:
        def on_start(self, info): pass
        def on_round_start(self, round, trains): pass
        def on_round_end(self, round, state, results, metrics): captured[round] = (state, results)
        def on_end(self, result): pass

    settings = FederationConfig(rounds=1, local=LocalTrainingConfig(epochs=1, batch_size=8, lr=0.5, momentum=0.0), execution="sequential")
    run_federation(make_dataset(), _model(), algorithm, settings, observers=[Capture()], progress=False)
    state, results = captured[1]
    assert all(torch.equal(r.state["transform.beta"], torch.zeros(5)) for r in results)
    mean = torch.stack([r.state["body.0.weight"] for r in results]).mean(dim=0)  # 1/K_s, although client sizes differ
    assert torch.allclose(state["body.0.weight"], mean)


def test_separate_transformation_learning_rate():
    """One full-batch step: the body moves as with one learning rate, the transformation 20 times as far."""
    slow, fast = PrivateFL(), PrivateFL(transform_lr_scale=20.0)
    a, b = _federation(slow, rounds=1, lr=0.01, batch_size=100), _federation(fast, rounds=1, lr=0.01, batch_size=100)
    assert torch.allclose(a.state["body.0.weight"], b.state["body.0.weight"])
    for cid in range(6):
        for name in ("transform.alpha", "transform.beta"):
            identity = torch.ones_like if name.endswith("alpha") else torch.zeros_like
            step_a = a.personal_states[cid][name] - identity(a.state[name])
            step_b = b.personal_states[cid][name] - identity(b.state[name])
            assert torch.allclose(step_b, 20 * step_a, rtol=1e-2 if name.endswith("alpha") else 1e-4, atol=1e-7)  # α near 1: float32


def test_personalised_and_global_evaluations_differ_as_designed():
    """A client whose transformation maps every input to one image predicts one class on its own split."""
    rng = np.random.default_rng(0)
    dim, classes = 4, 3
    clients = []
    for k in range(3):
        x = rng.normal(size=(12, dim)).astype(np.float32)
        y = np.array([k] * 9 + [(k + 1) % 3] * 3)  # client k: 75 % class k
        clients.append(ClientData(x, y, x, y))
    dataset = FederatedDataset("toy", clients, classes, (dim,), test=(np.concatenate([c.x_test for c in clients]), np.concatenate([c.y_test for c in clients])))
    model = PersonalisedModel(nn.Sequential(nn.Linear(dim, classes)), PersonalAffine((dim,), "channel", "pixel"))
    with torch.no_grad():
        model.body[0].weight.copy_(torch.eye(classes, dim) * 10)
        model.body[0].bias.zero_()
    algorithm = PrivateFL()
    result = run_federation(dataset, model, algorithm, FederationConfig(rounds=1, local=LocalTrainingConfig(epochs=1, batch_size=4, lr=1e-9, momentum=0.0), execution="sequential"), progress=False)
    state = {k: v.clone() for k, v in result.state.items()}
    for k in range(3):  # α = 0, β = e_k: the transformed input is e_k, whose logits favour class k
        algorithm._personal[k] = {"transform.alpha": torch.zeros(1), "transform.beta": torch.eye(classes, dim)[k].clone()}
    algorithm.observe_global(state)
    result.personal_states = algorithm.personal_states()
    evaluation = evaluate_privatefl(result, dataset)
    assert evaluation.personalised_per_client == [0.75, 0.75, 0.75]
    assert evaluation.personalised_accuracy == 0.75
    predicted = np.argmax(dataset.test[0] @ np.eye(classes, dim).T * 10, axis=1)
    assert evaluation.global_accuracy == pytest.approx(float(np.mean(predicted == dataset.test[1])))
    recalls = [np.mean(predicted[dataset.test[1] == c] == c) for c in range(classes)]
    assert evaluation.global_balanced_accuracy == pytest.approx(float(np.mean(recalls)))
    assert evaluation.global_accuracy != evaluation.personalised_accuracy


# -- the entry point ------------------------------------------------------------------------------
TINY = {"dataset": "digits", "num_clients": 4, "classes_per_client": 2, "rounds": 2, "batch_size": 32}


def test_train_privatefl_ldp_is_repeatable_and_within_budget(tmp_path):
    config = PrivateFLConfig(privacy="ldp", epsilon=4.0, delta=1e-3, **TINY)
    first = train_privatefl(config, out=tmp_path / "run")
    second = train_privatefl(config)
    assert all(torch.equal(first.state[k], second.state[k]) for k in first.state)
    summary = first.ledger.summary(1e-3, "rdp")
    assert sorted(summary.per_client) == ["0", "1", "2", "3"]
    assert 3.9 < summary.max_epsilon <= 4.0 and summary.all_valid
    assert all(c.budget == 4.0 and c.rounds == 2 for c in summary.per_client.values())
    manifest = TrainedFederation(tmp_path / "run").manifest
    assert manifest["privatefl"]["config"]["privacy"] == "ldp" and manifest["model"]["name"] == "privatefl-dnn-in"
    assert len(manifest["privatefl"]["calibration"]["noise_multipliers"]) == 4


def test_expected_participation_lets_oversampled_clients_exceed_the_target_under_record():
    config = PrivateFLConfig(privacy="ldp", epsilon=4.0, participation="expected", budget_policy="record", clients_per_round=0.5,
                             **{**TINY, "rounds": 4})
    result = train_privatefl(config)
    summary = result.ledger.summary(1e-3, "rdp")
    rounds = {cid: c.rounds for cid, c in summary.per_client.items()}
    over = [cid for cid, c in summary.per_client.items() if c.over_budget]
    assert over and all(rounds[cid] > 2 for cid in over)  # planned for E·R·sr = 2 rounds
    excluded = train_privatefl(PrivateFLConfig(privacy="ldp", epsilon=4.0, participation="expected", clients_per_round=0.5, **{**TINY, "rounds": 4}))
    assert excluded.ledger.summary(1e-3, "rdp").max_epsilon <= 4.0


@pytest.mark.parametrize("privacy", ["cdp", "ddp"])
def test_server_side_modes_record_server_events_and_the_claimed_budget(privacy):
    config = PrivateFLConfig(privacy=privacy, epsilon=8.0, cdp_variant="reference", bits=20, lr=0.005, **TINY)
    result = train_privatefl(config)
    assert {e.client_id for e in result.ledger.events} == {SERVER}
    assert result.ledger.budgets[SERVER].epsilon == 8.0
    summary = result.ledger.summary(1e-3, "rdp").per_client[SERVER]
    if privacy == "cdp":
        assert not summary.valid and summary.epsilon > 8.0  # σ/√L with L = 3 tensors
    else:
        assert summary.valid and 7.9 < summary.epsilon <= 8.0


def test_config_validation():
    with pytest.raises(InvalidParameterError, match="needs --epsilon"):
        PrivateFLConfig(privacy="ldp")
    with pytest.raises(InvalidParameterError, match="positive finite"):
        PrivateFLConfig(privacy="cdp", epsilon=0.0)
    with pytest.raises(InvalidParameterError, match="unknown CDP variant"):
        PrivateFLConfig(privacy="cdp", epsilon=1.0, cdp_variant="median")
    with pytest.raises(InvalidParameterError, match="clip-quantile"):
        PrivateFLConfig(privacy="cdp", epsilon=1.0, clip_quantile=0.5)
    with pytest.raises(InvalidParameterError, match="privacy mode"):
        PrivateFLConfig(privacy="hdp")


# -- CLI ------------------------------------------------------------------------------------------
CLI_TINY = ["--dataset", "digits", "--clients", "4", "--classes-per-client", "2", "--rounds", "1", "--batch-size", "32", "--quiet", "--json"]


def _cli(capsys, *args):
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_cli_ldp_then_compute_epsilon(capsys, tmp_path):
    out = tmp_path / "pfl-ldp"
    code, stdout, stderr = _cli(capsys, "train", "--algorithm", "privatefl", "--privacy", "ldp", "--epsilon", "8", "--delta", "1e-3",
                                "--participation", "every-round", "--out", str(out), *CLI_TINY)
    assert code == 0, stderr
    summary = json.loads(stdout)
    assert summary["algorithm"] == "privatefl+ldp" and summary["privacy_events"] == 4 and summary["max_epsilon"] <= 8.0
    assert TrainedFederation(out).manifest["train_spec"]["local"] == {"epochs": 1, "batch_size": 32, "lr": 0.1, "momentum": 0.0,
                                                                 "double_softmax": False}
    code, stdout, stderr = _cli(capsys, "compute-epsilon", "--checkpoint", str(out), "--delta", "1e-3", "--accountant", "rdp", "--json")
    assert code == 0, stderr
    per_client = json.loads(stdout)["per_client"]
    assert sorted(per_client) == ["0", "1", "2", "3"] and all(c["budget"] == 8.0 and c["epsilon"] <= 8.0 for c in per_client.values())


@pytest.mark.parametrize("extra", [
    ["--privacy", "cdp", "--cdp-variant", "reference"],
    ["--privacy", "cdp", "--cdp-variant", "paper"],
    ["--privacy", "cdp", "--cdp-variant", "dp-fedavg", "--clip-quantile", "0.5"],
    ["--privacy", "ddp", "--bits", "16"],
])
def test_cli_server_side_modes(capsys, tmp_path, extra):
    code, stdout, stderr = _cli(capsys, "train", "--algorithm", "privatefl", "--epsilon", "8", "--delta", "1e-3", *extra, *CLI_TINY)
    assert code == 0, stderr
    summary = json.loads(stdout)
    assert summary["privacy_events"] >= 1 and summary["claimed_epsilon"] == 8.0
    assert summary["epsilon_valid"] == (extra[1] == "ddp" or extra[3] == "dp-fedavg")


@pytest.mark.parametrize(("args", "message"), [
    (["--privacy", "cdp", "--cdp-variant", "median", "--epsilon", "8"], "--cdp-variant must be one of"),
    (["--privacy", "ldp", "--epsilon", "0"], "ε must be a positive finite number"),
    (["--privacy", "ldp", "--epsilon", "-2"], "ε must be a positive finite number"),
    (["--privacy", "ldp"], "needs --epsilon"),
    (["--privacy", "ddp", "--epsilon", "8", "--bits", "3"], "bits cannot hold the sum"),
    (["--privacy", "ddp", "--epsilon", "8", "--bits", "8"], "8 bits are too few for ε = 8 at δ = 0.001"),
    (["--privacy", "ldp", "--epsilon", "8", "--classes-per-client", "11"], "cannot give each client 11 classes"),
    (["--privacy", "hdp", "--epsilon", "8"], "unknown PrivateFL privacy mode"),
    (["--privacy", "ldp", "--epsilon", "8", "--clip", "1"], "--clip does not apply"),
])
def test_cli_bad_input_is_one_line_and_exit_2(capsys, args, message):
    base = [a for a in CLI_TINY if a != "--json"]
    if "--classes-per-client" in args:
        i = base.index("--classes-per-client")
        base = base[:i] + base[i + 2 :]
    code, _, stderr = _cli(capsys, "train", "--algorithm", "privatefl", *args, *base)
    assert code == 2
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and message in lines[0], stderr


def test_ledger_of_a_cli_ddp_run(capsys, tmp_path):
    out = tmp_path / "ddp"
    code, _, stderr = _cli(capsys, "train", "--algorithm", "privatefl", "--privacy", "ddp", "--bits", "16", "--epsilon", "8", "--delta",
                           "1e-3", "--out", str(out), *CLI_TINY)
    assert code == 0, stderr
    ledger = read_ledger(out)
    assert [type(e.mechanism).__name__ for e in ledger.events] == ["Skellam"]


@pytest.mark.slow
def test_evidence_pipeline_quick(tmp_path):
    """The evidence run end to end at 3 rounds (``benchmarks/evidence_privatefl.py --quick``): result file, then the page
    and figure rendered from it."""
    import importlib
    import sys
    from pathlib import Path

    from privaudit.report.results import read_result

    folder = str(Path(__file__).resolve().parents[3] / "benchmarks")
    if folder not in sys.path:
        sys.path.insert(0, folder)
    evidence = importlib.import_module("evidence_privatefl").main
    out = tmp_path / "privatefl.md"
    evidence(["--quick", "--workers", "1", "--out", str(out)])
    text = out.read_text()
    assert "CDP reference ε=8" in text and "realised ε" in text and out.with_suffix(".png").exists()
    saved = read_result(tmp_path / "evidence" / "privatefl.json")
    assert saved.kind == "privatefl-evidence" and all(f"| {run['label']} |" in text for run in saved.data["runs"])


def test_ldp_applies_the_separate_transformation_learning_rate():
    """``--transform-lr`` reaches DP-SGD: the personal layer (β starts at 0) moves several times as far."""
    base = {**TINY, "rounds": 1}
    plain = train_privatefl(PrivateFLConfig(privacy="ldp", epsilon=8.0, **base))
    lr = PrivateFLConfig(privacy="ldp", epsilon=8.0, **base).learning_rate
    scaled = train_privatefl(PrivateFLConfig(privacy="ldp", epsilon=8.0, transform_lr=10 * lr, **base))
    for cid in plain.personal_states:
        step_plain = float(plain.personal_states[cid]["transform.beta"].norm())
        step_scaled = float(scaled.personal_states[cid]["transform.beta"].norm())
        assert step_plain > 0 and step_scaled > 4 * step_plain


def test_cli_and_python_api_are_one_entry_point(capsys, tmp_path):
    """``privaudit train --algorithm privatefl`` and ``train_privatefl`` build the same TrainSpec path: the same model."""
    code, _, stderr = _cli(capsys, "train", "--algorithm", "privatefl", "--privacy", "cdp", "--cdp-variant", "dp-fedavg",
                           "--epsilon", "8", "--clip-norm", "0.5", "--clients-per-round", "0.5", "--transform", "tanh",
                           "--out", str(tmp_path / "cli"), *CLI_TINY)
    assert code == 0, stderr
    cli = TrainedFederation(tmp_path / "cli")
    assert cli.manifest["train_spec"]["sampling"] == "poisson" and cli.manifest["train_spec"]["execution"] == "sequential"
    assert cli.manifest["model"]["name"] is None  # tanh: no registered name describes the model
    config = PrivateFLConfig(privacy="cdp", cdp_variant="dp-fedavg", epsilon=8.0, clip_norm=0.5, clients_per_round=0.5,
                             transform="tanh", partition="classes:2", **{**TINY, "rounds": 1})
    api = train_privatefl(config)
    assert all(torch.equal(api.state[k], cli.global_state()[k]) for k in api.state)
    assert api.ledger.to_dict() == read_ledger(tmp_path / "cli").to_dict()
    assert cli.manifest["privatefl"]["calibration"]["noise_multiplier"] > 0


def test_dp_fedavg_with_fixed_size_client_sampling_is_refused(capsys):
    code, _, stderr = _cli(capsys, "train", "--algorithm", "privatefl", "--privacy", "cdp", "--cdp-variant", "dp-fedavg",
                           "--epsilon", "8", "--sampling", "fixed-size", *[a for a in CLI_TINY if a != "--json"])
    assert code == 2 and len(stderr.strip().splitlines()) == 1 and "--sampling poisson" in stderr
