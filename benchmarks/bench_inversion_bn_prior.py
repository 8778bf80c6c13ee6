"""Inverting Gradients with and without the BatchNorm-statistics prior, side by side: same images, seeds, iterations.

Workload: ``privaudit attack inversion``'s dataset mode on ``convnet-bn`` (seeded untrained weights, seed 0): K images
of an embedded dataset released under FedSGD in updates of B images each (B = 1: K one-image updates; B = 4: one
update of four images), attacked by ``ig`` with labels known, one restart and the same iterations, once without a
BatchNorm prior and once with each source (:mod:`attacks.inversion.bn_prior`): ``update`` (the client's batch
statistics, recovered from its released BatchNorm buffers: a stronger target than the papers') and ``running`` (the
global model's running statistics: GradInversion's and DeepInversion's target). Each row is equivalent to ::

    privaudit attack inversion --dataset D --model convnet-bn --defense fedsgd --attack ig --images K --per-update B \\
        --iterations N --labels-known [--bn-prior update|running]

Usage::

    python benchmarks/bench_inversion_bn_prior.py                      # lfw and images, B = 1 and 4, K = 4, N = 300
    python benchmarks/bench_inversion_bn_prior.py --iterations 1000 --datasets lfw

writes ``reports/bench/inversion_bn_prior.md`` (``--out`` to change). PSNR/SSIM are deterministic for a given torch
build; the times are wall-clock on whatever else the machine runs (the rows run one after another in one process).
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REPORT = ROOT / "reports" / "bench" / "inversion_bn_prior.md"
PRIORS: tuple[str | None, ...] = (None, "update", "running")


def run_case(dataset: str, per_update: int, images: int, iterations: int, prior: str | None, weight: float | None,
             defence: str) -> dict:
    from attacks.inversion import InversionExperiment, run_inversion

    options: dict = {"iterations": iterations}
    if prior is not None:
        options["bn_stats"] = prior
        if weight is not None:
            options["bn_weight"] = weight
    started = time.perf_counter()
    run = run_inversion(InversionExperiment(attack="ig", defence=defence, dataset=dataset, model="convnet-bn", num_images=images,
                                            examples_per_update=per_update, labels_known=True, attack_options=options, seed=0))
    return {"dataset": dataset, "per_update": per_update, "prior": prior or "none", "psnr": run.psnr_mean, "ssim": run.ssim_mean,
            "psnr_each": run.psnr, "seconds": time.perf_counter() - started}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--datasets", nargs="+", default=["lfw", "images"])
    parser.add_argument("--per-update", nargs="+", type=int, default=[1, 4])
    parser.add_argument("--images", type=int, default=4)
    parser.add_argument("--iterations", type=int, default=300)
    parser.add_argument("--bn-weight", type=float, default=None, help="α of the prior (default: the attack's, 0.1)")
    parser.add_argument("--defence", default="fedsgd")
    parser.add_argument("--out", type=Path, default=REPORT)
    args = parser.parse_args(argv)

    import torch

    torch.set_num_threads(1)
    rows = []
    for dataset in args.datasets:
        for per_update in args.per_update:
            for prior in PRIORS:
                row = run_case(dataset, per_update, args.images, args.iterations, prior, args.bn_weight, args.defence)
                rows.append(row)
                print(f"{dataset:7s} B={per_update} prior={row['prior']:8s} PSNR {row['psnr']:6.2f} dB  SSIM {row['ssim']:.3f}  "
                      f"{row['seconds']:6.1f} s", flush=True)
    command = "python benchmarks/bench_inversion_bn_prior.py " + " ".join(sys.argv[1:] if argv is None else argv)
    lines = [
        "# Inverting Gradients with the BatchNorm-statistics prior",
        "",
        f"`{command.strip()}` — torch {torch.__version__}, {platform.machine()}, one thread; `convnet-bn`, "
        f"{args.defence}, labels known, {args.images} images per row, {args.iterations} iterations, one restart, seed 0, "
        f"α = {args.bn_weight if args.bn_weight is not None else 0.1}. Times are wall-clock on a shared machine (noisy).",
        "",
        "| dataset | images per update | prior | PSNR mean (dB) | SSIM mean | per-image PSNR | seconds |",
        "|---|---:|---|---:|---:|---|---:|",
    ]
    for r in rows:
        each = ", ".join(f"{p:.1f}" for p in r["psnr_each"])
        lines.append(f"| {r['dataset']} | {r['per_update']} | {r['prior']} | {r['psnr']:.2f} | {r['ssim']:.3f} | {each} | {r['seconds']:.1f} |")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
