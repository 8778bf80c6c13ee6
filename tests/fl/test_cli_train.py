"""``privaudit train`` through ``privaudit.cli.app.main``: the issue's commands (scaled down), --list, bad input."""

from __future__ import annotations

import json

import pytest

from privaudit.cli.app import main
from privaudit.fl.engine.checkpoint import TrainedFederation, read_ledger

TINY = ["--num-clients", "4", "--dataset-option", "dim=5", "--dataset-option", "num_classes=2", "--quiet", "--json"]


def _run(capsys, *args: str):
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_upcycled_fedprox_command(capsys, tmp_path):
    out = tmp_path / "up"
    code, stdout, stderr = _run(
        capsys, "train", "--algorithm", "upcycled-fedprox", "--dataset", "synthetic:0.5,0.5", "--rounds", "6", "--mu", "0.5",
        "--upcycle", "0.7", "--clients-per-round", "0.5", "--stragglers", "0.9", "--local-epochs", "3", "--batch-size", "32",
        "--lr", "0.01", "--seed", "0", "--out", str(out), *TINY,
    )
    assert code == 0, stderr
    summary = json.loads(stdout)
    assert summary["algorithm"] == "upcycled-fedprox" and summary["training_rounds"] == 3 and summary["rounds"] == 6
    federation = TrainedFederation(out)
    assert federation.manifest["algorithm"]["hyperparameters"] == {"u": 0.7}
    assert federation.manifest["train_spec"]["algorithm_options"] == {"mu": 0.5, "upcycle": 0.7}
    assert all(len(m.clients) == 2 for m in federation.metrics if m.trained)


def test_private_fedprox_command(capsys, tmp_path):
    out = tmp_path / "priv"
    code, stdout, stderr = _run(
        capsys, "train", "--algorithm", "fedprox", "--privacy", "output-perturbation", "--clip", "10", "--noise", "1.0",
        "--dataset", "synthetic:iid", "--rounds", "2", "--local-epochs", "1", "--out", str(out), "--save-client-updates", *TINY,
    )
    assert code == 0, stderr
    ledger = read_ledger(out)
    assert len(ledger.events) == 2 * 4 and json.loads(stdout)["privacy_events"] == 8
    assert sorted(TrainedFederation(out).client_releases(2)) == [0, 1, 2, 3]


def test_theorem_6_3_setting_from_the_command_line(capsys, tmp_path):
    """glm-logistic on rows normalised to ‖x‖ ≤ 1 with the exact minimiser: Thm 6.3's assumptions hold on every release;
    the same run with logistic regression (‖v‖ = √2·‖(x, 1)‖ > 1) records them as failed."""
    base = ["train", "--algorithm", "upcycled-fedprox", "--mu", "0.5", "--dataset", "synthetic:iid", "--rounds", "4",
            "--privacy", "objective-perturbation", "--alpha", "20", "--objective-solver", "exact", *TINY]
    code, stdout, stderr = _run(capsys, *base, "--model", "glm-logistic", "--dataset-option", "normalise_rows=true",
                                "--out", str(tmp_path / "glm"))
    assert code == 0, stderr
    summary = json.loads(stdout)
    assert summary["privacy_events"] == 8 and summary["invalid_privacy_events"] == 0
    assert TrainedFederation(tmp_path / "glm").manifest["train_spec"]["dataset_options"]["normalise_rows"] is True
    code, stdout, stderr = _run(capsys, *base, "--model", "logreg")
    assert code == 0, stderr and json.loads(stdout)["invalid_privacy_events"] == 8
    code, _, stderr = _run(capsys, "train", "--algorithm", "fedavg", "--dataset", "digits", "--rounds", "1", "--model",
                           "glm-logistic", "--quiet")
    assert code == 2 and "binary model" in stderr


def test_list(capsys):
    code, stdout, _ = _run(capsys, "train", "--list")
    assert code == 0
    for name in ("upcycled-fedprox", "scaffold", "pfedme", "fedyogi", "output-perturbation", "objective-perturbation", "logreg", "synthetic:iid", "digits"):
        assert name in stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--algorithm", "fedsgd", "--dataset", "synthetic:iid", "--rounds", "1"], "unknown algorithm"),
        (["--algorithm", "fedavg", "--dataset", "nosuchdata", "--rounds", "1"], "nosuchdata"),
        (["--algorithm", "fedavg", "--dataset", "synthetic:iid", "--rounds", "1", "--mu", "0.5"], "--mu does not apply"),
        (["--algorithm", "fedavg", "--dataset", "synthetic:iid"], "--rounds"),
        (["--algorithm", "fedavg", "--dataset", "synthetic:iid", "--rounds", "1", "--frobnicate", "3"], "frobnicate"),
        (["--algorithm", "fedavg", "--dataset", "synthetic:iid", "--rounds", "1", "--clients-per-round", "0"], "clients per round"),
        (["--algorithm", "fedavg", "--dataset", "synthetic:iid", "--rounds", "1", "--lr", "-1"], "learning rate"),
        (["--algorithm", "fedavg", "--dataset", "synthetic:iid", "--rounds", "1", "--privacy", "output-perturbation", "--clip", "1"], "--noise"),
        (["--algorithm", "fedavg", "--dataset", "synthetic:iid", "--rounds", "1", "--privacy", "output-perturbation", "--clip", "1", "--noise", "1", "--noise-std", "cube"], "noise-std"),
        (["--algorithm", "fedavg", "--dataset", "synthetic:iid", "--rounds", "1", "--privacy", "dp-magic"], "unknown privacy mechanism"),
        (["--algorithm", "fedavg", "--dataset", "mnist:/nonexistent/root", "--rounds", "1"], "nonexistent"),
        (["--algorithm", "fedavg", "--dataset", "synthetic:iid", "--rounds", "1", "--model", "resnet999"], "unknown model"),
        (["--algorithm", "fedavg", "--dataset", "synthetic:iid", "--rounds", "1", "--dataset-option", "dim"], "KEY=VALUE"),
        (["--algorithm", "fedavg", "--dataset", "synthetic:iid", "--rounds", "1", "--dataset-option", "normalise_rows=7"],
         "normalise_rows takes true or false"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(capsys, args, message):
    code, _, stderr = _run(capsys, "train", *args, "--quiet")
    assert code == 2
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and "Traceback" not in stderr
    assert message in lines[0]


def test_unwritable_out_is_one_line_and_exit_2(capsys, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    code, _, stderr = _run(capsys, "train", "--algorithm", "fedavg", "--dataset", "synthetic:iid", "--rounds", "1", "--local-epochs", "1", "--out", str(blocker), *TINY)
    assert code == 2 and len(stderr.strip().splitlines()) == 1 and "is a file, not a folder" in stderr


def test_one_entry_point_the_algorithm_brings_its_defaults_report_and_summary(capsys, tmp_path):
    """upcycled-pfa is PFA's algorithm inside Upcycled: it gets PFA's settings, manifest section and summary rows through the
    wrapper's hooks (there is no per-paper branch in the command)."""
    out = tmp_path / "up-pfa"
    code, stdout, stderr = _run(capsys, "train", "--algorithm", "upcycled-pfa", "--budgets", "mixgauss2", "--local-steps", "2",
                                "--clients-per-round", "0.5", "--dataset", "synthetic:iid", "--rounds", "3", "--out", str(out), *TINY)
    assert code == 0, stderr
    summary = json.loads(stdout)
    assert summary["model"] == "pfa-lr" and summary["training_rounds"] == 2 and "uplink_bytes" in summary
    manifest = TrainedFederation(out).manifest
    assert manifest["train_spec"]["local"]["batch_size"] == 8 and manifest["train_spec"]["model"] == "pfa-lr"
    assert [r["round"] for r in manifest["pfa"]["rounds"]] == [1, 3]
