"""``privaudit attack inversion`` through ``privaudit.cli.app.main``: both modes, result files, report, one-line errors."""

from __future__ import annotations

import json
import math

import pytest

from privaudit.cli.app import main
from privaudit.report.results import read_result

TRAIN = ["train", "--algorithm", "fedavg", "--dataset", "images", "--model", "convnet", "--local-epochs", "1",
         "--batch-size", "1", "--lr", "0.1", "--momentum", "0", "--quiet", "--json"]


def _run(capsys, *args: str):
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    assert main([*TRAIN, "--rounds", "2", "--out", str(root / "releases"), "--save-client-updates"]) == 0
    assert main([*TRAIN, "--rounds", "1", "--out", str(root / "plain")]) == 0
    return root


@pytest.fixture(scope="module")
def dp_result(tmp_path_factory):
    out = tmp_path_factory.mktemp("inv") / "dp"
    code = main(["attack", "inversion", "--dataset", "images", "--attack", "ig", "--defense", "dpsgd:1e-2", "--images", "2",
                 "--iterations", "3", "--quiet", "--out", str(out)])
    assert code == 0
    return out


def test_dataset_mode_writes_an_inversion_result_with_per_image_scores(dp_result):
    from attacks.inversion.experiment import defence_epsilon, parse_defence

    result = read_result(dp_result / "inversion.json")
    data = result.data
    assert result.kind == "inversion" and data["attack"] == "ig" and data["defense"] == "dpsgd:1e-2"
    assert len(data["psnr"]) == len(data["ssim"]) == len(data["per_image"]) == 2
    assert all(math.isfinite(v) and v > 0 for v in data["psnr"]) and all(-1 <= v <= 1 for v in data["ssim"])
    assert data["psnr_mean"] == pytest.approx(sum(data["psnr"]) / 2)
    assert 0 <= data["label_accuracy"] <= 1
    # ε of 4 full-batch DP-SGD steps at σ = 0.01 (the dpsgd defaults) from the accountant: huge, as FedReg's comparators
    assert data["epsilon"] == pytest.approx(defence_epsilon(parse_defence("dpsgd:1e-2"), 1e-5)) and data["epsilon"] > 1e3
    assert data["mode"] == "dataset" and data["defence"]["noise_multiplier"] == 0.01
    row = data["per_image"][0]
    assert set(row) == {"index", "true_label", "predicted_label", "label_correct", "psnr", "ssim", "status", "status_reason"}
    assert data["status"] == [r["status"] for r in data["per_image"]] and set(data["status"]) <= {"ok", "no-progress", "diverged"}
    # the attack as it ran: its whole configuration, and per update the label rule, optimiser and client model it used
    assert data["attack_config"]["iterations"] == data["iterations"] and data["attack_config"]["label_strategy"] == "auto"
    update = data["updates"][0]
    assert update["settings"]["label_strategy"] in ("idlg", "bias-corrected", "given")
    assert update["settings"]["optimizer"]["name"] == "Adam" and update["settings"]["optimizer"]["gradient"] == "signed"
    assert update["settings"]["client_model"] and update["status"] == data["status"][0]
    assert row["label_correct"] == (row["predicted_label"] == row["true_label"])
    assert (dp_result / data["grid"]).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert result.config["seed"] == 0 and result.provenance["seed"] == 0


def test_report_renders_the_inversion_result(capsys, dp_result, tmp_path):
    code, _, stderr = _run(capsys, "report", str(dp_result), "--out", str(tmp_path / "report"))
    assert code == 0, stderr
    markdown = (tmp_path / "report" / "report.md").read_text()
    assert "## Gradient inversion" in markdown and "| ig | dpsgd:1e-2 |" in markdown
    assert (tmp_path / "report" / "figures" / "inversion-0.png").exists()


def test_analytic_attack_recovers_one_example_exactly_and_prints_a_table(capsys):
    code, stdout, stderr = _run(capsys, "attack", "inversion", "--dataset", "images", "--model", "upcycled-mlp", "--attack",
                                "analytic", "--defense", "fedavg", "--images", "2", "--quiet", "--json")
    assert code == 0, stderr
    data = json.loads(stdout)
    assert data["result"] is None and data["epsilon"] is None and data["grid"] is None
    assert all(p == "inf" or p > 60 for p in data["psnr"]) and data["label_accuracy"] == 1.0
    code, stdout, _ = _run(capsys, "attack", "inversion", "--dataset", "digits", "--model", "upcycled-mlp", "--attack",
                           "analytic", "--images", "1", "--quiet")
    assert code == 0 and "PSNR (dB)" in stdout and "label accuracy 1.00" in stdout


def test_checkpoint_mode_attacks_a_stored_client_release(capsys, checkpoints, tmp_path):
    code, stdout, stderr = _run(capsys, "attack", "inversion", "--checkpoint", str(checkpoints / "releases"), "--client", "3",
                                "--round", "2", "--attack", "ig", "--iterations", "3", "--quiet", "--json",
                                "--out", str(tmp_path / "ck"))
    assert code == 0, stderr
    data = json.loads(stdout)
    assert data["mode"] == "checkpoint" and data["client"] == 3 and data["round"] == 2
    # the attacker's knowledge comes from the checkpoint's local-training config: 1 record, 1 epoch, B = 1, lr 0.1
    knowledge = data["threat_model"]
    assert knowledge["num_examples"] == 1 and knowledge["local_steps"] == 1 and knowledge["lr"] == pytest.approx(0.1)
    from privaudit.data import load_dataset

    assert data["per_image"][0]["true_label"] == int(load_dataset("images").clients[3].y_train[0])  # the client's record
    assert len(data["psnr"]) == 1 and math.isfinite(data["psnr"][0]) and data["notes"] == []
    assert read_result(tmp_path / "ck" / "inversion.json").data["defense"] == "fedavg (privacy: none)"


def test_checkpoint_mode_takes_the_runs_own_algorithm_settings(capsys, tmp_path):
    """A white-box attacker of a stored run simulates what its clients ran: FedProx's μ, FedReg's γ, E and MG switch."""
    base = [a for a in TRAIN if a not in ("fedavg",)]
    i = base.index("--algorithm")
    runs = {"fedreg-mg": ["--fedreg-gamma", "0.3", "--fgsm-steps", "2"], "fedprox": ["--mu", "0.25"]}
    for algorithm, extra in runs.items():
        args = [*base[: i + 1], algorithm, *base[i + 1 :], *extra, "--rounds", "1", "--save-client-updates",
                "--out", str(tmp_path / algorithm)]
        assert main(args) == 0
        capsys.readouterr()
    code, stdout, stderr = _run(capsys, "attack", "inversion", "--checkpoint", str(tmp_path / "fedreg-mg"), "--client", "0",
                                "--round", "1", "--attack", "adaptive-mg", "--iterations", "2", "--quiet", "--json")
    assert code == 0, stderr
    data = json.loads(stdout)
    options = data["attack_options"]
    assert options["gamma"] == 0.3 and options["fgsm_steps"] == 2 and options["use_modified_gradient"] is True
    # two iterations need not descend: such an image is flagged, and that is the only note
    assert options["pseudo_step"] == 0.1 and options["iterations"] == 2
    assert [n for n in data["notes"] if "attack failed" not in n and "left out of the means" not in n] == []
    code, stdout, stderr = _run(capsys, "attack", "inversion", "--checkpoint", str(tmp_path / "fedprox"), "--client", "0",
                                "--round", "1", "--attack", "ig", "--iterations", "2", "--quiet", "--json")
    assert code == 0, stderr
    assert json.loads(stdout)["threat_model"]["proximal_mu"] == 0.25


def test_the_cli_knows_every_registered_attack_and_defence():
    from attacks.inversion.experiment import defence_specs
    from attacks.inversion.registry import registered_attacks
    from attacks.inversion.request import iteration_field
    from privaudit.cli.attack_inversion import attack_choices, defence_choices

    assert attack_choices() == tuple(registered_attacks())
    assert defence_choices() == defence_specs()
    assert {name: iteration_field(name) for name in attack_choices()} == {
        "analytic": None, "label": None, "dlg": "steps", "ig": "iterations", "imprint": None, "adaptive-mg": "iterations"}


def _cuda_unavailable(monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--attack", "gan"], "unknown attack 'gan'"),
        (["--defense", "secure-agg"], "unknown defence 'secure-agg'"),
        (["--defense", "dpsgd:lots"], "noise multiplier"),
        (["--defense", "dpsgd:-1"], "positive"),
        (["--images", "0"], "--images must be at least 1"),
        (["--iterations", "0"], "--iterations must be at least 1"),
        (["--attack", "analytic", "--iterations", "5"], "does not apply to the analytic attack"),
        (["--attack", "analytic", "--model", "convnet"], "fully connected first layer"),
        (["--device", "tpu"], "unknown device"),
        (["--device", "cuda"], "CUDA is not available"),
        (["--client", "1"], "checkpoint mode"),
        (["--threads", "0"], "--threads"),
        (["--dataset", "no-such-data", "--iterations", "1"], "no-such-data"),
        (["--option", "temperature=3"], "has no option 'temperature'"),
        (["--option", "restarts"], "KEY=VALUE"),
        (["--option", "restarts=two"], "option 'restarts' takes a int"),
        (["--option", "signed=maybe"], "option 'signed' takes a bool"),
        (["--option", "restarts=0"], "restarts"),
        (["--attack", "adaptive-mg", "--option", "start=middle"], "unknown start 'middle'"),
    ],
)
def test_dataset_mode_bad_inputs_are_one_line_and_exit_2(capsys, monkeypatch, args, message):
    _cuda_unavailable(monkeypatch)
    base = ([] if "--dataset" in args else ["--dataset", "images"]) + ([] if "--images" in args else ["--images", "1"])
    code, stdout, stderr = _run(capsys, "attack", "inversion", *base, *args, "--quiet")
    assert code == 2
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and message in lines[0], stderr
    assert "Traceback" not in stderr and stdout == ""


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--checkpoint", "{plain}", "--client", "0", "--round", "1"], "--save-client-updates"),
        (["--checkpoint", "{releases}", "--client", "99", "--round", "1"], "client 99 is not in"),
        (["--checkpoint", "{releases}", "--client", "0", "--round", "3"], "round 3 is not in"),
        (["--checkpoint", "{releases}", "--client", "0", "--round", "0"], "round 0 is not in"),
        (["--checkpoint", "{releases}", "--round", "1"], "needs --client and --round"),
        (["--checkpoint", "{releases}", "--client", "0", "--round", "1", "--images", "2"], "--images applies to dataset mode"),
        (["--checkpoint", "{releases}", "--client", "0", "--round", "1", "--attack", "analytic"], "fully connected first layer"),
        (["--checkpoint", "{releases}", "--dataset", "images", "--client", "0", "--round", "1"], "exactly one of"),
        (["--checkpoint", "{missing}", "--client", "0", "--round", "1"], "missing"),
        ([], "exactly one of"),
    ],
)
def test_checkpoint_mode_bad_inputs_are_one_line_and_exit_2(capsys, checkpoints, args, message):
    paths = {"plain": checkpoints / "plain", "releases": checkpoints / "releases", "missing": checkpoints / "missing"}
    args = [a.format(**paths) for a in args]
    code, stdout, stderr = _run(capsys, "attack", "inversion", *args, "--quiet")
    assert code == 2
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and message in lines[0], stderr
    assert "Traceback" not in stderr and stdout == ""


def test_cuda_device_runs_when_available(capsys):
    import torch

    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    code, stdout, stderr = _run(capsys, "attack", "inversion", "--dataset", "images", "--attack", "ig", "--images", "1",
                                "--iterations", "3", "--device", "cuda", "--quiet", "--json")
    assert code == 0, stderr
    data = json.loads(stdout)
    assert data["device"] == "cuda" and math.isfinite(data["psnr"][0])


def test_label_only_attack_reports_labels_without_images(capsys, tmp_path):
    code, stdout, stderr = _run(capsys, "attack", "inversion", "--dataset", "digits", "--attack", "label", "--images", "2",
                                "--quiet", "--json", "--out", str(tmp_path / "label"))
    assert code == 0, stderr
    data = json.loads(stdout)
    assert data["psnr"] == [] and data["psnr_mean"] is None and data["grid"] is None
    assert [r["predicted_label"] is not None for r in data["per_image"]] == [True, True]
    assert data["label_accuracy"] == pytest.approx(sum(r["label_correct"] for r in data["per_image"]) / 2)
    code, _, stderr = _run(capsys, "report", str(tmp_path / "label"), "--out", str(tmp_path / "report"))
    assert code == 0, stderr
    assert "| label | fedavg | — | — |" in (tmp_path / "report" / "report.md").read_text()


def test_any_configuration_field_is_an_option(capsys, tmp_path):
    """``--option KEY=VALUE`` reaches fields without a flag of their own (here the adaptive attack's analytic start)."""
    code, stdout, _ = _run(capsys, "attack", "inversion", "--dataset", "digits", "--model", "upcycled-mlp", "--defense", "fedreg",
                           "--attack", "adaptive-mg", "--images", "1", "--iterations", "3", "--option", "start=analytic",
                           "--option", "keep-best-iterate=true", "--option", "lr=0.001", "--labels-known", "--quiet",
                           "--out", str(tmp_path / "opt"))
    assert code == 0, stdout
    data = read_result(tmp_path / "opt" / "inversion.json").data
    assert data["attack_options"] == {"start": "analytic", "keep_best_iterate": True, "lr": 0.001, "iterations": 3}
    assert data["psnr_mean"] >= 20.0  # three iterations from a random start stay near 5 dB; the analytic start does not


@pytest.mark.slow
def test_the_readme_ig_example_prints_what_the_readme_shows(capsys, tmp_path, monkeypatch):
    """The README's Inverting Gradients example, run as printed: its per-image PSNR and SSIM are the README's."""
    import re
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    command = re.search(r"\$ privaudit (attack inversion --dataset lfw --model convnet --defense fedavg --attack ig [^\n]*)", readme)
    assert command, "the README's IG example is gone"
    shown = readme[command.end():].split("```", 1)[0]
    rows = re.findall(r"│\s+(\d+) │\s+\d+ │ [^│]+│\s+([\d.]+) │ ([\d.]+) │\s+(\S+) │", shown)
    assert rows, shown
    args = command.group(1).split()
    args[args.index("--out") + 1] = str(tmp_path / "inv-ig")
    monkeypatch.setenv("COLUMNS", "200")
    code, stdout, stderr = _run(capsys, *args, "--quiet")
    assert code == 0, stderr
    printed = re.findall(r"│\s+(\d+) │\s+\d+ │ [^│]+│\s+([\d.]+) │ ([\d.]+) │\s+(\S+) │", stdout)
    assert printed == rows, stdout
