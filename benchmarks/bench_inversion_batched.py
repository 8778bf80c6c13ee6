"""Inverting Gradients on K images: one batched optimisation vs K attacks one after another, same seeds, one run.

Workload: ``privaudit attack inversion``'s dataset mode — K images of an embedded dataset (default ``lfw``, 25×25
grey, 180 training images), the R-GAP-style ``convnet`` with seeded untrained weights (seed 0), each image
released as its own one-example update under the defence (``fedsgd``: the gradient; ``fedavg``: the
experiment's default FedAvg delta), attacked by ``ig`` with ``--iterations`` iterations and one restart. Update u
is attacked with seed u in both modes. Both modes run once on two images first (warm-up, not timed).

The table gives both wall times, the speed-up, the largest pixel difference between the two modes'
reconstructions, how many images differ at all, and the mean PSNR of each. Signed Adam (Geiping et al.) moves a pixel
by the full step whatever the gradient's size, so a gradient component that is zero up to rounding can take the other
sign when the batched run sums in another order, and that pixel then drifts from the one-by-one trajectory; the
count shows how often that happens. Usage::

    python benchmarks/bench_inversion_batched.py                       # K = 16 and 64, fedsgd and fedavg, CPU
    python benchmarks/bench_inversion_batched.py --device cuda         # the same on a GPU

writes ``reports/bench/inversion_batched.md`` (``--out`` to change). Timings on a shared machine are noisy;
the ratio is measured side by side in one run.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REPORT = ROOT / "reports" / "bench" / "inversion_batched.md"


def _synchronise(device) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def run_case(dataset: str, model: str, defence: str, images: int, iterations: int, device: str) -> dict:
    import numpy as np
    import torch

    from attacks.inversion import DataSpec, build_attack, release_update
    from attacks.inversion.experiment import parse_defence
    from attacks.metrics import score_reconstruction
    from privaudit.data import load_dataset
    from privaudit.models import build_model

    data = load_dataset(dataset, seed=0)
    x = np.concatenate([c.x_train for c in data.clients if c.num_train])
    y = np.concatenate([c.y_train for c in data.clients if c.num_train])
    if len(x) < images:
        raise SystemExit(f"{dataset} has {len(x)} training images, {images} requested")
    chosen = np.random.default_rng(0).permutation(len(x))[:images]
    mean, std = data.normalization if data.normalization is not None else (None, None)
    spec = DataSpec(data.input_shape, data.num_classes, tuple(data.data_range), mean, std)
    inputs, labels = torch.from_numpy(x[chosen]), torch.from_numpy(y[chosen])
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        weights = {k: v.detach().clone() for k, v in build_model(model, spec.shape, spec.num_classes).state_dict().items()}

    def factory():
        return build_model(model, spec.shape, spec.num_classes)

    release = parse_defence(defence)
    on_device = {k: v.to(device) for k, v in weights.items()}  # the client runs where its global weights are
    payloads = [release_update(release, factory, on_device, inputs[u:u + 1], labels[u:u + 1], spec, seed=u)
                for u in range(images)]
    attack = build_attack("ig", device=device, iterations=iterations, restarts=1)
    dev = torch.device(device)
    attack.reconstruct_many(payloads[:2], [0, 1])  # warm-up of both paths (first-call costs are not the attack's)
    attack.reconstruct(payloads[0], seed=0)
    _synchronise(dev)
    started = time.perf_counter()
    batched = attack.reconstruct_many(payloads, list(range(images)))
    _synchronise(dev)
    batched_s = time.perf_counter() - started
    started = time.perf_counter()
    alone = [attack.reconstruct(p, seed=u) for u, p in enumerate(payloads)]
    _synchronise(dev)
    sequential_s = time.perf_counter() - started

    def psnr(results) -> list[float]:
        return [score_reconstruction(spec.to_unit_range(inputs[u:u + 1]), spec.to_unit_range(r.images)).psnr[0]
                for u, r in enumerate(results)]

    psnr_batched, psnr_sequential = psnr(batched), psnr(alone)

    return {"dataset": dataset, "model": model, "defence": defence, "images": images, "iterations": iterations,
            "batched_s": batched_s, "sequential_s": sequential_s, "speedup": sequential_s / batched_s,
            "max_pixel_diff": max(float((a.images - b.images).abs().max()) for a, b in zip(batched, alone, strict=True)),
            "images_differing": sum(bool((a.images - b.images).abs().max() > 1e-6) for a, b in zip(batched, alone, strict=True)),
            "psnr_batched": float(np.mean(psnr_batched)), "psnr_sequential": float(np.mean(psnr_sequential)),
            "max_psnr_diff": max(abs(a - b) for a, b in zip(psnr_batched, psnr_sequential, strict=True))}


def render(rows: list[dict], device: str, threads: int, command: str) -> str:
    import torch

    name = torch.cuda.get_device_name(torch.device(device)) if device.startswith("cuda") else f"cpu, {os.cpu_count()} logical CPUs"
    lines = [
        "# Inverting Gradients: K images in one optimisation vs one after another",
        "",
        f"Command: `{command}`  ",
        f"Device: {device} ({name}), {platform.machine()}, torch {torch.__version__}, torch threads = {threads}  ",
        "Both modes in one process, same seeds, after a warm-up; one restart; `max |Δx|` compares the reconstructions.",
        "",
        "| dataset | model | defence | images | iterations | batched (s) | one by one (s) | speed-up | max \\|Δx\\| | images with \\|Δx\\| > 1e-6 "
        "| PSNR batched / one by one (dB) | max \\|ΔPSNR\\| of an image (dB) |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|---:|",
    ]
    for r in rows:
        lines.append(f"| {r['dataset']} | {r['model']} | {r['defence']} | {r['images']} | {r['iterations']} | {r['batched_s']:.2f} | "
                     f"{r['sequential_s']:.2f} | {r['speedup']:.1f}× | {r['max_pixel_diff']:.1e} | {r['images_differing']} | "
                     f"{r['psnr_batched']:.2f} / {r['psnr_sequential']:.2f} | {r['max_psnr_diff']:.2f} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", default="16,64", help="comma-separated K values")
    parser.add_argument("--defences", default="fedsgd,fedavg")
    parser.add_argument("--dataset", default="lfw")
    parser.add_argument("--model", default="convnet")
    parser.add_argument("--iterations", default="20", help="comma-separated iteration counts")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=1, help="torch threads on the CPU (default 1)")
    parser.add_argument("--out", type=Path, default=REPORT)
    args = parser.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    sys.path.insert(0, str(ROOT))
    rows = []
    for defence in args.defences.split(","):
        for iterations in (int(n) for n in args.iterations.split(",")):
            for images in (int(k) for k in args.images.split(",")):
                row = run_case(args.dataset, args.model, defence, images, iterations, args.device)
                print(f"{defence} K={images} × {iterations} iterations: batched {row['batched_s']:.2f} s, one by one "
                      f"{row['sequential_s']:.2f} s, {row['speedup']:.1f}×, max |Δx| {row['max_pixel_diff']:.1e}, "
                      f"{row['images_differing']} images differ, max |ΔPSNR| {row['max_psnr_diff']:.2f} dB", flush=True)
                rows.append(row)
    command = "python benchmarks/bench_inversion_batched.py " + " ".join(sys.argv[1:])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(render(rows, args.device, args.threads, command.strip()))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
