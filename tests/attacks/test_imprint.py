"""Imprint attack (Fowl et al., ICLR 2022): a malicious server's block separates a batch in one FedSGD update."""

from __future__ import annotations

import json

import pytest
import torch

from attacks.inversion import (
    FedAvgRelease,
    FedSGDRelease,
    InversionExperiment,
    build_attack,
    release_update,
    run_inversion,
)
from attacks.inversion.imprint import MALICIOUS_SERVER, expected_separated, signal_threshold
from attacks.inversion.imprint_block import ImprintedModel, design_imprint
from attacks.inversion.threat_model import DataSpec
from privaudit.errors import InvalidParameterError
from tests.attacks.toy_models import fc_first, seeded_weights

GREY_6 = DataSpec((1, 6, 6), 2)


def _toy_batch() -> tuple[torch.Tensor, torch.Tensor]:
    """Three images: two dark ones (brightness 0.10 and 0.12, one bin) and a bright one (0.90, its own bin)."""
    texture = torch.rand((3, 1, 6, 6), generator=torch.Generator().manual_seed(1)) * 0.1
    texture = texture - texture.mean(dim=(1, 2, 3), keepdim=True)
    x = torch.tensor([0.10, 0.12, 0.90]).reshape(3, 1, 1, 1) + texture
    return x, torch.tensor([0, 1, 1])


def _toy_attack(**options):
    attack = build_attack("imprint", bins=4, **options)
    factory = lambda: fc_first((1, 6, 6), hidden=16, classes=2)  # noqa: E731
    public = torch.rand((64, 1, 6, 6), generator=torch.Generator().manual_seed(2))  # brightness ≈ 0.5 ± 0.05
    server = attack.modify_model(factory, seeded_weights(factory, 0), GREY_6, public)
    return attack, server


def test_a_lone_image_is_exact_and_two_images_in_one_bin_give_their_weighted_mean():
    attack, server = _toy_attack()
    x, y = _toy_batch()
    assert server.design.occupancy(x) == {"inputs": 3, "bins_with_inputs": 2, "inputs_alone_in_a_bin": 1,
                                          "inputs_below_every_bin": 0}
    result = attack.reconstruct(release_update(FedSGDRelease(), server.factory, server.weights, x, y, GREY_6))
    notes = result.settings
    # 2 non-empty bins for 3 images: the attacker can prove 1 separated; one reconstruction repeats a row
    assert notes["bins_with_images"] == 2 and notes["examples_separated"] == 1 and notes["reconstructions_filled"] == 1
    assert notes["threat_model"]["server"] == MALICIOUS_SERVER and notes["threat_model"]["num_examples"] == 3
    images = result.images.reshape(3, -1).double()
    flat = x.reshape(3, -1).double()
    errors = torch.cdist(images, flat)
    bright = int(errors[:, 2].argmin())
    assert errors[bright, 2] < 1e-4 * flat[2].norm()  # exact
    solutions = torch.linalg.lstsq(flat[:2].T.expand(3, -1, -1), images[:, :, None]).solution[..., 0]
    residuals = (solutions @ flat[:2] - images).norm(dim=1)
    mixed_row = int(residuals.argmin())  # the row in the span of the two dark images (not the bright one, not the fill)
    mixed, coefficients, residual = images[mixed_row], solutions[mixed_row], residuals[mixed_row]
    assert mixed_row != bright
    assert residual < 1e-4 * mixed.norm() and coefficients.sum() == pytest.approx(1.0, abs=1e-4)  # a weighted mean …
    assert errors[:, :2].min() > 1e-3 * flat[0].norm() and coefficients.abs().min() > 1e-3  # … of both, equal to neither


def test_a_batch_of_eight_lfw_images_in_one_fedsgd_update_is_recovered_exactly():
    """Measured (seed 0, convnet, 128 bins): all 8 images alone in a bin, PSNR 126–166 dB; a mixed row scores < 25 dB."""
    run = run_inversion(InversionExperiment(attack="imprint", defence="fedsgd", dataset="lfw", model="convnet", num_images=8,
                                            examples_per_update=8, attack_options={"bins": 128}))
    (update,) = run.updates
    assert update["server_ground_truth"]["inputs_alone_in_a_bin"] == 8
    assert update["attack"]["settings"]["examples_separated"] == 8
    assert min(run.psnr) > 80.0
    assert run.server["behaviour"] == MALICIOUS_SERVER and run.server["bins"] == 128


def test_fewer_bins_mix_images_and_the_attacker_undercounts_never_overcounts():
    """digits, 16 images in one update, 32 bins, seed 3: here the images alone in a bin are the ones that come back
    exact after matching (the matching can break this: see the lfw test below)."""
    run = run_inversion(InversionExperiment(attack="imprint", defence="fedsgd", dataset="digits", model="upcycled-mlp",
                                            num_images=16, examples_per_update=16, attack_options={"bins": 32},
                                            seed=3))
    (update,) = run.updates
    alone = update["server_ground_truth"]["inputs_alone_in_a_bin"]
    exact = sum(p > 80.0 for p in run.psnr)
    assert 0 < alone < 16 and exact == alone == update["server_ground_truth"]["inputs_with_a_row_at_40_db"]
    assert update["attack"]["settings"]["examples_separated"] <= alone
    assert max(p for p in run.psnr if p <= 80.0) < 40.0  # mixed rows are not reconstructions
    assert update["attack"]["settings"]["expected_separated"] == pytest.approx(expected_separated(16, 32))


def test_the_minimum_mse_matching_can_give_a_lone_images_row_to_another_and_the_truth_records_it():
    """lfw, 16 images, 32 bins, seed 3 (measured): 10 images alone, 10 have a ≥ 40 dB row, 9 keep it after matching."""
    run = run_inversion(InversionExperiment(attack="imprint", defence="fedsgd", dataset="lfw", model="upcycled-mlp",
                                            num_images=16, examples_per_update=16, attack_options={"bins": 32}, seed=3))
    (update,) = run.updates
    truth = update["server_ground_truth"]
    matched = sum(p >= 40.0 for p in run.psnr)
    assert truth["inputs_alone_in_a_bin"] == truth["inputs_with_a_row_at_40_db"] > matched


def test_several_local_steps_are_flagged_approximate_and_nothing_is_claimed_proven():
    attack, server = _toy_attack()
    x, y = _toy_batch()
    payload = release_update(FedAvgRelease(lr=0.01, local_steps=4), server.factory, server.weights, x, y, GREY_6)
    settings = attack.reconstruct(payload).settings
    assert "approximate" in settings
    assert settings["examples_separated"] is None
    assert settings["examples_separated_reason"] == "not provable: the bins move during local training"


def test_the_cli_note_claims_a_proof_only_for_fixed_bins_and_exactness_only_for_a_gradient():
    from attacks.inversion.outcome_rows import separation_note

    row = {"images": 8, "alone_in_a_bin": 8, "separated_expected": 7.6, "separated_guaranteed": 8, "approximate": False,
           "approximate_reason": None, "update_kind": "gradient"}
    assert "can prove 8" in separation_note([row]) and "with a FedSGD gradient their rows are exact" in separation_note([row])
    delta = {**row, "update_kind": "delta"}
    assert "FedSGD" not in separation_note([delta]) and "encoder scale" in separation_note([delta])
    steps = {**delta, "separated_guaranteed": None, "approximate": True, "approximate_reason": "multi-step update"}
    note = separation_note([steps])
    assert "can prove" not in note and "not provable" in note and "approximate (multi-step update)" in note


def test_a_one_step_delta_with_encoder_scale_one_is_flagged_approximate():
    """lfw, 8 images, 128 bins, lr 0.01, seed 0, λ = 1: the bias change is about one float32 ulp; 0/8 rows ≥ 40 dB."""
    run = run_inversion(InversionExperiment(attack="imprint", defence="fedavg", defence_options={"lr": 0.01, "local_steps": 1},
                                            dataset="lfw", model="upcycled-mlp", num_images=8, examples_per_update=8,
                                            attack_options={"bins": 128, "encoder_scale": 1.0}))
    (update,) = run.updates
    settings = update["attack"]["settings"]
    assert max(run.psnr) < 40.0 and update["server_ground_truth"]["inputs_alone_in_a_bin"] == 8
    assert "not resolvable" in settings["approximate"]
    assert settings["examples_separated"] <= 8


def test_one_outlier_bin_does_not_hide_the_others():
    """lfw, lr 0.1, 4 local steps, seed 1: one bin's difference is ~2·10⁴ times the next; all 8 images are alone."""
    strength = torch.tensor([624.0, 3e-2, 2.7e-2, 6e-3, 5e-3, 4.6e-3, 3.3e-3, 2e-3, 1.9e-9, 1.9e-9, 0.0])
    floor = torch.full_like(strength, 1e-8)
    assert int(signal_threshold(strength, floor, 8, 1e-4).sum()) == 8
    run = run_inversion(InversionExperiment(attack="imprint", defence="fedavg", defence_options={"lr": 0.1, "local_steps": 4},
                                            dataset="lfw", model="upcycled-mlp", num_images=8, examples_per_update=8,
                                            attack_options={"bins": 128}, seed=1))
    (update,) = run.updates
    settings = update["attack"]["settings"]
    assert update["server_ground_truth"]["inputs_alone_in_a_bin"] == 8
    assert settings["bins_with_images"] == 8 and settings["bins_below_threshold"] > 0  # the relative-to-max rule kept 1
    assert sum(p >= 40.0 for p in run.psnr) >= 4  # measured 5 (0 with the old rule)


@pytest.mark.parametrize("scale", [1.0, 0.01])
def test_the_modified_model_runs_the_users_model_on_an_input_shifted_by_at_most_output_scale(scale):
    """‖shift‖ = ‖v‖ Σᵢ ReLU(s − cᵢ) ≤ output_scale · (s − c₁), and brightness s ≤ 1 on [0, 1] data."""
    _, server = _toy_attack(output_scale=scale)
    model = server.factory()
    model.load_state_dict(server.weights)
    assert isinstance(model, ImprintedModel)
    x, _ = _toy_batch()
    shift = (model.imprint(x) - x).detach().reshape(3, -1).norm(dim=1)
    assert torch.all(shift > 0) and torch.all(shift <= scale * (1 + 1e-5))
    assert model(x).shape == (3, 2)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"bins": 1}, "imprint bins must be an integer in [2, 65536], got 1"),
        ({"bins": 2.5}, "imprint bins must be an integer"),
        ({"statistic": "median"}, "unknown imprint statistic 'median'; choose one of: brightness, random"),
        ({"distribution": "uniform"}, "unknown imprint distribution 'uniform'"),
        ({"output_scale": 0.0}, "imprint output_scale must be positive and finite"),
        ({"min_signal": 1.0}, "imprint min_signal must lie in [0, 1)"),
    ],
)
def test_bad_configurations_are_one_line_errors(options, message):
    with pytest.raises(InvalidParameterError) as info:
        build_attack("imprint", **options)
    assert message in str(info.value) and "\n" not in str(info.value)


def test_an_update_of_an_unmodified_model_and_a_too_small_public_sample_are_refused():
    factory = lambda: fc_first((1, 6, 6), hidden=16, classes=2)  # noqa: E731
    x, y = _toy_batch()
    payload = release_update(FedSGDRelease(), factory, seeded_weights(factory, 0), x, y, GREY_6)
    with pytest.raises(InvalidParameterError, match="needs an update computed on the server's modified model"):
        build_attack("imprint").reconstruct(payload)
    with pytest.raises(InvalidParameterError, match="needs at least 128 public inputs, got 64"):
        design_imprint(GREY_6, torch.rand(64, 1, 6, 6), bins=128, distribution="empirical")


def test_cli_runs_the_imprint_attack_and_records_the_malicious_server(capsys, tmp_path):
    from privaudit.cli.app import main
    from privaudit.report.results import read_result

    code = main(["attack", "inversion", "--dataset", "lfw", "--model", "upcycled-mlp", "--attack", "imprint", "--defense",
                 "fedsgd", "--images", "8", "--per-update", "4", "--bins", "64", "--quiet", "--json", "--out", str(tmp_path / "imp")])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    data = read_result(tmp_path / "imp" / "inversion.json").data
    assert json.loads(captured.out)["server"] == data["server"] and data["attack"] == "imprint"
    assert data["server"]["behaviour"] == MALICIOUS_SERVER and data["server"]["bins"] == 64
    assert data["examples_per_update"] == 4 and len(data["psnr"]) == 8 and len(data["separation"]) == 2
    assert all(row["separated_guaranteed"] <= row["alone_in_a_bin"] <= 4 for row in data["separation"])
    assert any(note.startswith("imprint: ") for note in data["notes"])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--attack", "ig", "--bins", "8"], "--bins applies to the imprint attack, not ig"),
        (["--attack", "imprint", "--bins", "1"], "--bins must be at least 2"),
        (["--attack", "imprint", "--bins", "70000"], "imprint bins must be an integer in [2, 65536], got 70000"),
        (["--attack", "imprint", "--per-update", "0"], "--per-update must be at least 1"),
        (["--attack", "imprint", "--images", "6", "--per-update", "4"], "--images (6) must be a multiple of --per-update (4)"),
        (["--attack", "imprint", "--checkpoint", "nowhere", "--client", "0", "--round", "1"], "the imprint attack needs a server"),
    ],
)
def test_cli_refuses_bad_imprint_options_in_one_line(capsys, monkeypatch, args, message):
    import privaudit.data
    from privaudit.cli.app import main

    def no_loading(*_args, **_kwargs):
        raise AssertionError("the dataset was loaded before the options were checked")

    monkeypatch.setattr(privaudit.data, "load_dataset", no_loading)

    base = ["attack", "inversion", "--quiet"] + ([] if "--checkpoint" in args else ["--dataset", "lfw"])
    code = main([*base, *args])
    err = capsys.readouterr().err
    assert code == 2 and message in err and err.strip().count("\n") == 0
