"""Run an :class:`~attacks.inversion.request.InversionRequest`: the attack, scored by PSNR/SSIM, as the result's data.

Dataset mode simulates clients that each release a one-example (or ``per_update``-example) update under a defence
(FedReg App. B.4's attack setting; :func:`attacks.inversion.experiment.run_inversion`); for ``dpsgd:<σ>`` the result
carries the ε of that release at :data:`DELTA`. Checkpoint mode attacks one client's release in one round of a trained
federation (:mod:`attacks.inversion.checkpoint_payload`), with the attacker's settings taken from the run where the
attack simulates its local step (:meth:`~attacks.inversion.base.InversionAttack.options_for_run`). Images whose
attack diverged or made no progress leave the PSNR/SSIM means (:func:`attacks.inversion.experiment.reconstruction_summary`),
so a broken attack never reads as a defence's effect.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import torch

from attacks.inversion.analytic import first_fc_layer, probe_input_map
from attacks.inversion.bn_prior import has_batch_norm
from attacks.inversion.checkpoint_payload import bn_prior_reshuffle_note, checkpoint_payload
from attacks.inversion.experiment import (
    InversionExperiment,
    attack_and_score,
    defence_epsilon,
    parse_defence,
    reconstruction_summary,
    run_inversion,
)
from attacks.inversion.functional_model import FunctionalModel
from attacks.inversion.outcome_rows import (
    attack_record,
    mean,
    per_image,
    separation,
    separation_note,
    status_note,
)
from attacks.inversion.registry import build_attack, registered_attacks
from attacks.inversion.request import InversionRequest, is_dpsgd
from privaudit.data import load_dataset
from privaudit.device import describe_device
from privaudit.errors import InvalidParameterError
from privaudit.models import build_model
from privaudit.progress import progress_bar

#: δ at which a DP-SGD defence's ε is reported.
DELTA = 1e-5


@dataclass
class Attacked:
    """One mode's attack, before its summary: per-update records, per-image scores and status, images, the source."""

    records: list[dict[str, Any]]
    psnr: list[float]
    ssim: list[float]
    status: list[str]
    truth: torch.Tensor | None
    reconstructions: torch.Tensor | None
    label_scores: list[float]
    defence_label: str
    source: dict[str, Any]
    title: str
    notes: list[str] = field(default_factory=list)
    epsilon: float | None = None


@dataclass
class InversionOutcome:
    """The result's ``data`` (what ``--json`` prints and the ``inversion`` result holds), its title, and the images for
    its grid (ground truth over reconstructions; ``None`` when the attack reconstructs none)."""

    data: dict[str, Any]
    title: str
    defence_label: str
    ground_truth: torch.Tensor | None = field(default=None, repr=False)
    reconstructions: torch.Tensor | None = field(default=None, repr=False)


def run_request(request: InversionRequest, *, progress: bool = True) -> InversionOutcome:
    """Run the attack ``request`` names (``progress``: a transient progress bar)."""
    torch.set_num_threads(request.threads)
    options = {**request.attack_options, **request.bn_options}
    start = time.perf_counter()
    if request.checkpoint is not None:
        attacked = _checkpoint_attack(request, options, progress)
    else:
        attacked = _dataset_attack(request, options, progress)
    seconds = time.perf_counter() - start
    summary = reconstruction_summary(attacked.psnr, attacked.ssim, attacked.status)  # failed attacks never count
    notes = attacked.notes
    note = status_note(summary, len(attacked.psnr))
    if note:
        notes = [*notes, note]
    data = {
        "attack": request.attack, "defense": attacked.defence_label, "psnr": attacked.psnr, "ssim": attacked.ssim,
        "psnr_mean": summary["psnr_mean"], "ssim_mean": summary["ssim_mean"], "psnr_median": summary["psnr_median"],
        "images_summarised": summary["images_summarised"], "images_excluded": summary["images_excluded"],
        "status": attacked.status, "label_accuracy": mean(attacked.label_scores), "epsilon": attacked.epsilon,
        "delta": DELTA if attacked.epsilon is not None else None,
        "per_image": per_image(attacked.records, attacked.psnr, attacked.ssim), "grid": None, "device": request.device,
        "device_name": describe_device(request.device), "iterations": request.iterations, "seconds": seconds,
        "notes": notes, **attacked.source, **attack_record(attacked.records),
    }
    return InversionOutcome(data, attacked.title, attacked.defence_label, attacked.truth, attacked.reconstructions)


def _checkpoint_attack(request: InversionRequest, options: dict[str, Any], progress: bool) -> Attacked:
    assert request.checkpoint is not None and request.client is not None and request.round is not None
    payload, inputs, labels, spec, notes, context = checkpoint_payload(request.checkpoint, request.client, request.round,
                                                                       labels_known=request.labels_known)
    if request.bn_options:
        check_bn_model(payload.model_factory, spec.shape, spec.num_classes)
    if request.attack == "analytic":
        check_analytic(payload.model_factory, spec.shape, spec.num_classes)
    run_options, run_notes = registered_attacks()[request.attack].options_for_run(context["algorithm"], context["algorithm_options"])
    options = {**run_options, **options}
    if run_options:  # this attacker models the run's local objective: drop the caveat that it does not
        notes = [n for n in notes if not n.startswith(f"algorithm {context['algorithm']}:")]
    notes = [*notes, *run_notes]
    attack = build_attack(request.attack, device=request.device, **options)
    with progress_bar(f"{request.attack} on client {request.client}, round {request.round}", 1, enabled=progress,
                      transient=True) as bar:
        scored = attack_and_score(attack, [(payload, inputs, labels)], spec, seed=request.seed,
                                  progress=bar.set)
    source = {"mode": "checkpoint", "checkpoint": str(request.checkpoint), "client": request.client, "round": request.round,
              **context, "threat_model": payload.knowledge.to_dict(), "attack_options": options}
    if request.bn_options and scored.records:  # which statistics the BatchNorm prior matched, and how (attacks.inversion.bn_prior)
        source["bn_prior"] = bn_prior_reshuffle_note(scored.records[0]["attack"]["settings"].get("bn_prior"),
                                                     int(context["local"]["epochs"]), payload.knowledge.batch_size)
    return Attacked(scored.records, scored.psnr, scored.ssim, scored.status, scored.ground_truth, scored.reconstructions,
                    scored.label_scores, f"{context['algorithm']} (privacy: {context['privacy']})", source,
                    f"inversion {request.attack} on {request.checkpoint} client {request.client} round {request.round}", notes)


def _dataset_attack(request: InversionRequest, options: dict[str, Any], progress: bool) -> Attacked:
    assert request.dataset is not None
    config = InversionExperiment(attack=request.attack, defence=request.defence, dataset=request.dataset, model=request.model,
                                 num_images=request.image_count,
                                 examples_per_update=1 if request.per_update is None else request.per_update,
                                 labels_known=request.labels_known, attack_options=options, seed=request.seed,
                                 device=request.device, batched=request.batched)
    if request.attack == "analytic":
        info = load_dataset(request.dataset, seed=request.seed)
        check_analytic(request.model, tuple(info.input_shape), int(info.num_classes))
    if request.bn_options:
        info = load_dataset(request.dataset, seed=request.seed)
        check_bn_model(request.model, tuple(info.input_shape), int(info.num_classes))
    with progress_bar(f"{request.attack} vs {request.defence}", request.image_count, enabled=progress, transient=True) as bar:
        run = run_inversion(config, progress=bar.set)
    defence = parse_defence(request.defence)
    source = {"mode": "dataset", "dataset": request.dataset, "model": request.model, "defence": defence.describe(),
              "images": request.image_count, "batched": request.batched and request.attack == "ig",
              "examples_per_update": config.examples_per_update, "server": run.server, "attack_options": options}
    notes = []
    rows = separation(run.updates)
    if rows:
        source["separation"] = rows
        notes = [separation_note(rows)]
    if request.bn_options and run.updates:
        source["bn_prior"] = run.updates[0]["attack"]["settings"].get("bn_prior")
    return Attacked(run.updates, run.psnr, run.ssim, run.status, run.ground_truth, run.reconstructions,
                    [run.label_accuracy] if run.label_accuracy is not None else [], request.defence, source,
                    f"inversion {request.attack} vs {request.defence} on {request.dataset} ({request.model})", notes,
                    defence_epsilon(defence, DELTA) if is_dpsgd(request.defence) else None)


def check_analytic(model: Any, shape: tuple[int, ...], num_classes: int) -> None:
    """Fail early, with the analytic attack's own message (Phong et al. 2018 needs a fully connected first layer), when
    ``model`` (a model name, or a factory that builds the checkpoint's architecture) has none."""

    def factory() -> torch.nn.Module:
        return model() if callable(model) else build_model(model, shape, num_classes)

    functional = FunctionalModel.build(factory, factory().state_dict())
    probe = torch.rand((2, *shape), generator=torch.Generator().manual_seed(0))  # two: BatchNorm in train mode needs more than one
    layer = first_fc_layer(functional, probe)
    probe_input_map(functional, layer.module, probe)


def check_bn_model(model: Any, shape: tuple[int, ...], num_classes: int) -> None:
    """One line when ``model`` (a model name, or a factory) has no BatchNorm layer for the BatchNorm prior to use."""
    module = model() if callable(model) else build_model(model, shape, num_classes)
    if not has_batch_norm(module):
        name = "the checkpoint's model" if callable(model) else f"model {model!r}"
        raise InvalidParameterError(f"--bn-prior needs a model with BatchNorm layers and {name} has none (e.g. --model convnet-bn)")
