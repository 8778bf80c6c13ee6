"""The inversion evidence script (``python -m privaudit.papers.fedreg.inversion_evidence``): plan, ε column, outputs."""

from __future__ import annotations

import pytest

from attacks.inversion.experiment import defence_epsilon, parse_defence
from privaudit.accounting.gaussian import gaussian_epsilon
from privaudit.papers.fedreg import inversion_evidence as evidence
from privaudit.report.results import read_result


def test_plan_covers_every_defence_with_both_attacks_and_the_adaptive_one():
    cells = evidence.plan(["digits"], 4, 2)
    labels = {d.label for d in evidence.defences()}
    assert {c.defence.label for c in cells if c.attack == "analytic"} == labels
    assert {c.defence.label for c in cells if c.attack == "ig"} == labels
    adaptive = [c for c in cells if c.attack == "adaptive-mg" and c.model == evidence.IG_MODEL]
    # the same adaptive attack on plain FedReg and on FedReg+MG, so the difference between the two is MG's
    assert [(c.defence.spec, c.labels_known) for c in adaptive] == [
        ("fedreg", False), ("fedreg", True), ("fedreg-mg", False), ("fedreg-mg", True)]
    assert all(c.images == 2 for c in adaptive)
    fc = [c for c in cells if c.attack == "adaptive-mg" and c.model == evidence.ANALYTIC_MODEL]
    assert [(c.defence.spec, c.labels_known) for c in fc] == [("fedreg", True), ("fedreg-mg", True)]
    assert not [c for c in evidence.plan(["images"], 4, 2) if c.attack == "adaptive-mg" and c.model != evidence.IG_MODEL]
    assert sorted(d.sigma for d in evidence.defences() if d.sigma is not None) == list(evidence.SIGMAS)


def test_epsilon_column_is_the_gaussian_mechanism_of_one_full_batch_step():
    for sigma in evidence.SIGMAS:
        defence = parse_defence(f"dpsgd:{sigma:g}", {"local_steps": 1})
        assert defence_epsilon(defence, 1e-5) == pytest.approx(gaussian_epsilon(1.0 / sigma, 1e-5), rel=1e-3)
    assert defence_epsilon(parse_defence("dpsgd:0.1", {"local_steps": 4}), 1e-5) == pytest.approx(
        gaussian_epsilon(2.0 / 0.1, 1e-5), rel=1e-3)  # 4 full-batch steps compose to μ = √4/σ
    for spec in ("fedavg", "fedreg", "fedreg-mg", "fedsgd"):
        assert defence_epsilon(parse_defence(spec), 1e-5) is None


def test_fedreg_spec_switches_the_modified_gradient_off():
    plain, mg = parse_defence("fedreg", {"gamma": 0.3}), parse_defence("fedreg-mg")
    assert plain.name == "fedreg" and not plain.use_modified_gradient and plain.gamma == 0.3
    assert mg.use_modified_gradient


def test_the_first_k_images_of_a_run_equal_a_run_on_k_images():
    dp = next(d for d in evidence.defences() if d.sigma == 1e-2)
    long = evidence.run_cell(evidence.Cell("digits", dp, "analytic", "analytic", "upcycled-mlp", 2), 1, 0, None)
    short = evidence.run_cell(evidence.Cell("digits", dp, "analytic", "analytic", "upcycled-mlp", 1), 1, 0, None)
    assert long.first(1).psnr == pytest.approx(short.psnr) and long.first(1).ssim == pytest.approx(short.ssim)
    assert long.first(1).reconstructions.equal(short.reconstructions)


def test_main_writes_the_result_file_grids_and_page(tmp_path):
    assert evidence.main(["--images", "1", "--adaptive-images", "1", "--iterations", "2", "--datasets", "digits",
                          "--out-dir", str(tmp_path), "--quiet"]) == 0
    result = read_result(tmp_path / "evidence" / "inversion.json")
    assert result.kind == "inversion-evidence" and result.data["settings"]["iterations"] == 2
    assert set(result.inputs) == {"inversion-digits", "inversion-digits-adaptive"}  # the grids, declared
    records = result.data["records"]
    assert len(records) == 20
    informed = [r for r in records if r["labels_known"]]
    assert [(r["defence"], r["attack"], r["model"]) for r in informed] == [
        ("FedReg", "adaptive (labels known)", "convnet"), ("FedReg+MG", "adaptive (labels known)", "convnet"),
        ("FedReg", "adaptive (labels known)", "upcycled-mlp"), ("FedReg+MG", "adaptive (labels known)", "upcycled-mlp")]
    assert all(r["label_accuracy"] == 1.0 and len(r["matching_loss"]) == 1 for r in informed)
    # the header and the provenance name the command line that ran, not one rebuilt from the settings
    ran = ("python -m privaudit.papers.fedreg.inversion_evidence --images 1 --adaptive-images 1 --iterations 2 "
           f"--datasets digits --out-dir {tmp_path} --quiet")
    assert result.provenance["command"] == ran
    anatomy = result.data["update_anatomy"]
    assert [a["defence_label"] for a in anatomy] == ["FedReg", "FedReg+MG"]
    assert all(abs(v) < 1e-6 for a in anatomy for v in a["simulation_one_minus_cos"])  # the attacker's model is exact
    required = {"defence", "sigma", "epsilon", "attack", "dataset", "psnr_mean", "ssim_mean", "label_accuracy"}
    assert all(required <= set(r) for r in records)
    dp = [r for r in records if r["sigma"] is not None]
    assert len(dp) == 8 and all(isinstance(r["epsilon"], float) and r["epsilon"] > 0 for r in dp)
    assert all(r["epsilon"] == evidence.NO_DP for r in records if r["sigma"] is None)
    report = (tmp_path / "inversion.md").read_text()
    assert "ε (δ = 1e-5)" in report and "adaptive (labels known)" in report and "## Reading" in report
    assert f"`{ran}`" in report.splitlines()[2]
    assert "![inversion-digits-adaptive.png](inversion-digits-adaptive.png)" in report
    assert (tmp_path / "inversion-digits.png").exists() and (tmp_path / "inversion-digits-adaptive.png").exists()


def test_update_anatomy_separates_the_regulariser_from_sgd():
    from privaudit.papers.fedreg.update_anatomy import update_anatomy

    options = {**evidence.LOCAL, **evidence.FEDREG}
    plain = update_anatomy("digits", "fedreg", options, evidence.IG_MODEL, 1, 0)
    assert abs(plain["simulation_one_minus_cos"][0]) < 1e-6  # simulation on the true example = the release
    assert 0 < plain["norm_ratio_to_sgd"][0] < 0.5 and plain["one_minus_cos_to_sgd"][0] > 0.5  # eq. (10) removes most
    assert plain["idlg_correct_sgd"] == [True]


def test_reading_attributes_the_drop_to_the_regulariser_and_the_rest_to_mg():
    from privaudit.report.evidence.inversion import _fedreg_sentences

    def record(defence, attack, psnr, loss=None):
        return {"defence": defence, "attack": attack, "psnr": [psnr], "images": 1, "matching_loss": [loss]}

    rows = [record("FedReg", "ig (naive)", 6.0), record("FedReg+MG", "ig (naive)", 5.0),
            record("FedReg", "adaptive (labels known)", 8.0, 0.05), record("FedReg+MG", "adaptive (labels known)", 7.5)]
    anatomy = {label: {"simulation_one_minus_cos": [0.0], "norm_ratio_to_sgd": [0.1], "one_minus_cos_to_sgd": [0.9],
                       "idlg_correct_released": [False], "idlg_correct_sgd": [True]} for label in ("FedReg", "FedReg+MG")}
    text = " ".join(_fedreg_sentences(rows, anatomy, lambda r, first=None: r["psnr"][0], {"psnr": [30.0]}))
    assert "FedAvg → plain FedReg (the regulariser): -24.0 dB" in text
    assert "plain FedReg → FedReg+MG (MG): -1.0 dB" in text
    assert "MG's measured effect under this attack is -0.5 dB" in text
    assert "does not invert plain FedReg" in text and "wrong labels there are FedReg's, not MG's" in text
