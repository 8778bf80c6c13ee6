"""A broken attack never reads as privacy: absurd settings are refused, failed optimisations are flagged and left out.

Issue 24: ``--option lr=inf``, ``tv_weight=nan`` or ``tv_weight=inf`` returned 5.7–8.5 dB reconstructions reported as
normal results, and ``iterations=10**12`` ran forever. The configurations now refuse them (attacks.inversion.limits),
every result carries its optimisation's status (attacks.inversion.convergence), and the summaries that read as a
defence's strength leave flagged images out and say so.
"""

from __future__ import annotations

import json
import math

import pytest
import torch

from attacks.inversion import FedSGDRelease, InvertingGradientsAttack, build_attack, release_update
from attacks.inversion.convergence import CLOSED_FORM, DIVERGED, NO_PROGRESS, OK, optimisation_status
from attacks.inversion.experiment import attack_and_score, reconstruction_summary
from attacks.inversion.registry import parse_attack_options
from privaudit.cli.app import main
from privaudit.errors import InvalidParameterError
from tests.attacks.toy_models import COLOUR_8, seeded_weights, small_cnn, unit_images

INF, NAN = float("inf"), float("nan")


@pytest.mark.parametrize(
    ("attack", "options", "message"),
    [
        ("ig", {"lr": INF}, "lr must be a finite number, got inf"),
        ("ig", {"lr": NAN}, "lr must be a finite number, got nan"),
        ("ig", {"lr": 1e38}, r"lr must be at most 1e\+06"),  # torch's Adam overflowed float32 here: a traceback
        ("ig", {"tv_weight": NAN}, "tv_weight must be a finite number, got nan"),
        ("ig", {"tv_weight": INF}, "tv_weight must be a finite number, got inf"),
        ("ig", {"tv_weight": -1.0}, "tv_weight must be non-negative"),
        ("ig", {"bn_weight": INF}, "bn_weight must be a finite number"),
        ("ig", {"iterations": 10**12}, r"iterations must be an integer in \[1, 1,000,000\], got 1000000000000"),
        ("ig", {"iterations": 2.5}, "iterations must be an integer"),
        ("ig", {"restarts": 10**4}, r"restarts must be an integer in \[1, 1,000\]"),
        ("ig", {"trace_every": 0}, "trace_every"),
        ("adaptive-mg", {"pseudo_step": INF}, "pseudo_step must be a finite number"),
        ("adaptive-mg", {"perturb_step": NAN}, "perturb_step must be a finite number"),
        ("adaptive-mg", {"smooth_temperature": INF}, "smooth_temperature must be a finite number"),
        ("adaptive-mg", {"fgsm_steps": 10**9}, "fgsm_steps must be an integer"),
        ("adaptive-mg", {"lr": INF}, "lr must be a finite number"),
        ("dlg", {"lr": INF}, "L-BFGS lr must be a finite number"),
        ("dlg", {"tolerance_change": NAN}, "tolerance_change must be a finite number"),
        ("analytic", {"match_tolerance": INF}, "match_tolerance must be a finite number"),
    ],
)
def test_non_finite_and_absurd_settings_are_refused_by_the_configuration(attack, options, message):
    with pytest.raises(InvalidParameterError, match=message):
        build_attack(attack, **options)


@pytest.mark.parametrize("option", ["lr=inf", "tv_weight=nan", "tv_weight=inf", "iterations=1000000000000", "lr=-0.1"])
def test_the_cli_refuses_them_in_one_line_before_any_data_loads(option, capsys, monkeypatch):
    import privaudit.data

    def no_data(*args, **kwargs):
        pytest.fail("data were loaded for an attack whose settings are refused")

    monkeypatch.setattr(privaudit.data, "load_dataset", no_data)
    code = main(["attack", "inversion", "--dataset", "images", "--attack", "ig", "--option", option, "--quiet"])
    captured = capsys.readouterr()
    lines = [line for line in captured.err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in captured.err
    assert option.split("=")[0] in lines[0] and captured.out == ""


def test_iterations_flag_is_held_to_the_same_limit(capsys):
    assert main(["attack", "inversion", "--dataset", "images", "--iterations", str(10**12), "--quiet"]) == 2
    assert "iterations must be an integer in [1, 1,000,000]" in capsys.readouterr().err
    assert parse_attack_options("ig", ["iterations=1000000"]) == {"iterations": 1_000_000}  # the limit itself is allowed


# -- the status of an optimisation ---------------------------------------------------------------------------------
def test_status_rules():
    finite_images = torch.zeros(1, 3, 8, 8)
    assert optimisation_status([], None, finite_images) == (CLOSED_FORM, None)
    assert optimisation_status([0.5, 0.2], 0.2, finite_images) == (OK, None)
    assert optimisation_status([0.5, 0.5], 0.5, finite_images)[0] == NO_PROGRESS
    assert optimisation_status([0.5, 0.9], 0.9, finite_images)[0] == NO_PROGRESS
    assert optimisation_status([0.5, NAN], NAN, finite_images)[0] == DIVERGED
    assert optimisation_status([0.5, 0.1], INF, finite_images)[0] == DIVERGED
    status, reason = optimisation_status([0.5, 0.1], 0.1, torch.full((1, 3, 8, 8), NAN))
    assert status == DIVERGED and reason == "192 of 192 reconstructed values are not finite"


def _payloads(count: int = 2):
    truth = COLOUR_8.from_unit_range(unit_images(count, COLOUR_8, 5))
    labels = torch.arange(count)
    weights = seeded_weights(small_cnn, 0)
    return [(release_update(FedSGDRelease(), small_cnn, weights, truth[u:u + 1], labels[u:u + 1], COLOUR_8, seed=u),
             truth[u:u + 1], labels[u:u + 1]) for u in range(count)]


class BlowsUp(InvertingGradientsAttack):
    """Inverting Gradients whose matching loss leaves the finite range after two iterations (a stand-in for an
    optimisation that diverges: with the configurations' limits a plain run hardly can)."""

    name = "ig"
    calls = 0

    def matching_loss(self, simulator, model, x, targets, target_update, distance):
        loss = super().matching_loss(simulator, model, x, targets, target_update, distance)
        self.calls += 1
        return loss * float("nan") if self.calls > 2 else loss


def test_a_diverged_attack_is_flagged_scored_and_left_out_of_the_means():
    from attacks.inversion import InvertingGradientsConfig

    batches = _payloads(2)
    broken = BlowsUp(InvertingGradientsConfig(iterations=5))
    scored = attack_and_score(broken, batches[:1], COLOUR_8)
    assert scored.status == [DIVERGED] and scored.records[0]["attack"]["status"] == DIVERGED
    assert scored.records[0]["attack"]["status_reason"] == "the final matching loss is nan"
    assert math.isfinite(scored.psnr[0])  # its non-finite pixels are scored as 0, so the image is still shown
    working = attack_and_score(build_attack("ig", iterations=20), batches[1:], COLOUR_8)
    assert working.status == [OK]
    summary = reconstruction_summary(scored.psnr + working.psnr, scored.ssim + working.ssim, scored.status + working.status)
    assert summary["psnr_mean"] == pytest.approx(working.psnr[0]) and summary["images_summarised"] == 1
    assert summary["images_excluded"] == {DIVERGED: 1}
    assert reconstruction_summary(scored.psnr, scored.ssim, scored.status)["psnr_mean"] is None
    json.dumps(scored.records)  # the record of a NaN loss is still a JSON document


@pytest.mark.parametrize("batched", [True, False])
def test_an_optimisation_that_never_descends_is_flagged_in_lanes_and_alone(batched):
    batches = _payloads(2)
    attack = build_attack("ig", iterations=4, lr=1e-30)  # steps far below float32 resolution: the loss cannot move
    scored = attack_and_score(attack, batches, COLOUR_8, batched=batched)
    assert scored.status == [NO_PROGRESS, NO_PROGRESS]
    assert all("is not below the starting" in r["attack"]["status_reason"] for r in scored.records)
    assert scored.summary()["psnr_mean"] is None and scored.summary()["images_excluded"] == {NO_PROGRESS: 2}
    fine = attack_and_score(build_attack("ig", iterations=20), batches, COLOUR_8, batched=batched)
    assert fine.status == [OK, OK]


def test_dlg_that_never_improves_on_its_start_is_flagged():
    (payload, _, _), = _payloads(1)
    result = build_attack("dlg", steps=2, lr=1e-30).reconstruct(payload, seed=0)
    assert result.status == NO_PROGRESS
    assert build_attack("dlg", steps=3).reconstruct(payload, seed=0).status == OK


def test_a_diverged_restart_never_beats_a_finite_one():
    from attacks.inversion import InvertingGradientsConfig

    (payload, _, _), = _payloads(1)

    class FirstRestartBlowsUp(InvertingGradientsAttack):
        name = "ig"
        calls = 0

        def matching_loss(self, simulator, model, x, targets, target_update, distance):
            loss = super().matching_loss(simulator, model, x, targets, target_update, distance)
            self.calls += 1
            return loss * float("nan") if 2 < self.calls <= 6 else loss  # restart 1: iterations 3–5 and its final loss

    result = FirstRestartBlowsUp(InvertingGradientsConfig(iterations=5, restarts=2)).reconstruct(payload, seed=0)
    losses = result.settings["restart_matching_losses"]
    assert math.isnan(losses[0]) and math.isfinite(losses[1])
    assert result.matching_loss == losses[1] and result.status in (OK, NO_PROGRESS)


def test_the_cli_shows_and_records_each_images_status_and_the_exclusion(capsys, tmp_path):
    out = tmp_path / "inv"
    code = main(["attack", "inversion", "--dataset", "images", "--attack", "ig", "--images", "2", "--option", "lr=1e-30",
                 "--iterations", "3", "--quiet", "--out", str(out)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "attack status" in captured.out and "no-progress" in captured.out and "no PSNR: every attack failed" in captured.out
    data = json.loads((out / "inversion.json").read_text())["data"]
    assert data["status"] == [NO_PROGRESS, NO_PROGRESS] and data["psnr_mean"] is None
    assert data["images_excluded"] == {NO_PROGRESS: 2} and any("every image's attack failed" in n for n in data["notes"])
    assert [row["status"] for row in data["per_image"]] == [NO_PROGRESS, NO_PROGRESS]
    assert len(data["psnr"]) == 2  # the per-image PSNR stays, beside its status
    assert main(["report", str(out), "--out", str(tmp_path / "report")]) == 0
    markdown = (tmp_path / "report" / "report.md").read_text()
    assert "2 of 2 images excluded (2 no-progress)" in markdown  # the report's PSNR column shows no mean for them
