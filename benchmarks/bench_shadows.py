"""LiRA shadow federations: all shadows as lanes of one stacked run per round vs one shadow after another.

Same process, same seeds, side by side: for each workload a target federation is trained (not timed), then
``LiRAAttack.shadow_statistics`` trains the same 64 shadow designs three ways — ``shadow_batch=True`` (lockstep
lanes, :mod:`attacks.membership.batched_shadows`); ``shadow_batch=False`` (one federation after another, each with
the engine's own trainer, i.e. its clients already batched within the federation); and ``shadow_batch=False`` on
a recipe with ``execution="sequential"`` (one shadow after another, one client after another: nothing batched).
The table reports the wall and CPU times, the speed-ups of the lanes over both, and the largest difference of the
runs' φ (logit-scaled confidences of the candidate examples under every shadow) from the lanes' (0 means the
shadow models agree bit for bit).

Workloads (Carlini et al. 2022 train 64+ shadow models; LiRA's default recipe trains the target's own recipe):

* ``logreg`` — FedAvg, logistic regression (privaudit's default model for feature vectors) on FedProx
  Synthetic(0.5, 0.5) with d = 20, C = 2, 10 clients (natural power-law sizes), 5 rounds, E = 2, B = 16;
* ``mlp`` — FedAvg, ``upcycled-mlp`` (Linear-ReLU-Dropout-Linear, the default for single-channel images) on
  scikit-learn digits (8×8), 10 clients, 3 rounds, E = 1, B = 16;
* ``cnn`` — the same on ``lenet-dlg`` (three 5×5 convolutions, 12 channels: a small CNN).

Usage: ``python benchmarks/bench_shadows.py [--shadows 64] [--threads 1] [--workloads logreg,mlp,cnn]
[--modes lanes,sequential,unbatched]``
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


MODES = (
    # (key, shadow_batch, the recipe's execution)
    ("lanes", True, "auto"),
    ("sequential", False, "auto"),
    ("unbatched", False, "sequential"),
)


def run_workload(name: str, shadows: int, examples: int, modes: tuple[str, ...]) -> dict:
    import numpy as np

    from attacks.membership import LiRAAttack, LiRAConfig, TargetModel
    from attacks.membership.examples import examples_from_dataset
    from attacks.membership.target import load_training_data
    from privaudit.fl.engine.config import LocalTrainingConfig
    from privaudit.fl.run import TrainSpec, run_training

    w = WORKLOADS[name]

    def recipe(execution: str) -> TrainSpec:
        return TrainSpec(algorithm="fedavg", dataset=w["dataset"], rounds=w["rounds"], model=w["model"], num_clients=10,
                         dataset_options=w["dataset_options"], eval_every=w["rounds"], execution=execution,
                         local=LocalTrainingConfig(epochs=w["epochs"], batch_size=16, lr=0.05, momentum=0.5))

    dataset = load_training_data(recipe("auto"))
    targets = {}
    for execution in {e for key, _, e in MODES if key in modes}:  # the shadows follow the target's recipe
        spec = recipe(execution)
        targets[execution] = TargetModel.from_result(run_training(spec, dataset=dataset, progress=False), dataset, spec)
    candidates = examples_from_dataset(dataset, max_per_side=examples, seed=0)
    row = {"workload": name, "model": w["model"], "dataset": w["dataset"], "shadows": shadows,
           "clients": dataset.num_clients, "rounds": w["rounds"]}
    phi = {}
    for key, batched, execution in MODES:
        if key not in modes:
            continue
        attack = LiRAAttack(LiRAConfig(shadows=shadows, shadow_batch=batched, seed=1))
        started, cpu = time.perf_counter(), time.process_time()
        stats = attack.shadow_statistics(targets[execution], candidates)
        row[f"{key}_s"] = time.perf_counter() - started
        row[f"{key}_cpu_s"] = time.process_time() - cpu
        row[f"{key}_mode"] = attack.extra_meta()["shadow_training"]
        phi[key] = stats.phi
    for key in phi:
        if key != "lanes" and "lanes" in phi:
            row[f"{key}_speedup"] = row[f"{key}_s"] / row["lanes_s"]
            row[f"{key}_phi_diff"] = float(np.abs(phi["lanes"] - phi[key]).max())
    return row


def render(rows: list[dict], threads: int, command: str) -> str:
    def cell(r: dict, key: str, fmt: str) -> str:
        return fmt.format(r[key]) if key in r else "—"

    lines = [
        "# LiRA shadow federations: lanes vs one after another",
        "",
        f"Command: `{command}`  ",
        f"Machine: {platform.machine()}, {os.cpu_count()} logical CPUs, {platform.python_version()}, torch threads = {threads}  ",
        "All modes in one process, same seeds, same 64 shadow designs. **lanes**: every shadow's clients are lanes of one",
        "stacked run per round (`--shadow-batch`, the default); **one by one**: one shadow federation after another, each",
        "with the engine's own trainer, i.e. its clients already batched as lanes (`--no-shadow-batch`); **unbatched**:",
        "one shadow after another and, inside each, one client after another (the recipe's `execution = sequential`).",
        "Speed-up = that mode's wall time / the lanes' wall time. `max |Δφ|` compares every shadow's φ of every",
        "candidate example with the lanes' (0: the same shadow models bit for bit; unbatched differs by float rounding).",
        "CPU s: the process's CPU time (all its threads), which a loaded machine does not inflate as it does wall time.",
        "",
        "| workload | model | dataset | shadows | clients × rounds | lanes (s) | one by one (s) | speed-up | unbatched (s) | speed-up | "
        "lanes CPU s | one by one CPU s | unbatched CPU s | max \\|Δφ\\| one by one / unbatched |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['workload']} | {r['model']} | {r['dataset']} | {r['shadows']} | {r['clients']} × {r['rounds']} | "
            f"{cell(r, 'lanes_s', '{:.2f}')} | {cell(r, 'sequential_s', '{:.2f}')} | {cell(r, 'sequential_speedup', '{:.1f}×')} | "
            f"{cell(r, 'unbatched_s', '{:.2f}')} | {cell(r, 'unbatched_speedup', '{:.1f}×')} | {cell(r, 'lanes_cpu_s', '{:.2f}')} | "
            f"{cell(r, 'sequential_cpu_s', '{:.2f}')} | {cell(r, 'unbatched_cpu_s', '{:.2f}')} | "
            f"{cell(r, 'sequential_phi_diff', '{:.1e}')} / {cell(r, 'unbatched_phi_diff', '{:.1e}')} |")
    lines += ["", "Modes recorded by the runs:", ""]
    for r in rows:
        recorded = "; ".join(f"{key} — {r[key + '_mode']}" for key, _, _ in MODES if key + "_mode" in r)
        lines.append(f"- {r['workload']}: {recorded}")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shadows", type=int, default=64)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1: timings of one core)")
    parser.add_argument("--examples", type=int, default=100, help="candidate examples per side")
    parser.add_argument("--workloads", default="logreg,mlp,cnn")
    parser.add_argument("--modes", default="lanes,sequential,unbatched", help="which of lanes,sequential,unbatched to run")
    parser.add_argument("--out", type=Path, default=REPORT)
    args = parser.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    sys.path.insert(0, str(ROOT))
    rows = []
    for name in args.workloads.split(","):
        row = run_workload(name, args.shadows, args.examples, tuple(args.modes.split(",")))
        print(f"{name}: " + ", ".join(f"{key} {row[key + '_s']:.2f} s" for key, _, _ in MODES if key + "_s" in row), flush=True)
        rows.append(row)
    command = "python benchmarks/bench_shadows.py " + " ".join(sys.argv[1:])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(render(rows, args.threads, command.strip()))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
