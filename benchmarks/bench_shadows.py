"""LiRA shadow federations: all shadows as lanes of one stacked run per round vs one shadow after another.

Same process, same seeds, side by side: for each workload a target federation is trained once (not timed), then
``LiRAAttack.shadow_statistics`` trains the shadows twice — ``shadow_batch=True`` (lockstep lanes,
:mod:`attacks.membership.batched_shadows`) and ``shadow_batch=False`` (one federation after another, each with
the engine's own trainer, i.e. its clients batched within the federation) — and the table reports both wall
times, their ratio and the largest difference between the two runs' φ (logit-scaled confidences of the
candidate examples under every shadow; 0 means the shadow models agree bit for bit).

Workloads (Carlini et al. 2022 train 64+ shadow models; LiRA's default recipe trains the target's own recipe):

* ``logreg`` — FedAvg, logistic regression (privaudit's default model for feature vectors) on FedProx
  Synthetic(0.5, 0.5) with d = 20, C = 2, 10 clients (natural power-law sizes), 5 rounds, E = 2, B = 16;
* ``mlp`` — FedAvg, ``upcycled-mlp`` (Linear-ReLU-Dropout-Linear, the default for single-channel images) on
  scikit-learn digits (8×8), 10 clients, 3 rounds, E = 1, B = 16;
* ``cnn`` — the same on ``lenet-dlg`` (three 5×5 convolutions, 12 channels: a small CNN).

Usage: ``python benchmarks/bench_shadows.py [--shadows 64] [--threads 1] [--workloads logreg,mlp,cnn]``
writes ``reports/bench/shadows.md``. Timings on a shared machine are noisy; the ratio is measured in one run.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REPORT = ROOT / "reports" / "bench" / "shadows.md"

WORKLOADS = {
    "logreg": {"dataset": "synthetic:0.5,0.5", "model": "logreg", "rounds": 5, "epochs": 2,
               "dataset_options": {"dim": 20, "num_classes": 2}},
    "mlp": {"dataset": "digits", "model": "upcycled-mlp", "rounds": 3, "epochs": 1, "dataset_options": {}},
    "cnn": {"dataset": "digits", "model": "lenet-dlg", "rounds": 3, "epochs": 1, "dataset_options": {}},
}


def run_workload(name: str, shadows: int, examples: int) -> dict:
    import numpy as np

    from attacks.membership import LiRAAttack, LiRAConfig, TargetModel
    from attacks.membership.examples import examples_from_dataset
    from attacks.membership.target import load_training_data
    from privaudit.fl.engine.config import LocalTrainingConfig
    from privaudit.fl.engine.run import TrainSpec, run_training

    w = WORKLOADS[name]
    spec = TrainSpec(algorithm="fedavg", dataset=w["dataset"], rounds=w["rounds"], model=w["model"], num_clients=10,
                     dataset_options=w["dataset_options"], eval_every=w["rounds"],
                     local=LocalTrainingConfig(epochs=w["epochs"], batch_size=16, lr=0.05, momentum=0.5))
    dataset = load_training_data(spec)
    target = TargetModel.from_result(run_training(spec, dataset=dataset, progress=False), dataset, spec)
    candidates = examples_from_dataset(dataset, max_per_side=examples, seed=0)
    row = {"workload": name, "model": w["model"], "dataset": w["dataset"], "shadows": shadows,
           "clients": dataset.num_clients, "rounds": w["rounds"]}
    phi = {}
    for batched in (True, False):
        attack = LiRAAttack(LiRAConfig(shadows=shadows, shadow_batch=batched, seed=1))
        started = time.perf_counter()
        stats = attack.shadow_statistics(target, candidates)
        row["lanes_s" if batched else "sequential_s"] = time.perf_counter() - started
        row["lanes_mode" if batched else "sequential_mode"] = attack.extra_meta()["shadow_training"]
        phi[batched] = stats.phi
    row["speedup"] = row["sequential_s"] / row["lanes_s"]
    row["max_phi_diff"] = float(np.abs(phi[True] - phi[False]).max())
    return row


def render(rows: list[dict], threads: int, command: str) -> str:
    lines = [
        "# LiRA shadow federations: lanes vs one after another",
        "",
        f"Command: `{command}`  ",
        f"Machine: {platform.machine()}, {os.cpu_count()} logical CPUs, {platform.python_version()}, torch threads = {threads}  ",
        "Both modes in one process, same seeds; `max |Δφ|` compares every shadow's φ of every candidate example.",
        "",
        "| workload | model | dataset | shadows | clients × rounds | lanes (s) | one by one (s) | speed-up | max \\|Δφ\\| |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(f"| {r['workload']} | {r['model']} | {r['dataset']} | {r['shadows']} | {r['clients']} × {r['rounds']} | "
                     f"{r['lanes_s']:.2f} | {r['sequential_s']:.2f} | {r['speedup']:.1f}× | {r['max_phi_diff']:.1e} |")
    lines += ["", "Modes recorded by the runs:", ""]
    lines += [f"- {r['workload']}: lanes — {r['lanes_mode']}; one by one — {r['sequential_mode']}" for r in rows]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shadows", type=int, default=64)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1: timings of one core)")
    parser.add_argument("--examples", type=int, default=100, help="candidate examples per side")
    parser.add_argument("--workloads", default="logreg,mlp,cnn")
    parser.add_argument("--out", type=Path, default=REPORT)
    args = parser.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    sys.path.insert(0, str(ROOT))
    rows = []
    for name in args.workloads.split(","):
        row = run_workload(name, args.shadows, args.examples)
        print(f"{name}: lanes {row['lanes_s']:.2f} s, one by one {row['sequential_s']:.2f} s, "
              f"{row['speedup']:.1f}×, max |Δφ| {row['max_phi_diff']:.1e}", flush=True)
        rows.append(row)
    command = "python benchmarks/bench_shadows.py " + " ".join(sys.argv[1:])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(render(rows, args.threads, command.strip()))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
