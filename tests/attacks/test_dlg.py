"""DLG: ≥ 40 dB on the small CNN's single-image FedSGD update, labels (known, inferred, joint), best iterate."""

import functools

import pytest
import torch
from torch import nn

from attacks.inversion import ClientKnowledge, FedSGDRelease, InversionPayload, build_attack, release_update
from attacks.inversion.client_simulation import plain_simulator
from attacks.inversion.functional_model import FunctionalModel, one_hot
from attacks.inversion.lbfgs_descent import LBFGSSettings
from attacks.inversion.objectives import squared_l2_distance
from attacks.metrics import score_reconstruction
from privaudit.errors import InvalidParameterError
from tests.attacks.toy_models import COLOUR_8, seeded_weights, small_cnn, unit_images


def _case(seed=0, label=3, labels_known=False):
    """The single-image FedSGD update Inverting Gradients attacks in test_inverting_gradients.py (seed 0)."""
    truth = unit_images(1, COLOUR_8, seed)
    payload = release_update(FedSGDRelease(), small_cnn, seeded_weights(small_cnn, seed), COLOUR_8.from_unit_range(truth),
                             torch.tensor([label]), COLOUR_8, labels_known=labels_known)
    return truth, payload


def _psnr(truth, result):
    return score_reconstruction(truth, COLOUR_8.to_unit_range(result.images)).psnr[0]


def _matching_loss(payload, images, label):
    model = FunctionalModel.from_payload(payload, "cpu", torch.float32)
    simulated = plain_simulator(payload.knowledge).simulate(model, images, one_hot(torch.tensor([label]), 10), create_graph=False)
    return float(squared_l2_distance(simulated, payload.update))


def test_dlg_reaches_40_db_on_the_small_cnn_update():
    # Attack seed 7 reaches the exact solution within 100 outer steps (~1,500 evaluations, a few seconds);
    # the slow test in test_quality_targets.py runs seeds 0–5 with the default 300 steps.
    truth, payload = _case()
    result = build_attack("dlg", steps=100).reconstruct(payload, seed=7)
    assert _psnr(truth, result) >= 40.0
    assert result.labels.tolist() == [3]
    assert result.settings["label_strategy"] == "idlg"
    assert result.settings["label_strategy_requested"] == "auto"
    assert result.settings["optimizer"]["name"] == "L-BFGS"
    assert result.settings["optimizer"]["line_search_fn"] is None
    assert result.settings["optimizer"]["lr"] == 0.25
    solved = 1e-8 * sum(float((t**2).sum()) for t in payload.update.values())
    assert result.matching_loss <= solved  # so no further fresh start was spent
    assert result.settings["function_evaluations"] < 100 * 20


def test_known_labels_stay_fixed_and_only_the_image_is_optimised():
    _, payload = _case(label=3)
    # The attacker is told label 5 although the update came from label 3: a joint or inferred label would
    # drift to 3, a fixed one stays 5, and the matching loss is the loss of the image under label 5.
    told = InversionPayload(payload.model_factory, payload.global_weights, payload.update, payload.data,
                            ClientKnowledge(num_examples=1, labels=(5,)))
    result = build_attack("dlg", steps=5, clamp_final=False).reconstruct(told, seed=0)
    assert result.labels.tolist() == [5]
    assert result.settings["label_strategy"] == "given"
    assert result.settings["threat_model"]["labels_known"] is True
    assert result.matching_loss == pytest.approx(_matching_loss(told, result.images, 5), rel=1e-5)
    assert result.matching_loss != pytest.approx(_matching_loss(told, result.images, 3), rel=1e-3)


def test_true_known_labels_are_used_as_given():
    _, payload = _case(labels_known=True)
    result = build_attack("dlg", steps=2).reconstruct(payload, seed=0)
    assert result.settings["label_strategy"] == "given"
    assert result.labels.tolist() == [3]


def test_joint_labels_refuse_a_payload_whose_labels_are_known():
    _, payload = _case(labels_known=True)
    with pytest.raises(InvalidParameterError, match="would ignore the labels the attacker knows"):
        build_attack("dlg", label_strategy="joint", steps=1).reconstruct(payload)


def test_joint_labels_are_optimised_and_recorded():
    _, payload = _case(seed=1)
    result = build_attack("dlg", label_strategy="joint", steps=3).reconstruct(payload, seed=0)
    assert result.settings["label_strategy"] == "joint"
    assert result.labels.shape == (1,)


def test_auto_labels_fall_back_to_joint_without_a_linear_logit_layer():
    factory = functools.partial(nn.Sequential, nn.Conv2d(3, 10, 8), nn.Flatten())
    payload = release_update(FedSGDRelease(), factory, seeded_weights(factory, 0), torch.rand(1, 3, 8, 8), torch.tensor([0]),
                             COLOUR_8)
    result = build_attack("dlg", steps=2).reconstruct(payload, seed=0)
    assert result.settings["label_strategy"] == "joint"
    assert "final nn.Linear" in result.settings["label_note"]


def test_the_returned_candidate_is_the_best_evaluated_one_not_the_last():
    _, payload = _case()
    result = build_attack("dlg", steps=10, clamp_final=False).reconstruct(payload, seed=0)
    # fixed-step L-BFGS is not monotone: the last outer step's loss is above the best one seen
    assert result.loss_trace[-1] > result.matching_loss
    assert result.matching_loss <= min(result.loss_trace)
    assert result.matching_loss == pytest.approx(_matching_loss(payload, result.images, 3), rel=1e-5)


def test_a_step_to_infinity_restarts_from_the_best_candidate():
    _, payload = _case()
    result = build_attack("dlg", steps=4, lr=1e6).reconstruct(payload, seed=0)
    assert all(d["memory_restarts"] >= 1 for d in result.settings["descents"])
    assert torch.isfinite(result.images).all()
    assert result.matching_loss < float("inf")


def test_dlg_is_reproducible_for_a_seed():
    _, payload = _case(seed=2)
    attack = build_attack("dlg", steps=5)
    a, b = attack.reconstruct(payload, seed=3), attack.reconstruct(payload, seed=3)
    assert torch.equal(a.images, b.images)
    assert a.matching_loss == b.matching_loss


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"patience": 0}, r"patience .*must be an integer in \[1, 1,000,000\], got 0"),
        ({"lr": 0.0}, "lr must be positive"),
        ({"steps": 0}, r"steps must be an integer in \[1, 1,000,000\]"),
        ({"solved_relative_loss": -1.0}, "solved_relative_loss must be non-negative"),
        ({"init": "zeros"}, "unknown DLG init 'zeros'"),
        # non-finite and absurd settings (attacks.inversion.limits): refused before any work, never a 'result'
        ({"lr": float("inf")}, "lr must be a finite number, got inf"),
        ({"lr": float("nan")}, "lr must be a finite number, got nan"),
        ({"tolerance_grad": float("nan")}, "tolerance_grad must be a finite number"),
        ({"steps": 10**12}, r"steps must be an integer in \[1, 1,000,000\], got 1000000000000"),
        ({"steps": 100_000, "max_inner_iterations": 1000}, r"at most 10,000,000 matching-loss evaluations"),
    ],
)
def test_bad_dlg_options_are_one_line_errors(options, message):
    with pytest.raises(InvalidParameterError, match=message):
        build_attack("dlg", **options)


def test_optimizer_record_names_the_lbfgs_arguments():
    record = LBFGSSettings(lr=0.5, line_search=True).record()
    assert record == {"name": "L-BFGS", "lr": 0.5, "max_iter": 20, "history_size": 100, "tolerance_grad": 1e-7,
                      "tolerance_change": 1e-9, "patience": 25, "line_search_fn": "strong_wolfe"}


def test_labels_known_of_an_experiment_reach_dlg():
    # the path of ``privaudit attack inversion --attack dlg --labels-known``
    from attacks.inversion import InversionExperiment, run_inversion

    config = InversionExperiment(attack="dlg", dataset="digits", model="upcycled-mlp", num_images=1, labels_known=True,
                                 attack_options={"steps": 1})
    settings = run_inversion(config).updates[0]["attack"]["settings"]
    assert settings["label_strategy"] == "given"
    assert settings["threat_model"]["labels_known"] is True
    assert settings["optimizer"]["outer_steps"] == 1


def test_fresh_starts_end_once_a_descent_is_solved_and_stalled_descents_start_afresh():
    from attacks.inversion.lbfgs_descent import descend_with_fresh_starts

    target = torch.arange(4.0)

    def start():
        return [torch.zeros(4, requires_grad=True)]

    solved = descend_with_fresh_starts(start, lambda v: ((v[0] - target) ** 2).sum(), LBFGSSettings(lr=1.0), 50, 1e-10)
    assert len(solved) == 1 and solved[0].best.loss <= 1e-10
    assert torch.allclose(solved[0].best.values[0], target)
    # a flat objective: every step stops at once, the memory restart does not help, the descent stalls
    flat = descend_with_fresh_starts(start, lambda v: (v[0] * 0.0).sum(), LBFGSSettings(), 10, -1.0)
    assert [d.stopped for d in flat] == ["stalled"] * 5
    assert all(d.memory_restarts == 1 and d.steps == 2 for d in flat)
