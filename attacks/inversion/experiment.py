"""One inversion experiment end to end: data → client release under a defence → attack → scores.

:func:`run_inversion` is the Python entry point the ``privaudit attack inversion`` command calls. It picks
``num_images`` examples from an embedded dataset (``privaudit.data.load_dataset``), builds the model by name
(``privaudit.models.build_model``) with seeded weights, lets a client release an update for each group of
``examples_per_update`` examples under ``defence`` (:mod:`attacks.inversion.release`), runs the named
attack on each payload and scores the reconstructions (:mod:`attacks.metrics`). Everything is seeded.

Defence specs: ``fedsgd``, ``fedavg``, ``fedprox``, ``fedreg-mg``, ``dpsgd:<σ>`` (DP-SGD with noise
multiplier σ). For ``adaptive-mg`` against ``fedreg-mg`` the attacker assumes the defence's FedReg
hyper-parameters unless ``attack_options`` override them (the protocol is public).
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from privaudit.errors import InvalidParameterError

from ..metrics import score_reconstruction
from .figures import save_image_grid
from .registry import ATTACKS, build_attack
from .release import DPSGDRelease, FedAvgRelease, FedRegMGRelease, FedSGDRelease, release_update
from .threat_model import DataSpec

_FEDREG_SHARED = ("gamma", "pseudo_step", "perturb_step", "fgsm_steps", "use_modified_gradient", "regularize")


@dataclass(frozen=True)
class InversionExperiment:
    """Settings of one experiment (validated on construction)."""

    attack: str = "ig"
    defence: str = "fedsgd"
    dataset: str = "images"
    model: str = "convnet"
    num_images: int = 1
    examples_per_update: int = 1
    labels_known: bool = False
    attack_options: dict[str, Any] = field(default_factory=dict)
    defence_options: dict[str, Any] = field(default_factory=dict)
    seed: int = 0
    device: str = "cpu"
    out_dir: str | None = None

    def __post_init__(self) -> None:
        if self.attack not in ATTACKS:
            raise InvalidParameterError(f"unknown attack {self.attack!r}; choose one of: {', '.join(ATTACKS)}")
        if self.num_images < 1 or self.examples_per_update < 1:
            raise InvalidParameterError("num_images and examples_per_update must be at least 1")
        if self.num_images % self.examples_per_update:
            raise InvalidParameterError(
                f"num_images ({self.num_images}) must be a multiple of examples_per_update ({self.examples_per_update})"
            )
        parse_defence(self.defence, self.defence_options)


def parse_defence(spec: str, options: dict[str, Any] | None = None) -> Any:
    """A defence object from ``fedsgd | fedavg | fedprox | fedreg-mg | dpsgd:<σ>`` plus option overrides."""
    options = dict(options or {})
    name, _, argument = spec.partition(":")
    try:
        if name == "fedsgd" and not argument:
            return FedSGDRelease(**options)
        if name == "fedavg" and not argument:
            return FedAvgRelease(**options)
        if name == "fedprox" and not argument:
            return FedAvgRelease(**{"proximal_mu": 0.01, **options, "name": "fedprox"})
        if name == "fedreg-mg" and not argument:
            return FedRegMGRelease(**options)
        if name == "dpsgd":
            if argument:
                options["noise_multiplier"] = float(argument)
            return DPSGDRelease(**options)
    except TypeError as exc:
        raise InvalidParameterError(f"bad options for defence {spec!r}: {exc}") from None
    except ValueError:
        raise InvalidParameterError(f"defence {spec!r}: the noise multiplier must be a number, e.g. dpsgd:1e-2") from None
    raise InvalidParameterError(f"unknown defence {spec!r}; choose one of: fedsgd, fedavg, fedprox, fedreg-mg, dpsgd:<σ>")


@dataclass
class InversionRun:
    """Result of :func:`run_inversion`: per-update records and aggregate scores."""

    config: dict[str, Any]
    updates: list[dict[str, Any]]
    psnr_mean: float
    psnr_median: float
    ssim_mean: float
    label_accuracy: float | None
    seconds: float
    grid_path: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _pick_examples(cfg: InversionExperiment) -> tuple[torch.Tensor, torch.Tensor, DataSpec]:
    from privaudit.data import load_dataset

    dataset = load_dataset(cfg.dataset, seed=cfg.seed)
    x = np.concatenate([c.x_train for c in dataset.clients if c.num_train])
    y = np.concatenate([c.y_train for c in dataset.clients if c.num_train])
    if len(x) < cfg.num_images:
        raise InvalidParameterError(f"dataset {cfg.dataset!r} has {len(x)} training examples, {cfg.num_images} requested")
    chosen = np.random.default_rng(cfg.seed).permutation(len(x))[: cfg.num_images]
    mean, std = dataset.normalization if dataset.normalization is not None else (None, None)
    spec = DataSpec(dataset.input_shape, dataset.num_classes, tuple(dataset.data_range), mean, std)
    return torch.from_numpy(x[chosen]), torch.from_numpy(y[chosen]), spec


def _attack_options(cfg: InversionExperiment, defence: Any) -> dict[str, Any]:
    options = dict(cfg.attack_options)
    if cfg.attack == "adaptive-mg" and isinstance(defence, FedRegMGRelease):
        for key in _FEDREG_SHARED:
            options.setdefault(key, getattr(defence, key))
        options.setdefault("clamp_fgsm", defence.clamp_fgsm)
    return options


def run_inversion(config: InversionExperiment) -> InversionRun:
    """Run the experiment described by ``config`` (see the module docstring)."""
    from privaudit.models import build_model

    start = time.perf_counter()
    inputs, labels, spec = _pick_examples(config)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(config.seed)
        weights = {k: v.detach().clone() for k, v in build_model(config.model, spec.shape, spec.num_classes).state_dict().items()}

    def factory() -> torch.nn.Module:
        return build_model(config.model, spec.shape, spec.num_classes)

    defence = parse_defence(config.defence, config.defence_options)
    attack = build_attack(config.attack, device=config.device, **_attack_options(config, defence))
    records, truth, recon, recon_psnr = [], [], [], []
    label_scores = []
    per_update = config.examples_per_update
    for u in range(config.num_images // per_update):
        batch = slice(u * per_update, (u + 1) * per_update)
        payload = release_update(
            defence, factory, weights, inputs[batch], labels[batch], spec,
            seed=config.seed + u, device=config.device, labels_known=config.labels_known,
        )
        result = attack.reconstruct(payload, seed=config.seed + u)
        record: dict[str, Any] = {"true_labels": labels[batch].tolist(), "attack": result.to_dict()}
        if result.images is not None:
            ground = spec.to_unit_range(inputs[batch])
            rebuilt = spec.to_unit_range(result.images)
            scores = score_reconstruction(
                ground, rebuilt, true_labels=labels[batch].tolist(),
                predicted_labels=None if result.labels is None else result.labels.tolist(),
                labels_paired=bool(result.settings.get("labels_paired", True)),
            )
            record["scores"] = scores.to_dict()
            truth.append(ground)
            recon.append(rebuilt[scores.order])
            recon_psnr.extend(scores.psnr)
            if scores.label_accuracy is not None:
                label_scores.append(scores.label_accuracy)
        elif result.labels is not None:
            from ..metrics import label_accuracy

            accuracy = label_accuracy(labels[batch].tolist(), result.labels.tolist(), paired=False)
            record["scores"] = {"label_accuracy": accuracy}
            label_scores.append(accuracy)
        records.append(record)
    ssims = [s for r in records for s in r.get("scores", {}).get("ssim", [])]
    grid_path = None
    if config.out_dir is not None:
        out = Path(config.out_dir)
        out.mkdir(parents=True, exist_ok=True)
        if recon:
            grid_path = str(
                save_image_grid(
                    out / f"inversion-{config.attack}-{config.defence.replace(':', '-')}.png",
                    [("ground truth", torch.cat(truth)), (f"{config.attack} / {config.defence}", torch.cat(recon))],
                    psnr=[None, recon_psnr],
                    title=f"{config.model} on {config.dataset}",
                )
            )
    run = InversionRun(
        config=asdict(config),
        updates=records,
        psnr_mean=float(np.mean(recon_psnr)) if recon_psnr else float("nan"),
        psnr_median=float(np.median(recon_psnr)) if recon_psnr else float("nan"),
        ssim_mean=float(np.mean(ssims)) if ssims else float("nan"),
        label_accuracy=float(np.mean(label_scores)) if label_scores else None,
        seconds=time.perf_counter() - start,
        grid_path=grid_path,
    )
    if config.out_dir is not None:
        (Path(config.out_dir) / "inversion.json").write_text(json.dumps(_json_safe(run.to_dict()), indent=2))
    return run


def _json_safe(value: Any) -> Any:
    if isinstance(value, float) and not np.isfinite(value):
        return None if np.isnan(value) else str(value)
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    return value
