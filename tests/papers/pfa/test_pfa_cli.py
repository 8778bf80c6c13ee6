"""``privaudit train --algorithm pfa|pfa-plus|…`` and ``compute-epsilon --checkpoint`` through ``privaudit.cli.app.main``."""

from __future__ import annotations

import json

import pytest

from privaudit.cli.app import main
from privaudit.fl.engine.checkpoint import TrainedFederation, read_ledger

SYNTHETIC = ["--dataset", "synthetic:iid", "--clients", "6", "--dataset-option", "dim=5", "--dataset-option", "num_classes=2",
             "--rounds", "2", "--quiet", "--json"]

#: opacus warns on its own backward hooks for inputs without gradients (privaudit.fl.privacy.dpsgd); harmless here.
pytestmark = pytest.mark.filterwarnings("ignore:Full backward hook is firing:UserWarning")


def _run(capsys, *args: str):
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_issue_command_scaled_down_and_compute_epsilon(capsys, tmp_path):
    out = tmp_path / "pfa"
    code, stdout, stderr = _run(
        capsys, "train", "--algorithm", "pfa", "--budgets", "mixgauss1", "--clients", "20", "--clients-per-round", "0.8",
        "--local-steps", "29", "--batch-size", "8", "--rounds", "3", "--dataset", "mnist5k", "--model", "pfa-lr",
        "--lr", "0.1", "--momentum", "0", "--out", str(out), "--quiet", "--json",
    )
    assert code == 0, stderr
    summary = json.loads(stdout)
    assert summary["algorithm"] == "pfa" and summary["clients_over_budget"] == 0
    assert summary["max_epsilon_spent"] > 0 and summary["uplink_reduction_private"] == 0.0
    manifest = TrainedFederation(out).manifest
    assert manifest["pfa"]["plan"]["clients_per_round"] == 16 and len(manifest["pfa"]["plan"]["budgets"]["epsilons"]) == 20
    assert manifest["train_spec"]["algorithm_options"]["budgets"] == "mixgauss1"
    assert len(read_ledger(out).budgets) == 20
    code, stdout, stderr = _run(capsys, "compute-epsilon", "--checkpoint", str(out), "--delta", "1e-5", "--accountant", "rdp", "--json")
    assert code == 0, stderr
    per_client = json.loads(stdout)["per_client"]
    assert len(per_client) == 20
    assert all(c["budget"] is not None and not c["over_budget"] for c in per_client.values())


def test_pfa_plus_command(capsys, tmp_path):
    out = tmp_path / "plus"
    code, stdout, stderr = _run(
        capsys, "train", "--algorithm", "pfa-plus", "--projection-dims", "1", "--budgets", "uniform", "--local-steps", "4",
        "--batch-size", "8", "--clients-per-round", "1.0", "--out", str(out), *SYNTHETIC,
    )
    assert code == 0, stderr
    summary = json.loads(stdout)
    assert summary["algorithm"] == "pfa-plus" and summary["uplink_reduction_private"] > 0
    assert TrainedFederation(out).manifest["pfa"]["rounds"][0]["note"].startswith("warm-up")


@pytest.mark.parametrize("name", ["weiavg", "fedavg-hdp", "minimum", "maximum", "public-only", "np-fedavg"])
def test_every_family_name_trains(capsys, name):
    code, stdout, stderr = _run(capsys, "train", "--algorithm", name, "--budgets", "mixgauss2", "--local-steps", "2",
                                "--clients-per-round", "0.5", *SYNTHETIC)
    assert code == 0, stderr
    assert json.loads(stdout)["algorithm"] == name


def test_list_shows_the_family(capsys):
    code, stdout, _ = _run(capsys, "train", "--list")
    assert code == 0
    for name in ("pfa-plus", "weiavg", "fedavg-hdp", "public-only", "minimum", "maximum", "np-fedavg"):
        assert name in stdout


@pytest.mark.parametrize(
    ("extra", "budget_text", "message"),
    [
        (["--budgets", "mixgauss9"], None, "unknown budget distribution 'mixgauss9'"),
        ([], "0.5\n-2\n1\n1\n1\n1\n", "line 2: ε -2 is not positive"),
        ([], "0.5\nten\n1\n1\n1\n1\n", "line 2: ε 'ten' is not a number"),
        ([], "0.5\n1\n", "has 2 budgets for 6 clients"),
        (["--budgets", "mixgauss1", "--split", "topk", "--public-clients", "4"], None, "4 public clients is more than the 3 sampled per round"),
        (["--budgets", "mixgauss1", "--projection-dims", "0"], None, "projection dims k must be at least 1"),
        (["--budgets", "mixgauss1", "--public-clients", "2"], None, "--public-clients applies to the top-K split only"),
        (["--budgets", "mixgauss1", "--budget-seed", "2", "--nonpositive-budgets", "reject"], None, "drew ε ≤ 0"),
        (["--budgets", "mixgauss1", "--projection", "centred"], None, "--projection must be one of paper, reference"),
        (["--budgets", "mixgauss1", "--sampling", "poisson"], None, "fixed-size client sampling"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(capsys, tmp_path, extra, budget_text, message):
    if budget_text is not None:
        path = tmp_path / "eps.txt"
        path.write_text(budget_text)
        extra = ["--budgets", str(path)]
    code, _, stderr = _run(capsys, "train", "--algorithm", "pfa", "--clients-per-round", "0.5", *extra, *SYNTHETIC)
    assert code == 2
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and "Traceback" not in stderr
    assert message in lines[0]
