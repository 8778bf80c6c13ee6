"""Batched Inverting Gradients (attacks.inversion.batched): many attacks in one optimisation give each attack's own result."""

from __future__ import annotations

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
from attacks.inversion.batched import functional_simulation
from attacks.inversion.client_simulation import FedSGDGradient, UnrolledLocalSGD
from attacks.inversion.functional_model import FunctionalModel, one_hot
from privaudit.errors import InvalidParameterError
from privaudit.papers.fedreg.defences import FedRegMGRelease
from tests.attacks.toy_models import COLOUR_8, seeded_weights, small_cnn, unit_images


def _payloads(defence, count: int, per_update: int = 1, *, same_weights: bool = True):
    truth = COLOUR_8.from_unit_range(unit_images(count * per_update, COLOUR_8, 5))
    labels = torch.arange(count * per_update) % 10
    payloads = []
    for u in range(count):
        weights = seeded_weights(small_cnn, 0 if same_weights else u)
        rows = slice(u * per_update, (u + 1) * per_update)
        payloads.append(release_update(defence, small_cnn, weights, truth[rows], labels[rows], COLOUR_8, seed=u))
    return payloads


def _assert_same_attacks(batched, alone, atol=1e-5):
    for a, b in zip(batched, alone, strict=True):
        assert a.labels.tolist() == b.labels.tolist()
        torch.testing.assert_close(a.images, b.images, rtol=0, atol=atol)
        assert a.matching_loss == pytest.approx(b.matching_loss, rel=1e-4, abs=1e-7)
        assert a.settings["restart_matching_losses"] == pytest.approx(b.settings["restart_matching_losses"], rel=1e-4, abs=1e-7)
        assert len(a.loss_trace) == len(b.loss_trace)
        assert a.settings["label_strategy"] == b.settings["label_strategy"]
        varying = {"batched", "restart_matching_losses"}  # float-close above; the lane record is the batched run's own
        assert {k: v for k, v in a.settings.items() if k not in varying} == {k: v for k, v in b.settings.items() if k not in varying}


@pytest.mark.parametrize("same_weights", [True, False])
def test_fedsgd_attacks_in_lanes_match_the_attacks_one_by_one(same_weights):
    payloads = _payloads(FedSGDRelease(), 3, same_weights=same_weights)
    attack = build_attack("ig", iterations=25, restarts=2, trace_every=10)
    seeds = [7, 8, 9]
    batched = attack.reconstruct_many(payloads, seeds)
    alone = [attack.reconstruct(p, seed=s) for p, s in zip(payloads, seeds, strict=True)]
    _assert_same_attacks(batched, alone)
    assert batched[0].settings["batched"]["lanes"] == 6  # 3 updates × 2 restarts in one optimisation
    assert batched[1].settings["seed"] == 8 and batched[1].settings["restart_matching_losses"][0] != batched[0].settings["restart_matching_losses"][0]


def test_unrolled_fedprox_updates_of_two_examples_match_in_float64():
    payloads = _payloads(FedAvgRelease(lr=0.1, local_steps=3, batch_size=1, proximal_mu=0.05), 2, per_update=2)
    attack = build_attack("ig", iterations=20, precision="float64")
    batched = attack.reconstruct_many(payloads, [0, 1])
    alone = [attack.reconstruct(p, seed=s) for s, p in enumerate(payloads)]
    _assert_same_attacks(batched, alone, atol=1e-9)
    assert batched[0].settings["client_model"]["client_training"] == "fedprox-unrolled"


def test_functional_simulation_equals_the_autograd_simulation():
    payload = _payloads(FedAvgRelease(lr=0.1, local_steps=2, batch_size=1), 1, per_update=2)[0]
    model = FunctionalModel.from_payload(payload, dtype=torch.float64)
    x = torch.randn((2, 3, 8, 8), dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    targets = one_hot(torch.tensor([1, 4]), 10).double()
    for simulator in (FedSGDGradient(), UnrolledLocalSGD(lr=0.1, local_steps=2, batch_size=1, proximal_mu=0.1)):
        want = simulator.simulate(model, x, targets, create_graph=False)
        got = functional_simulation(simulator, model)({k: v.detach() for k, v in model.params.items()}, x, targets)
        for k in want:
            torch.testing.assert_close(got[k], want[k], rtol=1e-10, atol=1e-12)


def test_simulators_without_a_functional_form_run_one_by_one():
    """adaptive-mg simulates FedReg's local step, which has no torch.func form: its attacks run one by one."""
    payloads = _payloads(FedRegMGRelease(fgsm_steps=1), 2)
    attack = build_attack("adaptive-mg", iterations=2, fgsm_steps=1)
    many = attack.reconstruct_many(payloads, [0, 1])
    alone = [attack.reconstruct(p, seed=s) for s, p in enumerate(payloads)]
    for a, b in zip(many, alone, strict=True):
        assert "batched" not in a.settings
        assert torch.equal(a.images, b.images)
    assert functional_simulation(object(), None) is None
    with pytest.raises(InvalidParameterError, match="2 payloads but 1 seeds"):
        build_attack("ig").reconstruct_many(payloads, [0])


def test_experiment_batched_and_one_by_one_score_alike():
    common = {"attack": "ig", "defence": "fedsgd", "dataset": "digits", "model": "lenet-dlg", "num_images": 3,
              "attack_options": {"iterations": 15}, "seed": 2}
    ticks: list[float] = []
    batched = run_inversion(InversionExperiment(**common), progress=ticks.append)
    alone = run_inversion(InversionExperiment(**common, batched=False))
    assert batched.psnr == pytest.approx(alone.psnr, abs=1e-3)
    assert ticks[-1] == 3 and ticks == sorted(ticks)
    assert batched.updates[0]["attack"]["settings"]["batched"]["attacks"] == 3
    assert "batched" not in alone.updates[0]["attack"]["settings"]
    with pytest.raises(InvalidParameterError, match="batched"):
        InversionExperiment(batched="yes")


@pytest.mark.parametrize("flag", ["--batched", "--sequential"])
def test_cli_attacks_the_images_batched_or_one_by_one(capsys, flag):
    import json

    from privaudit.cli.app import main

    code = main(["attack", "inversion", "--dataset", "digits", "--model", "lenet-dlg", "--defense", "fedsgd", "--attack", "ig",
                 "--images", "2", "--iterations", "3", "--quiet", "--json", flag])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    data = json.loads(captured.out)
    assert data["batched"] is (flag == "--batched")
    assert len(data["psnr"]) == 2
