"""What FedReg's local step does to a one-example update, measured on the examples the inversion evidence attacks.

For each example the client's released update u (FedReg without MG, eq. 10–11, or with MG, eq. 12; Xu, Hong,
Huang, Jiang, ICLR 2022) is compared with

* the adaptive attacker's simulation of the client on the *true* example and label
  (:func:`privaudit.papers.fedreg.attacks.fedreg_simulator`, differentiable form): 1 − cos ≈ 0 says the attacker's
  model of the client is exact, so an attack that stays far from the truth fails by optimisation, not by a wrong
  model;
* the plain SGD step Δ = −η∇ℓ from the same weights (FedAvg's release): ‖u‖/‖Δ‖ and 1 − cos(u, Δ) say how much
  of the data gradient the defence leaves in the update;
* iDLG's label (Zhao et al. 2020; :func:`attacks.inversion.labels.infer_labels`, rule ``idlg``) read from u and
  from Δ: whether the defence, not the attack, is what breaks label inference;
* the landscape the attack descends: at ``draws`` points x̃ = x + noise (``noise`` × the data range per pixel, clamped
  to it; their PSNR recorded), the matching loss 1 − cos(U(x̃), u) and, at the first, along ``directions`` random unit
  directions d, the autograd derivative ⟨∇L(x̃), d⟩ against the central difference (L(x̃ + hd) − L(x̃ − hd))/2h at
  h = 1e-2. The difference quotient
  also sees the loss's jumps (LeakyReLU units changing sign between the weights at which the simulated step
  evaluates gradients), which autograd does not; and the loss at ``draws`` random starts (standard normal clamped to
  the data range, as Inverting Gradients starts). The same numbers for FedAvg (the plain SGD step matched by the plain
  simulation) are the reference.

Used by :mod:`privaudit.papers.fedreg.inversion_evidence`; the numbers land in its result file.
"""

from __future__ import annotations

from typing import Any

import torch

from attacks.inversion.base import make_generator
from attacks.inversion.client_simulation import plain_simulator
from attacks.inversion.experiment import InversionExperiment, attack_options_for, parse_defence, pick_examples
from attacks.inversion.functional_model import FunctionalModel, one_hot
from attacks.inversion.labels import infer_labels
from attacks.inversion.objectives import cosine_distance
from attacks.inversion.release import FedAvgRelease, release_update
from attacks.metrics import score_reconstruction
from privaudit.models import build_model
from privaudit.papers.fedreg.attacks import AdaptiveMGConfig, fedreg_simulator


def _flat_norm(update: dict[str, torch.Tensor]) -> float:
    return float(torch.sqrt(sum((v.double() ** 2).sum() for v in update.values())))


def _one_minus_cos(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> float:
    dot = sum((a[k].double() * b[k].double()).sum() for k in b)
    return float(1.0 - dot / (_flat_norm(a) * _flat_norm(b) + 1e-300))


def _slopes(simulator: Any, model: Any, x: torch.Tensor, targets: torch.Tensor, target: dict[str, torch.Tensor],
            directions: int, generator: torch.Generator, step: float = 1e-2) -> tuple[float, list[float], list[float]]:
    """(L(x), autograd derivatives, central differences) of L = 1 − cos(simulate(x), target) along random unit directions."""
    def loss(v: torch.Tensor, create_graph: bool) -> torch.Tensor:
        return cosine_distance(simulator.simulate(model, v, targets, create_graph=create_graph), target)

    candidate = x.clone().requires_grad_(True)
    value = loss(candidate, True)
    (grad,) = torch.autograd.grad(value, candidate)
    autograd, difference = [], []
    for _ in range(directions):
        d = torch.randn(x.shape, generator=generator)
        d = d / d.norm()
        autograd.append(float((grad * d).sum()))
        difference.append(float(loss(x + step * d, False) - loss(x - step * d, False)) / (2 * step))
    return float(value.detach()), autograd, difference


def update_anatomy(
    dataset: str, defence_spec: str, defence_options: dict[str, Any], model: str, images: int, seed: int,
    *, noise: float = 0.05, directions: int = 4, draws: int = 4,
) -> dict[str, Any]:
    """Per-example measurements of ``defence_spec`` (``fedreg`` or ``fedreg-mg``) on the first ``images`` examples
    the inversion experiment picks for ``dataset`` with ``seed`` (the same examples, weights and per-update seeds).

    Returns ``{"defence", "simulation_one_minus_cos", "norm_ratio_to_sgd", "one_minus_cos_to_sgd",
    "idlg_correct_released", "idlg_correct_sgd", "landscape"}``, each a list with one entry per example;
    ``landscape`` entries are ``{"noisy_psnr", "fedreg": {...}, "fedavg": {...}}`` with ``loss`` (per noisy point),
    ``loss_random_start``, ``autograd`` and ``difference`` (see the module docstring).
    """
    experiment = InversionExperiment(attack="adaptive-mg", defence=defence_spec, dataset=dataset, model=model,
                                     num_images=images, defence_options=dict(defence_options), seed=seed)
    inputs, labels, spec = pick_examples(experiment)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        weights = {k: v.detach().clone() for k, v in build_model(model, spec.shape, spec.num_classes).state_dict().items()}

    def factory() -> torch.nn.Module:
        return build_model(model, spec.shape, spec.num_classes)

    defence = parse_defence(defence_spec, defence_options)
    sgd = FedAvgRelease(lr=defence.lr, local_steps=defence.local_steps, batch_size=defence.batch_size)
    config = AdaptiveMGConfig(**attack_options_for(experiment, defence))
    out: dict[str, Any] = {"defence": defence_spec, "simulation_one_minus_cos": [], "norm_ratio_to_sgd": [],
                           "one_minus_cos_to_sgd": [], "idlg_correct_released": [], "idlg_correct_sgd": [],
                           "landscape": []}
    for u in range(images):
        x, y = inputs[u : u + 1], labels[u : u + 1]
        released = release_update(defence, factory, weights, x, y, spec, seed=seed + u)
        plain = release_update(sgd, factory, weights, x, y, spec, seed=seed + u)
        attacker_model = FunctionalModel.from_payload(released)
        candidate = x.to(torch.float32).clone().requires_grad_(True)
        simulated = fedreg_simulator(released, config).simulate(
            attacker_model, candidate, one_hot(y, spec.num_classes), create_graph=True)
        out["simulation_one_minus_cos"].append(_one_minus_cos({k: v.detach() for k, v in simulated.items()}, released.update))
        out["norm_ratio_to_sgd"].append(_flat_norm(released.update) / _flat_norm(plain.update))
        out["one_minus_cos_to_sgd"].append(_one_minus_cos(released.update, plain.update))
        for key, payload in (("idlg_correct_released", released), ("idlg_correct_sgd", plain)):
            inferred, _ = infer_labels(payload, FunctionalModel.from_payload(payload), make_generator(seed + u, "cpu"), "idlg")
            out[key].append(bool(int(inferred[0]) == int(y[0])))
        generator = make_generator(seed + u, "cpu")
        low, high = spec.box("cpu")
        x32 = x.to(torch.float32)
        noisy = [torch.maximum(torch.minimum(x32 + noise * (high - low) * torch.randn(x32.shape, generator=generator), high),
                               low) for _ in range(draws)]
        starts = [torch.maximum(torch.minimum(torch.randn(x32.shape, generator=generator), high), low) for _ in range(draws)]
        targets = one_hot(y, spec.num_classes)
        landscape: dict[str, Any] = {"noisy_psnr": [float(score_reconstruction(spec.to_unit_range(x32),
                                                                                spec.to_unit_range(v)).psnr[0]) for v in noisy]}
        for name, payload, simulator in (("fedreg", released, fedreg_simulator(released, config)),
                                         ("fedavg", plain, plain_simulator(plain.knowledge))):
            client = FunctionalModel.from_payload(payload)
            target = {k: v.to(torch.float32) for k, v in payload.update.items()}
            value, autograd, difference = _slopes(simulator, client, noisy[0], targets, target, directions, generator)
            rest = [_slopes(simulator, client, v, targets, target, 0, generator)[0] for v in noisy[1:]]
            random_values = [_slopes(simulator, client, v, targets, target, 0, generator)[0] for v in starts]
            landscape[name] = {"loss": [value, *rest], "loss_random_start": random_values, "autograd": autograd,
                               "difference": difference}
        out["landscape"].append(landscape)
    return out
