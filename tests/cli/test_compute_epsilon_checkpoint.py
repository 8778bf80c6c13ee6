"""`compute-epsilon --checkpoint`: per-client ε from a trained federation's ledger (issue 3's JSON keys)."""

import json

import pytest

from privaudit.cli.app import main


@pytest.fixture(scope="module")
def private_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("runs") / "priv"
    code = main(["train", "--algorithm", "fedprox", "--privacy", "output-perturbation", "--clip", "10", "--noise", "1.0",
                 "--dataset", "synthetic:iid", "--dataset-option", "dim=20", "--dataset-option", "num_classes=2",
                 "--num-clients", "6", "--rounds", "3", "--local-epochs", "1", "--out", str(out), "--quiet"])
    assert code == 0
    return out


def test_checkpoint_json_keys(private_run, capsys):
    capsys.readouterr()
    assert main(["compute-epsilon", "--checkpoint", str(private_run), "--delta", "1e-3", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert {"accountant", "delta", "max_epsilon", "mean_epsilon", "per_client"} <= set(data)
    assert len(data["per_client"]) == 6
    client = next(iter(data["per_client"].values()))
    assert {"epsilon", "budget", "rounds", "assumptions"} <= set(client)
    assert client["rounds"] == 3 and client["budget"] is None
    assert data["max_epsilon"] == max(c["epsilon"] for c in data["per_client"].values())
    assert any("Thm 6.2" in a for a in client["assumptions"])
    # the default names the accountant that answered (output perturbation: exact Gaussian composition by ctd), not "auto"
    assert data["accountant"] == client["accountant"] == "ctd"


def test_checkpoint_human_output_and_accountant_choice(private_run, capsys):
    capsys.readouterr()
    assert main(["compute-epsilon", "--checkpoint", str(private_run), "--delta", "1e-3", "--accountant", "rdp"]) == 0
    out = capsys.readouterr().out
    assert "max ε" in out and "per-client ε" in out


@pytest.mark.parametrize(
    "args",
    [["--checkpoint", "/no/such/run", "--delta", "1e-3"],
     ["--delta", "1e-3", "--noise-multiplier", "1"],
     ["--accountant", "all", "--delta", "1e-3"],
     ["--noise-multiplier", "2", "--delta", "1e-3"]],
)
def test_checkpoint_bad_input(private_run, capsys, args):
    if "--checkpoint" not in args:
        args = ["--checkpoint", str(private_run), *args]
    capsys.readouterr()
    assert main(["compute-epsilon", *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ")
