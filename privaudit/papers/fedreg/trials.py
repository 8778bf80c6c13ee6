"""Trials of FedReg's PSNR comparison: one image, attacked under every defence of the comparison.

FedReg (002 §4.5, App. B.4) measures privacy by the PSNR of the image a gradient-inversion attack recovers from a
client's update after **one local step on one data point**. :func:`psnr_trial` does exactly that for one image of a
packaged dataset, under each defence of the comparison — FedAvg (no defence, the attack's own check), DP-SGD at each
of the paper's noise multipliers σ (clip C, Abadi et al. 2016), FedReg without and with modified gradients (MG,
eq. 12) — from the same seeded initial weights, and attacks every update with the same attack and random start, so
that the rows of one trial are paired.

Attackers: ``analytic`` (closed-form first-layer recovery, exact on an FC-first model) or ``ig`` (Inverting
Gradients; its attacker assumes plain FedAvg — the *naive* attacker against FedReg, as in the paper), plus, when
``spec["adaptive"]``, the *adaptive* attacker against FedReg and FedReg+MG (``adaptive-mg``: the same optimisation
through a simulation of FedReg's step with the protocol's public hyper-parameters; audit point R4). The attacker
infers the label unless ``labels_known``.

Each trial also scores the **data-only baseline**: the mean of the dataset's other images, what an attacker who
ignores the update would output. An attacker can always output it, so the comparison uses
max(attack PSNR, baseline PSNR) per image (:mod:`privaudit.papers.fedreg.recipe`). PSNRs are capped at
``psnr_cap`` dB (an exact recovery scores +∞; above the cap only float rounding differs) so that means stay finite.

Trials import torch and :mod:`attacks.inversion`; the recipe that plans them does not.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from attacks.inversion import DataSpec, attack_and_score, build_attack, parse_defence, release_update
from attacks.metrics import psnr
from privaudit.data import load_dataset
from privaudit.models import build_model

#: The FedReg hyper-parameters an adaptive attacker takes from the protocol (they are public).
FEDREG_PUBLIC = ("gamma", "pseudo_step", "perturb_step", "fgsm_steps", "use_modified_gradient", "regularize", "clamp_fgsm")


def defence_ids(spec: dict[str, Any]) -> list[str]:
    """``fedavg``, ``dpsgd:<σ>`` for each σ of the spec, ``fedreg``, ``fedreg-mg`` — the rows of a trial."""
    return ["fedavg", *[f"dpsgd:{float(s):g}" for s in spec["sigmas"]], "fedreg", "fedreg-mg"]


def attackers(spec: dict[str, Any], defence: str) -> list[str]:
    """The attackers run against ``defence``: ``analytic``, or ``naive`` (IG) and, for FedReg(+MG), ``adaptive``."""
    if spec["attack"] == "analytic":
        return ["analytic"]
    if defence.startswith("fedreg") and spec.get("adaptive"):
        return ["naive", "adaptive"]
    return ["naive"]


@dataclass(frozen=True, eq=False)
class Pool:
    """The packaged dataset's pooled training images (raw values), their data spec and their sum."""

    x: np.ndarray
    y: np.ndarray
    spec: Any  # attacks.inversion.DataSpec
    total: np.ndarray


@lru_cache(maxsize=4)
def pool(dataset: str, data_seed: int) -> Pool:
    data = load_dataset(dataset, seed=int(data_seed))
    x = np.concatenate([c.x_train for c in data.clients if c.num_train]).astype(np.float32)
    y = np.concatenate([c.y_train for c in data.clients if c.num_train]).astype(np.int64)
    mean, std = data.normalization if data.normalization is not None else (None, None)
    spec = DataSpec(data.input_shape, data.num_classes, tuple(data.data_range), mean, std)
    return Pool(x, y, spec, x.astype(np.float64).sum(axis=0))


def _defence(defence: str, spec: dict[str, Any]):
    local = {"lr": float(spec["local"]["lr"]), "local_steps": int(spec["local"]["local_steps"]), "batch_size": None}
    if defence.startswith("dpsgd:"):
        return parse_defence(defence, {**local, "clip_norm": float(spec["clip"])})
    if defence.startswith("fedreg"):
        return parse_defence(defence, {**local, **dict(spec["fedreg"])})
    return parse_defence(defence, local)


def _attack(attacker: str, spec: dict[str, Any], release):
    if attacker == "analytic":
        return build_attack("analytic")
    options = dict(spec.get("attack_options", {}))
    if attacker == "adaptive":
        for key in FEDREG_PUBLIC:
            options.setdefault(key, getattr(release, key))
        return build_attack("adaptive-mg", **options)
    return build_attack("ig", **options)


def _capped(value: float, cap: float) -> float:
    return float(cap) if not math.isfinite(value) or value > cap else float(value)


def psnr_trial(spec: dict[str, Any], seed: int) -> dict[str, Any]:
    """One image (drawn from ``seed``) attacked under every defence; see the module docstring.

    Returns ``{"image", "label", "baseline_psnr", "rows": [{"defence", "attacker", "psnr", "status", "exact", "ssim",
    "label_accuracy", "seconds"}, …]}`` — ``psnr`` capped at ``psnr_cap`` (``exact``: the uncapped PSNR was above it);
    ``status`` is the attack's optimisation status (:mod:`attacks.inversion.convergence`: a diverged attack or one that
    made no progress is flagged, and its PSNR is no measure of the defence).
    """
    import torch


    data = pool(str(spec["dataset"]), int(spec["data_seed"]))
    rng = np.random.default_rng(int(seed))
    index = int(rng.integers(len(data.y)))
    init_seed, noise_seed, attack_seed = (int(v) for v in rng.integers(0, 2**31 - 1, size=3))
    inputs = torch.from_numpy(data.x[index:index + 1])
    labels = torch.from_numpy(data.y[index:index + 1])
    cap = float(spec["psnr_cap"])

    others = torch.from_numpy(((data.total - data.x[index]) / (len(data.y) - 1)).astype(np.float32))[None]
    truth = data.spec.to_unit_range(inputs)[0].numpy()
    baseline = _capped(psnr(truth, data.spec.to_unit_range(others)[0].numpy()), cap)

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(init_seed)
        weights = {k: v.detach().clone() for k, v in
                   build_model(spec["model"], data.spec.shape, data.spec.num_classes).state_dict().items()}

    def factory() -> torch.nn.Module:
        return build_model(spec["model"], data.spec.shape, data.spec.num_classes)

    rows = []
    for defence in defence_ids(spec):
        release = _defence(defence, spec)
        payload = release_update(release, factory, weights, inputs, labels, data.spec, seed=noise_seed,
                                 labels_known=bool(spec.get("labels_known", False)))
        for attacker in attackers(spec, defence):
            started = time.perf_counter()
            scored = attack_and_score(_attack(attacker, spec, release), [(payload, inputs, labels)], data.spec,
                                      seed=attack_seed)
            value = float(scored.psnr[0])
            rows.append({"defence": defence, "attacker": attacker, "psnr": _capped(value, cap),
                         "status": scored.status[0] if scored.status else "ok",
                         "exact": bool(not math.isfinite(value) or value > cap), "ssim": float(scored.ssim[0]),
                         "label_accuracy": float(scored.label_scores[0]) if scored.label_scores else None,
                         "seconds": time.perf_counter() - started})
    return {"image": index, "label": int(data.y[index]), "baseline_psnr": baseline, "rows": rows}


def release_is_deterministic(spec: dict[str, Any], seeds: tuple[int, int] = (1, 2)) -> dict[str, Any]:
    """FedReg+MG's release twice on the same image under two seeds, and once on a neighbouring image.

    ``repeat_distance`` = ‖u(D; seed₁) − u(D; seed₂)‖ (0: the release is a deterministic function of the data — it
    draws no noise), ``neighbour_distance`` = ‖u(D) − u(D')‖ for D' holding another image instead (> 0: the release
    depends on the data). Together: P[M(D) = u(D)] = 1 and P[M(D') = u(D)] = 0, so no (ε, δ) with δ < 1 holds.
    """
    import torch


    data = pool(str(spec["dataset"]), int(spec["data_seed"]))
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        weights = {k: v.detach().clone() for k, v in
                   build_model(spec["model"], data.spec.shape, data.spec.num_classes).state_dict().items()}

    def factory() -> torch.nn.Module:
        return build_model(spec["model"], data.spec.shape, data.spec.num_classes)

    release = _defence("fedreg-mg", spec)

    def update(index: int, seed: int) -> torch.Tensor:
        payload = release_update(release, factory, weights, torch.from_numpy(data.x[index:index + 1]),
                                 torch.from_numpy(data.y[index:index + 1]), data.spec, seed=seed)
        return torch.cat([v.reshape(-1).double() for v in payload.update.values()])

    first, again, neighbour = update(0, seeds[0]), update(0, seeds[1]), update(1, seeds[0])
    return {"repeat_distance": float(torch.linalg.norm(first - again)),
            "neighbour_distance": float(torch.linalg.norm(first - neighbour)),
            "update_norm": float(torch.linalg.norm(first)), "model": spec["model"], "dataset": spec["dataset"]}
