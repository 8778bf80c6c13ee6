"""``privaudit attack membership`` through ``privaudit.cli.app.main``: result files, and one-line exit-2 errors."""

from __future__ import annotations

import json

import numpy as np
import pytest

from privaudit.cli.app import main
from privaudit.report.results import read_result

TRAIN = ["train", "--algorithm", "fedavg", "--dataset", "synthetic:iid", "--rounds", "2", "--num-clients", "4",
         "--dataset-option", "dim=5", "--dataset-option", "num_classes=2", "--local-epochs", "2", "--quiet", "--json"]


def _run(capsys, *args: str):
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    assert main([*TRAIN, "--out", str(root / "plain")]) == 0
    assert main([*TRAIN, "--out", str(root / "releases"), "--save-client-updates"]) == 0
    # a checkpoint written without a training recipe (an in-memory run with a checkpoint observer)
    from privaudit.data import load_dataset
    from privaudit.fl.algorithms.fedavg import FedAvg
    from privaudit.fl.engine.checkpoint import CheckpointWriter
    from privaudit.fl.engine.config import FederationConfig, LocalTrainingConfig
    from privaudit.fl.engine.round_loop import run_federation

    dataset = load_dataset("synthetic:iid", num_clients=2, dim=5, num_classes=2)
    run_federation(dataset, "logreg", FedAvg(), FederationConfig(rounds=1, local=LocalTrainingConfig(epochs=1)),
                   observers=[CheckpointWriter(root / "bare")], progress=False)
    return root


def test_loss_attack_writes_the_result_and_the_scores(capsys, checkpoints, tmp_path):
    out = tmp_path / "loss"
    code, stdout, stderr = _run(capsys, "attack", "membership", "--checkpoint", str(checkpoints / "plain"), "--attack", "loss",
                                "--out", str(out))
    assert code == 0, stderr
    assert "AUC" in stdout and "TPR at 0.1% FPR" in stdout
    result = read_result(out / "membership-attack.json")
    assert result.kind == "membership-attack" and result.data["attack"] == "loss"
    assert set(result.data["tpr_at_fpr"]) == {"0.001", "0.01"} and 0 <= result.data["auc"] <= 1
    roc = result.data["roc"]
    assert roc["fpr"][0] == 0 and roc["fpr"][-1] == 1 and roc["tpr"][-1] == 1
    with np.load(out / result.data["scores_file"]) as scores:
        assert scores["in_scores"].size == result.data["n_in"] and scores["out_scores"].size == result.data["n_out"]
    # seeded BCa bootstrap intervals beside the point estimates, in the result and in the printed summary
    intervals = result.data["intervals"]
    assert intervals["auc"]["low"] <= result.data["auc"] <= intervals["auc"]["high"]
    for fpr in ("0.001", "0.01"):
        ci = intervals["tpr_at_fpr"][fpr]
        assert ci["low"] <= result.data["tpr_at_fpr"][fpr] <= ci["high"] and ci["method"] == "bca"
    assert "(95% BCa)" in stdout
    from privaudit.report.build import build_report

    markdown = build_report([out], tmp_path / "report").markdown.read_text()
    auc = intervals["auc"]
    assert f"| {result.data['auc']:.3g} [{auc['low']:.3g}, {auc['high']:.3g}] |" in markdown


def test_lira_and_the_client_release_threat_model(capsys, checkpoints, tmp_path):
    code, stdout, stderr = _run(capsys, "attack", "membership", "--checkpoint", str(checkpoints / "plain"), "--attack", "lira",
                                "--shadows", "2", "--quiet", "--json", "--out", str(tmp_path / "lira"))
    assert code == 0, stderr
    data = json.loads(stdout)
    assert data["attack"] == "lira" and data["meta"]["mode"] == "online" and data["n_in"] > 0
    assert (tmp_path / "lira" / "shadows" / "trials.jsonl").exists()
    code, stdout, stderr = _run(capsys, "attack", "membership", "--checkpoint", str(checkpoints / "releases"),
                                "--threat-model", "client-releases", "--json")
    assert code == 0, stderr
    assert json.loads(stdout)["meta"]["clients"] == 4


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--attack", "rmia"], "unknown membership attack"),
        (["--attack", "lira", "--shadows", "1"], "at least 2 shadow models"),
        (["--attack", "lira", "--executor", "ray"], "Ray"),
        (["--attack", "lira", "--executor", "slurm"], "unknown executor"),
        (["--threat-model", "client-releases"], "--save-client-updates"),
        (["--threat-model", "telepathy"], "unknown threat model"),
        (["--attack", "lira", "--threat-model", "client-releases"], "final-model threat model only"),
        (["--max-examples", "0"], "--max-examples"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(capsys, monkeypatch, checkpoints, args, message):
    import sys

    monkeypatch.setitem(sys.modules, "ray", None)  # "Ray is missing" must hold although the flower extra installs it
    code, _, stderr = _run(capsys, "attack", "membership", "--checkpoint", str(checkpoints / "plain"), *args)
    assert code == 2
    assert message in stderr and stderr.count("\n") == 1 and "Traceback" not in stderr


def test_bad_checkpoints_are_one_line_and_exit_2(capsys, checkpoints, tmp_path):
    for path, message in ((tmp_path / "nothing", "manifest.json is missing"), (checkpoints / "bare", "training recipe")):
        code, _, stderr = _run(capsys, "attack", "membership", "--checkpoint", str(path))
        assert code == 2 and message in stderr and stderr.count("\n") == 1
    code, _, stderr = _run(capsys, "attack", "membership")
    assert code == 2 and "--checkpoint" in stderr
