"""The inversion evidence (``python benchmarks/evidence_inversion.py``): plan, ε column, outputs, the page's reading."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

from attacks.inversion.experiment import defence_epsilon, parse_defence
from privaudit.accounting.gaussian import gaussian_epsilon
from privaudit.papers.fedreg import inversion_evidence as evidence
from privaudit.papers.fedreg.inversion_reading import fedreg_sentences, mg_rows, mg_summary
from privaudit.report.results import read_result

ROOT = Path(__file__).resolve().parents[3]


def _script():
    """``benchmarks/evidence_inversion.py``, the command that runs the evidence (its argument parsing only)."""
    folder = str(ROOT / "benchmarks")
    if folder not in sys.path:
        sys.path.insert(0, folder)
    return importlib.import_module("evidence_inversion")


def test_plan_covers_every_defence_with_both_attacks_and_the_adaptive_one():
    cells = evidence.plan(["digits"], 4, 2)
    labels = {d.label for d in evidence.defences()}
    assert {c.defence.label for c in cells if c.attack == "analytic"} == labels
    assert {c.defence.label for c in cells if c.attack == "ig"} == labels
    adaptive = [c for c in cells if c.attack == "adaptive-mg" and c.model == evidence.IG_MODEL and c.variant is None]
    # the same adaptive attack on plain FedReg and on FedReg+MG, so the difference between the two is MG's
    assert [(c.defence.spec, c.labels_known) for c in adaptive] == [
        ("fedreg", False), ("fedreg", True), ("fedreg-mg", False), ("fedreg-mg", True)]
    assert all(c.images == 2 for c in adaptive)
    fc = [c for c in cells if c.attack == "adaptive-mg" and c.model == evidence.ANALYTIC_MODEL and c.variant is None]
    assert [(c.defence.spec, c.labels_known) for c in fc] == [("fedreg", True), ("fedreg-mg", True)]
    assert not [c for c in evidence.plan(["images"], 4, 2)
                if c.attack == "adaptive-mg" and c.model != evidence.IG_MODEL and c.variant is None]
    # the adaptive attacks that try to invert plain FedReg: every variant on FedReg and FedReg+MG, on every dataset
    strong = [c for c in cells if c.variant is not None]
    assert strong == evidence.plan(["digits"], 4, 2, adaptive_only=True)
    for variant, spec in evidence.STRONG_ADAPTIVE.items():
        mine = [c for c in strong if c.variant == variant]
        assert [(c.defence.spec, c.labels_known) for c in mine] == [
            (d, k) for d in ("fedreg", "fedreg-mg") for k in spec.labels_known]
        assert all(c.model == spec.model and evidence.attack_options(c) == spec.options for c in mine)
        assert all(c.images == (4 if spec.all_images else 2) for c in mine)
    assert evidence.STRONG_ADAPTIVE["adaptive, analytic start"].options["start"] == "analytic"
    assert evidence.STRONG_ADAPTIVE["adaptive, continuation"].options["smooth_temperature"] > 0
    only = evidence.plan(["digits"], 4, 2, adaptive_only=True, variants=["adaptive, analytic start"])
    assert only == [c for c in strong if c.variant == "adaptive, analytic start"]
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
    assert _script().main(["--images", "1", "--adaptive-images", "1", "--iterations", "2", "--datasets", "digits",
                           "--out-dir", str(tmp_path), "--quiet"]) == 0
    result = read_result(tmp_path / "evidence" / "inversion.json")
    assert result.kind == "inversion-evidence" and result.data["settings"]["iterations"] == 2
    assert set(result.inputs) == {"inversion-digits", "inversion-digits-adaptive", "inversion-digits-analytic-start",
                                  "inversion-digits-continuation"}
    records = result.data["records"]
    strong = [r for r in records if r.get("variant")]
    assert len(records) == 20 + len(strong) and len(strong) == len(evidence.plan(["digits"], 1, 1, adaptive_only=True))
    assert all(r["attack_options"] == evidence.STRONG_ADAPTIVE[r["variant"]].options for r in strong)  # settings recorded
    records = [r for r in records if not r.get("variant")]
    informed = [r for r in records if r["labels_known"]]
    assert [(r["defence"], r["attack"], r["model"]) for r in informed] == [
        ("FedReg", "adaptive (labels known)", "convnet"), ("FedReg+MG", "adaptive (labels known)", "convnet"),
        ("FedReg", "adaptive (labels known)", "upcycled-mlp"), ("FedReg+MG", "adaptive (labels known)", "upcycled-mlp")]
    assert all(r["label_accuracy"] == 1.0 and len(r["matching_loss"]) == 1 for r in informed)
    # the header and the provenance name the command line that ran, not one rebuilt from the settings
    ran = ("python benchmarks/evidence_inversion.py --images 1 --adaptive-images 1 --iterations 2 "
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


def test_adaptive_only_reruns_the_strong_rows_and_keeps_every_other(tmp_path):
    common = ["--images", "1", "--adaptive-images", "1", "--iterations", "2", "--datasets", "digits",
              "--out-dir", str(tmp_path), "--quiet"]
    assert _script().main(common) == 0
    before = read_result(tmp_path / "evidence" / "inversion.json").data["records"]
    assert _script().main([*common, "--iterations", "3", "--adaptive-only", "--variants", "analytic-start"]) == 0
    result = read_result(tmp_path / "evidence" / "inversion.json")
    after = result.data["records"]
    seeded = "adaptive, analytic start"
    assert [r for r in after if r.get("variant") != seeded] == [r for r in before if r.get("variant") != seeded]
    fresh = [r for r in after if r.get("variant") == seeded]
    assert len(fresh) == len([r for r in before if r.get("variant") == seeded]) and all(r["iterations"] == 3 for r in fresh)
    rerun = result.data["settings"]["adaptive_reruns"]
    assert len(rerun) == 1 and "--adaptive-only" in rerun[0]["command"] and list(rerun[0]["strong_adaptive"]) == [seeded]
    assert result.provenance["command"].endswith("--quiet")  # the full run's provenance stays
    assert _script().main([*common, "--adaptive-only", "--variants", "analytic-start", "--datasets", "digits"]) == 0
    reruns = read_result(tmp_path / "evidence" / "inversion.json").data["settings"]["adaptive_reruns"]
    assert len(reruns) == 1 and reruns[0]["iterations"] == 2  # the superseded re-run is no longer listed
    page = (tmp_path / "inversion.md").read_text()
    assert "--adaptive-only" in page.splitlines()[2] and "adaptive, analytic start (labels known)" in page


def test_adaptive_only_refuses_a_missing_result_file_before_any_work(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        _script().main(["--adaptive-only", "--out-dir", str(tmp_path), "--quiet"])
    assert exit_info.value.code == 2
    assert "merges into an existing result file" in capsys.readouterr().err


def test_update_anatomy_separates_the_regulariser_from_sgd():
    from privaudit.papers.fedreg.update_anatomy import update_anatomy

    options = {**evidence.LOCAL, **evidence.FEDREG}
    plain = update_anatomy("digits", "fedreg", options, evidence.IG_MODEL, 1, 0)
    assert abs(plain["simulation_one_minus_cos"][0]) < 1e-6  # simulation on the true example = the release
    assert 0 < plain["norm_ratio_to_sgd"][0] < 0.5 and plain["one_minus_cos_to_sgd"][0] > 0.5  # eq. (10) removes most
    assert plain["idlg_correct_sgd"] == [True]


def test_reading_attributes_the_drop_to_the_regulariser_and_the_rest_to_mg():
    def record(defence, attack, psnr, loss=None):
        return {"defence": defence, "attack": attack, "psnr": [psnr], "images": 1, "matching_loss": [loss]}

    rows = [record("FedReg", "ig (naive)", 6.0), record("FedReg+MG", "ig (naive)", 5.0),
            record("FedReg", "adaptive (labels known)", 8.0, 0.05), record("FedReg+MG", "adaptive (labels known)", 7.5)]
    anatomy = {label: {"simulation_one_minus_cos": [0.0], "norm_ratio_to_sgd": [0.1], "one_minus_cos_to_sgd": [0.9],
                       "idlg_correct_released": [False], "idlg_correct_sgd": [True]} for label in ("FedReg", "FedReg+MG")}
    text = " ".join(fedreg_sentences(rows, anatomy, lambda r, first=None: r["psnr"][0], {"psnr": [30.0]}))
    assert "FedAvg → plain FedReg (the regulariser): -24.0 dB" in text
    assert "plain FedReg → FedReg+MG (MG): -1.0 dB" in text
    assert "MG's measured effect under this attack is -0.5 dB" in text
    assert "does not invert plain FedReg" in text and "wrong labels there are FedReg's, not MG's" in text


def test_reading_states_what_mg_adds_only_under_an_attack_that_inverts_plain_fedreg():
    def record(defence, variant, psnr, known=True):
        return {"defence": defence, "attack": variant + (" (labels known)" if known else ""), "psnr": psnr, "images": len(psnr),
                "model": "upcycled-mlp", "variant": variant, "iterations": 300, "label_accuracy": 1.0, "matching_loss": [0.01],
                "attack_options": {"start": "analytic", "lr": 1e-3, "tv_weight": 0.0, "keep_best_iterate": True}}

    rows = [record("FedReg", "adaptive, analytic start", [40.0, 30.0]),
            record("FedReg+MG", "adaptive, analytic start", [25.0, 15.0]),
            record("FedReg", "adaptive, continuation", [8.0, 25.0]), record("FedReg+MG", "adaptive, continuation", [9.0, 9.0])]
    text = " ".join(fedreg_sentences(rows, {}, lambda r, first=None: sum(r["psnr"]) / len(r["psnr"]), None))
    assert "plain FedReg 35.0 dB (40.0 / 30.0), FedReg+MG 20.0 dB (25.0 / 15.0)" in text
    assert "what MG adds against this attack: stops the attack on 1/2 image(s) (Δ -15.0 dB)" in text
    assert "It does not invert plain FedReg (1/2 image(s) ≥ 20 dB" in text and "is no measure of MG's protection" in text
    assert "closed-form first-layer recovery" in text
    for row in rows:
        row["dataset"] = "digits"
    table = {tuple(r[:2]): r[5:] for r in mg_rows(rows)}
    assert table[("digits", "adaptive, analytic start (labels known)")] == [
        "2/2", "1/2", "stops the attack on 1/2 image(s) (Δ -15.0 dB)"]
    assert table[("digits", "adaptive, continuation (labels known)")][2].startswith("not measured")
    assert "MG stops it on 1/2 (digits" in " ".join(mg_summary(rows))
