"""Producers of the report's ``training``, ``ledger`` and ``epsilon-curve`` results, end to end through the CLI.

``privaudit train --out DIR`` writes DIR/training.json; ``compute-epsilon --checkpoint DIR --delta D --out F``
a ledger result and with ``--curve`` an ε-vs-rounds result; ``build_report`` renders all three with figures.
"""

from __future__ import annotations

import itertools
import json

import pytest

from privaudit.accounting.ledger import PrivacyEvent, PrivacyLedger
from privaudit.accounting.mechanisms import Gaussian, SubsampledGaussian
from privaudit.cli.app import main
from privaudit.fl.engine.checkpoint import TRAINING_RESULT, TrainedFederation, read_ledger, verify_checkpoint
from privaudit.report.build import build_report
from privaudit.report.producers import epsilon_curve_data
from privaudit.report.results import read_result

ROUNDS = 5
TINY = ["--dataset", "synthetic:iid", "--dataset-option", "dim=5", "--dataset-option", "num_classes=2", "--quiet", "--json"]

#: opacus warns on its own backward hooks for inputs without gradients (privaudit.fl.privacy.dpsgd); harmless here.
pytestmark = pytest.mark.filterwarnings("ignore:Full backward hook is firing:UserWarning")


def _run(capsys, *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main([str(a) for a in args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture(scope="module")
def private_run(tmp_path_factory):
    """Output perturbation (one Gaussian release per client per round): 4 clients, 5 rounds."""
    out = tmp_path_factory.mktemp("runs") / "priv"
    code = main(["train", "--algorithm", "fedprox", "--privacy", "output-perturbation", "--clip", "10", "--noise", "1.0",
                 "--num-clients", "4", "--rounds", str(ROUNDS), "--local-epochs", "1", "--out", str(out), *TINY])
    assert code == 0
    return out


@pytest.fixture(scope="module")
def pfa_run(tmp_path_factory):
    """PFA with per-client budgets (DP-SGD events, so the ledger carries budgets and subsampled Gaussians)."""
    out = tmp_path_factory.mktemp("runs") / "pfa"
    code = main(["train", "--algorithm", "pfa", "--budgets", "mixgauss2", "--local-steps", "2", "--clients", "6",
                 "--clients-per-round", "0.5", "--rounds", "3", "--out", str(out), *TINY])
    assert code == 0
    return out


def test_train_writes_training_result_beside_a_loadable_checkpoint(private_run):
    result = read_result(private_run / TRAINING_RESULT)
    manifest = TrainedFederation(private_run).manifest
    d = result.data
    assert result.kind == "training" and d["algorithm"] == "fedprox+output-perturbation"
    assert d["rounds"] == list(range(1, ROUNDS + 1)) and d["total_rounds"] == ROUNDS and d["training_rounds"] == ROUNDS
    assert d["accuracy"] == [m["test_accuracy"] for m in manifest["metrics"]]
    assert d["loss"] == [m["test_loss"] for m in manifest["metrics"]]
    assert d["final_accuracy"] == manifest["final_accuracy"] == d["accuracy"][-1]
    assert result.config["run"] == manifest["train_spec"] and result.config["checkpoint"] == str(private_run)
    assert result.provenance["seed"] == 0 and result.provenance["command"].startswith("privaudit")
    # the checkpoint reader neither hashes nor needs the result file
    assert verify_checkpoint(private_run)["schema"] == "privaudit.federation/1"
    assert TRAINING_RESULT not in manifest["tensors"] and len(read_ledger(private_run).events) == 4 * ROUNDS
    assert TrainedFederation(private_run).global_state(ROUNDS)


def test_ledger_result_matches_json(private_run, tmp_path, capsys):
    out = tmp_path / "ledger.json"
    code, stdout, stderr = _run(capsys, "compute-epsilon", "--checkpoint", private_run, "--delta", "1e-5", "--accountant", "rdp",
                                "--json", "--out", out)
    assert code == 0, stderr
    printed = json.loads(stdout)
    result = read_result(out)
    d = result.data
    assert result.kind == "ledger" and d["accountant"] == "rdp" and d["delta"] == 1e-5
    assert d["per_client"] == printed["per_client"] and d["max_epsilon"] == printed["max_epsilon"]
    assert len(d["per_client"]) == 4 and d["clients"] == 4 and d["rounds"] == ROUNDS and d["steps"] == 4 * ROUNDS
    client = d["per_client"]["0"]
    assert {"epsilon", "budget", "rounds", "steps", "valid", "over_budget"} <= set(client)
    assert client["rounds"] == ROUNDS and client["budget"] is None and client["valid"] is True
    assert d["max_epsilon"] == max(c["epsilon"] for c in d["per_client"].values())
    assert d["over_budget"] == [] and d["invalid"] == []
    assert result.config["delta"] == 1e-5 and result.config["run"]["privacy"] == "output-perturbation"


def test_ledger_result_with_budgets(pfa_run, tmp_path, capsys):
    out = tmp_path / "deep" / "pfa-ledger.json"
    code, stdout, stderr = _run(capsys, "compute-epsilon", "--checkpoint", pfa_run, "--delta", "1e-5", "--accountant", "rdp",
                                "--out", out)
    assert code == 0, stderr
    assert f"ledger result: {out}" in stdout
    d = read_result(out).data
    assert len(d["per_client"]) == 6 and all(c["budget"] is not None for c in d["per_client"].values())
    assert d["over_budget"] == [cid for cid, c in d["per_client"].items() if c["over_budget"]]


def test_epsilon_curve_result(private_run, tmp_path, capsys):
    out = tmp_path / "curve.json"
    code, _, stderr = _run(capsys, "compute-epsilon", "--checkpoint", private_run, "--delta", "1e-5", "--curve", "--out", out)
    assert code == 0, stderr
    result = read_result(out)
    d = result.data
    assert result.kind == "epsilon-curve" and d["rounds"] == list(range(1, ROUNDS + 1)) and d["delta"] == 1e-5
    assert set(d["epsilon"]) == {"rdp", "prv", "pld"}  # Gaussian releases: every accountant answers
    assert all(len(v) == ROUNDS for v in d["epsilon"].values())
    ledger = read_ledger(private_run)
    finals = {cid: c.epsilon for cid, c in ledger.summary(1e-5, "rdp").per_client.items()}
    assert d["client"] == max(finals, key=finals.get) and d["selected_by"] == "rdp"
    assert d["epsilon"]["rdp"][-1] == pytest.approx(finals[d["client"]])
    for name, values in d["epsilon"].items():
        assert all(a < b for a, b in itertools.pairwise(values)), name  # one release per round: ε grows
    # prv is exact for Gaussian releases and may not exceed the RDP bound; pld agrees with it
    assert all(p <= r + 1e-9 for p, r in zip(d["epsilon"]["prv"], d["epsilon"]["rdp"], strict=True))
    assert d["epsilon"]["pld"][-1] == pytest.approx(d["epsilon"]["prv"][-1], rel=1e-3)


def test_epsilon_curve_thins_slow_accountants(private_run, tmp_path, capsys):
    out = tmp_path / "curve2.json"
    code, _, stderr = _run(capsys, "compute-epsilon", "--checkpoint", private_run, "--delta", "1e-5", "--curve",
                           "--curve-points", "2", "--json", "--out", out)
    assert code == 0, stderr
    d = read_result(out).data
    assert d["evaluated_rounds"]["pld"] == [1, ROUNDS] and d["epsilon"]["pld"][1:-1] == [None] * (ROUNDS - 2)
    assert d["evaluated_rounds"]["prv"] == d["rounds"] and None not in d["epsilon"]["prv"]  # exact: every round
    assert any("pld is evaluated at 2 of 5 rounds" in n for n in d["notes"])


def test_epsilon_by_round_composes_round_prefixes():
    ledger = PrivacyLedger()
    g, s = Gaussian(2.0, 1.0), SubsampledGaussian(1.1, 0.1)
    ledger.record_all([PrivacyEvent("a", 1, g), PrivacyEvent("a", 3, s, count=20), PrivacyEvent("b", 2, g, count=3)])
    eps = ledger.epsilon_by_round("a", 1e-5, [1, 2, 3, 4])
    assert eps[0] == eps[1] < eps[2] == eps[3]
    assert eps[2] == pytest.approx(ledger.epsilon_for("a", 1e-5).epsilon)
    assert ledger.composition_through("a", 2).total_count == 1 and ledger.composition_through("b", 1).is_empty
    d = epsilon_curve_data(ledger, 1e-5, ("rdp", "pld"), max_points=2)
    assert d["rounds"] == [1, 2, 3] and d["client"] in ("a", "b") and d["evaluated_rounds"]["pld"] == [1, 3]


def test_report_renders_the_three_sections(private_run, pfa_run, tmp_path, capsys):
    ledger_file, curve_file = tmp_path / "r" / "ledger.json", tmp_path / "r" / "curve.json"
    for args in (["--out", ledger_file], ["--curve", "--out", curve_file]):
        code, _, stderr = _run(capsys, "compute-epsilon", "--checkpoint", pfa_run, "--delta", "1e-5", *args)
        assert code == 0, stderr
    files = build_report([private_run, pfa_run, ledger_file, curve_file], tmp_path / "report")
    assert {"ledger", "epsilon-curve", "training"} <= set(files.sections)
    names = {f.name for f in files.figures}
    assert {"ledger-0.png", "epsilon-curve-0.png", "accuracy.png"} <= names
    for fig in files.figures:
        assert fig.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    md = files.markdown.read_text()
    for title in ("## Per-client ε vs budget", "## ε vs rounds", "## Accuracy vs rounds"):
        assert title in md
    assert "fedprox+output-perturbation · priv" in md and "pfa · pfa" in md  # both runs in the accuracy table
    assert "2 JSON file(s) that are not privaudit results were skipped" in md  # the two manifests


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--mechanism", "gaussian", "--noise-multiplier", "1", "--steps", "3", "--delta", "1e-5", "--out", "x.json"], "needs --checkpoint"),
        (["--schedule", "s.json", "--delta", "1e-5", "--curve"], "needs --checkpoint"),
        (["CHECKPOINT", "--delta", "1e-5", "--out", "UNDER_A_FILE"], "file is a file, not a folder"),  # before any work
        (["CHECKPOINT", "--delta", "1e-5", "--curve", "--out", "A_DIRECTORY"], "is a directory"),
        (["CHECKPOINT", "--delta", "1e-5", "--curve", "--curve-points", "1"], "at least 2"),
        (["CHECKPOINT", "--curve", "--out", "c.json"], "needs --delta"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(private_run, tmp_path, capsys, args, message):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    subs = {"CHECKPOINT": ["--checkpoint", str(private_run)], "UNDER_A_FILE": [str(blocker / "ledger.json")],
            "A_DIRECTORY": [str(tmp_path)]}
    argv = [x for a in args for x in subs.get(a, [a])]
    code, _, stderr = _run(capsys, "compute-epsilon", *argv)
    assert code == 2
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], stderr
