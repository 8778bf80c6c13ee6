"""What the Upcycled-FL README private run needs beyond the clock: the reference's double softmax, training
accuracy per round (train → checkpoint → ``privaudit report``), and the run's spec."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from privaudit.cli.app import main
from privaudit.errors import InvalidParameterError
from privaudit.fl.algorithms.fedavg import FedAvg
from privaudit.fl.engine.config import Execution, FederationConfig, LocalTrainingConfig
from privaudit.fl.engine.local_solver import LocalTask
from privaudit.fl.engine.local_training import LocalObjective
from privaudit.fl.engine.round_loop import run_federation
from privaudit.fl.engine.seeding import SeedTree, seeded_torch_global
from privaudit.fl.engine.trainer import ClientTrainer
from privaudit.models import build_model
from privaudit.papers.upcycled.readme_run import (
    REFERENCE_TEST_SIZES,
    REFERENCE_TRAIN_SIZES,
    noise_weight,
    readme_spec,
    reference_sized_iid,
)
from tests.fl.conftest import make_dataset


def _trainer(double_softmax: bool, execution: Execution = Execution.SEQUENTIAL, batch_size: int = 64):
    model = seeded_torch_global(0, lambda: build_model("logreg", (5,), 3, init="torch"))
    local = LocalTrainingConfig(epochs=1, batch_size=batch_size, lr=0.5, momentum=0.0, double_softmax=double_softmax)
    return model, ClientTrainer(model, (5,), 3, local, execution, SeedTree(0))


@pytest.mark.parametrize("double_softmax", [False, True])
def test_one_full_batch_step_follows_the_loss_as_defined(double_softmax):
    """One full-batch SGD step: ω₁ = ω₀ − lr·∇ CE(s(xWᵀ + b), y) with s = softmax (double softmax) or the identity."""
    data = make_dataset(sizes=(40,), dim=5, num_classes=3).clients[0]
    model, trainer = _trainer(double_softmax)
    start = {k: v.detach().clone() for k, v in model.state_dict().items()}
    outcome = trainer.train_one(start, LocalTask(0, data, 1, LocalObjective()), 1)
    w = start["linear.weight"].clone().requires_grad_()
    b = start["linear.bias"].clone().requires_grad_()
    logits = torch.from_numpy(data.x_train) @ w.T + b
    scores = torch.softmax(logits, dim=1) if double_softmax else logits
    loss = F.cross_entropy(scores, torch.from_numpy(data.y_train))
    gw, gb = torch.autograd.grad(loss, [w, b])
    assert torch.allclose(outcome.state["linear.weight"], start["linear.weight"] - 0.5 * gw, atol=1e-6)
    assert torch.allclose(outcome.state["linear.bias"], start["linear.bias"] - 0.5 * gb, atol=1e-6)
    assert outcome.mean_loss == pytest.approx(float(loss.detach()), rel=1e-5)


def test_double_softmax_batched_equals_sequential_and_changes_training():
    data = make_dataset(sizes=(23, 41, 17), dim=5, num_classes=3)
    tasks = [LocalTask(i, c, 2, LocalObjective()) for i, c in enumerate(data.clients)]
    model, sequential = _trainer(True, Execution.SEQUENTIAL, batch_size=8)
    start = {k: v.detach().clone() for k, v in model.state_dict().items()}
    _, batched = _trainer(True, Execution.BATCHED, batch_size=8)
    _, plain = _trainer(False, Execution.BATCHED, batch_size=8)
    one = sequential.train(start, tasks, 1)
    many = batched.train(start, tasks, 1)
    logits_only = plain.train(start, tasks, 1)
    for a, b, c in zip(one, many, logits_only, strict=True):
        assert torch.allclose(a.state["linear.weight"], b.state["linear.weight"], atol=1e-5)
        assert not torch.allclose(b.state["linear.weight"], c.state["linear.weight"], atol=1e-4)


def test_double_softmax_refused_by_solvers_with_their_own_loss():
    from privaudit.fl.engine.glm import ExactMinimiser

    data = make_dataset(sizes=(20,), dim=5, num_classes=3).clients[0]
    model, trainer = _trainer(True)
    start = {k: v.detach().clone() for k, v in model.state_dict().items()}
    with pytest.raises(InvalidParameterError, match="double softmax"):
        trainer.train_one(start, LocalTask(0, data, 1, LocalObjective(solver=ExactMinimiser())), 1)


def test_training_accuracy_is_recorded_per_round():
    dataset = make_dataset()
    config = FederationConfig(rounds=3, local=LocalTrainingConfig(epochs=1, batch_size=8, lr=0.1), eval_train_loss=True)
    result = run_federation(dataset, "logreg", FedAvg(), config, progress=False)
    assert all(m.global_train_accuracy is not None for m in result.history)
    x = torch.from_numpy(np.concatenate([c.x_train for c in dataset.clients]))
    y = torch.from_numpy(np.concatenate([c.y_train for c in dataset.clients]))
    state = result.state
    pooled = float(((x @ state["linear.weight"].T + state["linear.bias"]).argmax(1) == y).double().mean())
    assert result.history[-1].global_train_accuracy == pytest.approx(pooled)
    silent = run_federation(dataset, "logreg", FedAvg(), FederationConfig(rounds=1, local=config.local), progress=False)
    assert silent.history[-1].global_train_accuracy is None


def test_train_double_softmax_and_report_shows_training_accuracy(capsys, tmp_path):
    out, page = tmp_path / "run", tmp_path / "report"
    code = main(["train", "--algorithm", "fedavg", "--dataset", "synthetic:iid", "--dataset-option", "dim=5",
                 "--dataset-option", "num_classes=2", "--num-clients", "4", "--rounds", "3", "--privacy", "output-perturbation",
                 "--clip", "10", "--noise", "1", "--noise-std", "sigma-squared", "--noise-rng", "clock-ms", "--double-softmax",
                 "--eval-train-loss", "--quiet", "--json", "--out", str(out)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    summary = json.loads(captured.out)
    assert 0 <= summary["final_train_accuracy"] <= 1
    training = json.loads((out / "training.json").read_text())["data"]
    assert len(training["train_accuracy"]) == 3 and None not in training["train_accuracy"]
    assert main(["report", str(out / "training.json"), "--out", str(page)]) == 0
    capsys.readouterr()
    markdown = (page / "report.md").read_text()
    assert "train accuracy, mean of last 10 evaluations" in markdown


def test_readme_spec_is_the_reference_run():
    spec = readme_spec(seed=2)
    assert spec.local == LocalTrainingConfig(epochs=10, batch_size=32, lr=0.07, momentum=0.5, double_softmax=True)
    assert spec.privacy_options == {"clip": 10.0, "noise": 1.0, "noise_std": "sigma-squared", "noise_rng": "clock-ms"}
    assert (spec.rounds, spec.clients_per_round, spec.stragglers, spec.seed) == (80, 1.0, 0.0, 2)
    assert noise_weight([1, 1, 1, 1]) == pytest.approx(0.25) and noise_weight([9, 1]) == pytest.approx(0.82)


def test_reference_sized_data_has_the_reference_files_client_sizes():
    data = reference_sized_iid(0)
    assert tuple(int(n) for n in data.client_sizes) == REFERENCE_TRAIN_SIZES and sum(REFERENCE_TRAIN_SIZES) == 6043
    # the reference's test/user_groups.json: 683 pooled test examples, client 3 has 9 and client 20 has 14 (the smallest
    # totals with ⌊0.9 n⌋ = 72 and 117 would give 8 and 13)
    assert tuple(c.num_test for c in data.clients) == REFERENCE_TEST_SIZES and len(data.test[1]) == 683
    assert (data.clients[3].num_test, data.clients[20].num_test) == (9, 14)
    assert all(int(0.9 * (c.num_train + c.num_test)) == c.num_train for c in data.clients)
    assert noise_weight(REFERENCE_TRAIN_SIZES) == pytest.approx(0.0516, abs=1e-4)
    again, other = reference_sized_iid(0), reference_sized_iid(1)
    assert np.array_equal(data.clients[3].x_train, again.clients[3].x_train)
    assert not np.array_equal(data.clients[3].y_train, other.clients[3].y_train)


def test_readme_run_script_prints_one_line_per_run(capsys):
    import importlib
    import sys
    from pathlib import Path

    folder = str(Path(__file__).resolve().parents[3] / "benchmarks")
    if folder not in sys.path:
        sys.path.insert(0, folder)
    readme_main = importlib.import_module("upcycled_readme_run").main  # benchmarks/upcycled_readme_run.py
    readme_main(["--seeds", "0", "--rounds", "2", "--reference-sizes"])
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 2 and lines[1].split()[:3] == ["0", "0", "0.0516"]
