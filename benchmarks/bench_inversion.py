"""Gradient-inversion benchmark: quality (PSNR/SSIM) and time of privaudit's attacks.

Targets (issue 5): analytic recovery ≥ 60 dB in milliseconds; Inverting Gradients on the ~140k-parameter
``convnet`` (R-GAP cnn6 style), one 32×32 image, FedSGD: ≥ 20 dB within 1,000 iterations, timed per 1,000
iterations with torch pinned to ``--threads`` threads; DLG on the DLG paper's sigmoid LeNet: ≥ 40 dB.
Further rows: a 4-step FedAvg update attacked with and without unrolling, DP-SGD noise, and FedReg with
modified gradients attacked naively and adaptively.

Prints a table and writes ``reports/bench/inversion.md`` plus an image grid (ground truth vs each row).
Images: scikit-image samples (astronaut, chelsea, coffee) at 32×32; models built by
``privaudit.models.build_model`` with seed = image index. Usage::

    python benchmarks/bench_inversion.py                  # full run (CPU: about 20–30 minutes)
    python benchmarks/bench_inversion.py --quick          # smaller budgets, for a smoke test
    python benchmarks/bench_inversion.py --device cuda    # the same code on a GPU
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from attacks.inversion import (
    ClientKnowledge,
    DataSpec,
    DPSGDRelease,
    FedAvgRelease,
    FedSGDRelease,
    InversionPayload,
    build_attack,
    release_update,
    save_image_grid,
)
from attacks.metrics import score_reconstruction
from privaudit.data.embedded import sample_images
from privaudit.models import build_model, count_parameters
from privaudit.papers.fedreg.attacks import AdaptiveMGAttack, AdaptiveMGConfig, naive_and_adaptive
from privaudit.papers.fedreg.defences import FedRegMGRelease

IMAGE_NAMES = ("astronaut", "chelsea", "coffee")
# CIFAR-10 normalisation, as FedReg's CIFAR-10 pipeline (Zoesgithub/FedReg@34b081f) and JonasGeiping/breaching use it.
CIFAR = DataSpec((3, 32, 32), 10, mean=(0.4914, 0.4822, 0.4465), std=(0.2023, 0.1994, 0.2010))
RAW = DataSpec((3, 32, 32), 10)  # DLG works on un-normalised [0, 1] images


@dataclass
class Row:
    section: str
    setting: str
    model: str
    params: int
    iterations: str
    psnr: list[float] = field(default_factory=list)
    ssim: list[float] = field(default_factory=list)
    label_ok: list[bool] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)
    per_1000: float | None = None
    target: str = ""
    short: str = ""
    images: list[torch.Tensor] = field(default_factory=list)

    def met(self) -> str:
        if not self.target:
            return ""
        threshold = float(self.target.split()[1])
        return "yes" if min(self.psnr) >= threshold else "no"


def fmt(values: list[float], digits: int = 1) -> str:
    return " / ".join("∞" if math.isinf(v) else f"{v:.{digits}f}" for v in values)


def model_factory(name: str, spec: DataSpec) -> Callable[[], torch.nn.Module]:
    return lambda: build_model(name, spec.shape, spec.num_classes)


def seeded_weights(name: str, spec: DataSpec, seed: int) -> dict[str, torch.Tensor]:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return {k: v.detach().clone() for k, v in build_model(name, spec.shape, spec.num_classes).state_dict().items()}


def record(row: Row, truth01: torch.Tensor, result: Any, spec: DataSpec, labels: list[int]) -> None:
    rebuilt = spec.to_unit_range(result.images)
    scores = score_reconstruction(
        truth01, rebuilt, true_labels=labels,
        predicted_labels=None if result.labels is None else result.labels.tolist(),
        labels_paired=bool(result.settings.get("labels_paired", True)),
    )
    row.psnr.extend(scores.psnr)
    row.ssim.extend(scores.ssim)
    row.label_ok.append(scores.label_accuracy == 1.0)
    row.seconds.append(result.seconds)
    row.images.append(rebuilt[scores.order])


def to_device(weights: dict[str, torch.Tensor], device: str) -> dict[str, torch.Tensor]:
    """The global weights on ``device``: the released client update is computed where they are."""
    return {k: v.to(device) for k, v in weights.items()}


def run_analytic(images01: torch.Tensor, device: str) -> list[Row]:
    rows = []
    for name in ("upcycled-mlp", "logreg"):
        factory = model_factory(name, CIFAR)
        row = Row("analytic", "FedSGD, 1 image", name, count_parameters(factory()), "closed form", target="≥ 60 dB",
                  short=f"analytic ({name})")
        for i in range(len(images01)):
            weights = seeded_weights(name, CIFAR, i)
            payload = release_update(FedSGDRelease(), factory, to_device(weights, device),
                                     CIFAR.from_unit_range(images01[i : i + 1]), torch.tensor([i]), CIFAR)
            build_attack("analytic", device=device).reconstruct(payload)  # warm-up (first-call overheads)
            record(row, images01[i : i + 1], build_attack("analytic", device=device).reconstruct(payload), CIFAR, [i])
        rows.append(row)
    # a batch of 4 through the ReLU MLP: rows active for one example separate the batch exactly
    factory = model_factory("upcycled-mlp", CIFAR)
    batch = torch.from_numpy(sample_images(32, ("astronaut", "chelsea", "coffee", "rocket"))[0])
    row = Row("analytic", "FedSGD, batch of 4", "upcycled-mlp", count_parameters(factory()), "closed form", target="≥ 60 dB")
    payload = release_update(FedSGDRelease(), factory, to_device(seeded_weights("upcycled-mlp", CIFAR, 0), device),
                             CIFAR.from_unit_range(batch), torch.tensor([0, 1, 2, 3]), CIFAR)
    record(row, batch, build_attack("analytic", device=device).reconstruct(payload), CIFAR, [0, 1, 2, 3])
    rows.append(row)
    return rows


def run_ig_fedsgd(images01: torch.Tensor, iterations: int, device: str) -> Row:
    factory = model_factory("convnet", CIFAR)
    row = Row("inverting gradients", "FedSGD, 1 image", "convnet", count_parameters(factory()), str(iterations),
              target="≥ 20 dB", short="IG, FedSGD")
    for i in range(len(images01)):
        payload = release_update(FedSGDRelease(), factory, to_device(seeded_weights("convnet", CIFAR, i), device),
                                 CIFAR.from_unit_range(images01[i : i + 1]), torch.tensor([i]), CIFAR)
        record(row, images01[i : i + 1], build_attack("ig", device=device, iterations=iterations).reconstruct(payload), CIFAR, [i])
    row.per_1000 = float(np.median(row.seconds)) * 1000 / iterations
    return row


def run_dlg(images01: torch.Tensor, steps: int, device: str) -> Row:
    factory = model_factory("lenet-dlg", RAW)
    options = dict(steps=steps, label_strategy="auto", line_search=True, init="uniform", precision="float64",
                   tolerance_grad=0.0, tolerance_change=0.0)
    row = Row("DLG", "FedSGD, 1 image", "lenet-dlg", count_parameters(factory()), f"{steps} L-BFGS steps",
              target="≥ 40 dB", short="DLG (LeNet)")
    for i in range(len(images01)):
        payload = release_update(FedSGDRelease(), factory, to_device(seeded_weights("lenet-dlg", RAW, i), device),
                                 RAW.from_unit_range(images01[i : i + 1]), torch.tensor([i]), RAW)
        result = build_attack("dlg", device=device, **options).reconstruct(payload)
        record(row, images01[i : i + 1], result, RAW, [i])
        row.iterations = f"{steps} L-BFGS steps (≈{result.settings['function_evaluations']} evals)"
    return row


def run_fedavg(images01: torch.Tensor, iterations: int, device: str) -> list[Row]:
    factory = model_factory("convnet", CIFAR)
    params = count_parameters(factory())
    lr, steps = 0.01, 4
    unrolled = Row("multi-step", f"FedAvg {steps} steps lr {lr}, attacker unrolls", "convnet", params, str(iterations),
                   short=f"IG, FedAvg×{steps}, unrolled")
    single = Row("multi-step", f"FedAvg {steps} steps lr {lr}, attacker assumes one gradient", "convnet", params,
                 str(iterations), short=f"IG, FedAvg×{steps}, as 1 gradient")
    for i in range(len(images01)):
        payload = release_update(FedAvgRelease(lr=lr, local_steps=steps), factory,
                                 to_device(seeded_weights("convnet", CIFAR, i), device),
                                 CIFAR.from_unit_range(images01[i : i + 1]), torch.tensor([i]), CIFAR)
        record(unrolled, images01[i : i + 1], build_attack("ig", device=device, iterations=iterations).reconstruct(payload), CIFAR, [i])
        as_gradient = InversionPayload(payload.model_factory, payload.global_weights,
                                       {k: -v / lr for k, v in payload.update.items()}, payload.data, ClientKnowledge(1))
        record(single, images01[i : i + 1], build_attack("ig", device=device, iterations=iterations).reconstruct(as_gradient), CIFAR, [i])
    unrolled.per_1000 = float(np.median(unrolled.seconds)) * 1000 / iterations
    return [unrolled, single]


def run_dpsgd(images01: torch.Tensor, iterations: int, device: str, sigmas: tuple[float, ...]) -> list[Row]:
    factory = model_factory("convnet", CIFAR)
    rows = []
    for sigma in sigmas:
        row = Row("DP-SGD", f"1 step lr 0.01, C = 1, σ = {sigma:g}", "convnet", count_parameters(factory()), str(iterations),
                  short=f"IG, DP-SGD σ={sigma:g}")
        for i in range(len(images01)):
            payload = release_update(DPSGDRelease(lr=0.01, local_steps=1, clip_norm=1.0, noise_multiplier=sigma), factory,
                                     to_device(seeded_weights("convnet", CIFAR, i), device),
                                     CIFAR.from_unit_range(images01[i : i + 1]), torch.tensor([i]), CIFAR, seed=i)
            record(row, images01[i : i + 1], build_attack("ig", device=device, iterations=iterations).reconstruct(payload), CIFAR, [i])
        rows.append(row)
    return rows


def run_fedreg(images01: torch.Tensor, iterations: int, device: str, fgsm_steps: int) -> list[Row]:
    factory = model_factory("convnet", CIFAR)
    params = count_parameters(factory())
    # FedReg App. B.4 (CIFAR-10): one local step on one image, lr 0.1, γ = 0.5, MG η_s = 0.001.
    defence = FedRegMGRelease(lr=0.1, local_steps=1, gamma=0.5, pseudo_step=1e-3, fgsm_steps=fgsm_steps)
    config = AdaptiveMGConfig(iterations=iterations, gamma=0.5, pseudo_step=1e-3, fgsm_steps=fgsm_steps)
    label = f"FedReg+MG 1 step lr 0.1 γ 0.5 η_s 1e-3 ({fgsm_steps} FGSM steps)"
    naive = Row("FedReg-MG", f"{label}, naive (FedAvg-assuming)", "convnet", params, str(iterations),
                short="IG, FedReg+MG, naive")
    adaptive = Row("FedReg-MG", f"{label}, adaptive", "convnet", params, str(iterations), short="FedReg+MG, adaptive")
    informed = Row("FedReg-MG", f"{label}, adaptive, true label given", "convnet", params, str(iterations),
                   short="FedReg+MG, adaptive + label")
    for i in range(len(images01)):
        for labels_known in (False, True):
            payload = release_update(defence, factory, to_device(seeded_weights("convnet", CIFAR, i), device),
                                     CIFAR.from_unit_range(images01[i : i + 1]), torch.tensor([i]), CIFAR,
                                     labels_known=labels_known)
            if labels_known:
                record(informed, images01[i : i + 1], AdaptiveMGAttack(config, device).reconstruct(payload), CIFAR, [i])
                continue
            results = naive_and_adaptive(payload, config, seed=0, device=device)
            record(naive, images01[i : i + 1], results["naive"], CIFAR, [i])
            record(adaptive, images01[i : i + 1], results["adaptive"], CIFAR, [i])
    adaptive.per_1000 = float(np.median(adaptive.seconds)) * 1000 / iterations
    return [naive, adaptive, informed]


def markdown(rows: list[Row], args: argparse.Namespace, device_name: str, grid: Path | None) -> str:
    lines = [
        "# Gradient-inversion benchmark",
        "",
        f"`python benchmarks/bench_inversion.py {' '.join(sys.argv[1:])}` — device {device_name}, "
        f"torch {torch.__version__}, {args.threads} torch thread(s), Python {platform.python_version()}.",
        f"Images: scikit-image {', '.join(IMAGE_NAMES[: args.images])} at 32×32 (one per update, label = index); "
        "untrained models seeded with the image index; labels inferred by the attacks (iDLG). PSNR/SSIM: scikit-image "
        "on [0, 1] images after Hungarian matching (`attacks.metrics`). Times are wall-clock per image; the machine "
        f"({os.cpu_count()} CPUs) is shared, 1-minute load average at the end {os.getloadavg()[0]:.2f}, so single "
        "images can stall (OpenMP over-subscription); the per-1000-iteration column is the median over images.",
        "",
        "| section | setting | model (params) | iterations | PSNR dB per image | SSIM per image | labels | s / image | median s / 1000 it. | target | met |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        seconds = fmt(r.seconds, 3) if r.section == "analytic" else fmt(r.seconds)
        lines.append(
            f"| {r.section} | {r.setting} | {r.model} ({r.params:,}) | {r.iterations} | {fmt(r.psnr)} | {fmt(r.ssim, 3)} | "
            f"{sum(r.label_ok)}/{len(r.label_ok)} | {seconds} | {'' if r.per_1000 is None else f'{r.per_1000:.1f}'} | {r.target} | {r.met()} |"
        )
    lines += [
        "",
        "Settings: Inverting Gradients = cosine distance, TV 1e-4, Adam lr 0.1 on signed gradients, ×0.1 at 3/8, 5/8, 7/8, "
        "box constraint, 1 restart, CIFAR-10 normalisation. DLG = squared L2 matching, L-BFGS (history 100, 20 inner "
        "iterations, strong-Wolfe line search), float64, iDLG label, candidates initialised uniformly in [0, 1], "
        "un-normalised images as in the DLG paper. The FedSGD-assuming attacker reads a K-step delta Δ as one gradient −Δ/η. "
        "The naive FedReg attacker unrolls plain SGD; the adaptive one simulates FedReg's MG step (eq. 12), its regulariser "
        "(eq. 10) and FGSM pseudo data with a straight-through sign; \"true label given\" separates label inference "
        "(iDLG fails on MG updates) from reconstruction.",
    ]
    if grid is not None:
        lines += ["", f"Image grid (row 1 ground truth, then one row per setting): `{grid}`"]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=2, help="torch intra-op threads (pinned)")
    parser.add_argument("--images", type=int, default=3, choices=(1, 2, 3))
    parser.add_argument("--ig-iterations", type=int, default=1000)
    parser.add_argument("--dlg-steps", type=int, default=200)
    parser.add_argument("--fedreg-iterations", type=int, default=1000)
    parser.add_argument("--fgsm-steps", type=int, default=10)
    parser.add_argument("--quick", action="store_true", help="small budgets (smoke test; targets are not expected)")
    parser.add_argument("--skip", nargs="*", default=[], choices=("analytic", "ig", "dlg", "fedavg", "dpsgd", "fedreg"))
    parser.add_argument("--out", default="reports/bench/inversion.md")
    args = parser.parse_args(argv)
    if args.quick:
        args.images, args.ig_iterations, args.dlg_steps, args.fedreg_iterations, args.fgsm_steps = 1, 100, 10, 50, 2
    torch.set_num_threads(args.threads)
    device_name = torch.cuda.get_device_name(0) if args.device.startswith("cuda") else f"CPU ({platform.processor() or platform.machine()})"
    images01 = torch.from_numpy(sample_images(32, IMAGE_NAMES[: args.images])[0])

    sections: list[tuple[str, Callable[[], list[Row]]]] = [
        ("analytic", lambda: run_analytic(images01, args.device)),
        ("ig", lambda: [run_ig_fedsgd(images01, args.ig_iterations, args.device)]),
        ("dlg", lambda: [run_dlg(images01, args.dlg_steps, args.device)]),
        ("fedavg", lambda: run_fedavg(images01, args.ig_iterations, args.device)),
        ("dpsgd", lambda: run_dpsgd(images01, args.ig_iterations, args.device, (1e-3, 1e-2, 1e-1))),
        ("fedreg", lambda: run_fedreg(images01, args.fedreg_iterations, args.device, args.fgsm_steps)),
    ]
    rows: list[Row] = []
    for name, run in sections:
        if name in args.skip:
            continue
        start = time.perf_counter()
        new = run()
        rows += new
        for r in new:
            print(f"{r.section:>20} | {r.setting:<60} | {r.model:<12} | PSNR {fmt(r.psnr):<22} | SSIM {fmt(r.ssim, 3):<22} "
                  f"| labels {sum(r.label_ok)}/{len(r.label_ok)} | {fmt(r.seconds, 2)} s"
                  + ("" if r.per_1000 is None else f" | {r.per_1000:.1f} s/1000 it."), flush=True)
        print(f"  ({name}: {time.perf_counter() - start:.0f} s)", flush=True)

    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    grid = None
    single = [r for r in rows if len(r.images) == images01.shape[0] and all(im.shape[0] == 1 for im in r.images)]
    if single:
        grid = save_image_grid(
            out.with_name("inversion_grid.png"),
            [("ground truth", images01)] + [(r.short or r.section, torch.cat(r.images)) for r in single],
            psnr=[None] + [r.psnr for r in single],
            title="privaudit gradient inversion benchmark",
        )
    out.write_text(markdown(rows, args, device_name, grid))
    print(f"wrote {out}" + (f" and {grid}" if grid else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
