"""run_inversion: the end-to-end entry point the CLI calls (data → release → attack → scores → files)."""

import json

import pytest

from attacks.inversion import InversionExperiment, parse_defence, run_inversion
from attacks.inversion.release import DPSGDRelease, FedAvgRelease
from privaudit.errors import InvalidParameterError
from privaudit.papers.fedreg.defences import FedRegMGRelease


def test_analytic_on_digits_writes_json_and_grid(tmp_path):
    config = InversionExperiment(attack="analytic", dataset="digits", model="upcycled-mlp", num_images=3, out_dir=str(tmp_path))
    run = run_inversion(config)
    assert run.psnr_mean >= 60.0 and run.ssim_mean == pytest.approx(1.0, abs=1e-6)
    assert run.label_accuracy == 1.0
    assert len(run.updates) == 3
    saved = json.loads((tmp_path / "inversion.json").read_text())
    assert saved["config"]["attack"] == "analytic"
    assert saved["updates"][0]["attack"]["settings"]["threat_model"]["labels_known"] is False
    assert (tmp_path / "inversion-analytic-fedsgd.png").stat().st_size > 1000
    assert run.grid_path is not None


def test_runs_are_reproducible_and_labels_only_attack_scores_labels():
    config = InversionExperiment(attack="label", dataset="digits", model="upcycled-mlp", num_images=4, examples_per_update=2, seed=3)
    first, second = run_inversion(config), run_inversion(config)
    assert first.label_accuracy == second.label_accuracy == 1.0
    assert first.psnr_mean is None and first.status == [] and first.images_excluded == {}  # no images: no PSNR
    assert [u["attack"]["labels"] for u in first.updates] == [u["attack"]["labels"] for u in second.updates]


def test_adaptive_attack_inherits_the_defences_fedreg_settings():
    config = InversionExperiment(
        attack="adaptive-mg", defence="fedreg-mg", dataset="digits", model="upcycled-mlp",
        defence_options={"pseudo_step": 0.05, "fgsm_steps": 1, "gamma": 0.4},
        attack_options={"iterations": 2},
    )
    run = run_inversion(config)
    settings = run.updates[0]["attack"]["settings"]
    assert settings["config"]["pseudo_step"] == 0.05 and settings["config"]["gamma"] == 0.4
    assert settings["client_model"]["client_training"] == "fedreg-mg"


def test_defence_specs():
    assert isinstance(parse_defence("fedavg"), FedAvgRelease)
    assert parse_defence("fedprox").proximal_mu > 0
    assert parse_defence("dpsgd:1e-2") == DPSGDRelease(noise_multiplier=1e-2)
    assert isinstance(parse_defence("fedreg-mg", {"pseudo_step": 0.03}), FedRegMGRelease)
    for spec, message in [("dpsgd:lots", "must be a number"), ("fedsgd:3", "unknown defence"), ("secure-agg", "unknown defence")]:
        with pytest.raises(InvalidParameterError, match=message):
            parse_defence(spec)
    with pytest.raises(InvalidParameterError, match="bad options"):
        parse_defence("fedavg", {"momentum": 0.9})


def test_bad_experiment_settings():
    with pytest.raises(InvalidParameterError, match="unknown attack"):
        InversionExperiment(attack="magic")
    with pytest.raises(InvalidParameterError, match="multiple of examples_per_update"):
        InversionExperiment(num_images=3, examples_per_update=2)
    with pytest.raises(InvalidParameterError, match="first trainable layer is Conv2d"):
        run_inversion(InversionExperiment(attack="analytic", dataset="images", model="convnet"))
